"""Where the records other than tasks live in the state tree, how they are read from a
Snapshot or Tx, and the two in-transaction session rules (a completion counted in
the session; a claim refused once the session reached its limit).

    sessions/<n>@<clone>.json  the session record (worker, base, started/ended,
                        completed tasks, decisions, blockers, ack); `sessions/<n>.json`
                        in states written before fleet ids (still read and written)
    docs/<n>@<clone>.json      the handoff document session <n> of that clone wrote
                        (`docs/<n>.json` before fleet ids)
    relay.json          the relay running (or last run) for this repository

Below every use case: sessions, handoff, claim, relay and status all ask these.
"""

from __future__ import annotations

import socket
from collections.abc import Collection
from typing import Any, cast

from git_handoff.core import record_schemas, state_tree
from git_handoff.core.errors import InvalidState, Negative
from git_handoff.core.model import now, now_iso, parse_time
from git_handoff.core.record_schemas import HandoffDoc, RelayRecord, SessionRecord
from git_handoff.infra import procs
from git_handoff.state import identity
from git_handoff.state.snapshot import StateReader
from git_handoff.state.store import StateStore, Tx, active_session

SESSIONS_DIR = "sessions"
DOCS_DIR = "docs"
RELAY_PATH = "relay.json"


# -- sessions -------------------------------------------------------------------------


# Session numbers: each clone counts the sessions it started in meta.json's
# `sessions_by_clone` {clone: n} (merged by maximum, so the sum is the number started
# fleet-wide); a new session is numbered one more than that sum, and its record is keyed
# by number *and* clone, so two clones that both minted N offline keep two records.


# Sessions a count may claim beyond the session records that stand behind it: the count
# of an older layout, or one an imported plan carried over (ops.tasks). A clone's own count
# in `sessions_by_clone` counts only as far as its records do.
UNRECORDED_SESSIONS = 10_000


def sessions_started(meta: dict[str, Any], source: StateReader | None = None) -> int:
    """Sessions started fleet-wide, as far as this state knows.

    With `source` (the Snapshot or Tx `meta` is from), what the limit and the next
    session's number go by: each count only as far as records stand behind it (a clone's
    count up to the session records of that clone; the others up to the records of no
    listed clone plus UNRECORDED_SESSIONS), so that a count pushed from a remote (say
    10**18 - 1 for one clone) can not use up max_sessions or the session numbers."""
    by_clone = meta.get("sessions_by_clone")
    if source is None:
        if not isinstance(by_clone, dict):
            return _count(meta.get("session_count"))
        return _count(meta.get("sessions_legacy")) + sum(_count(v) for v in by_clone.values())
    recorded: dict[str | None, int] = {}
    for _, _, clone in session_keys(source):
        recorded[clone] = recorded.get(clone, 0) + 1
    if not isinstance(by_clone, dict):
        return min(_count(meta.get("session_count")), sum(recorded.values()) + UNRECORDED_SESSIONS)
    total = sum(min(_count(v), recorded.get(k, 0)) for k, v in by_clone.items())
    unlisted = sum(n for clone, n in recorded.items() if clone is None or clone not in by_clone)
    return total + min(_count(meta.get("sessions_legacy")), unlisted + UNRECORDED_SESSIONS)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def count_session_start(meta: dict[str, Any], clone: str, source: StateReader | None = None) -> int:
    """Count a session start of `clone` in `meta` (changed in place); its number.

    With `source` (the Tx writing `meta`), counts go only as far as their records
    (sessions_started), this clone's own count included, and the number is the first
    after them that this clone has no record of yet."""
    by_clone = meta.get("sessions_by_clone")
    if not isinstance(by_clone, dict):
        meta["sessions_legacy"] = _count(meta.get("session_count"))
        by_clone = {}
    number = sessions_started(meta, source) + 1
    own = _count(by_clone.get(clone))
    if source is not None:
        own = min(own, sum(1 for _, _, c in session_keys(source) if c == clone))
        for _ in range(UNRECORDED_SESSIONS):
            if number > record_schemas.MAX_SESSION or not sessions_numbered_by(source, number, clone):
                break
            number += 1
    if number > record_schemas.MAX_SESSION:  # a state whose counters another clone set this high
        raise InvalidState(f"cannot start session {number}: session numbers go up to {record_schemas.MAX_SESSION:,} "
                           "(the largest a session file's name holds), and this state counts "
                           f"{number - 1:,} started; nothing was changed")
    meta["sessions_by_clone"] = dict(sorted({**by_clone, clone: own + 1}.items()))
    meta["session_count"] = max(number, _count(meta.get("session_count")))
    return number


