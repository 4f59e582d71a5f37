"""Pure data: tasks, config, ids, durations, timestamps. No git, no I/O.

A Task is frozen; change it with `dataclasses.replace`. Fields a newer writer
added that this version does not know are kept in `extra` and written back. The
checks of a task's fields are here; their stored form (a task's JSON file, the table of
config.toml) is git_handoff.core.serialization.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar, get_args

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
    "CONFLICT",  # the task's work does not merge onto the target (git handoff integrate)
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
    "INTEGRATE",  # a task's work landed on the target branch
)
MODES = ("exclusive", "concurrent")
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_TIMEOUT = 300
DEFAULT_MAX_TASKS_PER_SESSION = 20
DEFAULT_MAX_SESSIONS = 50
MAX_SECONDS = 10 * 366 * 24 * 3600  # durations and timeouts: ten years at most
MAX_TITLE = 500  # characters of a task title
MAX_COUNT = 2**63 - 1  # TOML's integer range: every count, number and id number
MAX_ATTEMPTS = 10_000  # a task's max_attempts
MAX_LIST = 10_000  # entries of one list inside a record
MAX_RECORD_BYTES = 1 << 20  # one record blob in the state
MAX_RELAY_FAILURES = 100  # relay.json's `failures`

# The most entries each capped list of a record may hold, by record kind (state_tree.kind_of)
# and field; a dotted name is a list inside an object field (a handoff document's
# `status.pending`), and meta.json's `sessions_by_clone` is an object of counters capped
# the same way. One table for both sides of the rule: the parsers (git_handoff.core.record_schemas, task_file)
# refuse a record holding more, and the merge (git_handoff.core.merge) bounds a union of two
# sides to it, so that any two records the edge accepts merge into one it accepts. A list
# no entry names is a field a newer writer added: no parser counts it, the record's size
# (MAX_RECORD_BYTES) bounds it.
LIST_LIMITS: dict[str, dict[str, int]] = {
    "task": {"depends_on": MAX_LIST, "error_log": MAX_LIST, "checkpoints": MAX_LIST},
    "meta": {"sessions_by_clone": MAX_LIST},
    "session": {"completed": MAX_LIST, "decisions": MAX_LIST, "blockers": MAX_LIST, "agents": MAX_LIST},
    "doc": {
        "status.completed": MAX_LIST, "status.in_progress": MAX_LIST, "status.pending": MAX_LIST,
        "completed_this_session": MAX_LIST, "failed": MAX_LIST, "decisions": MAX_LIST, "blockers": MAX_LIST,
        "files_changed": MAX_LIST, "rejections": MAX_LIST,
    },
    "relay": {"failures": MAX_RELAY_FAILURES, "agents": MAX_LIST, "switches": MAX_RELAY_FAILURES,
              "limited": MAX_LIST},
}
_CONTROL = lazy(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")
# a terminal's escape sequences: CSI (colors, cursor moves), OSC (titles, links), and the
# two-character ones
_ESCAPES = lazy(r"\x1b(?:\[[0-?]*+[ -/]*+[@-~]|\][^\x07\x1b]*+(?:\x07|\x1b\\)?|[@-Z\\-_])")


def printable(text: str) -> str:
    """`text` (a command's output: a check's, a cleanup's) as one line of text the state's
    records may hold (field_checks.line_problem): terminal escape sequences removed (a test
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
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_iso(seconds: int) -> str | None:
    """Seconds since the epoch (a commit's time: whatever its writer put there) as an
    ISO-8601 UTC time; None for one outside years 1 to 9999, or that this platform's
    time functions refuse."""
    try:
        return iso(datetime.fromtimestamp(seconds, UTC))
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
        moment = moment.replace(tzinfo=UTC)
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


def is_task_id(text: str) -> bool:
    """The task id rule (check_id words the refusal; the quick parse asks it too)."""
    return _ID.fullmatch(text) is not None and ".." not in text and not text.endswith(".lock")


def check_id(task_id: str) -> str:
    """Refuse ids outside the id rule (docs/git-handoff.md, `add`): `[A-Za-z0-9][A-Za-z0-9._-]{0,63}`,
    no `..`, no `.lock` end."""
    if not isinstance(task_id, str) or not is_task_id(task_id):
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

# The claim's bookkeeping, kept in a task's extra fields while it is claimed (Task.claim
# reads them typed): the one list. A release, a failure and a reopen shed them all; `done`
# keeps the branch and the session the work was done in (CLAIM_KEPT_WHEN_DONE); a lease
# that ran out sheds the worktree (git_handoff.core.selection).
CLAIM_FIELDS = ("worktree", "branch", "claimed_at", "lease_seconds", "claim_session", "claim_snapshot", "clone",
                "clone_seal")
CLAIM_KEPT_WHEN_DONE = ("branch", "claim_session")
# A task's published work: refs/harness/work/<task-id>/<n>, the commit `done` completed it
# at (created once, never moved, like the attempts: ops/work_refs.py); its `work_ref`.
WORK_PREFIX = "refs/harness/work/"
_T = TypeVar("_T", str, int)


class _ClaimField(Generic[_T]):
    """One field of a Claim: the extra field `key` when it is a `kind`, else None."""

    __slots__ = ("key", "kind")

    def __init__(self, key: str, kind: type[_T]) -> None:
        self.key: str = key
        self.kind: type[_T] = kind

    def __get__(self, claim: Claim, owner: type[Claim] | None = None) -> _T | None:
        value = claim._fields.get(self.key)
        return value if type(value) is self.kind else None


class Claim:
    """A task's claim (Task.claim), read typed from its extra fields (CLAIM_FIELDS); a field
    absent, or not of its type (a record written by hand), is None. A read-only view, not a
    copy: building one costs next to nothing, so the per-task hot paths (the claim index
    over 50,000 tasks) read a field through it about as cheaply as from the dict."""

    __slots__ = ("_fields",)

    worktree = _ClaimField("worktree", str)  # the work tree holding it (absent in older state)
    branch = _ClaimField("branch", str)  # the branch it was claimed on
    claimed_at = _ClaimField("claimed_at", str)  # when: with the worker and base, what tells one claim from the next
    lease_seconds = _ClaimField("lease_seconds", int)  # the lease it was granted, what `renew` grants again
    session = _ClaimField("claim_session", int)  # the session that claimed it
    snapshot = _ClaimField("claim_snapshot", str)  # the commit of the uncommitted work at claim time
    clone = _ClaimField("clone", str)  # the clone that claimed it
    clone_seal = _ClaimField("clone_seal", str)  # that clone's seal over the claim (state.identity)

    def __init__(self, fields: Mapping[str, Any] | None = None) -> None:
        self._fields: Mapping[str, Any] = fields if fields is not None else {}

    def _values(self) -> tuple[str | int | None, ...]:
        return (self.worktree, self.branch, self.claimed_at, self.lease_seconds, self.session, self.snapshot,
                self.clone, self.clone_seal)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Claim) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"Claim({', '.join(f'{k}={v!r}' for k, v in zip(CLAIM_FIELDS, self._values(), strict=True))})"


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
    tokens: int = 0  # the agent's tokens spent on it (ops/usage.py shares each session's among its tasks)
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
    def claim(self) -> Claim:
        """The claim the task records (CLAIM_FIELDS): every field None when it records none."""
        return Claim(self.extra)

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


_TASK_FIELDS = frozenset(f.name for f in dataclasses.fields(Task))


def whole_number(value: Any, what: str, minimum: int, maximum: int = MAX_COUNT) -> int:
    """`value` as a whole number in [minimum, maximum] (digits as text too), else a UsageError naming `what`."""
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


def optional_text(value: Any, what: str) -> str | None:
    """`value` when it is text or None, else a UsageError naming `what`."""
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
    return whole_number(value, f"{prefix}max_attempts", minimum=1, maximum=MAX_ATTEMPTS)


def check_timeout(value: Any, where: str = "") -> int:
    prefix = f"{where}: " if where else ""
    return whole_number(value, f"{prefix}timeout_seconds", minimum=1, maximum=MAX_SECONDS)


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
