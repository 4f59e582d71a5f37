"""The typed records of the state, and one parser per record kind: the edge.

Every record read from a state tree (task, config, meta, session, handoff document,
relay, dispatch run) and every object reached from a fetched ref passes the parser of
its kind before anything acts on it: types, ranges, sizes, character classes, object
kinds. A record no parser accepts is an InvalidState (exit 2) naming the path and the
field; `sync` refuses a remote state holding one and changes nothing.

The records keep their JSON exactly (TypedDicts over the stored objects); fields a
newer writer added are kept as they are, within the same size and nesting limits.

Pure: no git, no I/O.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, cast

from git_handoff.core import model
from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.model import Config, Task, parse_time
from git_handoff.core.patterns import LazyPattern, lazy
from git_handoff.core.serialization import TASK_READ_KEYS, config_from_dict, task_from_json

# -- limits (documented in docs/threat-model.md) -------------------------------------------

MAX_RECORD_BYTES = model.MAX_RECORD_BYTES  # one record blob in the state
MAX_STATE_BLOB_BYTES = 1 << 20  # any blob of a fetched state tree
MAX_JSON_DEPTH = 32
MAX_TITLE = model.MAX_TITLE  # characters of a task title
MAX_TEXT = 2000  # a reason, decision, blocker, checkpoint message, error_log entry
MAX_LIST = model.MAX_LIST  # entries of one list inside a record (error_log, checkpoints, decisions...)
# each capped list of each record kind and its cap: model.LIST_LIMITS (the merge keeps to it too)
LIST_LIMITS = model.LIST_LIMITS
MAX_COUNT = model.MAX_COUNT  # TOML's integer range, for every count and number of seconds
MAX_SECONDS = model.MAX_SECONDS  # durations and timeouts: ten years at most
MAX_NAME = 255  # one tree entry name
PATH_MAX = 4096  # a path kept as text (a worktree, a spec, a file changed)

_OID = lazy(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HEX = lazy(r"[0-9a-f]{8,128}")
_TIME = lazy(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.+Z-]{8,30}")
# Backend session ids go into a command line: letters, digits and `._:@+=-` only.
SAFE_WORD = lazy(r"[A-Za-z0-9._:@+=-]{1,200}")
_CONTROL = lazy(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")


def problem(where: str, message: str) -> InvalidState:
    return InvalidState(f"{where}: {message}")


# -- text ---------------------------------------------------------------------------------------


def line_problem(value: str, limit: int) -> str | None:
    """Why `value` is not one line of text (None when it is): control characters,
    newlines, lone surrogates, more than `limit` characters."""
    if len(value) > limit:
        return f"longer than {limit} characters ({len(value)})"
    if _CONTROL.search(value):
        return "holds a newline or a control character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (a lone surrogate)"
    return None


# -- JSON -----------------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# json.loads(text, parse_constant=_no_constant), without building a decoder per record
_decode = json.JSONDecoder(parse_constant=_no_constant).decode


def load_json(raw: bytes, where: str, limit: int = MAX_RECORD_BYTES) -> Any:
    """Parse a JSON record: at most `limit` bytes, UTF-8, no NaN/Infinity, nesting at most
    MAX_JSON_DEPTH. InvalidState naming `where` otherwise."""
    if len(raw) > limit:
        raise problem(where, f"{len(raw)} bytes, more than the {limit} a record may hold")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise problem(where, f"not valid JSON: not UTF-8 at byte {exc.start}") from None
    if _depth_over(text, MAX_JSON_DEPTH):
        raise problem(where, f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return _decode(text)
    except (ValueError, RecursionError) as exc:
        raise problem(where, f"not valid JSON: {exc}") from None


def _depth_over(text: str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than `limit` (linear, no recursion)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def nested_deeper(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether lists and tables inside a parsed value nest deeper than `limit` (iterative:
    a TOML file of dotted keys parses into a structure too deep for any recursive walk)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def load_json_text(text: str, where: str) -> Any:
    """Parse JSON text a person or another program gave (a plan file, a payload): nesting at
    most MAX_JSON_DEPTH, no NaN/Infinity. UsageError (exit 2) naming `where` otherwise."""
    if _depth_over(text, MAX_JSON_DEPTH):
        raise UsageError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return _decode(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{where}: not valid JSON ({exc})") from None


# The pieces of TOML text a dotted key is made of, and those it cannot cross: comments and
# strings are skipped whole, an unterminated one to the end of its line (or of the text).
# Possessive, so no piece is ever scanned twice: linear in the text, whatever it holds.
_TOML_PIECE = lazy("|".join((
    r"(?P<skip>#[^\n]*+"  # a comment
    r'|"""(?:[^"\\]|\\[\s\S]|"{1,2}+(?!"))*+(?:"{3,5}|\Z)'  # a multi-line basic string
    r"|'{3}(?:[^']|'{1,2}+(?!'))*+(?:'{3,5}|\Z))",  # a multi-line literal string
    r'(?P<part>[A-Za-z0-9_-]++|"(?:[^"\\\n]|\\.)*+"?|' r"'[^'\n]*+'?)",  # a key part
    r"(?P<dot>[ \t]*+\.[ \t]*+)",
    r"(?P<other>[^A-Za-z0-9_\-" r'"' r"'#. \t]++|[ \t]++|.)",
)), re.DOTALL)


def _dotted_key_over(text: str, limit: int) -> bool:
    """Whether a dotted key in `text` has more than `limit` parts (one linear scan).
    tomllib spends time quadratic in a key's parts (here a 20,000-part `a.a.a…` took 11 s,
    one of 100,000 exhausted memory); a key of more than MAX_JSON_DEPTH parts nests its
    value deeper than a record may be, refused after parsing anyway, so it is refused
    before. Only a key makes such a run: a value's dotted run is a number or a time (one
    or two dots), and strings and comments are skipped whole."""
    if text.count(".") < limit:  # a key of limit + 1 parts has limit dots
        return False
    run, dotted = 0, False  # parts of the current run; whether a dot ends it (a part must follow)
    for piece in _TOML_PIECE.finditer(text):
        group = piece.lastgroup
        if group == "part":
            run = run + 1 if dotted else 1
            if run > limit:
                return True
            dotted = False
        elif group == "dot" and run and not dotted:
            dotted = True
        else:
            run, dotted = 0, False
    return False


