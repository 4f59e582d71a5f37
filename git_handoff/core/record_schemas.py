"""The typed records of the state, and the parser of each record kind: the edge.

Every record read from a state tree (config, meta, session, handoff document, relay,
dispatch run; tasks in git_handoff.core.task_file) and the fleet lock's record pass the
parser of their kind before anything acts on them: types, ranges, sizes, character
classes. A record no parser accepts is an InvalidState (exit 2) naming the path and the
field; `sync` refuses a remote state holding one and changes nothing. Which kind a path
of a state tree holds, and the one call that checks any of them, are in
git_handoff.core.state_tree.

The records keep their JSON exactly (TypedDicts over the stored objects); fields a
newer writer added are kept as they are, within the same size and nesting limits.

Pure: no git, no I/O.
"""

from __future__ import annotations

import datetime
from typing import Any, TypedDict, cast

from git_handoff.core.decoding import load_json, parse_toml, problem
from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.field_checks import (
    CLONE_ID,
    HEX,
    LINE,
    OID,
    PATH_TEXT,
    SAFE_WORD,
    STAMP,
    WORKER,
    Check,
    boolean,
    capped,
    check_fields,
    either,
    integer,
    list_of,
    obj,
    one_of,
    opt,
    pattern,
    shown,
    text,
)
from git_handoff.core.model import LIST_LIMITS, MAX_COUNT, MAX_RECORD_BYTES, MAX_TITLE, Config
from git_handoff.core.patterns import lazy
from git_handoff.core.serialization import config_from_dict

# -- the records' types -------------------------------------------------------------------------


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
    usage: dict[str, Any]  # what its agent used (ops/usage.py UsageRecord)
    budget: str  # the budget that ended it (ops/budgets.py)
    updated_at: str
    hlc: str  # the clock stamp of its last write (git_handoff.core.hlc)
    field_clock: dict[str, list[str]]  # {field: [stamp, digest of the value]}
    agents: list[str]  # the relay's agents that ran in it, in order (ops/relay_agents.py)


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
    omitted: dict[str, int]  # entries of a list ("status.pending", ...) counted, not listed, for want of room


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
    agent_name: str  # the kind of the agent it launches now ("claude"; ops/relay_agents.py)
    agents: list[str]  # every agent command, in order, when it has several
    switches: list[dict[str, Any]]  # its last switches from one agent to another
    limited: list[dict[str, Any]]  # the agents limited now, and until when


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


# -- each record kind's fields and parser ---------------------------------------------------------

# a run id: NNN-slug (before fleet ids) or NNN-slug@<clone>: the clone part makes two
# clones' numbers distinct even when both minted the same one offline
RUN_ID = lazy(r"[0-9]{3,12}-[a-z]+(?:-[a-z]+){0,2}(?:@[0-9a-f]{16})?")
_DECISION = obj({"what": LINE, "why": LINE, "at": opt(STAMP)})
_BLOCKER = either(LINE, obj({"text": LINE, "at": opt(STAMP)}))