def carry_session_count(meta: dict[str, Any], carried: int) -> None:
    """Raise the count of sessions started to `carried` (an imported plan's count)."""
    started = sessions_started(meta)
    if carried <= started:
        return
    if isinstance(meta.get("sessions_by_clone"), dict):
        meta["sessions_legacy"] = _count(meta.get("sessions_legacy")) + carried - started
    meta["session_count"] = max(carried, _count(meta.get("session_count")))


def _clone_of(source: StateReader) -> str:
    return identity.clone_id(source.repo)


def _keyed(directory: str, source: StateReader, number: int) -> str:
    """This clone's record of session `number` in `directory`: the fleet path
    `<n>@<clone>.json` unless the record is a legacy `<n>.json` of this clone's session."""
    own = f"{directory}/{number}@{_clone_of(source)}.json"
    legacy = f"{directory}/{number}.json"
    if source.read(own) is None and source.read(legacy) is not None:
        return legacy
    return own


def session_path(source: StateReader, number: int) -> str:
    """Where this clone's session `number` lives in the state of `source` (a Snapshot or Tx)."""
    return _keyed(SESSIONS_DIR, source, number)


def session_keys(source: StateReader, directory: str = SESSIONS_DIR) -> list[tuple[int, str, str | None]]:
    """Every record in `directory` as (number, path, clone or None for a legacy one), by
    number then clone."""
    out: list[tuple[int, str, str | None]] = []
    for name in source.listdir(directory):
        if not name.endswith(".json"):
            continue
        number, _, clone = name[:-5].partition("@")
        if number.isdigit() and (not clone or state_tree.is_clone_id(clone)):
            out.append((int(number), f"{directory}/{name}", clone or None))
    out.sort(key=lambda k: (k[0], k[2] or ""))
    return out


def sessions_numbered_by(source: StateReader, number: int, clone: str, directory: str = SESSIONS_DIR) -> bool:
    """Whether `clone` has a record of session `number` already."""
    return source.read(f"{directory}/{number}@{clone}.json") is not None


def sessions_numbered(source: StateReader, number: int, directory: str = SESSIONS_DIR) -> list[str]:
    """Paths of every record of session `number` (one per clone that minted it)."""
    legacy = f"{directory}/{number}.json"
    out = [legacy] if source.read(legacy) is not None else []
    prefix = f"{number}@"
    out.extend(f"{directory}/{name}" for name in sorted(source.listdir(directory))
               if name.startswith(prefix) and name.endswith(".json"))
    return out


def put_record(tx: Tx, path: str, record: SessionRecord | HandoffDoc | dict[str, Any]) -> None:
    """Write a session or document record, stamped for the merge's written-last rule."""
    record["updated_at"] = now_iso()
    tx.put_json(path, record)


def read_session(source: StateReader, number: int) -> SessionRecord | None:
    """Session `number` from a Snapshot or Tx: this clone's, else (a session another clone
    started) the first of that number."""
    data = source.read_json(session_path(source, number))
    if not isinstance(data, dict):
        for path in sessions_numbered(source, number):
            data = source.read_json(path)
            if isinstance(data, dict):
                return cast(SessionRecord, data)
        return None
    return cast(SessionRecord, data)


def current_number(store: StateStore) -> int:
    """The session the store acts in, else $HANDOFF_SESSION or this worktree's open one, else 0."""
    return store.session if store.session else active_session(store.repo)


def completed_in(record: SessionRecord | None) -> list[str]:
    if not record:
        return []
    done = record.get("completed") or []
    return [x for x in done if isinstance(x, str)]


