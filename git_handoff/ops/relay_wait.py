"""How long the relay waits out a limit, and what the wait does to the state: the
arithmetic of a wait (the reset time the CLI printed, capped; else a doubling backoff),
its words ("3 h 12 min", "resumes at 15:03"), the claims renewed to outlast it, and the
document an agent's exit wrote withdrawn (the session goes on afterwards). The watch that
decides to wait is git_handoff.ops.relay_watch."""

from __future__ import annotations

import datetime

from git_handoff.agent_cli.agent_output import Limit
from git_handoff.core.errors import HandoffError
from git_handoff.core.model import parse_time
from git_handoff.ops import work
from git_handoff.state import identity
from git_handoff.state.session_records import doc_path, put_record, read_session, session_path
from git_handoff.state.store import StateStore, Tx

RESET_MARGIN = 5.0  # seconds after a printed reset time before the next launch
JUST_PAST = 180.0  # seconds a reset time may lie in the past and still be this one's
MAX_WAIT = 8 * 24 * 3600.0  # a reset time further away than this is not believed: backoff instead
WAIT_CAP = 24 * 3600.0  # the longest wait for a printed reset (relay --max-limit-wait, handoff.maxLimitWait)


def span(seconds: float) -> str:
    """ "45 s", "12 min", "3 h 12 min"."""
    whole = max(0, int(round(seconds)))
    if whole < 60:
        return f"{whole} s"
    minutes = (whole + 30) // 60 if whole < 3600 else whole // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min" if minutes % 60 else f"{minutes // 60} h"


def clock(moment: datetime.datetime, now: datetime.datetime) -> str:
    """A moment as the relay's local time of day, with its date when not today."""
    local = moment.astimezone()
    return local.strftime("%H:%M") if local.date() == now.astimezone().date() else local.strftime("%Y-%m-%d %H:%M")


def wait_seconds(limit: Limit, streak: int, backoff: float, backoff_max: float,
                 now: datetime.datetime, cap: float = WAIT_CAP) -> tuple[float, bool]:
    """How long to wait out `limit`, the `streak`-th in a row, and whether the CLI's reset
    time said so: until that time (and a margin), but never longer than `cap` (see
    beyond_cap); else `backoff` doubled per limit in a row, at most `backoff_max`."""
    if limit.resets_at:
        try:
            left = (parse_time(limit.resets_at) - now).total_seconds()
        except HandoffError:
            left = 0.0
        if -JUST_PAST < left <= MAX_WAIT:  # a reset printed to the minute may be just past: now
            return min(max(left, 0.0) + RESET_MARGIN, cap), True
    return float(min(backoff_max, cap, backoff * 2 ** min(max(streak - 1, 0), 30))), False


def beyond_cap(limit: Limit, now: datetime.datetime, cap: float) -> bool:
    """Did the CLI print a reset further away than `cap` (the wait is then cut to it)?"""
    try:
        return bool(limit.resets_at) and (parse_time(limit.resets_at or "") - now).total_seconds() + RESET_MARGIN > cap
    except HandoffError:
        return False


def renew_claims(store: StateStore, number: int, lease: int | None) -> None:
    """Renew this clone's claims made in session `number`: by `lease` seconds more than
    their own lease (a wait), or (None) back to their own lease."""
    for task in store.snapshot().tasks().values():
        claim = task.claim
        if task.status != "in_progress" or claim.session != number:
            continue
        if not identity.claim_is_mine(store.repo, task):
            continue
        own = claim.lease_seconds
        base = own if own and own > 0 else None
        try:
            if lease is None:
                work.renew(store, task.id, lease=base)
            else:
                work.renew(store, task.id, lease=(base or 30 * 60) + lease)
        except HandoffError:
            continue  # gone or taken meanwhile: recovery's business, not the wait's


def withdraw_exit_doc(store: StateStore, number: int, since: str) -> bool:
    """Remove the document the agent's exit hook (SessionEnd) wrote for session `number`
    at or after `since`: the session is not over, it waits. True when one was removed."""
    def apply(tx: Tx) -> bool:
        path = doc_path(tx, number)
        doc = tx.read_json(path)
        if not isinstance(doc, dict) or doc.get("trigger") != "session-end":
            return False
        if str(doc.get("written_at") or "") < since:
            return False
        tx.put(path, None)
        record = read_session(tx, number)
        if record is not None and record.get("handoff"):
            record.pop("handoff", None)
            put_record(tx, session_path(tx, number), record)
        return True

    return bool(store.transact(apply))
