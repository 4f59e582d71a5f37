"""The task graph: init, add, import, edit, and the read-only views (list, show,
status, next, log, graph)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from git_handoff import identity, records, schedule
from git_handoff.errors import InvalidState, Negative, UsageError
from git_handoff.model import (
    LOG_TYPES,
    MODES,
    Config,
    Task,
    check_id,
    check_max_attempts,
    check_priority,
    check_timeout,
    check_title,
    new_id,
    now_iso,
    order_key_now,
)
from git_handoff.ops import trust
from git_handoff.store import CONFIG_PATH, META_PATH, Entry, Snapshot, StateStore, Tx, initial_files

# -- init ---------------------------------------------------------------------------

CONFIG_HEADER = """\
# git handoff: state-wide settings, shared by every clone through refs/harness/state.
# Per-clone settings live in git config under handoff.* (see `git handoff --help`).
"""


def init(
    store: StateStore,
    *,
    mode: str | None = None,
    max_tasks_per_session: int | None = None,
    max_sessions: int | None = None,
    spec: str | None = None,
    init_command: str | None = None,
) -> dict[str, Any]:
    """Create the state, or apply the given settings to an existing one (idempotent)."""
    import tomlkit

    if mode is not None and mode not in MODES:
        raise UsageError(f"invalid mode {mode!r}: use exclusive or concurrent")
    for name, value in (("max-tasks-per-session", max_tasks_per_session), ("max-sessions", max_sessions)):
        if value is not None and value < 1:
            raise UsageError(f"--{name} must be at least 1, not {value}")
    wanted = {
        "mode": mode,
        "max_tasks_per_session": max_tasks_per_session,
        "max_sessions": max_sessions,
        "spec_ref": spec,
        "init_command": init_command,
    }

    def apply(tx: Tx) -> dict[str, Any]:
        created = tx.base is None
        if created:
            doc = tomlkit.parse(CONFIG_HEADER)
            defaults = Config()
            doc["mode"] = defaults.mode
            doc["max_tasks_per_session"] = defaults.max_tasks_per_session
            doc["max_sessions"] = defaults.max_sessions
        else:
            raw = tx.read(CONFIG_PATH) or b""
            doc = tomlkit.parse(raw.decode())
        changed = []
        for key, value in wanted.items():
            if value is not None and doc.get(key) != value:
                doc[key] = value
                changed.append(f"{key}={value}")
        if created:
            for path, data in initial_files(tomlkit.dumps(doc)).items():
                tx.put(path, data)
            tx.log("INIT", "git handoff initialized" + (f" ({', '.join(changed)})" if changed else ""))
        elif changed:
            tx.put(CONFIG_PATH, tomlkit.dumps(doc).encode())
            tx.log("INIT", "config " + " ".join(changed))
        cfg = tx.config()
        return {"created": created, "changed": changed, "config": dataclasses.asdict(cfg)}

    result = store.transact(apply, allow_uninitialized=True)
    trust.remember(store.repo, [init_command])
    return result


# -- add / import / edit ---------------------------------------------------------------


def _check_deps(tasks: dict[str, Task], task_id: str, deps: Sequence[str]) -> None:
    for dep in deps:
        check_id(dep)
        if dep not in tasks and dep != task_id:
            raise UsageError(f"unknown dependency {dep!r} (see `git handoff list`)")
    cycle = schedule.would_cycle(tasks, task_id, deps)
    if cycle is not None:
        raise UsageError("dependency cycle: " + " -> ".join(cycle))


def add(
    store: StateStore,
    *,
    title: str,
    task_id: str | None = None,
    priority: str = "P1",
    after: Sequence[str] = (),
    check: str | None = None,
    timeout: int | None = None,
    max_attempts: int | None = None,
    cleanup: str | None = None,
    spec: str | None = None,
) -> Task:
    check_title(title)
    if task_id is not None:
        check_id(task_id)
    check_priority(priority)
    timeout_s = check_timeout(timeout) if timeout is not None else None
    attempts_max = check_max_attempts(max_attempts) if max_attempts is not None else None
    deps = tuple(dict.fromkeys(after))
    for dep in deps:
        check_id(dep)
    stamp = now_iso()
    order = order_key_now()
    chosen_id = task_id or new_id()

    def apply(tx: Tx) -> Task:
        if tx.task(chosen_id) is not None:
            raise UsageError(f"task {chosen_id!r} already exists")
        _check_deps(tx.tasks(), chosen_id, deps)
        task = Task(
            id=chosen_id,
            title=title,
            priority=priority,
            depends_on=deps,
            check=check or None,
            cleanup=cleanup or None,
            spec_ref=spec,
            created_at=stamp,
            order=order,
        )
        if timeout_s is not None:
            task = dataclasses.replace(task, timeout_seconds=timeout_s)
        if attempts_max is not None:
            task = dataclasses.replace(task, max_attempts=attempts_max)
        task = tx.put_task(task)
        tx.log("INIT", f"Added {title}", task=chosen_id)
        return task

    task = store.transact(apply)
    trust.remember(store.repo, [task.check, task.cleanup])
    return task


_EDITABLE = ("title", "priority", "after", "check", "timeout", "max_attempts", "cleanup", "spec")


def edit(store: StateStore, task_id: str, **changes: Any) -> Task:
    """Change the given fields of a task (None: leave as it is)."""
    check_id(task_id)
    changes = {k: v for k, v in changes.items() if v is not None}
    unknown = set(changes) - set(_EDITABLE)
    if unknown:
        raise UsageError(f"cannot edit {', '.join(sorted(unknown))}")
    if not changes:
        raise UsageError("nothing to change: give at least one option (see `git handoff edit --help`)")
    if "title" in changes:
        check_title(changes["title"])
    if "priority" in changes:
        check_priority(changes["priority"])
    if "timeout" in changes:
        check_timeout(changes["timeout"])
    if "max_attempts" in changes:
        check_max_attempts(changes["max_attempts"])

    def apply(tx: Tx) -> Task:
        task = tx.require_task(task_id)
        fields: dict[str, Any] = {}
        if "after" in changes:
            deps = tuple(dict.fromkeys(changes["after"]))
            _check_deps(tx.tasks(), task_id, deps)
            fields["depends_on"] = deps
        mapping = {
            "title": "title",
            "priority": "priority",
            "check": "check",
            "timeout": "timeout_seconds",
            "max_attempts": "max_attempts",
            "cleanup": "cleanup",
            "spec": "spec_ref",
        }
        for opt, attr in mapping.items():
            if opt in changes:
                value = changes[opt]
                if opt in ("check", "cleanup", "spec") and value == "":
                    value = None
                fields[attr] = value
        shown = " ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in fields.items())
        new = dataclasses.replace(task, **fields)
        if new == task:
            return task
        new = tx.put_task(new)
        tx.log("INIT", f"Edited {shown}", task=task_id)
        return new

    task = store.transact(apply)
    trust.remember(store.repo, [changes.get("check"), changes.get("cleanup")])
    return task


PLAN_KEYS = {"id", "title", "priority", "depends_on", "check", "timeout", "max_attempts", "cleanup", "spec"}


def _read_import(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Task objects (SPEC §2 names) and top-level extras of a TOML plan or a tasks.json v2."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a plan file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not a text file (not UTF-8)") from None
    if "\x00" in text:
        raise UsageError(f"{path} is a binary file, not a plan")
    stripped = text.lstrip()
    if path.suffix.lower() == ".json" or (path.suffix.lower() != ".toml" and stripped.startswith("{")):
        return _read_tasks_json(text, path)
    return _read_plan(text, path), {}


def _read_tasks_json(text: str, path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a tasks.json object with version 2")
    if data.get("version") != 2:
        raise UsageError(f"{path}: unsupported tasks.json version {data.get('version')!r} (version 2 is read)")
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise UsageError(f"{path}: 'tasks' must be a list")
    extras = {k: v for k, v in data.items() if k not in ("tasks", "version")}
    return tasks, extras


def _read_plan(text: str, path: Path) -> list[dict[str, Any]]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path}: not a valid TOML plan ({exc})") from None
    unknown_top = set(data) - {"task"}
    if unknown_top:
        raise UsageError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown_top))}: a plan holds [[task]] tables")
    entries = data.get("task", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: 'task' must be [[task]] tables")
    out = []
    for n, entry in enumerate(entries, 1):
        unknown = set(entry) - PLAN_KEYS
        if unknown:
            raise UsageError(f"{path}: task #{n}: unknown key(s) {', '.join(sorted(unknown))}")
        obj: dict[str, Any] = {"id": entry.get("id") or new_id(), "title": entry.get("title")}
        if "priority" in entry:
            obj["priority"] = entry["priority"]
        if "depends_on" in entry:
            obj["depends_on"] = entry["depends_on"]
        if "max_attempts" in entry:
            obj["max_attempts"] = entry["max_attempts"]
        obj["validation"] = {"command": entry.get("check"), "timeout_seconds": entry.get("timeout", 300)}
        obj["on_failure"] = {"cleanup": entry.get("cleanup")}
        if "spec" in entry:
            obj["spec_ref"] = entry["spec"]
        out.append(obj)
    return out


def import_file(store: StateStore, path: str | Path) -> list[Task]:
    """Add every task of a plan (TOML) or harness tasks.json v2: all or nothing."""
    file = Path(path)
    objects, extras = _read_import(file)
    if not objects:
        raise UsageError(f"{file}: no tasks to import")
    stamp = now_iso()
    parsed: list[Task] = []
    for n, obj in enumerate(objects, 1):
        task = Task.from_json(obj, source=f"{file}: task #{n}")
        try:
            records.check_task_text(task, f"{file}: task #{n}")
        except InvalidState as exc:
            raise UsageError(exc.message) from None
        if not task.created_at:
            task = dataclasses.replace(task, created_at=stamp)
        if task.status == "in_progress":
            # a claim in a file this user imports here is this clone's own claim
            task = task.with_extra(clone=identity.clone_id(store.repo), clone_seal=identity.claim_seal(
                store.repo, task.id, task.get("claimed_at"), task.get("worktree"), task.started_at_commit,
                task.claimed_by))
        parsed.append(dataclasses.replace(task, order=order_key_now()))
    ids = [t.id for t in parsed]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise UsageError(f"{file}: duplicate task id(s) {', '.join(dupes)}")
    session_config = extras.get("session_config")
    if session_config is not None and not isinstance(session_config, dict):
        raise UsageError(f"{file}: session_config must be an object")

    def apply(tx: Tx) -> list[Task]:
        existing = tx.tasks()
        clash = [i for i in ids if i in existing]
        if clash:
            raise UsageError(f"{file}: task(s) already exist: {', '.join(clash[:5])}")
        known = set(existing) | set(ids)
        for task in parsed:
            for dep in task.depends_on:
                if dep not in known:
                    raise UsageError(f"{file}: task {task.id}: unknown dependency {dep!r}")
        out = [tx.put_task(t) for t in parsed]
        if extras:
            meta = tx.meta()
            meta["imported"] = extras
            tx.put_json(META_PATH, meta)
        if session_config:
            _apply_session_config(tx, session_config, file)
        tx.log("INIT", f"Imported {len(out)} task(s) from {file.name}")
        return out

    tasks = store.transact(apply)
    trust.remember(store.repo, [c for t in tasks for c in (t.check, t.cleanup)])
    return tasks


def _apply_session_config(tx: Tx, session_config: dict[str, Any], file: Path) -> None:
    import tomlkit

    doc = tomlkit.parse((tx.read(CONFIG_PATH) or b"").decode())
    mapping = {"concurrency_mode": "mode", "max_tasks_per_session": "max_tasks_per_session", "max_sessions": "max_sessions"}
    for src, dst in mapping.items():
        if src in session_config:
            doc[dst] = session_config[src]
    try:
        Config.from_dict(dict(doc))
    except UsageError as exc:
        raise UsageError(f"{file}: session_config: {exc.message}") from None
    tx.put(CONFIG_PATH, tomlkit.dumps(doc).encode())


# -- views --------------------------------------------------------------------------


def view(task: Task, blocked: set[str] | None = None) -> dict[str, Any]:
    """A task for --json output: SPEC §2 fields, plus the computed `blocked`."""
    out = task.to_json()
    out["blocked"] = bool(blocked and task.id in blocked)
    return out


def list_tasks(snap: Snapshot, *, status: str | None = None, ready: bool = False) -> tuple[list[Task], set[str]]:
    tasks = snap.tasks()
    blocked = schedule.blocked_ids(tasks)
    if status is not None and status not in ("pending", "in_progress", "completed", "failed", "blocked"):
        raise UsageError(f"invalid status {status!r}: use pending, in_progress, completed, failed or blocked")
    chosen: Iterable[Task]
    if ready:
        prepared, _ = schedule.prepare(tasks, now_iso())
        chosen = schedule.eligible(prepared)
    else:
        chosen = tasks.values()
    if status == "blocked":
        chosen = [t for t in chosen if t.id in blocked]
    elif status is not None:
        chosen = [t for t in chosen if t.status == status and t.id not in blocked]
    return list(chosen), blocked


def show(snap: Snapshot, task_id: str) -> Task:
    check_id(task_id)
    task = snap.task(task_id)
    if task is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    return task


def next_task(snap: Snapshot) -> Task:
    """The task `claim` would take; Negative (exit 1) when none."""
    prepared, _ = schedule.prepare(snap.tasks(), now_iso())
    found = schedule.eligible(prepared)
    if not found:
        raise Negative("nothing eligible: every task is completed, in progress, or waiting on failed dependencies")
    return found[0]


def stats_line_fields(tasks: dict[str, Task]) -> dict[str, int]:
    """The fields of a STATS log line (SPEC §5)."""
    c = schedule.counts(tasks)
    return {
        "tasks_total": len(tasks),
        "completed": c["completed"],
        "failed": c["failed"],
        "pending": c["pending"],
        "blocked": c["blocked"],
        "attempts_total": sum(t.attempts for t in tasks.values()),
        "checkpoints": sum(len(t.checkpoints) for t in tasks.values()),
    }


def stats_text(tasks: dict[str, Task]) -> str:
    return " ".join(f"{k}={v}" for k, v in stats_line_fields(tasks).items())


def status(store: StateStore) -> dict[str, Any]:
    snap = store.snapshot()
    tasks = snap.tasks()
    blocked = schedule.blocked_ids(tasks)
    meta = snap.meta()
    last_lines = [e.line for e in store.entries(limit=5)]
    last_lines.reverse()
    return {
        "counts": schedule.counts(tasks, blocked),
        "tasks": [
            {
                "id": t.id,
                "title": t.title,
                "status": "blocked" if t.id in blocked else t.status,
                "attempts": t.attempts,
                "max_attempts": t.max_attempts,
                "priority": t.priority,
                "claimed_by": t.claimed_by,
            }
            for t in tasks.values()
        ],
        "log": last_lines,
        "session_count": int(meta.get("session_count") or 0),
        "last_session": meta.get("last_session"),
        "config": dataclasses.asdict(snap.config()),
        "state_commit": snap.commit,
        "notes": _notes(store, snap),
    }


def _notes(store: StateStore, snap: Snapshot) -> list[str]:
    """Extra lines for `status` from other areas: what waits to be pushed, the relay."""
    from git_handoff.ops import relay, sync

    return sync.pending_notes(store) + relay.status_notes(snap)


def log(
    store: StateStore,
    *,
    limit: int | None = None,
    task: str | None = None,
    session: int | None = None,
    kind: str | None = None,
) -> list[Entry]:
    """Log lines oldest first; with `limit`, the last `limit` matching lines."""
    if not store.is_initialized():
        store.snapshot()  # raises NotInitialized
    if limit is not None and limit < 0:
        raise UsageError("-n must not be negative")
    if task is not None:
        check_id(task)
    if kind is not None and kind.lower() not in {t.lower() for t in LOG_TYPES}:
        raise UsageError(f"unknown log type {kind!r}: use one of {', '.join(LOG_TYPES)}")
    out: list[Entry] = []
    for entry in store.entries():
        if task is not None and entry.task != task:
            continue
        if session is not None and entry.session != session:
            continue
        if kind is not None and entry.type.lower() != kind.lower():
            continue
        out.append(entry)
        if limit is not None and len(out) >= limit:
            break
    out.reverse()
    return out


# -- graph --------------------------------------------------------------------------


def graph(snap: Snapshot, fmt: str = "text") -> str:
    tasks = snap.tasks()
    blocked = schedule.blocked_ids(tasks)

    def state(t: Task) -> str:
        return "blocked" if t.id in blocked else t.status

    if fmt == "dot":
        lines = ["digraph handoff {", "  rankdir=LR;", "  node [shape=box];"]
        for t in tasks.values():
            label = f"{t.id}\\n{t.title}\\n[{state(t)}]".replace('"', '\\"')
            lines.append(f'  "{t.id}" [label="{label}"];')
        for t in tasks.values():
            for dep in t.depends_on:
                lines.append(f'  "{dep}" -> "{t.id}";')
        lines.append("}")
        return "\n".join(lines) + "\n"
    if fmt == "mermaid":
        names = {tid: f"n{n}" for n, tid in enumerate(tasks)}
        lines = ["graph TD"]
        for t in tasks.values():
            label = f"{t.id}: {t.title} [{state(t)}]".replace('"', "'")
            lines.append(f'  {names[t.id]}["{label}"]')
        for t in tasks.values():
            for dep in t.depends_on:
                if dep in names:
                    lines.append(f"  {names[dep]} --> {names[t.id]}")
        return "\n".join(lines) + "\n"
    if fmt != "text":
        raise UsageError(f"invalid format {fmt!r}: use text, dot or mermaid")
    # text: each root, then what depends on it, indented; a task reached again is shown once more as a reference
    dependents: dict[str, list[str]] = {}
    for t in tasks.values():
        for dep in t.depends_on:
            dependents.setdefault(dep, []).append(t.id)
    roots = [t.id for t in tasks.values() if not any(d in tasks for d in t.depends_on)]
    out: list[str] = []
    printed: set[str] = set()

    def walk(tid: str, prefix: str, last: bool, top: bool) -> None:
        t = tasks[tid]
        branch = "" if top else ("└── " if last else "├── ")
        seen = tid in printed
        suffix = " (see above)" if seen else ""
        out.append(f"{prefix}{branch}[{state(t)}] {tid}: {t.title}{suffix}")
        if seen:
            return
        printed.add(tid)
        kids = dependents.get(tid, [])
        child_prefix = prefix + ("" if top else ("    " if last else "│   "))
        for n, kid in enumerate(kids):
            walk(kid, child_prefix, n == len(kids) - 1, False)

    for root in roots:
        walk(root, "", True, True)
    # tasks only reachable through a cycle have no root
    for tid in tasks:
        if tid not in printed:
            walk(tid, "", True, True)
    return "\n".join(out) + ("\n" if out else "")
