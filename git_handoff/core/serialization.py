"""A task and the state's config in their stored form, and back: `task_to_json` and
`dump_task` write a task's file, `task_from_json` and `load_task` parse one with every
check of its fields (a bad field is a UsageError naming it), `config_from_dict` reads
config.toml's table.

Two fast paths keep 50,000 tasks cheap, each exactly what the plain code does:
`json_indented` lays a value out as `json.dumps(indent=2)` does, and `_well_formed` builds
a task from a file as git handoff writes it in one pass of checks, before the full parse
(which alone words an error).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from git_handoff.core.errors import UsageError
from git_handoff.core.model import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_TASKS_PER_SESSION,
    DEFAULT_TIMEOUT,
    MAX_ATTEMPTS,
    MAX_COUNT,
    MAX_SECONDS,
    MODES,
    PRIORITIES,
    STATUSES,
    Config,
    Task,
    _id_ok,
    check_id,
    check_max_attempts,
    check_priority,
    check_timeout,
    optional_text,
    whole_number,
)

# The harness's task fields, in the order task_to_json writes them.
TASK_FIELDS = (
    "id",
    "title",
    "status",
    "priority",
    "depends_on",
    "attempts",
    "max_attempts",
    "started_at_commit",
    "validation",
    "on_failure",
    "error_log",
    "checkpoints",
    "completed_at",
    "claimed_by",
    "lease_expires_at",
    "created_at",
    "spec_ref",
)


# -- a task -------------------------------------------------------------------------


def task_to_json(task: Task) -> dict[str, Any]:
    """The task as the harness tasks.json names its fields (plus bookkeeping and unknown fields after)."""
    out: dict[str, Any] = {
        "id": task.id,
        "title": task.title,
        "status": task.status,
        "priority": task.priority,
        "depends_on": list(task.depends_on),
        "attempts": task.attempts,
        "max_attempts": task.max_attempts,
        "started_at_commit": task.started_at_commit,
        "validation": {"command": task.check, "timeout_seconds": task.timeout_seconds},
        "on_failure": {"cleanup": task.cleanup},
        "error_log": list(task.error_log),
        "checkpoints": [dict(c) for c in task.checkpoints],
        "completed_at": task.completed_at,
        "claimed_by": task.claimed_by,
        "lease_expires_at": task.lease_expires_at,
        "created_at": task.created_at,
        "spec_ref": task.spec_ref,
        "order": task.order,
        "updated_at": task.updated_at,
    }
    for k, v in task.extra.items():
        if k not in out:
            out[k] = v
    return out


def dump_task(task: Task) -> bytes:
    """The bytes of the task's file in the state."""
    return task_file(task_to_json(task))


def task_from_json(data: Any, *, source: str = "task") -> Task:
    """Parse and check one task object; a bad field is a UsageError naming it."""
    quick = _well_formed(Task, data)
    if quick is not None:
        return quick
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a task must be an object")
    d = dict(data)
    task_id = d.pop("id", None)
    if not isinstance(task_id, str):
        raise UsageError(f"{source}: missing or non-text task id")
    check_id(task_id)
    where = f"{source}: task {task_id}"
    title = d.pop("title", None)
    if not isinstance(title, str) or not title.strip():
        raise UsageError(f"{where}: title must be non-empty text")
    status = d.pop("status", "pending")
    if status not in STATUSES:
        raise UsageError(f"{where}: status must be one of {', '.join(STATUSES)}")
    priority = check_priority(d.pop("priority", "P1"), where)
    deps = d.pop("depends_on", []) or []
    if not isinstance(deps, list) or not all(isinstance(x, str) for x in deps):
        raise UsageError(f"{where}: depends_on must be a list of task ids")
    for dep in deps:
        check_id(dep)
    attempts = whole_number(d.pop("attempts", 0), f"{where}: attempts", minimum=0)
    max_attempts = check_max_attempts(d.pop("max_attempts", DEFAULT_MAX_ATTEMPTS), where)
    validation = d.pop("validation", None) or {}
    if not isinstance(validation, dict):
        raise UsageError(f"{where}: validation must be an object")
    check = optional_text(validation.get("command"), f"{where}: validation.command")
    timeout = check_timeout(validation.get("timeout_seconds", DEFAULT_TIMEOUT), where)
    on_failure = d.pop("on_failure", None) or {}
    if not isinstance(on_failure, dict):
        raise UsageError(f"{where}: on_failure must be an object")
    cleanup = optional_text(on_failure.get("cleanup"), f"{where}: on_failure.cleanup")
    error_log = d.pop("error_log", []) or []
    if not isinstance(error_log, list) or not all(isinstance(x, str) for x in error_log):
        raise UsageError(f"{where}: error_log must be a list of text")
    checkpoints = d.pop("checkpoints", []) or []
    if not isinstance(checkpoints, list) or not all(isinstance(x, dict) for x in checkpoints):
        raise UsageError(f"{where}: checkpoints must be a list of objects")
    order = d.pop("order", 0)
    return _assemble(Task, dict(
        id=task_id,
        title=title,
        status=status,
        priority=priority,
        depends_on=tuple(deps),
        attempts=attempts,
        max_attempts=max_attempts,
        started_at_commit=optional_text(d.pop("started_at_commit", None), f"{where}: started_at_commit"),
        check=check,
        timeout_seconds=timeout,
        cleanup=cleanup,
        error_log=tuple(error_log),
        checkpoints=tuple(checkpoints),
        completed_at=optional_text(d.pop("completed_at", None), f"{where}: completed_at"),
        claimed_by=optional_text(d.pop("claimed_by", None), f"{where}: claimed_by"),
        lease_expires_at=optional_text(d.pop("lease_expires_at", None), f"{where}: lease_expires_at"),
        created_at=optional_text(d.pop("created_at", None), f"{where}: created_at") or "",
        spec_ref=optional_text(d.pop("spec_ref", None), f"{where}: spec_ref"),
        order=order if isinstance(order, int) and not isinstance(order, bool) else 0,
        updated_at=optional_text(d.pop("updated_at", None), f"{where}: updated_at") or "",
        extra=d,
    ))