def _parse_toml(text: str) -> tuple[dict[str, Any] | None, str | None, bool]:
    """(table, None, False) for TOML text nesting at most MAX_JSON_DEPTH levels of tables
    and arrays; else (None, what is wrong, whether it is the nesting). One parser for the
    plan files and config people give (UsageError) and the state's config.toml (InvalidState)."""
    import tomllib
    if _dotted_key_over(text, MAX_JSON_DEPTH):
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels (a dotted key of more than " \
                     f"{MAX_JSON_DEPTH} parts)", True
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except RecursionError:
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels", True
    except ValueError as exc:
        return None, str(exc), False
    if nested_deeper(data):
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels", True
    return data, None, False


def load_toml_text(text: str, where: str) -> dict[str, Any]:
    """Parse TOML text (a plan file, a config): nesting at most MAX_JSON_DEPTH levels of
    tables and arrays. UsageError (exit 2) naming `where` otherwise."""
    data, why, deep = _parse_toml(text)
    if data is None:
        raise UsageError(f"{where}: {why}" if deep else f"{where}: not valid TOML ({why})")
    return data


def _deep_strings_ok(value: Any, where: str) -> None:
    """Every string anywhere in a record encodes as UTF-8 (no lone surrogates)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise problem(where, "holds text that is not valid Unicode (a lone surrogate)") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# -- field checkers --------------------------------------------------------------------------------

Check = Callable[[Any, str], None]


def _fail(where: str, field: str, message: str) -> InvalidState:
    return problem(where, f"field {field!r} {message}")


def opt(check: Check) -> Check:
    def run(value: Any, at: str) -> None:
        if value is not None:
            check(value, at)

    return run


def integer(minimum: int = 0, maximum: int = MAX_COUNT) -> Check:
    def run(value: Any, at: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidState(f"{at} must be a whole number, not {_shown(value)}")
        if not minimum <= value <= maximum:
            raise InvalidState(f"{at} must be between {minimum} and {maximum}, not {value}")

    return run


def text(limit: int = MAX_TEXT, *, one_line: bool = True) -> Check:
    def run(value: Any, at: str) -> None:
        if not isinstance(value, str):
            raise InvalidState(f"{at} must be text, not {_shown(value)}")
        why = line_problem(value, limit) if one_line else (
            f"longer than {limit} characters" if len(value) > limit else None)
        if why:
            raise InvalidState(f"{at} {why}")

    return run


def pattern(regex: LazyPattern, what: str) -> Check:
    def run(value: Any, at: str) -> None:
        if not isinstance(value, str) or not regex.fullmatch(value):
            raise InvalidState(f"{at} must be {what}, not {_shown(value)}")

    return run


def one_of(*choices: Any) -> Check:
    def run(value: Any, at: str) -> None:
        if value not in choices:
            raise InvalidState(f"{at} must be one of {', '.join(map(str, choices))}, not {_shown(value)}")

    return run


def boolean(value: Any, at: str) -> None:
    if not isinstance(value, bool):
        raise InvalidState(f"{at} must be true or false, not {_shown(value)}")


def list_of(check: Check, limit: int = MAX_LIST) -> Check:
    def run(value: Any, at: str) -> None:
        if not isinstance(value, list):
            raise InvalidState(f"{at} must be a list, not {_shown(value)}")
        if len(value) > limit:
            raise InvalidState(f"{at} holds {len(value)} entries, more than {limit}")
        for i, item in enumerate(value):
            check(item, f"{at}[{i}]")

    return run


def capped(kind: str, name: str, check: Check) -> Check:
    """A list of `check`s holding at most LIST_LIMITS[kind][name] entries: the cap the merge
    (git_handoff.core.merge) keeps a union of two sides to."""
    return list_of(check, LIST_LIMITS[kind][name])


def obj(fields: Mapping[str, Check]) -> Check:
    def run(value: Any, at: str) -> None:
        if not isinstance(value, dict):
            raise InvalidState(f"{at} must be an object, not {_shown(value)}")
        for name, check in fields.items():
            if name in value:
                check(value[name], f"{at}.{name}")

    return run


def either(*checks: Check) -> Check:
    def run(value: Any, at: str) -> None:
        errors = []
        for check in checks:
            try:
                check(value, at)
                return
            except InvalidState as exc:
                errors.append(exc.message)
        raise InvalidState(errors[0])

    return run


def anything(value: Any, at: str) -> None:
    return None


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def check_fields(data: Any, fields: Mapping[str, Check], where: str) -> dict[str, Any]:
    """`data` as an object whose known fields pass their checks; InvalidState naming the
    path and the field otherwise."""
    if not isinstance(data, dict):
        raise problem(where, f"must be a JSON object, not {type(data).__name__}")
    for name, check in fields.items():
        if name in data:
            try:
                check(data[name], name)
            except InvalidState as exc:
                raise problem(where, f"field {exc.message}") from None
    stamp = data.get("hlc")
    if stamp is not None and not (isinstance(stamp, str) and _HLC.fullmatch(stamp)):
        raise problem(where, f"field hlc must be a clock stamp (ms.counter.clone), not {_shown(stamp)}")
    _deep_strings_ok(data, where)
    return data


# A time is ISO-8601 text (_TIME's characters) that names an instant, read as every reader
# reads it (model.parse_time), from 1970 to 9000 in UTC: a month 13 or a day 45 passed the
# characters and then made every scheduling command exit 2; a year near 9999 would
# overflow when a lease (ten years at most) is added to it.
FIRST_YEAR, LAST_YEAR = 1970, 9000


def is_time(value: Any) -> bool:
    """Whether `value` is a time a record may hold (see FIRST_YEAR)."""
    if not isinstance(value, str) or not _TIME.fullmatch(value):
        return False
    try:
        year = parse_time(value).astimezone(datetime.timezone.utc).year
    except (UsageError, ValueError, OverflowError):
        return False
    return FIRST_YEAR <= year <= LAST_YEAR


def _stamp(value: Any, at: str) -> None:
    if not is_time(value):
        raise InvalidState(f"{at} must be an ISO-8601 time from {FIRST_YEAR} to {LAST_YEAR}, not {_shown(value)}")


STAMP: Check = _stamp
OID = pattern(_OID, "an object id")
HEX = pattern(_HEX, "hexadecimal")
LINE = text()
WORKER = text(MAX_TEXT)
PATH_TEXT = text(PATH_MAX)

# -- records -------------------------------------------------------------------------------------


class Meta(TypedDict, total=False):
    created: str
    session_count: int
    sessions_legacy: int
    sessions_by_clone: dict[str, int]
    last_session: str | None
    imported: Any


class Decision(TypedDict, total=False):
    what: str
    why: str
    at: str


class SessionRecord(TypedDict, total=False):
    """`sessions/<n>.json`."""

    session: int
    worker: str
    base: str | None
    head: str | None
    worktree: str | None
    clone: str | None
    started_at: str
    ended_at: str | None
    ended_by: str
    completed: list[str]
    decisions: list[Decision]
    blockers: list[Any]
    ack: Any
    handoff: Any
    stats: str
    updated_at: str
    hlc: str  # the clock stamp of its last write (git_handoff.core.hlc)
    field_clock: dict[str, list[str]]  # {field: [stamp, digest of the value]}


class HandoffDoc(TypedDict, total=False):
    """`docs/<n>.json`: the handoff document (facts only: no next steps)."""

    session: int
    worker: str | None
    base: str | None
    head: str | None
    written_at: str
    trigger: str | None
    spec_ref: str | None
    status: dict[str, list[dict[str, Any]]]
    completed_this_session: list[str]
    failed: list[dict[str, Any]]
    decisions: list[dict[str, str | None]]  # {what, why} as the session recorded them
    blockers: list[str | None]
    files_changed: list[Any]
    archived: bool
    accepted_by: Any
    accepted_at: str | None
    rejections: list[dict[str, Any]]
    updated_at: str
    hlc: str
    field_clock: dict[str, list[str]]


class WrittenDoc(HandoffDoc, total=False):
    """What `doc write` answers: the document, and whether this call wrote it."""

    written: bool


class RelayRecord(TypedDict, total=False):
    """`relay.json`: the relay running (or last run) for this state."""

    state: str
    host: str
    pid: int | None
    agent: str  # the agent command the relay launches
    tmux: bool
    clone: str | None
    clone_seal: str | None
    started_at: str
    stopped_at: str | None
    reason: str | None
    session: int | None
    agent_pid: int | None
    agent_token: str | None
    tmux_session: str | None
    tmux_socket: str | None
    failures: list[dict[str, Any]]
    updated_at: str
    waiting: dict[str, Any] | None


class DispatchRun(TypedDict, total=False):
    """`dispatch/<run_id>.json`: one background run of an agent backend."""

    run_id: str
    seq: int
    slug: str
    backend: str
    prompt: str
    status: str
    created_at: str
    updated_at: str
    created_by: str
    conversation: str
    resume_of: str | None
    session_id: str | None
    exit_status: int | None
    result: Any
    stdout_tail: str | None
    stderr_tail: str | None
    output: str | None  # both tails, stdout first
    command: str  # the backend's command line the run ran
    started_at: str | None
    finished_at: str | None
    host: str | None
    pid: int | None
    clone: str | None
    key: str  # `<run_id>@<clone>`: where it is stored (fleet ids)
    conversation_key: str
    resume_of_key: str | None
    error: str | None  # why it failed before its backend ran
    lost: bool  # in a view only: its runner died on this host before recording a result
    hlc: str  # the clock stamp of its last write (git_handoff.core.hlc)
    field_clock: dict[str, list[str]]


class FileChange(TypedDict):
    """A file an attempt changed: git's status letter and the path."""

    status: str
    path: str


