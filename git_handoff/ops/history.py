"""The state's history for the commands that read it (`log`, where `trust` says a
command came from), in a clone that joined one commit deep (git_handoff.remote.shallow):
fetched whole from the remote the first time a walk from the state would reach the cut."""

from __future__ import annotations

from git_handoff.remote import shallow, transport
from git_handoff.state.store import StateStore


def ensure_history(store: StateStore, remote: str | None = None) -> bool:
    """Fetch the history below the cut when the state's history reaches it; whether a
    fetch ran. A complete repository asks nothing (one file lookup)."""
    repo = store.repo
    if not shallow.history_cut(repo, store.head()):
        return False
    transport.fetch_history(repo, transport.Remote(repo, remote))
    return True
