"""Sessions: numbering, the per-worktree open session, and the facts a session records
for its handoff document (decisions, blockers). `session start` with its health check
and recovery is ops/session_start.py; the session records and their in-transaction rules
are git_handoff/state/session_records.py; this worktree's files are git_handoff/state/this_clone.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any, Literal, TypeVar, cast

from git_handoff.core import selection
from git_handoff.core.errors import Negative, UsageError
from git_handoff.core.field_checks import one_line
from git_handoff.core.model import now_iso, parse_time
from git_handoff.core.record_schemas import Decision, SessionRecord
from git_handoff.ops import usage
from git_handoff.ops.payloads import Blocker, SessionRow, SessionShown
from git_handoff.state import identity, notes
from git_handoff.state.session_records import (
    completed_ids,
    count_session_start,
    current_number,
    put_record,
    read_session,
    session_keys,
    session_path,
    sessions_numbered,
    sessions_started,
)
from git_handoff.state.snapshot import META_PATH
from git_handoff.state.store import StateStore, Tx
from git_handoff.state.this_clone import (
    SESSION_FILE,
    clear_hook_state,
    open_session,
    worker_identity,
    write_hook_state,
    write_private,
)

# -- start / end ---------------------------------------------------------------------


def _stats(tx: Tx) -> str:
    return selection.stats_text(tx.tasks())


def begin(store: StateStore, worker: str | None = None) -> SessionRecord:
    """Open a new session in this worktree: number it, record its base; no recovery.

    Refuses (Negative, exit 1) with a STATS line once max_sessions sessions were started.
    A session this worktree left open is closed first.
    """
    repo = store.repo
    who = worker_identity(repo, worker)
    base = repo.head()
    stale = open_session(repo)
    stamp = now_iso()
    clone = identity.clone_id(repo)

    def apply(tx: Tx) -> dict[str, Any]:
        meta = tx.meta()
        count = sessions_started(meta, tx)  # fetched counts only as far as their records go
        cfg = tx.config()
        if stale is not None:
            _close_left_open(tx, stale["session"], stamp)
        if count >= cfg.max_sessions:
            return _refused(tx, meta, count, cfg.max_sessions)
        number = count_session_start(meta, clone, tx)
        record: SessionRecord = {
            "session": number,
            "worker": who,
            "base": base,
            "worktree": str(repo.workdir) if repo.workdir else None,
            "clone": clone,
            "started_at": stamp,
            "ended_at": None,
            "completed": [],
            "decisions": [],
            "blockers": [],
            "ack": None,
            "handoff": None,
        }
        put_record(tx, session_path(tx, number), record)
        meta["last_session"] = stamp
        tx.put_json(META_PATH, meta)
        short = base[:7] if base else "none"
        tx.log("INIT", f"Session {number} started (base={short}, worker={who})", session=number)
        return {"refused": False, "record": record}

    result = store.transact(apply)
    if stale is not None:
        write_private(repo, SESSION_FILE, json.dumps({**stale, "ended_at": stamp}) + "\n")
        clear_hook_state(repo)
    if result["refused"]:
        raise Negative(
            f"max_sessions ({result['max_sessions']}) reached: {result['session_count']} sessions were started; "
            "no new session (raise it with `git handoff init --max-sessions N`)",
            payload=result,
        )
    record = result["record"]
    write_private(repo, SESSION_FILE, json.dumps({
        "session": record["session"], "base": base, "worker": who,
        "started_at": record["started_at"], "ended_at": None,
    }) + "\n")
    write_hook_state(repo, base)
    store.session = record["session"]
    return cast(SessionRecord, dict(record))


def _close_left_open(tx: Tx, number: int, stamp: str) -> None:
    """Close session `number`, which this worktree left open, as the next one starts."""
    old = read_session(tx, number)
    if old is not None and not old.get("ended_at"):
        old["ended_at"] = stamp
        old["ended_by"] = "next session start"
        put_record(tx, session_path(tx, number), old)
        tx.log("WARN", f"Session {number} was left open; closed by the next session start", session=number)


def _refused(tx: Tx, meta: dict[str, Any], count: int, max_sessions: int) -> dict[str, Any]:
    """`begin`'s answer once max_sessions sessions were started, its STATS line logged
    (once: the last session's end already logged these very figures)."""
    last = read_session(tx, int(meta.get("session_count") or 0)) if count else None
    stats = _stats(tx)
    if not (last and last.get("ended_at") and last.get("stats") == stats):
        tx.log("STATS", stats, session=count)
    return {"refused": True, "session_count": count, "max_sessions": max_sessions}


def end(store: StateStore, *, cost: float | None = None) -> SessionRecord:
    """`session end`: notes for the session's commits, the STATS line, the session closed;
    what its agent used recorded (ops/usage.py), and shared among the tasks it worked on.
    `cost`: in dollars, where the agent's output printed it (the relay reads it)."""
    repo = store.repo
    opened = open_session(repo)
    if opened is None:
        raise UsageError("no open session in this worktree (start one with `git handoff session start`)")
    number = int(opened["session"])
    store.session = number
    _note_open_claims(store)
    used, clis = usage.of_session(repo, number)
    used = usage.with_cost(used, cost)
    stamp = now_iso()

    def apply(tx: Tx) -> SessionRecord:
        record: SessionRecord = read_session(tx, number) or {"session": number}
        record["ended_at"] = stamp
        record["head"] = repo.head()
        record["completed"] = completed_ids(tx, number)
        stats = _stats(tx)
        record["stats"] = stats  # kept, so a refused next start need not log the same figures again
        if used is not None:
            record["usage"] = dict(usage.as_record(used, _seconds(record.get("started_at"), stamp), clis))
            charged = usage.charge_tasks(tx, number, used.tokens)
            tx.log("STATS", usage.line(used, charged), session=number)
        put_record(tx, session_path(tx, number), record)
        meta = tx.meta()
        meta["last_session"] = stamp
        tx.put_json(META_PATH, meta)
        tx.log("STATS", stats, session=number)
        return record

    record = store.transact(apply)
    write_private(repo, SESSION_FILE, json.dumps({**opened, "ended_at": stamp}) + "\n")
    clear_hook_state(repo)
    return record


def _seconds(start: str | None, end: str) -> int | None:
    try:
        return max(0, int((parse_time(end) - parse_time(start)).total_seconds())) if start else None
    except UsageError:
        return None


def _note_open_claims(store: StateStore) -> None:
    """Notes for the commits of tasks still claimed in this worktree (the hook stays fast)."""
    repo = store.repo
    here = str(repo.workdir) if repo.workdir else None
    for task in store.snapshot().tasks().values():
        if (task.status == "in_progress" and here and task.claim.worktree == here
                and identity.claim_is_mine(repo, task)):
            store.best_effort("notes", partial(notes.note_task_commits, store, task))


def show(store: StateStore, number: int | None = None) -> SessionShown:
    """A session record: N, else this worktree's open session, else the latest.

    Two clones that started a session offline may both have numbered it N: `session show N`
    shows this clone's (else the first by clone id) and names the others in `also`."""
    snap = store.snapshot()
    if number is None:
        opened = open_session(store.repo)
        number = int(opened["session"]) if opened else int(snap.meta().get("session_count") or 0)
        if number == 0:
            raise Negative("no session was started yet (`git handoff session start`)")
    elif number < 1:
        raise UsageError(f"invalid session number {number}: sessions are numbered from 1")
    record = read_session(snap, number)
    if record is None:
        raise UsageError(f"no session {number} (sessions started: {sessions_started(snap.meta())}; "
                         "see `git handoff session list`)")
    out = cast(SessionShown, dict(record))  # the record, open_here and also added below
    out["completed"] = completed_ids(snap, number)
    opened = open_session(store.repo)
    out["open_here"] = bool(opened and opened.get("session") == number)
    others = []
    for path in sessions_numbered(snap, number):
        other = snap.read_json(path)
        if isinstance(other, dict) and other.get("clone") != record.get("clone"):
            others.append(other.get("clone"))
    if others:
        out["also"] = others
    return out


def list_sessions(store: StateStore) -> list[SessionRow]:
    """Every session record, by number then clone (two clones may share a number)."""
    snap = store.snapshot()
    mine = identity.clone_id(store.repo)
    out = []
    for number, path, _ in session_keys(snap):
        record = snap.read_json(path)
        if not isinstance(record, dict):
            continue
        out.append(SessionRow({
            "session": number, "clone": record.get("clone"), "here": record.get("clone") == mine,
            "worker": record.get("worker"), "started_at": record.get("started_at"),
            "ended_at": record.get("ended_at"), "completed": len(record.get("completed") or []),
        }))
    return out


# -- facts for the handoff document --------------------------------------------------


def _require_number(store: StateStore) -> int:
    store.snapshot()  # NotInitialized first
    number = current_number(store)
    if number <= 0:
        raise UsageError("no open session in this worktree (start one with `git handoff session start`)")
    return number


def decide(store: StateStore, what: str, why: str) -> Decision:
    """Record a decision (what was chosen, and why) in the current session."""
    what = one_line(what, "WHAT")
    why = one_line(why, "--why")
    entry: Decision = {"what": what, "why": why, "at": now_iso()}
    return _record_fact(store, "decisions", entry, "INIT", f'Decision "{what}" why="{why}"')


def blocker(store: StateStore, text: str) -> Blocker:
    """Record a blocker found in the current session."""
    text = one_line(text, "TEXT")
    entry: Blocker = {"text": text, "at": now_iso()}
    return _record_fact(store, "blockers", entry, "WARN", f'Blocker "{text}"')


Fact = TypeVar("Fact", bound=Mapping[str, object])  # a Decision or a Blocker


def _record_fact(store: StateStore, kind: Literal["decisions", "blockers"], entry: Fact,
                 log_type: str, line: str) -> Fact:
    """Append `entry` to the current session record's `kind` list, with its log line."""
    number = _require_number(store)

    def apply(tx: Tx) -> Fact:
        record = read_session(tx, number)
        if record is None:
            raise UsageError(f"session {number} is not in the state (start one with `git handoff session start`)")
        if kind == "decisions":
            record.setdefault("decisions", []).append(cast(Decision, entry))  # {what, why, at}: decide()
        else:
            record.setdefault("blockers", []).append(entry)
        put_record(tx, session_path(tx, number), record)
        tx.log(log_type, line, session=number)
        return entry

    return store.transact(apply)
