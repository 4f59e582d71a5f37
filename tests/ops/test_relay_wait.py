"""How long the relay waits out a limit (relay_wait): the reset the CLI printed, capped;
else a doubling backoff; its words; the document an agent's exit wrote withdrawn (the
session goes on). The watch that decides to wait: tests/ops/test_relay_watch.py."""

from __future__ import annotations

import datetime
from pathlib import Path

from git_handoff.agent_cli.agent_output import OUTAGE, RATE_LIMIT, USAGE_LIMIT, Limit
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import handoff, relay_wait
from git_handoff.state import this_clone
from git_handoff.state.store import StateStore
from tests.support.repo import run

NOW = datetime.datetime(2026, 7, 1, 10, 0, 0, tzinfo=datetime.UTC)


def test_a_printed_reset_time_is_waited_for_else_a_capped_doubling_backoff() -> None:
    at_eight = Limit(USAGE_LIMIT, "2026-07-01T20:00:00Z", "You've hit your session limit · resets 8pm (UTC)")
    assert relay_wait.wait_seconds(at_eight, 1, 60, 1800, NOW) == (10 * 3600 + relay_wait.RESET_MARGIN, True)
    bare = Limit(RATE_LIMIT, None, "API Error: Request rejected (429)")
    assert [relay_wait.wait_seconds(bare, n, 60, 1800, NOW)[0] for n in (1, 2, 3, 6, 40)] == [60, 120, 240, 1800, 1800]
    # printed to the minute within that minute: the reset is now, not the same time tomorrow
    just_past = Limit(USAGE_LIMIT, "2026-07-01T09:59:00Z", "resets 9:59am (UTC)")
    assert relay_wait.wait_seconds(just_past, 1, 60, 1800, NOW) == (relay_wait.RESET_MARGIN, True)
    # a reset long past or absurdly far is not believed: backoff
    for stamp in ("2026-06-30T10:00:00Z", "2027-07-01T10:00:00Z"):
        assert relay_wait.wait_seconds(Limit(OUTAGE, stamp, "x"), 2, 60, 1800, NOW) == (120, False)


def test_spans_read_as_people_say_them() -> None:
    assert [relay_wait.span(s) for s in (0, 45, 90, 12 * 60, 3 * 3600 + 12 * 60, 2 * 3600)] == [
        "0 s", "45 s", "2 min", "12 min", "3 h 12 min", "2 h"]


def test_the_document_an_exit_wrote_is_withdrawn_and_no_other(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("session", "start").rc == 0
    store = StateStore(Repo.discover(repo), session=1)
    since = "2000-01-01T00:00:00Z"
    handoff.write_doc(store, trigger="session-end")
    assert handoff.handed_off(store, 1)
    assert relay_wait.withdraw_exit_doc(store, 1, since) is True
    assert not handoff.handed_off(store, 1)
    assert "handoff" not in (run("session", "show", "1", "--json").json() or {})
    handoff.write_doc(store, trigger="tasks")  # a real handoff stays
    assert relay_wait.withdraw_exit_doc(store, 1, since) is False and handoff.handed_off(store, 1)
    assert this_clone.open_session(store.repo) is not None  # the session itself is untouched


def test_a_reset_further_than_the_cap_is_waited_for_the_cap_and_said_so() -> None:
    weekly = Limit(USAGE_LIMIT, "2026-07-08T02:02:00Z", "You've hit your weekly limit · resets Jul 8, 2:02am (UTC)")
    assert relay_wait.wait_seconds(weekly, 1, 60, 1800, NOW) == (relay_wait.WAIT_CAP, True)
    assert relay_wait.beyond_cap(weekly, NOW, relay_wait.WAIT_CAP)
    assert relay_wait.wait_seconds(weekly, 1, 60, 1800, NOW, cap=3.0) == (3.0, True)
    at_eight = Limit(USAGE_LIMIT, "2026-07-01T20:00:00Z", "resets 8pm (UTC)")
    assert not relay_wait.beyond_cap(at_eight, NOW, relay_wait.WAIT_CAP)
    bare = Limit(RATE_LIMIT, None, "API Error: Request rejected (429)")
    assert relay_wait.wait_seconds(bare, 6, 60, 1800, NOW, cap=100.0) == (100.0, False)  # the backoff too
    assert not relay_wait.beyond_cap(bare, NOW, 100.0)