class FailOutcome(TypedDict):
    """What `fail` (and a failing `done`) reports."""

    task: dict[str, Any]
    category: str
    reason: str
    attempt: int | None
    attempt_ref: str | None
    attempt_commit: str | None
    files: list[FileChange]
    base: str | None
    rolled_back: bool
    snapshot: str | None  # the claim's snapshot commit the rollback returned to
    snapshot_missing: bool
    no_local_claim: bool  # no rollback: this worktree keeps no journal of the claim (claim_journal)
    operation_ended: str | None  # the rebase/merge/... `--force` ended
    cleanup: dict[str, Any] | None
    validation: dict[str, Any] | None


_CLONE = lazy(r"[0-9a-f]{16}")
_HLC = lazy(r"[0-9]{13}\.[0-9]{6}\.[0-9a-f]{0,16}")  # git_handoff.core.hlc
# a run id: NNN-slug (before fleet ids) or NNN-slug@<clone>; a session or document file:
# <n>.json (before fleet ids) or <n>@<clone>.json -- the clone part makes two clones'
# numbers distinct even when both minted the same one offline
_RUN_ID = lazy(r"[0-9]{3,12}-[a-z]+(?:-[a-z]+){0,2}(?:@[0-9a-f]{16})?")
_SESSION_NAME = lazy(r"[1-9][0-9]{0,17}(?:@[0-9a-f]{16})?\.json")
# a handoff document is named by its session, or 0: `doc write` before any session started
# (which wrote docs/0@<clone>.json, a name every other clone's edge refused)
_DOC_NAME = lazy(r"(?:0|[1-9][0-9]{0,17})(?:@[0-9a-f]{16})?\.json")
_DECISION = obj({"what": LINE, "why": LINE, "at": opt(STAMP)})
_BLOCKER = either(LINE, obj({"text": LINE, "at": opt(STAMP)}))

def counts_by_clone(value: Any, at: str) -> None:
    """{clone id: count}: how many sessions each clone started (a grow-only counter)."""
    if not isinstance(value, dict):
        raise InvalidState(f"{at} must be an object, not {_shown(value)}")
    limit = LIST_LIMITS["meta"]["sessions_by_clone"]
    if len(value) > limit:
        raise InvalidState(f"{at} holds {len(value)} entries, more than {limit}")
    for key, count in value.items():
        if not isinstance(key, str) or not _CLONE.fullmatch(key):
            raise InvalidState(f"{at} must be keyed by clone ids (16 hex digits), not {_shown(key)}")
        integer(0)(count, f"{at}.{key}")


# the largest session number a session file's name holds (_SESSION_NAME: 18 digits)
MAX_SESSION = 10**18 - 1


