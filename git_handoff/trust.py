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
    """Who wrote this command into the state, and when: from the state head, follow a
    parent that still holds the command; the commit none of whose parents holds it
    introduced it (through a sync merge, the other side's commit, not the merge)."""
    import json as _json
    from datetime import datetime, timezone

    from git_handoff.model import iso
    from git_handoff.store import CONFIG_PATH, task_path

    repo = store.repo
    path = CONFIG_PATH if item_id == "config" else task_path(item_id)
    verdicts: dict[str, bool] = {}

    def holds(commit: str) -> bool:
        entry = repo.tree_lookup(repo.commit_tree(commit), path)
        if entry is None or entry[1]:
            return False
        blob = entry[0]
        if blob not in verdicts:
            raw = repo.read_blob(blob)
            if item_id == "config":
                verdicts[blob] = command in raw.decode(errors="replace")
            else:
                try:
                    data = _json.loads(raw)
                except ValueError:
                    data = {}
                section = data.get("validation" if kind == "validation" else "on_failure") or {}
                value = section.get("command" if kind == "validation" else "cleanup")
                verdicts[blob] = value == command
        return verdicts[blob]

    current = store.head()
    if current is None or not holds(current):
        return {"introduced_by": None, "introduced_at": None, "commit": None}
    for _ in range(HISTORY_LIMIT):
        parents = repo.commit_info(current)[1]
        older = next((p for p in parents if holds(p)), None)
        if older is None:
            break
        current = older
    message, _, when, author = repo.commit_info(current)
    first = message.splitlines()[0] if message else ""
    return {"introduced_by": author, "introduced_at": iso(datetime.fromtimestamp(when, timezone.utc)),
            "commit": current, "log": first}


def untrusted(store: Any, *, with_origin: bool = True) -> list[dict[str, Any]]:
    """Every command in the state this clone has not approved, once per command: the
    first task (or 'config') using it, every use, and who introduced it and when."""
    snap = store.snapshot()
    trusted = _load(store.repo)
    by_command: dict[str, dict[str, Any]] = {}
    for item_id, kind, command in _commands(snap):
        if command_key(command) in trusted:
            continue
        entry = by_command.get(command)
        if entry is None:
            entry = by_command[command] = {"id": item_id, "kind": kind, "command": command, "uses": []}
        entry["uses"].append({"id": item_id, "kind": kind})
    out = list(by_command.values())
    if with_origin:
        for entry in out:
            entry.update(_introduced(store, entry["id"], entry["kind"], entry["command"]))
    return out


def approve(store: Any, ids: Iterable[str] = (), *, approve_all: bool = False) -> list[dict[str, Any]]:
    """Trust the untrusted commands of the given task ids ('config': the init command), or all."""
    wanted = list(dict.fromkeys(ids))
    if not approve_all and not wanted:
        raise UsageError("name the task IDs to trust, or give --all (see `git handoff trust` for the list)")
    snap = store.snapshot()
    known = set(snap.tasks()) | {"config"}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise UsageError(f"no task {unknown[0]!r} (see `git handoff trust` for what needs trust)")
    pending = untrusted(store, with_origin=False)
    chosen = pending if approve_all else [p for p in pending if any(u["id"] in wanted for u in p["uses"])]
    remember(store.repo, [p["command"] for p in chosen])
    return chosen