def completed_ids(source: StateReader, number: int) -> list[str]:
    """Tasks completed in session `number`, as `done` recorded them in the session record
    (one blob read: claim checks it on its fast path)."""
    if number <= 0:
        return []
    return completed_in(read_session(source, number))


def record_completion(tx: Tx, task_id: str) -> int:
    """Count a task completed in the transaction's session; returns the session's count."""
    number = tx.session
    if number <= 0:
        return 0
    record = read_session(tx, number)
    if record is None:
        return 0
    done = completed_in(record)
    if task_id not in done:
        done.append(task_id)
    record["completed"] = done
    put_record(tx, session_path(tx, number), record)
    return len(done)


def check_claim_allowed(tx: Tx) -> None:
    """Refuse a claim (Negative, exit 1) once the session completed max_tasks_per_session
    tasks, or, outside any session, once max_sessions sessions were started: the limit
    that stopped the sessions stops new work too (no claim slips past it as SESSION-0)."""
    number = tx.session
    if number <= 0:
        limit = tx.config().max_sessions
        started = sessions_started(tx.meta())
        if started >= limit:  # counted as far as records stand behind it (never more than the raw count)
            started = sessions_started(tx.meta(), tx)
        if started > 0 and started >= limit:
            raise Negative(
                f"max_sessions ({limit}) reached: {started} session(s) were started and none is open here, "
                "so no new work is taken; raise the limit with `git handoff init --max-sessions N`"
            )
        return
    limit = tx.config().max_tasks_per_session
    done = len(completed_ids(tx, number))
    if done >= limit:
        raise Negative(
            f"max_tasks_per_session ({limit}) reached: session {number} completed {done} task(s); "
            "hand off: `git handoff doc write`, then `git handoff session end` and start a new session"
        )


def limit_reached(snapshot: StateReader, number: int) -> bool:
    if number <= 0:
        return False
    return bool(len(completed_ids(snapshot, number)) >= snapshot.config().max_tasks_per_session)


# -- handoff documents ------------------------------------------------------------------


def doc_path(source: StateReader, number: int) -> str:
    """Where this clone's session `number` keeps its handoff document."""
    return _keyed(DOCS_DIR, source, number)


def doc_numbers(source: StateReader) -> list[int]:
    return sorted({n for n, _, _ in session_keys(source, DOCS_DIR)})


def doc_paths(source: StateReader) -> list[tuple[int, str]]:
    """(session number, path) of every handoff document, oldest session first."""
    return [(n, path) for n, path, _ in session_keys(source, DOCS_DIR)]


def read_doc(source: StateReader, number: int) -> HandoffDoc | None:
    """The document of session `number`: this clone's, else the first of that number."""
    found = read_doc_at(source, number)
    return found[1] if found else None


def read_doc_at(source: StateReader, number: int, skip: Collection[str] = ()) -> tuple[str, HandoffDoc] | None:
    """(path, document) of `read_doc`, passing over the paths in `skip`."""
    for path in (doc_path(source, number), *sessions_numbered(source, number, DOCS_DIR)):
        if path in skip:
            continue
        doc = source.read_json(path)
        if isinstance(doc, dict):
            return path, cast(HandoffDoc, doc)
    return None


def pending_doc(source: StateReader, before: int | None = None) -> HandoffDoc | None:
    """The latest document not yet archived, from a session before `before` (whichever
    clone wrote it)."""
    found = pending_doc_at(source, before)
    return found[1] if found else None


def pending_doc_at(source: StateReader, before: int | None = None,
                   skip: Collection[str] = ()) -> tuple[str, HandoffDoc] | None:
    """(path, document) of `pending_doc`, passing over the paths in `skip`."""
    for n, path in reversed(doc_paths(source)):
        if (before is not None and n >= before) or path in skip:
            continue
        doc = source.read_json(path)
        if isinstance(doc, dict) and not doc.get("archived"):
            return path, cast(HandoffDoc, doc)
    return None


# -- the relay record -------------------------------------------------------------------


