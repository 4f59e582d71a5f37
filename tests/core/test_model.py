"""The task model (git_handoff.core.model): times and durations, ids, the field checks
of what a user types, printable text, and the Task and its claim."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from git_handoff.core import model
from git_handoff.core.errors import UsageError
from git_handoff.core.model import Task


def test_parse_duration_reads_seconds_minutes_hours() -> None:
    assert [model.parse_duration(t) for t in ("90s", " 30m ", "2h")] == [90, 1800, 7200]
    for bad in ("0s", "5", "5d", "-1m", "1.5h", "9999999999999s"):
        with pytest.raises(UsageError, match="invalid duration"):
            model.parse_duration(bad)


def test_times_read_and_written_in_utc() -> None:
    moment = model.parse_time("2026-01-01T02:00:00+02:00")
    assert model.iso(moment) == "2026-01-01T00:00:00Z"
    assert model.parse_time("2026-01-01T00:00:00").tzinfo == UTC
    with pytest.raises(UsageError, match="not an ISO-8601 time: 'soon'"):
        model.parse_time("soon")
    assert model.epoch_iso(0) == "1970-01-01T00:00:00Z"
    assert model.epoch_iso(10**15) is None


def test_the_pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-01-01T00:00:01Z")
    assert model.now() == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert model.now_iso() == "2026-01-01T00:00:01Z"
    assert model.now_ms() == 1_767_225_601_000


def test_check_id_refuses_ids_outside_the_rule() -> None:
    for good in ("a", "T-1.x_y", "9" * 64):
        assert model.check_id(good) == good
    for bad in ("", "-a", "a..b", "a.lock", "a/b", "x" * 65, "é"):
        with pytest.raises(UsageError, match="invalid task id"):
            model.check_id(bad)


def test_new_ids_are_valid_and_sort_by_creation() -> None:
    ids = [model.new_id() for _ in range(50)]
    assert all(model.check_id(i) for i in ids)
    assert [i[:11] for i in ids] == sorted(i[:11] for i in ids) and len(set(ids)) == 50
    orders = [model.order_key_now() for _ in range(50)]
    assert orders == sorted(set(orders))


def test_printable_makes_one_line_without_escapes() -> None:
    assert model.printable("\x1b[31mred\x1b[0m\n  next\tline") == "red next line"
    assert model.printable("bell\x07") == "bell\\x07"


def test_the_checks_of_typed_fields() -> None:
    assert model.whole_number("12", "n", 1) == 12
    assert model.check_priority("P0") == "P0" and model.check_max_attempts(3) == 3
    assert model.check_timeout("60") == 60 and model.check_title(" t ") == " t "
    assert model.optional_text(None, "x") is None
    cases: list[tuple[Callable[[], object], str]] = [(lambda: model.whole_number(True, "n", 0),
                                                      "n must be a whole number"),
                          (lambda: model.whole_number(0, "n", 1), "n must be at least 1, not 0"),
                          (lambda: model.check_priority("P9", "w"), "w: invalid priority 'P9'"),
                          (lambda: model.check_max_attempts(0), "max_attempts must be at least 1"),
                          (lambda: model.check_title("a\nb"), "a task title is one line"),
                          (lambda: model.check_title(""), "a task needs a non-empty title"),
                          (lambda: model.check_category("NOPE"), "invalid category 'NOPE'"),
                          (lambda: model.optional_text(5, "x"), "x must be text")]
    for call, message in cases:
        with pytest.raises(UsageError, match=message):
            call()


def test_a_task_evolves_and_keeps_unknown_fields_in_extra() -> None:
    task = Task(id="a", title="A", extra={"note": 1})
    moved = task.evolve(status="failed", attempts=3)
    assert (moved.status, moved.attempts, moved.extra, task.status) == ("failed", 3, {"note": 1}, "pending")
    with pytest.raises(TypeError, match="no field 'nope'"):
        task.evolve(nope=1)
    assert task.with_extra(note=None, other=2).extra == {"other": 2}
    assert task.get("note") == 1 and task.get("none", "d") == "d"


def test_failed_for_good_and_the_claim_a_task_records() -> None:
    assert Task(id="a", title="A", status="failed", attempts=3, max_attempts=3).failed_for_good
    assert not Task(id="a", title="A", status="failed", attempts=1, max_attempts=3).failed_for_good
    assert Task(id="a", title="A", status="failed", error_log=("[DEPENDENCY] b failed",)).failed_for_good
    claimed = Task(id="a", title="A", extra={"worktree": "/w", "branch": "main"})
    assert claimed.claim.worktree == "/w" and Task(id="a", title="A").claim.worktree is None
