"""Which shell commands this clone has approved (validation, cleanup, init commands).

A command that arrived by fetch is not run until this clone trusts it; commands
created here are trusted at birth. The store is a file in this clone's git dir and
never syncs: trust is a decision of whoever runs the commands.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from typing import Any

from git_handoff.errors import UsageError
from git_handoff.gitrepo import Repo
from git_handoff.model import now_iso

TRUST_FILE = "trusted.json"


def command_key(command: str) -> str:
    return hashlib.sha256(command.encode()).hexdigest()


def _load(repo: Repo) -> dict[str, Any]:
    try:
        data = json.loads((repo.handoff_dir / TRUST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_trusted(repo: Repo, command: str) -> bool:
    return command_key(command) in _load(repo)


def remember(repo: Repo, commands: Iterable[str | None]) -> None:
    """Trust `commands` on this clone (atomic replace under a lock)."""
    wanted = [c for c in commands if c]
    if not wanted:
        return
    from filelock import FileLock

    path = repo.handoff_dir / TRUST_FILE
    with FileLock(str(path) + ".lock", timeout=30):
        data = _load(repo)
        changed = False
        for command in wanted:
            key = command_key(command)
            if key not in data:
                data[key] = {"command": command, "trusted_at": now_iso()}
                changed = True
        if changed:
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, path)


def require_trusted(repo: Repo, command: str, what: str) -> None:
    """Refuse (exit 2) to run a command this clone has not approved."""
    if not is_trusted(repo, command):
        raise UsageError(
            f"{what} {command!r} came from another clone and is not trusted here; "
            "review it with `git handoff trust` and approve it with `git handoff trust --all` or `git handoff trust ID`"
        )