def dollars(value: Any, at: str) -> None:
    """A cost in US dollars: a number in [0, 1e9)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e9:
        raise InvalidState(f"{at} must be a cost in dollars (a number from 0), not {shown(value)}")


# a session's use of its agent CLI (ops/usage.py)
_USAGE = obj({"input_tokens": integer(0), "output_tokens": integer(0), "tokens": integer(0), "turns": integer(0),
              "cost_usd": opt(dollars), "seconds": integer(0),
              "clis": list_of(pattern(lazy(r"[a-z][a-z0-9-]{0,31}"), "an agent CLI's name"), 16)})


def counts_by_clone(value: Any, at: str) -> None:
    """{clone id: count}: how many sessions each clone started (a grow-only counter)."""
    if not isinstance(value, dict):
        raise InvalidState(f"{at} must be an object, not {shown(value)}")
    limit = LIST_LIMITS["meta"]["sessions_by_clone"]
    if len(value) > limit:
        raise InvalidState(f"{at} holds {len(value)} entries, more than {limit}")
    for key, count in value.items():
        if not isinstance(key, str) or not CLONE_ID.fullmatch(key):
            raise InvalidState(f"{at} must be keyed by clone ids (16 hex digits), not {shown(key)}")
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
    "ack": opt(obj({"status": one_of("accepted", "failed"), "at": opt(STAMP), "reason": opt(LINE),
                    "handoff": opt(integer(0, MAX_SESSION))})),
    "handoff": opt(obj({"written_at": opt(STAMP), "trigger": opt(LINE)})),
    "usage": opt(_USAGE),
    "budget": opt(LINE),
    "updated_at": opt(STAMP),
    "agents": capped("session", "agents", LINE),
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
    "omitted": opt(obj({name: integer(0) for name in ("status.completed", "status.in_progress", "status.pending",
                                                      "failed", "files_changed")})),
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
    "agent_name": opt(LINE),
    "agents": capped("relay", "agents", LINE),
    "switches": capped("relay", "switches", obj({"at": opt(STAMP), "session": opt(integer(0)), "from": opt(LINE),
                                                  "to": opt(LINE), "reason": opt(LINE)})),
    "limited": capped("relay", "limited", obj({"agent": opt(LINE), "until": opt(STAMP)})),
}
DISPATCH_FIELDS: dict[str, Check] = {
    "run_id": pattern(RUN_ID, "a run id (NNN-slug)"),
    "key": pattern(RUN_ID, "a run key (NNN-slug@clone)"),
    "conversation_key": opt(pattern(RUN_ID, "a run key")),
    "resume_of_key": opt(pattern(RUN_ID, "a run key")),
    "seq": integer(1, 10**12),
    "slug": pattern(lazy(r"[a-z]+(?:-[a-z]+){0,2}"), "a slug"),
    "backend": pattern(lazy(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"), "a backend name"),
    "prompt": text(MAX_RECORD_BYTES, one_line=False),
    "status": one_of("new", "running", "succeeded", "completed", "failed"),
    "created_at": opt(STAMP),
    "updated_at": opt(STAMP),
    "created_by": opt(LINE),
    "conversation": opt(pattern(RUN_ID, "a run id")),
    "resume_of": opt(pattern(RUN_ID, "a run id")),
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


class FleetLockRecord(TypedDict, total=False):
    """`lock.json` of the fleet relay lock (refs/harness/locks/relay): which clone's relay
    holds it, until when. Every field is required but the two times of its history."""

    clone: str  # the holder's clone id (16 hex digits)
    host: str
    pid: int
    acquired_at: str
    renewed_at: str
    expires_at: str
    lease_seconds: int


FLEET_LOCK_FIELDS: dict[str, Check] = {
    "clone": pattern(CLONE_ID, "a clone id (16 hex digits)"),
    "host": LINE,
    "pid": integer(1, 2**31 - 1),
    "acquired_at": opt(STAMP),
    "renewed_at": opt(STAMP),
    "expires_at": STAMP,
    "lease_seconds": integer(1, 24 * 3600),
}


def fleet_lock(raw: bytes, where: str) -> FleetLockRecord:
    """`lock.json` of the fleet relay lock (refs/harness/locks/relay): every field required."""
    data = check_fields(load_json(raw, where, MAX_LOCK_BYTES), FLEET_LOCK_FIELDS, where)
    missing = [name for name in FLEET_LOCK_FIELDS if name not in data and name not in ("acquired_at", "renewed_at")]
    if missing:
        raise problem(where, f"a lock record needs {', '.join(missing)}")
    return cast(FleetLockRecord, data)  # expires_at a time: STAMP reads it as every reader does (is_time)


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


# -- config.toml ----------------------------------------------------------------------------------


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
    data, why, deep = parse_toml(text)
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
