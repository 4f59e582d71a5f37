"""The task graph: init, add, import, edit, and the read-only views (list, show,
status, next, log, graph)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, cast

from git_handoff.core import decoding, selection, task_file
from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.model import (
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
from git_handoff.core.serialization import config_from_dict, task_from_json
from git_handoff.ops.payloads import InitResult, config_view
from git_handoff.state import identity, trust
from git_handoff.state.session_records import carry_session_count
from git_handoff.state.snapshot import CONFIG_PATH, META_PATH
from git_handoff.state.store import StateStore, Tx, initial_files

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
) -> InitResult:
    """Create the state, or apply the given settings to an existing one (idempotent)."""
    import tomlkit  # noqa: PLC0415 - import cost: tomlkit takes ~30 ms; only init and import write TOML

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

    def apply(tx: Tx) -> InitResult:
        created = tx.base is None
        if created:
            doc = tomlkit.parse(CONFIG_HEADER)
            defaults = Config()
            doc["mode"] = defaults.mode
            doc["max_tasks_per_session"] = defaults.max_tasks_per_session
            doc["max_sessions"] = defaults.max_sessions
        else:
            tx.config()  # through its parser first: a corrupt config is named, not fed to tomlkit
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
        return {"created": created, "changed": changed, "config": config_view(cfg)}

    result = store.transact(apply, allow_uninitialized=True)
    trust.remember(store.repo, [(trust.INIT_PLACE, init_command)])
    return result


# -- add / import / edit ---------------------------------------------------------------


def _check_deps(tasks: dict[str, Task], task_id: str, deps: Sequence[str]) -> None:
    for dep in deps:
        check_id(dep)
        if dep not in tasks and dep != task_id:
            raise UsageError(f"unknown dependency {dep!r} (see `git handoff list`)")
    cycle = selection.would_cycle(tasks, task_id, deps)
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
    trust.remember(store.repo, [(trust.place(task.id, "validation"), task.check),
                                (trust.place(task.id, "cleanup"), task.cleanup)])
    return task


_EDITABLE = ("title", "priority", "after", "check", "timeout", "max_attempts", "cleanup", "spec")


def edit(store: StateStore, task_id: str, **changes: object) -> Task:
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
            deps = tuple(dict.fromkeys(cast("Iterable[str]", changes["after"])))  # ids, checked just below
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
        shown = " ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={list(v) if isinstance(v, tuple) else v}"
                         for k, v in fields.items())
        new = dataclasses.replace(task, **fields)
        if new == task:
            return task
        new = tx.put_task(new)
        tx.log("INIT", f"Edited {shown}", task=task_id)
        return new

    task = store.transact(apply)
    # the command texts as given (checked above as the task's check and cleanup)
    trust.remember(store.repo, [(trust.place(task.id, "validation"), cast("str | None", changes.get("check"))),
                                (trust.place(task.id, "cleanup"), cast("str | None", changes.get("cleanup")))])
    return task


PLAN_KEYS = {"id", "title", "priority", "depends_on", "check", "timeout", "max_attempts", "cleanup", "spec"}


def _read_import(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Task objects (the harness field names) and top-level extras of a TOML plan or a tasks.json v2."""
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
    data = decoding.load_json_text(text, str(path))
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a tasks.json object with version 2")
    # the harness skill's own fixtures write tasks.json without "version": that is version 2
    if data.get("version", 2) != 2:
        raise UsageError(f"{path}: unsupported tasks.json version {data.get('version')!r} (version 2 is read)")
    tasks = data.get("tasks")
    if not isinstance(tasks, list):
        raise UsageError(f"{path}: 'tasks' must be a list")
    extras = {k: v for k, v in data.items() if k not in ("tasks", "version")}
    return tasks, extras


def _read_plan(text: str, path: Path) -> list[dict[str, Any]]:
    try:
        data = decoding.load_toml_text(text, str(path))
    except UsageError as exc:
        raise UsageError(exc.message.replace("not valid TOML", "not a valid TOML plan", 1)) from None
    unknown_top = set(data) - {"task"}
    if unknown_top:
        raise UsageError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown_top))}: "
                         "a plan holds [[task]] tables")
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