META_FIELDS: dict[str, Check] = {
    "created": opt(STAMP),
    "session_count": integer(0),
    "sessions_legacy": integer(0),
    "sessions_by_clone": counts_by_clone,
    "last_session": opt(STAMP),
}
SESSION_FIELDS: dict[str, Check] = {
    "session": integer(1),
    "worker": opt(WORKER),
    "base": opt(OID),
    "head": opt(OID),
    "worktree": opt(PATH_TEXT),
    "clone": opt(HEX),
    "started_at": opt(STAMP),
    "ended_at": opt(STAMP),
    "ended_by": opt(LINE),
    "completed": capped("session", "completed", LINE),
    "decisions": capped("session", "decisions", _DECISION),
    "blockers": capped("session", "blockers", _BLOCKER),
    "updated_at": opt(STAMP),
}
DOC_FIELDS: dict[str, Check] = {
    "session": integer(0, MAX_SESSION),  # 0: written before any session started
    "worker": opt(WORKER),
    "base": opt(OID),
    "head": opt(OID),
    "written_at": opt(STAMP),
    "trigger": opt(LINE),
    "spec_ref": opt(PATH_TEXT),
    "status": obj({k: capped("doc", f"status.{k}", obj({"id": LINE, "title": text(MAX_TITLE)})) for k in
                   ("completed", "in_progress", "pending")}),
    "completed_this_session": capped("doc", "completed_this_session", LINE),
    "failed": capped("doc", "failed", obj({"id": LINE, "title": text(MAX_TITLE)})),
    "decisions": capped("doc", "decisions", _DECISION),
    "blockers": capped("doc", "blockers", LINE),
    "files_changed": capped("doc", "files_changed", either(PATH_TEXT, obj({"path": PATH_TEXT, "status": LINE}))),
    "archived": boolean,
    "accepted_at": opt(STAMP),
    "rejections": capped("doc", "rejections", obj({"session": integer(0), "reason": opt(LINE), "at": opt(STAMP)})),
    "updated_at": opt(STAMP),
}
RELAY_FIELDS: dict[str, Check] = {
    "state": one_of("running", "stopped"),
    "host": opt(LINE),
    "pid": opt(integer(1, 2**31 - 1)),
    "clone": opt(HEX),
    "clone_seal": opt(HEX),
    "started_at": opt(STAMP),
    "stopped_at": opt(STAMP),
    "reason": opt(LINE),
    "session": opt(integer(0)),
    "agent_pid": opt(integer(2, 2**31 - 1)),
    "agent_token": opt(pattern(lazy(r"[A-Za-z0-9_-]{8,128}"), "a random token")),
    "tmux_session": opt(pattern(lazy(r"[A-Za-z0-9._-]{1,200}"), "a tmux session name")),
    "tmux_socket": opt(pattern(lazy(r"[A-Za-z0-9._-]{1,200}"), "a tmux socket name")),
    "failures": capped("relay", "failures", obj({"at": opt(STAMP), "what": LINE})),
    "updated_at": opt(STAMP),
    # a limit or outage the relay waits out (ops/relay_watch.py); None when it waits for none
    "waiting": opt(obj({"kind": one_of("usage_limit", "rate_limit", "outage"), "since": opt(STAMP),
                        "until": opt(STAMP), "line": opt(LINE)})),
}
DISPATCH_FIELDS: dict[str, Check] = {
    "run_id": pattern(_RUN_ID, "a run id (NNN-slug)"),
    "key": pattern(_RUN_ID, "a run key (NNN-slug@clone)"),
    "conversation_key": opt(pattern(_RUN_ID, "a run key")),
    "resume_of_key": opt(pattern(_RUN_ID, "a run key")),
    "seq": integer(1, 10**12),
    "slug": pattern(lazy(r"[a-z]+(?:-[a-z]+){0,2}"), "a slug"),
    "backend": pattern(lazy(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"), "a backend name"),
    "prompt": text(MAX_RECORD_BYTES, one_line=False),
    "status": one_of("new", "running", "succeeded", "completed", "failed"),
    "created_at": opt(STAMP),
    "updated_at": opt(STAMP),
    "created_by": opt(LINE),
    "conversation": opt(pattern(_RUN_ID, "a run id")),
    "resume_of": opt(pattern(_RUN_ID, "a run id")),
    "session_id": opt(pattern(SAFE_WORD, "a backend session id (letters, digits, ._:@+=-)")),
    "exit_status": opt(integer(-(2**31), 2**31)),
    "stdout_tail": opt(text(MAX_RECORD_BYTES, one_line=False)),
    "stderr_tail": opt(text(MAX_RECORD_BYTES, one_line=False)),
    "started_at": opt(STAMP),
    "finished_at": opt(STAMP),
    "host": opt(LINE),
    "pid": opt(integer(1, 2**31 - 1)),
    "clone": opt(HEX),
}


MAX_LOCK_BYTES = 4096
FLEET_LOCK_FIELDS: dict[str, Check] = {
    "clone": pattern(_CLONE, "a clone id (16 hex digits)"),
    "host": LINE,
    "pid": integer(1, 2**31 - 1),
    "acquired_at": opt(STAMP),
    "renewed_at": opt(STAMP),
    "expires_at": STAMP,
    "lease_seconds": integer(1, 24 * 3600),
}


def fleet_lock(raw: bytes, where: str) -> dict[str, Any]:
    """`lock.json` of the fleet relay lock (refs/harness/locks/relay): every field required."""
    data = check_fields(load_json(raw, where, MAX_LOCK_BYTES), FLEET_LOCK_FIELDS, where)
    missing = [name for name in FLEET_LOCK_FIELDS if name not in data and name not in ("acquired_at", "renewed_at")]
    if missing:
        raise problem(where, f"a lock record needs {', '.join(missing)}")
    return data  # expires_at a time: STAMP reads it as every reader does (is_time)


def meta(raw: bytes, where: str = "meta.json") -> Meta:
    return cast(Meta, check_fields(load_json(raw, where), META_FIELDS, where))


def session(raw: bytes, where: str) -> SessionRecord:
    return cast(SessionRecord, check_fields(load_json(raw, where), SESSION_FIELDS, where))


def handoff_doc(raw: bytes, where: str) -> HandoffDoc:
    return cast(HandoffDoc, check_fields(load_json(raw, where), DOC_FIELDS, where))


def relay(raw: bytes, where: str = "relay.json") -> RelayRecord:
    return cast(RelayRecord, check_fields(load_json(raw, where), RELAY_FIELDS, where))


def dispatch_run(raw: bytes, where: str) -> DispatchRun:
    record = check_fields(load_json(raw, where), DISPATCH_FIELDS, where)
    name = where.rsplit("/", 1)[-1]
    stem = name[:-5] if name.endswith(".json") else name
    if "run_id" in record:
        short, _, clone = stem.partition("@")
        if short != record["run_id"] or (clone and (record.get("clone") != clone or record.get("key") != stem)):
            raise problem(where, f"holds run {record['run_id']!r}")
    return cast(DispatchRun, record)


# -- attempts: the record in an attempt commit's message ------------------------------------------

MAX_ATTEMPT_BYTES = 64 << 20  # the JSON of one attempt record (a file list of a big work tree)
MAX_ATTEMPT_FILES = 1_000_000  # files one attempt changed


class AttemptFile(TypedDict):
    status: str  # git's status letter: A, M, D, T...
    path: str


class AttemptRecord(TypedDict, total=False):
    """The JSON record `fail` writes after the summary line of an attempt commit
    (refs/harness/attempts/<id>/<n>): what the attempt was, and what it changed."""

    task: str
    attempt: int
    time: str
    category: str
    reason: str
    base: str  # the commit the claim started from
    head: str  # HEAD when the attempt was saved
    branch: str | None
    worker: str | None
    session: int | None
    files: list[AttemptFile]
    index: str | None  # the tree of the index, when it was saved with one
    claim_snapshot: str | None


def _attempt_file(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise InvalidState(f"{at} must be an object, not {_shown(value)}")
    for name, check in (("status", LINE), ("path", text(PATH_MAX, one_line=False))):
        if name not in value:
            raise InvalidState(f"{at} needs a {name}")
        check(value[name], f"{at}.{name}")


def path_text(path: str) -> str:
    """A path from an attempt's file list as text any output can hold: a file name that was
    not UTF-8 (git's bytes, decoded with surrogateescape when the attempt was saved) keeps
    its bytes as \\xNN escapes. The list is what the attempt changed, for people to read;
    restore reads the attempt's trees, never these names."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        pass
    try:
        data = path.encode("utf-8", "surrogateescape")  # the bytes git gave
    except UnicodeEncodeError:  # a surrogate no byte decodes to: its own three bytes
        data = path.encode("utf-8", "surrogatepass")
    return data.decode("utf-8", "backslashreplace")


# The texts of an attempt record that are only shown (attempts, the dashboard): any text of
# their size, shown as one printable line (model.printable); an attempt saved before its
# reason was made printable (a check's colored output) stays readable and restorable.
ATTEMPT_TEXTS = {"task": 4096, "category": 4096, "reason": MAX_RECORD_BYTES, "branch": PATH_MAX, "worker": 4096}
ATTEMPT_FIELDS: dict[str, Check] = {
    **{name: opt(text(cap, one_line=False)) for name, cap in ATTEMPT_TEXTS.items()},
    "attempt": integer(1),
    "time": opt(STAMP),
    "base": opt(OID),
    "head": opt(OID),
    "session": opt(integer(0)),
    "files": list_of(_attempt_file, MAX_ATTEMPT_FILES),
    "index": opt(OID),
    "claim_snapshot": opt(OID),
}


def attempt(body: str, where: str) -> AttemptRecord:
    """The record in the body of an attempt commit's message (another clone's, when the
    ref was fetched): every field the readers use of its type; the texts it shows
    (ATTEMPT_TEXTS) as printable lines, the paths of `files` as any text (a file name may
    hold a newline, or bytes that are not UTF-8: see path_text), printed escaped.
    InvalidState naming `where` and the field otherwise."""
    try:
        raw = body.encode("utf-8")
    except UnicodeEncodeError:
        raise problem(where, "holds text that is not valid Unicode (a lone surrogate)") from None
    if not raw.strip():
        raise problem(where, "holds no record")
    data = load_json(raw, where, MAX_ATTEMPT_BYTES)
    files = data.pop("files", []) if isinstance(data, dict) else []
    record = check_fields(data, ATTEMPT_FIELDS, where)  # every text but the paths: valid Unicode
    try:
        ATTEMPT_FIELDS["files"](files, "files")
    except InvalidState as exc:
        raise problem(where, f"field {exc.message}") from None
    record["files"] = [{"status": f["status"], "path": path_text(f["path"])} for f in files]
    for name in ATTEMPT_TEXTS:
        if isinstance(record.get(name), str):
            record[name] = model.printable(record[name])
    return cast(AttemptRecord, record)


# -- tasks: the claim bookkeeping ------------------------------------------------------------------


TASK_EXTRA_FIELDS: dict[str, Check] = {
    "worktree": opt(PATH_TEXT),
    "branch": opt(text(1024)),
    "claimed_at": opt(STAMP),
    "lease_seconds": opt(integer(1, MAX_SECONDS)),
    "claim_session": opt(integer(0)),
    "clone": opt(HEX),
    "clone_seal": opt(HEX),
    "checkpoint_tree": opt(OID),
    "failed_at": opt(STAMP),
    "last_attempt_ref": opt(PATH_TEXT),
    "hlc": opt(pattern(_HLC, "a clock stamp (ms.counter.clone)")),
}
_CHECKPOINT = obj({"step": opt(integer(0)), "total": opt(integer(0)), "description": LINE, "timestamp": opt(STAMP)})
# The task's fields of one line of text and their caps (each entry of error_log too, at
# MAX_TEXT), checked together by lines_problem; its times (ISO-8601 when set) and its
# commands (any text, capped: a command may be a script of several lines).
TASK_LINES = (("title", MAX_TITLE), ("claimed_by", 4096), ("spec_ref", 4096))
TASK_TIMES = ("completed_at", "lease_expires_at", "created_at", "updated_at")
TASK_COMMANDS = (("check", 4096), ("cleanup", 4096))


def lines_problem(lines: list[tuple[str, str, int]], *, escapes: bool = True) -> str | None:
    """"field 'NAME' WHY" for the first of `lines` ((name, value, cap) each) that is not one
    line of text by line_problem's rules, None when every one is. One pass over all of
    them: a control character or a lone surrogate in their concatenation is in one of
    them, and one regex search (and at most one encode) over it replaces one per field;
    only a record that fails is asked field by field, to name the field. `escapes=False`:
    the values were decoded from UTF-8 JSON without a `\\u` escape, where no lone surrogate
    can be (only an escape makes one)."""
    joined = "".join([line[1] for line in lines])
    fine = not _CONTROL.search(joined)
    for _, value, cap in lines:
        if len(value) > cap:
            fine = False
            break
    if fine and escapes:
        try:
            joined.encode("utf-8")
        except UnicodeEncodeError:
            fine = False
    if fine:
        return None
    for name, value, cap in lines:
        why = line_problem(value, cap)
        if why:
            return f"field {name!r} {why}"
    return None


def check_task_text(task: Any, where: str, *, escapes: bool = True) -> None:
    """The edge's rules for a task beyond what task_from_json checks: every text a person
    reads or a command line gets is one line and capped (TASK_LINES, and each error_log
    entry), times are times, the base is an object id, numbers in range, the claim
    bookkeeping (TASK_EXTRA_FIELDS) well-typed. `escapes=False`: the task was parsed from
    UTF-8 JSON without a `\\u` escape, so no text in it can be a lone surrogate."""
    for name, limit in _TASK_LISTS:
        if len(getattr(task, name)) > limit:
            raise problem(where, f"field {name!r} holds {len(getattr(task, name))} entries, more than {limit}")
    # The usual task has one line field set (its title): asked directly. Several (error
    # log entries, a claim) are asked together, in one pass (lines_problem).
    if task.error_log or task.claimed_by is not None or task.spec_ref is not None:
        lines = [(name, value, cap) for name, cap in TASK_LINES if (value := getattr(task, name)) is not None]
        lines += [(f"error_log[{i}]", entry, MAX_TEXT) for i, entry in enumerate(task.error_log)]
        why = lines_problem(lines, escapes=escapes)
    else:
        why = line_problem(task.title, MAX_TITLE)
        why = f"field 'title' {why}" if why else None
    if why:
        raise problem(where, why)
    for i, cp in enumerate(task.checkpoints):
        try:
            _CHECKPOINT(cp, f"checkpoints[{i}]")
        except InvalidState as exc:
            raise problem(where, f"field {exc.message}") from None
    base = task.started_at_commit  # a full or abbreviated object id: never a revision expression
    if base is not None and not _BASE.fullmatch(base):
        raise problem(where, "field 'started_at_commit' must be an object id (hexadecimal)")
    for name in TASK_TIMES:
        value = getattr(task, name)
        if value and not is_time(value):
            raise problem(where, f"field {name!r} must be an ISO-8601 time")
    for name, cap in TASK_COMMANDS:
        value = getattr(task, name)
        if value is not None and len(value) > cap:
            raise problem(where, f"field {name!r} is too long")
    if task.timeout_seconds > MAX_SECONDS:
        raise problem(where, f"field 'validation.timeout_seconds' must be at most {MAX_SECONDS}")
    if not (0 <= task.attempts <= MAX_COUNT and 1 <= task.max_attempts <= model.MAX_ATTEMPTS):
        raise problem(where, "field 'attempts' or 'max_attempts' is out of range")
    if isinstance(task.order, int) and not 0 <= task.order <= 2**64:
        raise problem(where, "field 'order' is out of range")
    for name, value in task.extra.items():  # usually one or two: ask the table of each
        check = TASK_EXTRA_FIELDS.get(name)
        if check is not None:
            try:
                check(value, name)
            except InvalidState as exc:
                raise problem(where, f"field {exc.message}") from None
    if escapes:  # the text no rule above encodes: the commands, every checkpoint field, the rest
        _deep_strings_ok([task.check, task.cleanup, list(task.checkpoints), task.extra], where)


_BASE = lazy(r"[0-9a-f]{4,64}")  # a full or abbreviated object id
_TASK_LISTS = tuple(LIST_LIMITS["task"].items())


def task(raw: bytes, where: str, expected_id: str | None = None) -> Task:
    """A task blob as a model.Task (checked as `load_task` does, plus the edge's rules)."""
    data = load_json(raw, where)
    try:
        parsed = task_from_json(data, source=where)
    except UsageError as exc:
        raise InvalidState(exc.message) from None
    check_task_text(parsed, where, escapes=b"\\u" in raw)
    if expected_id is not None and parsed.id != expected_id:
        raise problem(where, f"holds task {parsed.id!r}")
    return parsed


# -- tasks: the layout git handoff writes, recognized in one pass ------------------------------
#
# A fetched state of 10,000 tasks is 10,000 task files, nearly all written by git handoff
# itself (dump_task: json.dumps(indent=2) of task_to_json). written_task_id recognizes
# that layout, field by field in its order, with every value inside the edge's rules, by
# one regular expression over the text (C, ~3 us for a pending task's 600 bytes, against
# ~30 us for json + task_from_json + check_task_text). It accepts only what `task` accepts
# (tests/core/test_records_edge_check.py: a property over canonical and mutated files), and answers
# None for anything else — an escape in a string, a field out of order, a number it does
# not bound, a key it does not know the rules of — which then goes to `task`, the parser
# that words what is wrong. Possessive and bounded throughout: linear in the text.

_JSON_NOT_IN_STRING = r'"\\\x00-\x1f'  # what a JSON string holds only escaped (or ends at)


def _string(cap: int | None = None) -> str:
    """A JSON string without escapes (any text JSON holds raw), of at most `cap` characters."""
    return f'"[^{_JSON_NOT_IN_STRING}]' + ("*+" if cap is None else f"{{0,{cap}}}+") + '"'


def _line_string(cap: int) -> str:
    """A JSON string that is one line of text by line_problem's rules, at most `cap` long."""
    return rf'"[^{_JSON_NOT_IN_STRING}\x7f\u0085\u2028\u2029]{{0,{cap}}}+"'


def _whole(minimum: int, maximum: int) -> str:
    """Whole numbers from `minimum` (0 or 1) that have fewer digits than `maximum`: all of
    them inside [minimum, maximum] (a larger one in range goes to the full parse)."""
    digits = len(str(maximum)) - 1
    return ("(?:0|" if minimum == 0 else "(?:") + f"[1-9][0-9]{{0,{digits - 1}}}+)"


def _null_or(pattern_: str) -> str:
    return f"(?:null|{pattern_})"


def _json_list(item: str, indent: int, limit: int = MAX_LIST) -> str:
    """`[]`, or 1..limit items laid out one per line as json.dumps(indent=2) does."""
    inner, outer = "\n" + " " * (indent + 2), "\n" + " " * indent
    return rf"(?:\[\]|\[{inner}{item}(?:,{inner}{item}){{0,{limit - 1}}}+{outer}\])"


# model._id_ok: no `..` and no `.lock` end within an id's 64 characters (the lookaheads look no
# further: an id longer than that is refused by the match itself)
_W_ID = r'(?![A-Za-z0-9._-]{0,64}?\.\.)(?![A-Za-z0-9._-]{0,64}?\.lock")[A-Za-z0-9][A-Za-z0-9._-]{0,63}+'
# is_time, in the layout now_iso writes (and with a fraction, an offset): a day that every
# month has (or 29 and 30 outside February, 31 in the months that have it), the years
# 2000-2999 (any offset keeps them inside FIRST_YEAR..LAST_YEAR); February 29 and any
# other form go to the full parse
_W_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
          r"|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_W_TIME = (r'"2[0-9]{3}-' + _W_DAY + r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
           r'(?:Z|[+-](?:0[0-9]|1[0-3]):[0-5][0-9])"')
_W_TIME_OR_EMPTY = f'(?:null|""|{_W_TIME})'  # TASK_TIMES: check_task_text asks only a time that is set
_W_COUNT = _whole(0, MAX_COUNT)
_W_SECONDS = _whole(1, MAX_SECONDS)
_W_CHECKPOINT = (  # _CHECKPOINT, as the checkpoint verb writes one
    r'\{\n      "step": ' + _null_or(_W_COUNT) + r',\n      "total": ' + _null_or(_W_COUNT)
    + r',\n      "description": ' + _line_string(MAX_TEXT) + r',\n      "timestamp": ' + _null_or(_W_TIME)
    + r"\n    \}")
# TASK_EXTRA_FIELDS, each as a pattern of its value. A field of that table missing here is
# left to the full parse (the negative lookahead below keeps it out of `_W_ANY_EXTRA`).
_W_EXTRA_VALUES = {
    "worktree": _null_or(_line_string(PATH_MAX)),
    "branch": _null_or(_line_string(1024)),
    "claimed_at": _null_or(_W_TIME),
    "lease_seconds": _null_or(_W_SECONDS),
    "claim_session": _null_or(_W_COUNT),
    "clone": _null_or(rf'"{_HEX.pattern}+"'),
    "clone_seal": _null_or(rf'"{_HEX.pattern}+"'),
    "checkpoint_tree": _null_or(r'"[0-9a-f]{40}(?:[0-9a-f]{24})?"'),
    "failed_at": _null_or(_W_TIME),
    "last_attempt_ref": _null_or(_line_string(PATH_MAX)),
    "hlc": _null_or(rf'"{_HLC.pattern}+"'),
}
_W_RULED_KEYS = sorted(TASK_READ_KEYS | TASK_EXTRA_FIELDS.keys(), key=len, reverse=True)
# A key no rule reads (completed_commit, field_clock, ...): a plain value, or the
# {field: [stamp, digest]} table of git_handoff.core.hlc; anything else goes to the full parse.
_W_PLAIN = r"(?:null|true|false|-?(?:0|[1-9][0-9]{0,18}+)|" + _string() + ")"
_W_TABLE_ENTRY = _string() + ": " + _json_list(_string(), 4)
_W_TABLE = r"(?:\{\}|\{\n    " + _W_TABLE_ENTRY + r"(?:,\n    " + _W_TABLE_ENTRY + r")*+\n  \})"
_W_ANY_EXTRA = r'"(?!(?:' + "|".join(_W_RULED_KEYS) + r')")[A-Za-z0-9_]{1,64}+": (?:' + _W_PLAIN + "|" + _W_TABLE + ")"
_W_EXTRA = "(?:" + "|".join(f'"{key}": {value}' for key, value in _W_EXTRA_VALUES.items()
                            if key in TASK_EXTRA_FIELDS) + "|" + _W_ANY_EXTRA + ")"
_WRITTEN_TASK = lazy(
    r'\{\n  "id": "(?P<id>' + _W_ID + ')"'
    + r',\n  "title": "(?=\s*+[^\s"])' + _line_string(MAX_TITLE)[1:]  # not blank (task_from_json)
    + r',\n  "status": "(?:' + "|".join(model.STATUSES) + ')"'
    + r',\n  "priority": "(?:' + "|".join(model.PRIORITIES) + ')"'
    + r',\n  "depends_on": ' + _json_list(f'"{_W_ID}"', 2, LIST_LIMITS["task"]["depends_on"])
    + r',\n  "attempts": ' + _W_COUNT
    + r',\n  "max_attempts": ' + _whole(1, model.MAX_ATTEMPTS)
    + r',\n  "started_at_commit": ' + _null_or(rf'"{_BASE.pattern}+"')
    + r',\n  "validation": \{\n    "command": ' + _null_or(_string(TASK_COMMANDS[0][1]))
    + r',\n    "timeout_seconds": ' + _W_SECONDS + r"\n  \}"
    + r',\n  "on_failure": \{\n    "cleanup": ' + _null_or(_string(TASK_COMMANDS[1][1])) + r"\n  \}"
    + r',\n  "error_log": ' + _json_list(_line_string(MAX_TEXT), 2, LIST_LIMITS["task"]["error_log"])
    + r',\n  "checkpoints": ' + _json_list(_W_CHECKPOINT, 2, LIST_LIMITS["task"]["checkpoints"])
    + r',\n  "completed_at": ' + _W_TIME_OR_EMPTY
    + r',\n  "claimed_by": ' + _null_or(_line_string(dict(TASK_LINES)["claimed_by"]))
    + r',\n  "lease_expires_at": ' + _W_TIME_OR_EMPTY
    + r',\n  "created_at": ' + _W_TIME_OR_EMPTY
    + r',\n  "spec_ref": ' + _null_or(_line_string(dict(TASK_LINES)["spec_ref"]))
    + r',\n  "order": ' + _whole(0, 2**64)
    + r',\n  "updated_at": ' + _W_TIME_OR_EMPTY
    + r"(?:,\n  " + _W_EXTRA + r")*+\n\}\n?")


def written_task_id(raw: bytes) -> str | None:
    """The id of the task file `raw` when it is laid out as git handoff writes it and every
    field is inside the edge's rules (then `task(raw, ...)` accepts it too); None for any
    other text, which `task` must then parse."""
    try:
        found = _WRITTEN_TASK.fullmatch(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None
    return found["id"] if found else None


# -- state trees -----------------------------------------------------------------------------------

FILE_MODES = (0o100644, 0o100755)
TREE_MODE = 0o040000


# Names made of these alone, not starting with a dot, pass every rule of name_problem
# (the names git handoff writes): one match instead of the rules one by one.
_PLAIN_NAME = lazy(r"[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,254}")  # 255 = MAX_NAME characters at most


def name_problem(name: str) -> str | None:
    """Why a tree entry name is unsafe anywhere (None when it is fine)."""
    return None if _PLAIN_NAME.fullmatch(name) else _name_rules(name)


def _name_rules(name: str) -> str | None:
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        return "is not a plain file name"
    if name.lower() in (".git", ".git.") or name.lower().startswith(".git~"):
        return "names a git directory"
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME or _CONTROL.search(name):
        return "is too long or holds control characters"
    return None


def is_clone_id(text_: str) -> bool:
    return bool(_CLONE.fullmatch(text_))


def is_number_name(name: str) -> bool:
    return bool(re.fullmatch(r"[1-9][0-9]{0,17}", name))


def kind_of(path: str) -> str | None:
    """The record kind stored at `path` of a state tree, or None for a path this version
    does not know."""
    if path in ("format", "config.toml", "meta.json", "relay.json"):
        return path.split(".")[0]
    parts = path.split("/")
    if parts[0] == "tasks" and len(parts) == 4 and len(parts[1]) == 1 and len(parts[2]) == 1:
        return "task" if parts[3].endswith(".json") else None
    if len(parts) == 2 and parts[0] == "sessions" and _SESSION_NAME.fullmatch(parts[1]):
        return "session"
    if len(parts) == 2 and parts[0] == "docs" and _DOC_NAME.fullmatch(parts[1]):
        return "doc"
    if len(parts) == 2 and parts[0] == "dispatch" and parts[1].endswith(".json") and _RUN_ID.fullmatch(parts[1][:-5]):
        return "dispatch"
    return None


def check_record(path: str, raw: bytes, kind: str | None = None) -> None:
    """Parse the record at `path` of a state tree by its kind (InvalidState if it fails);
    `kind`: kind_of(path), when the caller has asked it already."""
    if kind is None:
        kind = kind_of(path)
    if kind is None:
        raise problem(path, "is not a file this version of git handoff knows")
    if len(raw) > MAX_STATE_BLOB_BYTES:
        raise problem(path, f"{len(raw)} bytes, more than the {MAX_STATE_BLOB_BYTES} a record may hold")
    RECORD_CHECKS[kind](path, raw)


def _check_format(path: str, raw: bytes) -> None:
    text_ = raw.decode("utf-8", "replace").strip()
    name, _, version = text_.partition(" ")
    if name != "git-handoff-state" or not version.isdigit() or len(version) > 6:
        raise problem(path, f"an unreadable format marker {text_[:40]!r}")


def _check_session_file(path: str, raw: bytes) -> None:
    record = session(raw, path)
    number, _, clone = path.split("/")[1][:-5].partition("@")
    if record.get("session") not in (None, int(number)):
        raise problem(path, f"holds session {record.get('session')!r}")
    if clone and record.get("clone") != clone:
        raise problem(path, f"holds a session of clone {record.get('clone')!r}")


def _check_doc_file(path: str, raw: bytes) -> None:
    doc = handoff_doc(raw, path)
    number = path.split("/")[1][:-5].partition("@")[0]
    if doc.get("session") not in (None, int(number)):
        raise problem(path, f"holds the document of session {doc.get('session')!r}")


def _check_task_file(path: str, raw: bytes) -> None:
    task_id = path.rsplit("/", 1)[1][:-5]
    found = written_task_id(raw)
    if found is None:  # not laid out as git handoff writes it: the parser that words what is wrong
        found = task(raw, path).id
    h = hashlib.sha1(found.encode()).hexdigest()
    if found != task_id or path != f"tasks/{h[0]}/{h[1]}/{task_id}.json":
        raise problem(path, f"holds task {found!r}")


# one parser per record kind (kind_of names the kind of a path)
RECORD_CHECKS: dict[str, Callable[[str, bytes], object]] = {
    "format": _check_format,
    "config": lambda path, raw: config(raw, path),
    "meta": lambda path, raw: meta(raw, path),
    "relay": lambda path, raw: relay(raw, path),
    "session": _check_session_file,
    "doc": _check_doc_file,
    "dispatch": lambda path, raw: dispatch_run(raw, path),
    "task": _check_task_file,
}


def _toml_time_key(data: dict[str, Any]) -> str | None:
    """The dotted key of the first TOML date, time or date-time in `data` (None if none)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
            return key[:200]
        if isinstance(value, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
    return None


def config(raw: bytes, where: str = "config.toml") -> Config:
    """The state's config.toml as a model.Config (InvalidState if it does not parse)."""
    if len(raw) > MAX_RECORD_BYTES:
        raise problem(where, f"{len(raw)} bytes, more than the {MAX_RECORD_BYTES} a record may hold")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidState(f"state file {where} is not valid TOML: not UTF-8 at byte {exc.start}") from None
    data, why, deep = _parse_toml(text)
    if data is None:
        raise InvalidState(f"state file {where} is {why}" if deep else f"state file {where} is not valid TOML: {why}")
    dated = _toml_time_key(data)
    if dated is not None:  # git handoff never writes one, and the merge of records holds JSON values only
        raise problem(where, f"field {dated!r} is a TOML date or time, which a state's config does not hold")
    try:
        cfg = config_from_dict(data)
    except UsageError as exc:
        raise InvalidState(f"state file {where}: {exc.message}") from None
    for name in ("max_tasks_per_session", "max_sessions"):
        if getattr(cfg, name) > MAX_COUNT:
            raise problem(where, f"field {name!r} is out of range")
    if cfg.init_command is not None and len(cfg.init_command) > 4096:
        raise problem(where, "field 'init_command' is too long")
    return cfg

