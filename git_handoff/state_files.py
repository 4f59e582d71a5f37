"""Where the records other than tasks live in the state tree, how they are read from a
Snapshot or Tx, and the two in-transaction session rules (a completion counted in
the session; a claim refused once the session reached its limit).

    sessions/<n>.json   the session record (worker, base, started/ended, completed
                        tasks, decisions, blockers, ack)
    docs/<n>.json       the handoff document session <n> wrote
    relay.json          the relay running (or last run) for this repository

Below every use case: sessions, handoff, claim, relay and status all ask these.
"""

from __future__ import annotations

import socket
from typing import Any, cast

from git_handoff import procs, records
from git_handoff.errors import Negative
from git_handoff.model import now_iso
from git_handoff.records import HandoffDoc, RelayRecord, SessionRecord
from git_handoff.store import StateStore, Tx, active_session

SESSIONS_DIR = "sessions"
DOCS_DIR = "docs"
RELAY_PATH = "relay.json"


# -- sessions -------------------------------------------------------------------------


def session_path(number: int) -> str:
    return f"{SESSIONS_DIR}/{number}.json"


def put_record(tx: Tx, path: str, record: SessionRecord | HandoffDoc | dict[str, Any]) -> None:
    """Write a session or document record, stamped for the merge's written-last rule."""
    record["updated_at"] = now_iso()
    tx.put_json(path, record)


def read_session(source: Any, number: int) -> SessionRecord | None:
    """sessions/<n>.json from a Snapshot or Tx."""
    data = source.read_json(session_path(number))
    return cast(SessionRecord, data) if isinstance(data, dict) else None


def current_number(store: StateStore) -> int:
    """The session the store acts in, else $HANDOFF_SESSION or this worktree's open one, else 0."""
    return store.session if store.session else active_session(store.repo)


def completed_in(record: SessionRecord | None) -> list[str]:
    if not record:
        return []
    done = record.get("completed") or []
    return [x for x in done if isinstance(x, str)]


def completed_ids(source: Any, number: int) -> list[str]:
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
    put_record(tx, session_path(number), record)
    return len(done)


def check_claim_allowed(tx: Tx) -> None:
    """Refuse a claim (Negative, exit 1) once the session completed max_tasks_per_session
    tasks, or, outside any session, once max_sessions sessions were started: the limit
    that stopped the sessions stops new work too (no claim slips past it as SESSION-0)."""
    number = tx.session
    if number <= 0:
        started = tx.meta().get("session_count")
        limit = tx.config().max_sessions
        if isinstance(started, int) and started > 0 and started >= limit:
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


def limit_reached(snapshot: Any, number: int) -> bool:
    if number <= 0:
        return False
    return bool(len(completed_ids(snapshot, number)) >= snapshot.config().max_tasks_per_session)


# -- handoff documents ------------------------------------------------------------------


def doc_path(number: int) -> str:
    return f"{DOCS_DIR}/{number}.json"


def doc_numbers(source: Any) -> list[int]:
    out = []
    for name in source.listdir(DOCS_DIR):
        stem = name[:-5] if name.endswith(".json") else ""
        if stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def pending_doc(source: Any, before: int | None = None) -> HandoffDoc | None:
    """The latest document not yet archived, from a session before `before`."""
    for n in reversed(doc_numbers(source)):
        if before is not None and n >= before:
            continue
        doc = source.read_json(doc_path(n))
        if isinstance(doc, dict) and not doc.get("archived"):
            return cast(HandoffDoc, doc)
    return None


# -- the relay record -------------------------------------------------------------------


def read_relay(source: Any) -> RelayRecord | None:
    """relay.json through its parser (git_handoff.records): InvalidState if unreadable."""
    raw = source.read(RELAY_PATH)
    if raw is None:
        return None
    return records.relay(raw, RELAY_PATH)


def relay_status_lines(snapshot: Any) -> list[str]:
    """Lines for `status`: the relay running or stopped, and its recent failures."""
    record = read_relay(snapshot)
    if not record:
        return []
    out = []
    where = f"pid {record.get('pid')} on {record.get('host')}"
    if record.get("state") == "running":
        alive = record.get("host") != socket.gethostname() or procs.alive(int(record.get("pid") or 0))
        if alive:
            out.append(f"relay: running ({where} since {record.get('started_at')}, session {record.get('session') or '-'})")
        else:
            out.append(f"relay: died ({where}, started {record.get('started_at')}); "
                       "a new `git handoff relay` takes over")
    else:
        out.append(f"relay: stopped at {record.get('stopped_at')} ({record.get('reason') or 'no reason recorded'})")
    for failure in (record.get("failures") or [])[-5:]:
        out.append(f"relay failure: [{failure.get('at')}] {failure.get('what')}")
    return out