def load_task(raw: bytes, *, source: str = "task") -> Task:
    """A task from the bytes of its file: task_from_json of its JSON."""
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{source}: not valid JSON (not UTF-8 at byte {exc.start})") from None
    except ValueError as exc:
        raise UsageError(f"{source}: not valid JSON ({exc})") from None
    return task_from_json(data, source=source)


# -- the layout of a task file ----------------------------------------------------------


class _Unusual(Exception):
    """A value json_indented leaves to json.dumps (a subclass, a non-text key, ...)."""


_text = json.encoder.encode_basestring  # the C one (ensure_ascii=False), as json.dumps uses
_INF = float("inf")


def _json_float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return float.__repr__(value)


def _lay_out(value: Any, nl: str, out: list[str]) -> None:
    """Append `value` laid out as json.dumps(indent=2) does, at the indent `nl` ("\n" and
    two spaces a level). Exact types only: anything else raises _Unusual."""
    t = type(value)
    if t is str:
        out.append(_text(value))
    elif t is dict or t is list or t is tuple:
        if not value:
            out.append("{}" if t is dict else "[]")
            return
        inner = nl + "  "
        sep = ("{" if t is dict else "[") + inner
        glue = "," + inner
        items = value.items() if t is dict else ((None, v) for v in value)
        for k, v in items:
            out.append(sep)
            sep = glue
            if t is dict:
                if type(k) is not str:
                    raise _Unusual
                out.append(_text(k))
                out.append(": ")
            tv = type(v)
            if tv is str:
                out.append(_text(v))
            elif v is None:
                out.append("null")
            elif tv is int:
                out.append(int.__repr__(v))
            elif tv is list and all(type(x) is str for x in v):  # depends_on, error_log
                if v:
                    deeper = inner + "  "
                    out.append("[" + deeper + ("," + deeper).join(map(_text, v)) + inner + "]")
                else:
                    out.append("[]")
            else:
                _lay_out(v, inner, out)
        out.append(nl + ("}" if t is dict else "]"))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif t is int:
        out.append(int.__repr__(value))
    elif t is float:
        out.append(_json_float(value))
    else:
        raise _Unusual


def task_file(doc: dict[str, Any]) -> bytes:
    """The bytes of a task file holding `doc` (a task_to_json)."""
    return (json_indented(doc) + "\n").encode()


def json_indented(value: Any) -> str:
    """Exactly `json.dumps(value, indent=2, ensure_ascii=False)`, several times faster:
    with an indent the json module falls back to its pure-Python encoder (generators,
    one call per value), which was most of a claim that fails 50,000 tasks. Here one
    recursive function appends pieces to a list (strings through the same C string
    encoder); anything but the exact JSON types (subclasses, non-text keys, a value
    nested past the recursion limit or circular) goes to json.dumps as before, which
    lays it out or raises exactly as it always did."""
    out: list[str] = []
    try:
        _lay_out(value, "\n", out)
    except (_Unusual, RecursionError):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return "".join(out)


# -- the quick parse ---------------------------------------------------------------------

_TASK_FIELDS = frozenset(f.name for f in dataclasses.fields(Task))

# The keys task_from_json reads (everything else is kept in `extra`).
TASK_READ_KEYS = frozenset((
    "id", "title", "status", "priority", "depends_on", "attempts", "max_attempts", "validation",
    "on_failure", "error_log", "checkpoints", "order", "started_at_commit", "completed_at",
    "claimed_by", "lease_expires_at", "created_at", "spec_ref", "updated_at",
))
_OPTIONAL_TEXT = ("started_at_commit", "completed_at", "claimed_by", "lease_expires_at", "spec_ref")


def _good_id(value: Any) -> bool:
    return type(value) is str and _id_ok(value)


