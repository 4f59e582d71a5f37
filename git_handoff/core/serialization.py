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
from dataclasses import dataclass
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
    MAX_TITLE,
    MODES,
    PRIORITIES,
    STATUSES,
    Config,
    Task,
    check_id,
    check_priority,
    is_task_id,
    optional_text,
    whole_number,
)

# -- the task's fields: one table ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskField:
    """One field of a task, the one definition of its rule: the full parse
    (task_from_json, which words a refusal), the quick parse (_well_formed) and the
    stored form (task_to_json; task_file's check_task_text and its one-pass recognizer)
    all read it from here.

    `kind` is the type and the parse's rule: "id" (a task id, required), "title"
    (non-blank text, required), "choice" (one of `choices`), "ids" / "texts" / "objects"
    (a list of task ids / text / objects; absent or empty is none), "count" (a whole
    number in [low, high]), "text" (text or null; absent is `default`), "order" (a whole
    number, anything else read as `default`; the edge holds it to [low, high]). `key` is
    where it is stored, inside the object `key` when `sub` is set. `form` is the edge's
    rule for a text (check_task_text): "line" (one line, at most `cap`), "time" (an
    ISO-8601 time when set), "command" (any text, at most `cap`), "oid" (an object id)."""

    name: str
    kind: str
    key: str
    sub: str | None = None
    default: Any = None
    low: int = 0
    high: int = MAX_COUNT
    choices: tuple[str, ...] = ()
    form: str | None = None
    cap: int = 0
    check: Callable[[Any, str], Any] | None = None  # the model's check that words a refusal


_ABSENT: Any = object()  # a field the record does not hold (null is a value: None)


# In the order task_to_json writes them (the Task's order too). A new field is one row here,
# its Task attribute (model), its merge rule (field_merge) and its views (ops/payloads).
TASK_TABLE = (
    TaskField("id", "id", "id"),
    TaskField("title", "title", "title", form="line", cap=MAX_TITLE),
    TaskField("status", "choice", "status", default="pending", choices=STATUSES),
    TaskField("priority", "choice", "priority", default="P1", choices=PRIORITIES, check=check_priority),
    TaskField("depends_on", "ids", "depends_on", default=()),
    TaskField("attempts", "count", "attempts", default=0),
    TaskField("max_attempts", "count", "max_attempts", default=DEFAULT_MAX_ATTEMPTS, low=1, high=MAX_ATTEMPTS),
    TaskField("started_at_commit", "text", "started_at_commit", form="oid"),
    TaskField("check", "text", "validation", "command", form="command", cap=4096),
    TaskField("timeout_seconds", "count", "validation", "timeout_seconds", default=DEFAULT_TIMEOUT, low=1,
              high=MAX_SECONDS),
    TaskField("cleanup", "text", "on_failure", "cleanup", form="command", cap=4096),
    TaskField("error_log", "texts", "error_log", default=()),
    TaskField("checkpoints", "objects", "checkpoints", default=()),
    TaskField("completed_at", "text", "completed_at", form="time"),
    TaskField("claimed_by", "text", "claimed_by", form="line", cap=4096),
    TaskField("lease_expires_at", "text", "lease_expires_at", form="time"),
    TaskField("created_at", "text", "created_at", default="", form="time"),
    TaskField("spec_ref", "text", "spec_ref", form="line", cap=4096),
    TaskField("tokens", "count", "tokens", default=0),
    TaskField("order", "order", "order", default=0, high=2**64),
    TaskField("updated_at", "text", "updated_at", default="", form="time"),
)

# The keys task_from_json reads (everything else is kept in `extra`).
TASK_READ_KEYS = frozenset(row.key for row in TASK_TABLE)
# The harness's task fields, in the order task_to_json writes them (the bookkeeping after).
TASK_FIELDS = tuple(dict.fromkeys(row.key for row in TASK_TABLE if row.name not in ("order", "updated_at")))
_LISTS = {"ids": "task ids", "texts": "text", "objects": "objects"}
_ITEM_TYPE: dict[str, type] = {"ids": str, "texts": str, "objects": dict}
# A record with several bad fields is refused for the first in this order: the table's, its
# top-level texts last (as task_from_json always checked them).
_PARSE_ORDER = sorted(TASK_TABLE, key=lambda row: row.kind == "text" and row.sub is None)


def _parse_text(row: TaskField, value: Any, where: str) -> Any:
    label = row.key if row.sub is None else f"{row.key}.{row.sub}"
    text = optional_text(None if value is _ABSENT else value, f"{where}: {label}")
    return row.default if text is None else text


def _parse_count(row: TaskField, value: Any, where: str) -> Any:
    value = row.default if value is _ABSENT else value
    return whole_number(value, f"{where}: {row.sub or row.key}", minimum=row.low, maximum=row.high)


def _parse_choice(row: TaskField, value: Any, where: str) -> Any:
    value = row.default if value is _ABSENT else value
    if row.check is not None:
        return row.check(value, where)
    if value not in row.choices:
        raise UsageError(f"{where}: {row.key} must be one of {', '.join(row.choices)}")
    return value


def _parse_title(row: TaskField, value: Any, where: str) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: title must be non-empty text")
    return value


def _parse_order(row: TaskField, value: Any, where: str) -> Any:
    return value if isinstance(value, int) and not isinstance(value, bool) else row.default


