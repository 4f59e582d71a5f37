"""Pure data: tasks, config, ids, durations, timestamps. No git, no I/O.

A Task is frozen; change it with `dataclasses.replace`. Fields a newer writer
added that this version does not know are kept in `extra` and written back.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, cast, get_args

from git_handoff.core import display
from git_handoff.core.errors import UsageError
from git_handoff.core.patterns import lazy

# The statuses a task records, spelled once.
Status = Literal["pending", "in_progress", "completed", "failed"]
STATUSES: tuple[Status, ...] = get_args(Status)
# The statuses a task is shown with (`list --status`, `status`, `graph`, the dashboard): a
# pending task a failed or circular dependency holds back is shown "blocked", computed
# (git_handoff.core.selection.shown_status), never stored.
ShownStatus = Literal[Status, "blocked"]
SHOWN_STATUSES: tuple[ShownStatus, ...] = (*STATUSES, "blocked")
PRIORITIES = ("P0", "P1", "P2")
CATEGORIES = (
    "ENV_SETUP",
    "CONFIG",
    "TASK_EXEC",
    "TEST_FAIL",
    "TIMEOUT",
    "DEPENDENCY",
    "SESSION_TIMEOUT",
)
LOG_TYPES = (
    "INIT",
    "Starting",
    "Completed",
    "ERROR",
    "CHECKPOINT",
    "ROLLBACK",
    "RECOVERY",
    "STATS",
    "LOCK",
    "WARN",
    "HANDOFF",
    "ACK",
    "SYNC",
)
MODES = ("exclusive", "concurrent")
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_TIMEOUT = 300
DEFAULT_MAX_TASKS_PER_SESSION = 20
DEFAULT_MAX_SESSIONS = 50
MAX_SECONDS = 10 * 366 * 24 * 3600  # durations and timeouts: ten years at most (records.MAX_SECONDS)
MAX_TITLE = 500  # characters of a task title (records.MAX_TITLE)
MAX_COUNT = 2**63 - 1  # TOML's integer range: every count, number and id number (records.MAX_COUNT)
MAX_ATTEMPTS = 10_000  # a task's max_attempts
MAX_LIST = 10_000  # entries of one list inside a record (records.MAX_LIST)
MAX_RECORD_BYTES = 1 << 20  # one record blob in the state (records.MAX_RECORD_BYTES)
MAX_RELAY_FAILURES = 100  # relay.json's `failures`

# The most entries each capped list of a record may hold, by record kind (records.kind_of)
# and field; a dotted name is a list inside an object field (a handoff document's
# `status.pending`), and meta.json's `sessions_by_clone` is an object of counters capped
# the same way. One table for both sides of the rule: the parsers (git_handoff.core.records)
# refuse a record holding more, and the merge (git_handoff.core.merge) bounds a union of two
# sides to it, so that any two records the edge accepts merge into one it accepts. A list
# no entry names is a field a newer writer added: no parser counts it, the record's size
# (MAX_RECORD_BYTES) bounds it.
LIST_LIMITS: dict[str, dict[str, int]] = {
    "task": {"depends_on": MAX_LIST, "error_log": MAX_LIST, "checkpoints": MAX_LIST},
    "meta": {"sessions_by_clone": MAX_LIST},
    "session": {"completed": MAX_LIST, "decisions": MAX_LIST, "blockers": MAX_LIST},
    "doc": {
        "status.completed": MAX_LIST, "status.in_progress": MAX_LIST, "status.pending": MAX_LIST,
        "completed_this_session": MAX_LIST, "failed": MAX_LIST, "decisions": MAX_LIST, "blockers": MAX_LIST,
        "files_changed": MAX_LIST, "rejections": MAX_LIST,
    },
    "relay": {"failures": MAX_RELAY_FAILURES},
}
_CONTROL = lazy(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")
# a terminal's escape sequences: CSI (colors, cursor moves), OSC (titles, links), and the
# two-character ones
_ESCAPES = lazy(r"\x1b(?:\[[0-?]*+[ -/]*+[@-~]|\][^\x07\x1b]*+(?:\x07|\x1b\\)?|[@-Z\\-_])")


def printable(text: str) -> str:
    """`text` (a command's output: a check's, a cleanup's) as one line of text the state's
    records may hold (records.line_problem): terminal escape sequences removed (a test
    runner's colors), runs of whitespace and line breaks one space, any other control
    character, bidi formatting character and lone surrogate shown as its escape
    (display.line)."""
    return display.line(" ".join(_ESCAPES.sub("", text).split()))

# -- time -------------------------------------------------------------------------


def now() -> datetime:
    """The current time, UTC. GIT_HANDOFF_NOW (ISO-8601) pins it, for tests of leases."""
    pinned = os.environ.get("GIT_HANDOFF_NOW")
    if pinned:
        return parse_time(pinned)
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_iso(seconds: int) -> str | None:
    """Seconds since the epoch (a commit's time: whatever its writer put there) as an
    ISO-8601 UTC time; None for one outside years 1 to 9999, or that this platform's
    time functions refuse."""
    try:
        return iso(datetime.fromtimestamp(seconds, timezone.utc))
    except (ValueError, OverflowError, OSError):
        return None


# now_iso's answer for the current wall-clock second: a transaction that writes 50,000
# tasks asks for it twice per task, and the text only changes once a second.
_second: tuple[int, str] = (-1, "")
_pinned: dict[str, tuple[str, int]] = {}


def now_iso() -> str:
    """`iso(now())`, cheaply."""
    global _second
    pinned = os.environ.get("GIT_HANDOFF_NOW")
    if pinned:
        return _pinned_now(pinned)[0]
    second = time.time_ns() // 1_000_000_000  # the second datetime.now() floors to
    if second != _second[0]:
        _second = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _second[1]


def now_ms() -> int:
    """The current time in milliseconds since the epoch (GIT_HANDOFF_NOW pins it too)."""
    pinned = os.environ.get("GIT_HANDOFF_NOW")
    if pinned:
        return _pinned_now(pinned)[1]
    return time.time_ns() // 1_000_000


def _pinned_now(pinned: str) -> tuple[str, int]:
    found = _pinned.get(pinned)
    if found is None:
        moment = parse_time(pinned)  # a bad value raises every time, never cached
        found = _pinned[pinned] = (iso(moment), int(moment.timestamp() * 1000))
    return found


def parse_time(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"not an ISO-8601 time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment


_DURATION = lazy(r"^([0-9]+)([smh])$")


def parse_duration(text: str) -> int:
    """Seconds in a DURATION: a number with s, m or h (90s, 30m, 2h)."""
    match = _DURATION.fullmatch(text.strip())
    if not match or len(match.group(1)) > 12 or int(match.group(1)) <= 0:
        raise UsageError(f"invalid duration {text!r}: use a positive number with s, m or h (90s, 30m, 2h)")
    seconds = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]
    if seconds > MAX_SECONDS:
        raise UsageError(f"invalid duration {text!r}: at most {MAX_SECONDS // 86400} days")
    return seconds


# -- ids --------------------------------------------------------------------------

_ID = lazy(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # the whole string: fullmatch, never `$`


def _id_ok(text: str) -> bool:
    """The task id rule (check_id words the refusal; the quick parse asks it too)."""
    return _ID.fullmatch(text) is not None and ".." not in text and not text.endswith(".lock")


def check_id(task_id: str) -> str:
    """Refuse ids outside the id rule (docs/git-handoff.md, `add`): `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`, no `..`, no `.lock` end."""
    if not isinstance(task_id, str) or not _id_ok(task_id):
        shown = task_id if isinstance(task_id, str) else repr(task_id)
        raise UsageError(
            f"invalid task id {shown!r}: use 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit, "
            "without '..' and not ending in '.lock'"
        )
    return task_id


_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_last_ms = 0


def _base36(n: int, width: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = _B36[r] + out
    return out.rjust(width, "0")


def new_id() -> str:
    """`t-<ms since epoch, base36, 9>-<random, base36, 5>`: sorts by creation, and 36**5
    random values per millisecond make a collision between machines vanishingly rare."""
    global _last_ms
    ms = max(int(time.time() * 1000), _last_ms + 1)
    _last_ms = ms
    return f"t-{_base36(ms, 9)}-{_base36(secrets.randbelow(36**5), 5)}"


def order_key_now() -> int:
    """A creation-order number: nanoseconds, strictly increasing within a process."""
    global _last_order
    value = max(time.time_ns(), _last_order + 1)
    _last_order = value
    return value


_last_order = 0

# -- tasks ------------------------------------------------------------------------

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


# The claim's bookkeeping, kept in a task's extra fields while it is claimed (Task.claim
# reads them typed): the one list. A release, a failure and a reopen shed them all; `done`
# keeps the branch and the session the work was done in (CLAIM_KEPT_WHEN_DONE); a lease
# that ran out sheds the worktree (git_handoff.core.selection).
CLAIM_FIELDS = ("worktree", "branch", "claimed_at", "lease_seconds", "claim_session", "claim_snapshot", "clone",
                "clone_seal")
CLAIM_KEPT_WHEN_DONE = ("branch", "claim_session")


@dataclass(frozen=True, slots=True)
class Claim:
    """A task's claim, as its extra fields (CLAIM_FIELDS) record it; a field absent, or
    not of its type (a record written by hand), is None."""

    worktree: str | None = None  # the work tree holding it (absent in older state)
    branch: str | None = None  # the branch it was claimed on
    claimed_at: str | None = None  # when (ISO-8601): with the worker and base, what tells one claim from the next
    lease_seconds: int | None = None  # the lease it was granted, what `renew` grants again
    session: int | None = None  # `claim_session`: the session that claimed it
    snapshot: str | None = None  # `claim_snapshot`: the commit of the uncommitted work at claim time
    clone: str | None = None  # the clone that claimed it
    clone_seal: str | None = None  # that clone's seal over the claim (state.identity)


def _text_or_none(value: Any) -> str | None:
    return value if type(value) is str else None


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    status: Status = "pending"
    priority: str = "P1"
    depends_on: tuple[str, ...] = ()
    attempts: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    started_at_commit: str | None = None
    check: str | None = None  # validation.command
    timeout_seconds: int = DEFAULT_TIMEOUT  # validation.timeout_seconds
    cleanup: str | None = None  # on_failure.cleanup
    error_log: tuple[str, ...] = ()
    checkpoints: tuple[dict[str, Any], ...] = ()
    completed_at: str | None = None
    claimed_by: str | None = None
    lease_expires_at: str | None = None
    created_at: str = ""
    spec_ref: str | None = None
    # Bookkeeping beyond the harness task fields (serialized after them).
    order: int = 0  # creation order; ties between machines broken by id
    updated_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # fields this version does not know

    # -- derived ----------------------------------------------------------------

    @property
    def failed_for_good(self) -> bool:
        """Failed and never retried: attempts exhausted, or failed by a dependency."""
        return self.status == "failed" and (
            self.attempts >= self.max_attempts
            or any(e.startswith("[DEPENDENCY]") for e in self.error_log)
        )

    @property
    def claim(self) -> Claim | None:
        """The claim the task records (CLAIM_FIELDS), None when it records none."""
        extra = self.extra
        if extra.keys().isdisjoint(CLAIM_FIELDS):
            return None
        get = extra.get
        return Claim(
            worktree=_text_or_none(get("worktree")),
            branch=_text_or_none(get("branch")),
            claimed_at=_text_or_none(get("claimed_at")),
            lease_seconds=_int_or_none(get("lease_seconds")),
            session=_int_or_none(get("claim_session")),
            snapshot=_text_or_none(get("claim_snapshot")),
            clone=_text_or_none(get("clone")),
            clone_seal=_text_or_none(get("clone_seal")),
        )

    def get(self, key: str, default: Any = None) -> Any:
        return self.extra.get(key, default)

    def evolve(self, **changes: Any) -> Task:
        """`dataclasses.replace` for the hot paths (thousands of tasks in one command):
        the same result, without re-running the generated __init__ per copy."""
        unknown = changes.keys() - _TASK_FIELDS
        if unknown:
            raise TypeError(f"Task has no field {sorted(unknown)[0]!r}")
        fields = dict(self.__dict__)
        fields.update(changes)
        new = object.__new__(Task)
        object.__setattr__(new, "__dict__", fields)
        return new

    def with_extra(self, **values: Any) -> Task:
        merged = dict(self.extra)
        for k, v in values.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        return dataclasses.replace(self, extra=merged)

    # -- (de)serialization --------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The task as the harness tasks.json names its fields (plus bookkeeping and unknown fields after)."""
        out: dict[str, Any] = {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "priority": self.priority,
            "depends_on": list(self.depends_on),
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "started_at_commit": self.started_at_commit,
            "validation": {"command": self.check, "timeout_seconds": self.timeout_seconds},
            "on_failure": {"cleanup": self.cleanup},
            "error_log": list(self.error_log),
            "checkpoints": [dict(c) for c in self.checkpoints],
            "completed_at": self.completed_at,
            "claimed_by": self.claimed_by,
            "lease_expires_at": self.lease_expires_at,
            "created_at": self.created_at,
            "spec_ref": self.spec_ref,
            "order": self.order,
            "updated_at": self.updated_at,
        }
        for k, v in self.extra.items():
            if k not in out:
                out[k] = v
        return out

    def dumps(self) -> bytes:
        return task_file(self.to_json())

    @classmethod
    def from_json(cls, data: Any, *, source: str = "task") -> Task:
        """Parse and check one task object; a bad field is a UsageError naming it."""
        quick = _well_formed(cls, data)
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
        attempts = _int(d.pop("attempts", 0), f"{where}: attempts", minimum=0)
        max_attempts = check_max_attempts(d.pop("max_attempts", DEFAULT_MAX_ATTEMPTS), where)
        validation = d.pop("validation", None) or {}
        if not isinstance(validation, dict):
            raise UsageError(f"{where}: validation must be an object")
        check = _opt_text(validation.get("command"), f"{where}: validation.command")
        timeout = check_timeout(validation.get("timeout_seconds", DEFAULT_TIMEOUT), where)
        on_failure = d.pop("on_failure", None) or {}
        if not isinstance(on_failure, dict):
            raise UsageError(f"{where}: on_failure must be an object")
        cleanup = _opt_text(on_failure.get("cleanup"), f"{where}: on_failure.cleanup")
        error_log = d.pop("error_log", []) or []
        if not isinstance(error_log, list) or not all(isinstance(x, str) for x in error_log):
            raise UsageError(f"{where}: error_log must be a list of text")
        checkpoints = d.pop("checkpoints", []) or []
        if not isinstance(checkpoints, list) or not all(isinstance(x, dict) for x in checkpoints):
            raise UsageError(f"{where}: checkpoints must be a list of objects")
        order = d.pop("order", 0)
        return _assemble(cls, dict(
            id=task_id,
            title=title,
            status=cast(Status, status),
            priority=priority,
            depends_on=tuple(deps),
            attempts=attempts,
            max_attempts=max_attempts,
            started_at_commit=_opt_text(d.pop("started_at_commit", None), f"{where}: started_at_commit"),
            check=check,
            timeout_seconds=timeout,
            cleanup=cleanup,
            error_log=tuple(error_log),
            checkpoints=tuple(checkpoints),
            completed_at=_opt_text(d.pop("completed_at", None), f"{where}: completed_at"),
            claimed_by=_opt_text(d.pop("claimed_by", None), f"{where}: claimed_by"),
            lease_expires_at=_opt_text(d.pop("lease_expires_at", None), f"{where}: lease_expires_at"),
            created_at=_opt_text(d.pop("created_at", None), f"{where}: created_at") or "",
            spec_ref=_opt_text(d.pop("spec_ref", None), f"{where}: spec_ref"),
            order=order if isinstance(order, int) and not isinstance(order, bool) else 0,
            updated_at=_opt_text(d.pop("updated_at", None), f"{where}: updated_at") or "",
            extra=d,
        ))

    @classmethod
    def loads(cls, raw: bytes, *, source: str = "task") -> Task:
        try:
            data = json.loads(raw)
        except UnicodeDecodeError as exc:
            raise UsageError(f"{source}: not valid JSON (not UTF-8 at byte {exc.start})") from None
        except ValueError as exc:
            raise UsageError(f"{source}: not valid JSON ({exc})") from None
        return cls.from_json(data, source=source)


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
    """The bytes of a task file holding `doc` (a Task.to_json())."""
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


_TASK_FIELDS = frozenset(f.name for f in dataclasses.fields(Task))


# The keys from_json reads (everything else is kept in `extra`).
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
    """The task `from_json` builds from `data` when every field is of the exact plain
    type and in the range it checks (a task file as git handoff writes it), else None:
    then the full parse runs, and it alone words the error. Parsing 50,000 tasks (the
    first command after a sync) spends most of its time in the checks, and here they
    are one pass without building a message per field. Accepts nothing the full parse
    refuses, and builds the same task (tests/core/test_selection.py checks both)."""
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


def _int(value: Any, what: str, minimum: int, maximum: int = MAX_COUNT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 40:
            value = int(value)
        else:
            raise UsageError(f"{what} must be a whole number, not {value!r}"[:200])
    if value < minimum:
        raise UsageError(f"{what} must be at least {minimum}, not {value}")
    if value > maximum:
        raise UsageError(f"{what} must be at most {maximum}, not {value}"[:200])
    return int(value)


def _opt_text(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise UsageError(f"{what} must be text")


def check_priority(value: Any, where: str = "") -> str:
    if value not in PRIORITIES:
        prefix = f"{where}: " if where else ""
        raise UsageError(f"{prefix}invalid priority {value!r}: use P0, P1 or P2")
    return str(value)


def check_max_attempts(value: Any, where: str = "") -> int:
    prefix = f"{where}: " if where else ""
    return _int(value, f"{prefix}max_attempts", minimum=1, maximum=MAX_ATTEMPTS)


def check_timeout(value: Any, where: str = "") -> int:
    prefix = f"{where}: " if where else ""
    return _int(value, f"{prefix}timeout_seconds", minimum=1, maximum=MAX_SECONDS)


def check_title(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError("a task needs a non-empty title")
    if "\n" in value or "\r" in value:
        raise UsageError("a task title is one line")
    if _CONTROL.search(value):
        raise UsageError("a task title may not hold control characters")
    if len(value) > MAX_TITLE:
        raise UsageError(f"a task title is at most {MAX_TITLE} characters ({len(value)} given)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("a task title must be valid Unicode text") from None
    return value


def check_category(value: str) -> str:
    if value not in CATEGORIES:
        raise UsageError(f"invalid category {value!r}: use one of {', '.join(CATEGORIES)}")
    return value


# -- config -----------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """State-wide settings (the state's config.toml, shared by every clone)."""

    mode: str = "exclusive"
    max_tasks_per_session: int = DEFAULT_MAX_TASKS_PER_SESSION
    max_sessions: int = DEFAULT_MAX_SESSIONS
    spec_ref: str | None = None
    init_command: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        mode = data.get("mode", "exclusive")
        if mode not in MODES:
            raise UsageError(f"config: mode must be exclusive or concurrent, not {mode!r}")
        return cls(
            mode=mode,
            max_tasks_per_session=_int(
                data.get("max_tasks_per_session", DEFAULT_MAX_TASKS_PER_SESSION),
                "config: max_tasks_per_session",
                minimum=1,
            ),
            max_sessions=_int(data.get("max_sessions", DEFAULT_MAX_SESSIONS), "config: max_sessions", minimum=1),
            spec_ref=_opt_text(data.get("spec_ref"), "config: spec_ref"),
            init_command=_opt_text(data.get("init_command"), "config: init_command"),
        )