def import_file(store: StateStore, path: str | Path, progress: Callable[[str], None] | None = None) -> list[Task]:
    """Add every task of a plan (TOML) or harness tasks.json v2: all or nothing.

    `progress(text)`, when given, hears what is being done (a large plan takes seconds)."""
    say = progress or (lambda _text: None)
    file = Path(path)
    say(f"reading {file.name}")
    objects, extras = _read_import(file)
    if not objects:
        raise UsageError(f"{file}: no tasks to import")
    parsed = _parsed(store, objects, file, say)
    ids = [t.id for t in parsed]
    total = len(parsed)
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
        out = []
        for n, t in enumerate(parsed, 1):
            if n % 1000 == 0:
                say(f"preparing task {n:,}/{total:,}")
            out.append(tx.put_task(t))
        say(f"writing {total:,} task(s) to refs/harness/state")
        if extras:
            meta = tx.meta()
            meta["imported"] = extras
            # the harness's session count carries over, so max_sessions keeps counting
            carried = extras.get("session_count")
            if isinstance(carried, int) and not isinstance(carried, bool):
                carry_session_count(meta, carried)
            tx.put_json(META_PATH, meta)
        if session_config:
            _apply_session_config(tx, session_config, file)
        tx.log("INIT", f"Imported {len(out)} task(s) from {file.name}")
        return out

    tasks = store.transact(apply)
    trust.remember(store.repo, [use for t in tasks for use in ((trust.place(t.id, "validation"), t.check),
                                                            (trust.place(t.id, "cleanup"), t.cleanup))])
    return tasks


def _parsed(store: StateStore, objects: list[dict[str, Any]], file: Path, say: Callable[[str], None]) -> list[Task]:
    """The plan's tasks, each held to the edge's rules and stamped for this clone; refused
    (exit 2) on the first one that breaks them or an id given twice."""
    stamp = now_iso()
    parsed: list[Task] = []
    total = len(objects)
    for n, obj in enumerate(objects, 1):
        if n % 1000 == 0:
            say(f"checking task {n:,}/{total:,}")
        task = task_from_json(obj, source=f"{file}: task #{n}")
        try:
            task_file.check_task_text(task, f"{file}: task #{n}")
        except InvalidState as exc:
            raise UsageError(exc.message) from None
        if not task.created_at:
            task = dataclasses.replace(task, created_at=stamp)
        if task.status == "in_progress":
            task = _claimed_here(store, task)
        parsed.append(dataclasses.replace(task, order=order_key_now()))
    dupes = sorted(i for i, n in Counter(t.id for t in parsed).items() if n > 1)  # not count(): quadratic at 50k
    if dupes:
        raise UsageError(f"{file}: duplicate task id(s) {', '.join(dupes)}")
    return parsed


def _claimed_here(store: StateStore, task: Task) -> Task:
    """A claim in a file this user imports here is this clone's own claim, in this worktree
    when the file names none (the harness skill's tasks.json never does)."""
    if not task.claim.worktree and store.repo.workdir is not None:
        task = task.with_extra(worktree=str(store.repo.workdir))
    claim = task.claim
    return task.with_extra(clone=identity.clone_id(store.repo), clone_seal=identity.claim_seal(
        store.repo, task.id, claim.claimed_at, claim.worktree, task.started_at_commit, task.claimed_by))


def _apply_session_config(tx: Tx, session_config: dict[str, Any], file: Path) -> None:
    import tomlkit  # noqa: PLC0415 - import cost (see init)

    tx.config()  # through its parser first (see init)
    doc = tomlkit.parse((tx.read(CONFIG_PATH) or b"").decode())
    mapping = {"concurrency_mode": "mode", "max_tasks_per_session": "max_tasks_per_session",
               "max_sessions": "max_sessions"}
    for src, dst in mapping.items():
        if src in session_config:
            doc[dst] = session_config[src]
    try:
        config_from_dict(dict(doc))
    except UsageError as exc:
        raise UsageError(f"{file}: session_config: {exc.message}") from None
    tx.put(CONFIG_PATH, tomlkit.dumps(doc).encode())
