"""The relay's watch, in process: how long a limit is waited out, what `status` says
while it waits, and the document an agent's exit wrote being withdrawn (the session
goes on). The relay with the real CLIs: tests/e2e/test_relay_unattended.py."""

from __future__ import annotations

import datetime
from pathlib import Path

from git_handoff.agent_cli.agent_output import OUTAGE, RATE_LIMIT, USAGE_LIMIT, Limit, limit_in
from git_handoff.core.record_schemas import RelayRecord
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import handoff, relay_watch
from git_handoff.state import this_clone
from git_handoff.state.session_records import waiting_lines
from git_handoff.state.store import StateStore
from tests.support.repo import run

NOW = datetime.datetime(2026, 7, 1, 10, 0, 0, tzinfo=datetime.timezone.utc)


def test_a_printed_reset_time_is_waited_for_else_a_capped_doubling_backoff() -> None:
    at_eight = Limit(USAGE_LIMIT, "2026-07-01T20:00:00Z", "You've hit your session limit · resets 8pm (UTC)")
    assert relay_watch.wait_seconds(at_eight, 1, 60, 1800, NOW) == (10 * 3600 + relay_watch.RESET_MARGIN, True)
    bare = Limit(RATE_LIMIT, None, "API Error: Request rejected (429)")
    assert [relay_watch.wait_seconds(bare, n, 60, 1800, NOW)[0] for n in (1, 2, 3, 6, 40)] == [60, 120, 240, 1800, 1800]
    # printed to the minute within that minute: the reset is now, not the same time tomorrow
    just_past = Limit(USAGE_LIMIT, "2026-07-01T09:59:00Z", "resets 9:59am (UTC)")
    assert relay_watch.wait_seconds(just_past, 1, 60, 1800, NOW) == (relay_watch.RESET_MARGIN, True)
    # a reset long past or absurdly far is not believed: backoff
    for stamp in ("2026-06-30T10:00:00Z", "2027-07-01T10:00:00Z"):
        assert relay_watch.wait_seconds(Limit(OUTAGE, stamp, "x"), 2, 60, 1800, NOW) == (120, False)


def test_spans_read_as_people_say_them() -> None:
    assert [relay_watch.span(s) for s in (0, 45, 90, 12 * 60, 3 * 3600 + 12 * 60, 2 * 3600)] == [
        "0 s", "45 s", "2 min", "12 min", "3 h 12 min", "2 h"]


def test_status_shows_the_wait_with_its_reset_and_what_the_agent_printed() -> None:
    until = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=3, minutes=12, seconds=30))
    record: RelayRecord = {"state": "running", "waiting": {
        "kind": "usage_limit", "since": "2026-07-01T10:00:00Z", "until": until.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "line": "You've hit your session limit · resets 8pm"}}
    (line,) = waiting_lines(record)
    assert line.startswith(f"relay: waiting for the usage limit, resumes at {until.strftime('%Y-%m-%dT%H:%M:%SZ')} "
                           "(in 3 h 12 min)"), line
    assert line.endswith(": You've hit your session limit · resets 8pm")
    assert waiting_lines({"state": "running", "waiting": None}) == []


def test_the_document_an_exit_wrote_is_withdrawn_and_no_other(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("session", "start").rc == 0
    store = StateStore(Repo.discover(repo), session=1)
    since = "2000-01-01T00:00:00Z"
    handoff.write_doc(store, trigger="session-end")
    assert handoff.handed_off(store, 1)
    assert relay_watch.withdraw_exit_doc(store, 1, since) is True
    assert not handoff.handed_off(store, 1)
    assert "handoff" not in (run("session", "show", "1", "--json").json() or {})
    handoff.write_doc(store, trigger="tasks")  # a real handoff stays
    assert relay_watch.withdraw_exit_doc(store, 1, since) is False and handoff.handed_off(store, 1)
    assert this_clone.open_session(store.repo) is not None  # the session itself is untouched


def test_a_reset_printed_to_the_minute_within_that_minute_is_now_not_tomorrow() -> None:
    """claude prints "resets 12:01pm (UTC)" for a reset at 12:01:40; read at 12:01:10 that
    was the same time tomorrow: a 24-hour wait (found by the relay test of the plan limit)."""
    now = datetime.datetime(2026, 7, 1, 12, 1, 10, tzinfo=datetime.timezone.utc)
    found = limit_in("claude", 1, "You've hit your session limit · resets 12:01pm (UTC)", now)
    assert found is not None and found.resets_at == "2026-07-01T12:01:00Z"
    later = limit_in("claude", 1, "You've hit your session limit · resets 11:30am (UTC)", now)
    assert later is not None and later.resets_at == "2026-07-02T11:30:00Z"
