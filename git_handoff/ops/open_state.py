"""The one door: how every adapter (the CLI, each MCP tool call, each hook call, `serve`,
and through the CLI `relay` and `dispatch`) opens the state of the repository it works in.

Opening is where a command's start-of-command work happens, so that no adapter can skip
it: the notices queued for this clone (a claim lost in a sync) are taken to be shown
once, and a rollback a killed `fail` left half done is finished before anything reads
the work tree. The adapter shows the returned warnings in its own way (stderr, a tool
result's `warning:` lines, a hook's message).

Kept light: the rollback machinery is imported only when a rollback journal is there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from git_handoff.core.errors import NotInitialized
from git_handoff.infra import rollback
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import notices
from git_handoff.state.store import StateStore


@dataclass
class Opened:
    """An opened state and what its opening has to tell the user, in order."""

    store: StateStore
    warnings: list[str] = field(default_factory=list)


def open_state(start: str | os.PathLike[str] | None = None, *, repo: Repo | None = None,
               session: int | None = None, initialized: bool = False) -> Opened:
    """The state of the repository around `start` (default: the current directory), or of
    `repo` when the adapter keeps one open; `session` as StateStore takes it. With
    `initialized`, a repository without a state raises NotInitialized before any of the
    start-of-command work (an adapter that stays silent there loses nothing)."""
    store = StateStore(repo if repo is not None else Repo.discover(start), session=session)
    if initialized and not store.is_initialized():
        raise NotInitialized("git handoff is not initialized here: run `git handoff init`")
    warnings = notices.take(store.repo)  # e.g. a claim lost in a sync: told at the next command
    if rollback.has_journal(store.repo):  # a `fail` was killed half way: finish its rollback first
        from git_handoff.ops import attempts  # noqa: PLC0415  (only when a journal is there: import cost)

        finished = attempts.finish_interrupted_rollback(store)
        if finished:
            warnings.append(finished)
    return Opened(store, warnings)
