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


# -- reviewing what arrived -------------------------------------------------------------

HISTORY_LIMIT = 20000


def _commands(snap: Any) -> list[tuple[str, str, str]]:
    """(id, kind, command) for every command the state would have this clone run."""
    out: list[tuple[str, str, str]] = []
    init_command = snap.config().init_command
    if init_command:
        out.append(("config", "init", init_command))
    for task in snap.tasks().values():
        if task.check:
            out.append((task.id, "validation", task.check))
        if task.cleanup:
            out.append((task.id, "cleanup", task.cleanup))
    return out


def _introduced(store: Any, item_id: str, kind: str, command: str) -> dict[str, Any]:
    """Who wrote this command into the state, and when: the oldest commit of the newest
    unbroken run of state commits holding it."""
    import json as _json

    from git_handoff.model import iso
    from git_handoff.store import CONFIG_PATH, task_path

    repo = store.repo
    path = CONFIG_PATH if item_id == "config" else task_path(item_id)
    found: str | None = None
    last_blob: str | None = None
    holds = False
    for n, commit in enumerate(repo.walk(store.head())):
        if n >= HISTORY_LIMIT:
            break
        entry = repo.tree_lookup(repo.commit_tree(commit), path)
        blob = entry[0] if entry and not entry[1] else None
        if blob is None:
            break
        if blob != last_blob:
            last_blob = blob
            raw = repo.read_blob(blob)
            if item_id == "config":
                holds = command in raw.decode(errors="replace")
            else:
                try:
                    data = _json.loads(raw)
                except ValueError:
                    break
                field = (data.get("validation") or {}).get("command") if kind == "validation" else \
                    (data.get("on_failure") or {}).get("cleanup")
                holds = field == command
        if not holds:
            break
        found = commit
    if found is None:
        return {"introduced_by": None, "introduced_at": None, "commit": None}
    message, _, when, author = repo.commit_info(found)
    from datetime import datetime, timezone

    first = message.splitlines()[0] if message else ""
    return {"introduced_by": author, "introduced_at": iso(datetime.fromtimestamp(when, timezone.utc)),
            "commit": found, "log": first}


def untrusted(store: Any) -> list[dict[str, Any]]:
    """Every command in the state this clone has not approved, with its origin."""
    snap = store.snapshot()
    trusted = _load(store.repo)
    out = []
    for item_id, kind, command in _commands(snap):
        if command_key(command) in trusted:
            continue
        entry = {"id": item_id, "kind": kind, "command": command}
        entry.update(_introduced(store, item_id, kind, command))
        out.append(entry)
    return out


def approve(store: Any, ids: Iterable[str] = (), *, approve_all: bool = False) -> list[dict[str, Any]]:
    """Trust the untrusted commands of the given task ids ('config': the init command), or all."""
    wanted = list(dict.fromkeys(ids))
    if not approve_all and not wanted:
        raise UsageError("name the task IDs to trust, or give --all (see `git handoff trust` for the list)")
    snap = store.snapshot()
    known = {t for t in snap.tasks()} | {"config"}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise UsageError(f"no task {unknown[0]!r} (see `git handoff trust` for what needs trust)")
    pending = untrusted(store)
    chosen = pending if approve_all else [p for p in pending if p["id"] in wanted]
    remember(store.repo, [p["command"] for p in chosen])
    return chosen