def _parse_list(row: TaskField, value: Any, where: str) -> Any:
    items = [] if value is _ABSENT else value or []
    if not isinstance(items, list) or not all(isinstance(x, _ITEM_TYPE[row.kind]) for x in items):
        raise UsageError(f"{where}: {row.key} must be a list of {_LISTS[row.kind]}")
    if row.kind == "ids":
        for item in items:
            check_id(item)
    return tuple(items)


# The full parse of each kind: (row, the stored value or _ABSENT, where) to the Task's value,
# or a UsageError naming the field. The id is asked first, by task_from_json itself (every
# other refusal names the task).
_PARSE: dict[str, Callable[[TaskField, Any, str], Any]] = {
    "id": lambda row, value, where: value, "title": _parse_title, "choice": _parse_choice,
    "count": _parse_count, "text": _parse_text, "order": _parse_order,
    "ids": _parse_list, "texts": _parse_list, "objects": _parse_list,
}


# -- a task -------------------------------------------------------------------------


def task_to_json(task: Task) -> dict[str, Any]:
    """The task as the harness tasks.json names its fields (plus bookkeeping and unknown fields after).

    TASK_TABLE's rows in its order, written out: a loop over the table cost twice the time
    (2 us a task against 4; a claim that fails 50,000 tasks writes each), and
    tests/core/test_serialization.py holds the two to the same keys."""
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
        "tokens": task.tokens,
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
    """Parse and check one task object; a bad field is a UsageError naming it (the first in
    _PARSE_ORDER). The quick parse first: it builds the same task from a file as git
    handoff writes it, and None for anything else."""
    quick = _well_formed(Task, data)
    if quick is not None:
        return quick
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a task must be an object")
    d = dict(data)
    task_id = d.get("id")
    if not isinstance(task_id, str):
        raise UsageError(f"{source}: missing or non-text task id")
    where = f"{source}: task {check_id(task_id)}"
    values: dict[str, Any] = {}
    objects: dict[str, dict[str, Any]] = {}
    for row in _PARSE_ORDER:
        if row.sub is None:
            value = d.pop(row.key, _ABSENT)
        else:  # a field inside an object (validation.command): the object checked first
            if row.key not in objects:
                found = d.pop(row.key, None) or {}
                if not isinstance(found, dict):
                    raise UsageError(f"{where}: {row.key} must be an object")
                objects[row.key] = found
            value = objects[row.key].get(row.sub, _ABSENT)
        values[row.name] = _PARSE[row.kind](row, value, where)
    values = {row.name: values[row.name] for row in TASK_TABLE}  # the Task's order
    values["extra"] = d
    return _assemble(Task, values)


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
    two spaces a level). Exact types only: anything else raises _Unusual.

    One function of complexity ~26 on purpose: json_indented's hot path (every task file
    written), where the common values of a task (texts, null, numbers, lists of texts)
    are laid out inline instead of by a call each; a branch per JSON type."""
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


def _ids_ok(items: list[Any]) -> bool:
    return all(type(x) is str and is_task_id(x) for x in items)


_ITEMS_OK: dict[str, Callable[[list[Any]], bool]] = {
    "ids": _ids_ok,
    "texts": lambda items: all(type(x) is str for x in items),
    "objects": lambda items: all(type(x) is dict for x in items),
}
# The quick parse's reading of the table: each row as a plain tuple.
_QUICK = tuple((row.name, row.key, row.sub, row.kind, row.default, row.low, row.high, row.choices)
               for row in TASK_TABLE)


def _well_formed(cls: type[Task], data: Any) -> Task | None:
    """The task `task_from_json` builds from `data` when every field is of the exact plain
    type and inside its row's rule (a task file as git handoff writes it), else None: then
    the full parse runs, and it alone words the error. Parsing 50,000 tasks (the first
    command after a sync) spends most of its time in the checks, and here they are one
    pass without building a message per field. Accepts nothing the full parse refuses, and
    builds the same task (tests/ops/test_bulk_paths.py checks both).

    One function of complexity ~34 on purpose: it is the inner loop of that parse (a
    field of a task per turn, a million turns for 50,000 tasks), where a call per kind
    would cost more than the checks it holds; each branch is one kind of TASK_TABLE's
    rows, read top to bottom."""
    if type(data) is not dict:
        return None
    get = data.get
    fields: dict[str, Any] = {}
    for name, key, sub, kind, default, low, high, choices in _QUICK:
        value = get(key, _ABSENT)
        if sub is not None:  # inside an object: absent or null is an empty one
            if value is _ABSENT or value is None:
                value = _ABSENT
            elif type(value) is not dict:
                return None
            else:
                value = value.get(sub, _ABSENT)
        if kind == "text":
            if value is _ABSENT or value is None:
                value = default
            elif type(value) is not str:
                return None
        elif kind == "count":
            if value is _ABSENT:
                value = default
            if type(value) is not int or not low <= value <= high:
                return None
        elif kind == "choice":
            if value is _ABSENT:
                value = default
            if type(value) is not str or value not in choices:
                return None
        elif kind == "id":
            if type(value) is not str or not is_task_id(value):
                return None
        elif kind == "title":
            if type(value) is not str or not value.strip():
                return None
        elif kind == "order":
            if value is _ABSENT:
                value = default
            elif type(value) is not int:
                return None
        elif value is _ABSENT or value is None:
            value = ()
        elif type(value) is not list or not _ITEMS_OK[kind](value):
            return None
        else:
            value = tuple(value)
        fields[name] = value
    fields["extra"] = {k: v for k, v in data.items() if k not in TASK_READ_KEYS}
    task = object.__new__(cls)
    object.__setattr__(task, "__dict__", fields)
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
