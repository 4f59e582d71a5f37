"""Messages for this clone's next command, shown once (e.g. a claim lost in a sync).

Kept light on purpose: every command checks for notices, so this module imports
nothing heavy."""

from __future__ import annotations

import json

from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo

NOTICES_FILE = "notices.json"


def remember(repo: Repo, messages: list[str]) -> None:
    """Queue `messages` for the next command of this clone."""
    if not messages:
        return
    path = repo.handoff_dir / NOTICES_FILE
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = []
    if not isinstance(old, list):
        old = []
    old.extend(messages)
    atomic_write(path, json.dumps(old, indent=2) + "\n")


def take(repo: Repo) -> list[str]:
    """The queued messages, removed as they are read."""
    path = repo.handoff_dir / NOTICES_FILE
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
        path.unlink()
    except (OSError, ValueError):
        return []
    return [str(x) for x in data] if isinstance(data, list) else []