def read_relay(source: StateReader) -> RelayRecord | None:
    """relay.json through its parser (git_handoff.core.record_schemas): InvalidState if unreadable."""
    raw = source.read(RELAY_PATH)
    if raw is None:
        return None
    return record_schemas.relay(raw, RELAY_PATH)


def relay_status_lines(snapshot: StateReader) -> list[str]:
    """Lines for `status`: the relay running or stopped, and its recent failures."""
    record = read_relay(snapshot)
    if not record:
        return []
    out = []
    where = f"pid {record.get('pid')} on {record.get('host')}"
    if record.get("state") == "running":
        alive = record.get("host") != socket.gethostname() or procs.alive(int(record.get("pid") or 0))
        if alive:
            out.append(f"relay: running ({where} since {record.get('started_at')}, session "
                       f"{record.get('session') or '-'})")
            out += waiting_lines(record) + switch_lines(record)
        else:
            out.append(f"relay: died ({where}, started {record.get('started_at')}); "
                       "a new `git handoff relay` takes over")
    else:
        out.append(f"relay: stopped at {record.get('stopped_at')} ({record.get('reason') or 'no reason recorded'})")
        out += switch_lines(record)[:1]  # its last switch of agents
    for failure in (record.get("failures") or [])[-5:]:
        out.append(f"relay failure: [{failure.get('at')}] {failure.get('what')}")
    return out


_WAITED = {"usage_limit": "the usage limit", "rate_limit": "the rate limit", "outage": "the API outage"}


def waiting_lines(record: RelayRecord) -> list[str]:
    """`relay: waiting for the usage limit, resumes at 2026-07-01T20:00:00Z (in 3 h 12 min): <what
    the agent printed>` while the relay waits a limit out (ops/relay_watch.py), else none."""
    waiting = record.get("waiting")
    if not isinstance(waiting, dict) or waiting.get("kind") not in _WAITED:
        return []
    text = f"relay: waiting for {_WAITED[str(waiting['kind'])]}"
    until = waiting.get("until")
    if isinstance(until, str):
        left = int((parse_time(until) - now()).total_seconds())
        text += f", resumes at {until}" + (f" (in {left // 3600} h {left % 3600 // 60} min)" if left >= 3600 else
                                         f" (in {max(left, 0) // 60} min {max(left, 0) % 60} s)")
    return [text + (f": {waiting['line']}" if waiting.get("line") else "")]


def usage_totals(source: StateReader) -> dict[str, Any]:
    """What every session record's `usage` says, summed (ops/payloads.UsageTotal)."""
    out: dict[str, Any] = {"tokens": 0, "input_tokens": 0, "output_tokens": 0, "turns": 0, "cost_usd": None,
                           "sessions": 0}
    for _, path, _ in session_keys(source):
        record = source.read_json(path)
        used = record.get("usage") if isinstance(record, dict) else None
        if not isinstance(used, dict):
            continue
        out["sessions"] += 1
        for key in ("tokens", "input_tokens", "output_tokens", "turns"):
            value = used.get(key)
            out[key] += value if isinstance(value, int) else 0
        cost = used.get("cost_usd")
        if isinstance(cost, int | float):
            out["cost_usd"] = (out["cost_usd"] or 0.0) + cost
    return out


def switch_lines(record: RelayRecord) -> list[str]:
    """`relay: agent codex (switched from claude at ..., session 3; 2 switch(es) this run):
    <reason>` and the agents limited now, when the relay switched agents
    (ops/relay_agents.py), else none."""
    out: list[str] = []
    switches = record.get("switches")
    if isinstance(switches, list) and switches and isinstance(switches[-1], dict):
        last = switches[-1]
        out.append(f"relay: agent {last.get('to')} (switched from {last.get('from')} at {last.get('at')}, session "
                   f"{last.get('session')}; {len(switches)} switch(es) this run): {last.get('reason')}")
    limited = record.get("limited")
    if isinstance(limited, list) and limited:
        out.append("relay: limited agents: " + ", ".join(
            f"{x.get('agent')} until {x.get('until')}" for x in limited if isinstance(x, dict)))
    return out