def _plain_list(value: Any, ok: Callable[[Any], bool]) -> tuple[Any, ...] | None:
    """An absent list as (), a list whose every item is `ok` as a tuple, else None."""
    if value is None:
        return ()
    if type(value) is list and all(ok(item) for item in value):
        return tuple(value)
    return None


def _well_formed(cls: type[Task], data: Any) -> Task | None:
    """The task `task_from_json` builds from `data` when every field is of the exact plain
    type and in the range it checks (a task file as git handoff writes it), else None:
    then the full parse runs, and it alone words the error. Parsing 50,000 tasks (the
    first command after a sync) spends most of its time in the checks, and here they
    are one pass without building a message per field. Accepts nothing the full parse
    refuses, and builds the same task (tests/ops/test_bulk_paths.py checks both:
    test_the_quick_parse_builds_what_the_full_parse_builds)."""
    if type(data) is not dict:
        return None
    get = data.get
    task_id = get("id")
    title = get("title")
    status = get("status", "pending")
    priority = get("priority", "P1")
    if not _good_id(task_id) or type(title) is not str or not title.strip() \
            or type(status) is not str or status not in STATUSES \
            or type(priority) is not str or priority not in PRIORITIES:
        return None
    deps = _plain_list(get("depends_on"), _good_id)
    if deps is None:
        return None
    attempts = get("attempts", 0)
    max_attempts = get("max_attempts", DEFAULT_MAX_ATTEMPTS)
    order = get("order", 0)
    if type(attempts) is not int or not 0 <= attempts <= MAX_COUNT or type(max_attempts) is not int \
            or not 1 <= max_attempts <= MAX_ATTEMPTS or type(order) is not int:
        return None
    validation = get("validation")
    on_failure = get("on_failure")
    if validation is None:
        validation = {}
    if on_failure is None:
        on_failure = {}
    if type(validation) is not dict or type(on_failure) is not dict:
        return None
    check = validation.get("command")
    timeout = validation.get("timeout_seconds", DEFAULT_TIMEOUT)
    cleanup = on_failure.get("cleanup")
    if (check is not None and type(check) is not str) or type(timeout) is not int \
            or not 1 <= timeout <= MAX_SECONDS or (cleanup is not None and type(cleanup) is not str):
        return None
    error_log = _plain_list(get("error_log"), lambda e: type(e) is str)
    checkpoints = _plain_list(get("checkpoints"), lambda c: type(c) is dict)
    if error_log is None or checkpoints is None:
        return None
    texts = [get(name) for name in _OPTIONAL_TEXT]
    created_at = get("created_at")
    updated_at = get("updated_at")
    for text in (*texts, created_at, updated_at):
        if text is not None and type(text) is not str:
            return None
    started_at_commit, completed_at, claimed_by, lease_expires_at, spec_ref = texts
    task = object.__new__(cls)
    object.__setattr__(task, "__dict__", {
        "id": task_id, "title": title, "status": status, "priority": priority, "depends_on": deps,
        "attempts": attempts, "max_attempts": max_attempts, "started_at_commit": started_at_commit,
        "check": check, "timeout_seconds": timeout, "cleanup": cleanup, "error_log": error_log,
        "checkpoints": checkpoints, "completed_at": completed_at, "claimed_by": claimed_by,
        "lease_expires_at": lease_expires_at, "created_at": created_at or "", "spec_ref": spec_ref,
        "order": order, "updated_at": updated_at or "",
        "extra": {k: v for k, v in data.items() if k not in TASK_READ_KEYS},
    })
    return task


def _assemble(cls: type[Task], fields: dict[str, Any]) -> Task:
    """A task from every one of its fields, checked already: what the generated
    __init__ does, without one frozen setattr per field (parsing 50,000 tasks)."""
    if fields.keys() != _TASK_FIELDS:
        raise TypeError(f"Task fields differ: {sorted(fields.keys() ^ _TASK_FIELDS)}")
    task = object.__new__(cls)
    object.__setattr__(task, "__dict__", fields)
    return task


# -- config ----------------------------------------------------------------------------


def config_from_dict(data: dict[str, Any]) -> Config:
    """The state's config.toml table as a Config, each setting checked."""
    mode = data.get("mode", "exclusive")
    if mode not in MODES:
        raise UsageError(f"config: mode must be exclusive or concurrent, not {mode!r}")
    return Config(
        mode=mode,
        max_tasks_per_session=whole_number(
            data.get("max_tasks_per_session", DEFAULT_MAX_TASKS_PER_SESSION),
            "config: max_tasks_per_session",
            minimum=1,
        ),
        max_sessions=whole_number(data.get("max_sessions", DEFAULT_MAX_SESSIONS), "config: max_sessions", minimum=1),
        spec_ref=optional_text(data.get("spec_ref"), "config: spec_ref"),
        init_command=optional_text(data.get("init_command"), "config: init_command"),
    )
