"""The relay's budgets: how they are set (handoff.budget.*, `relay --budget KEY=VALUE`), bad
values refused before anything runs, and the run's budgets checked before each session.
The budgets against a real agent CLI: tests/e2e/test_budgets.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from git_handoff.core.errors import Negative, UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import budgets, sessions
from git_handoff.state.store import StateStore
from tests.support.repo import git, run, run_exe


def _store(repo: Path) -> StateStore:
    return StateStore(Repo.discover(str(repo)))


def test_config_keys_and_options_set_the_budgets(repo: Path) -> None:
    assert run("init").rc == 0
    git("config", "handoff.budget.tokens", "2M", cwd=repo)
    git("config", "handoff.budget.sessionTime", "30m", cwd=repo)
    git("config", "handoff.budget.claim", "keep", cwd=repo)
    found = budgets.configured(_store(repo).repo, ["task-tokens=50k", "cost=$2.50", "tokens=1000", "sessions=3"])
    assert found.limits == {"tokens": 1000, "session-time": 1800, "task-tokens": 50_000, "cost": 2.5, "sessions": 3}
    assert found.keep_claim
    assert not budgets.configured(_store(repo).repo, ["claim=release"]).keep_claim


@pytest.mark.parametrize(("option", "said"), [
    ("tokens", "use KEY=VALUE"), ("bananas=3", "use KEY=VALUE"), ("tokens=lots", "is not a whole number"),
    ("tokens=0", "must be positive"), ("time=soon", "is not a duration"), ("cost=free", "is not an amount"),
    ("claim=maybe", "claim is release or keep"), ("session-tokens=-5", "must be positive"),
])
def test_a_bad_budget_is_refused(repo: Path, option: str, said: str) -> None:
    assert run("init").rc == 0
    with pytest.raises(UsageError, match=said):
        budgets.configured(_store(repo).repo, [option])


def test_the_relay_refuses_a_bad_budget_with_one_line_and_changes_nothing(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "A", "--id", "a", "--check", "true").rc == 0
    before = git("rev-parse", "refs/harness/state", cwd=repo)
    r = run_exe("relay", "--agent", "true", "--budget", "tokens=many", cwd=repo)
    assert r.rc == 2 and r.err.strip() == "error: --budget tokens: 'many' is not a whole number (50000, 200k, 2M)"
    git("config", "handoff.budget.time", "forever", cwd=repo)
    r = run_exe("relay", "--agent", "true", cwd=repo)
    assert r.rc == 2 and r.err.strip().startswith("error: handoff.budget.time: 'forever' is not a duration")
    assert git("rev-parse", "refs/harness/state", cwd=repo) == before


def test_a_run_sessions_budget_is_checked_before_each_session(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets({"sessions": 2}), tmp_path)
    tracker.check_run()
    tracker.check_run()
    with pytest.raises(Negative, match=r"^relay stopped: the run's sessions budget reached \(2 of 2; --budget "
                                       r"sessions\) after 2 session\(s\)$"):
        tracker.check_run()


def test_a_run_time_budget_is_checked_before_each_session(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets({"time": 60}), tmp_path)
    tracker.check_run()
    tracker.started = time.monotonic() - 61
    with pytest.raises(Negative, match=r"the run's time budget reached \(61s of 60s"):
        tracker.check_run()


def test_a_run_token_budget_counts_the_ended_sessions(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0
    assert run("session", "start").rc == 0
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {"id": "m", "usage": {
        "input_tokens": 900, "output_tokens": 100}}}) + "\n")
    payload = {"session_id": "s", "cwd": str(repo), "transcript_path": str(transcript)}
    assert run("hook", "claude-stop", stdin=json.dumps(payload)).rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets({"tokens": 1000}), tmp_path)
    tracker.sessions = 1
    assert tracker.over(1) == "the run's tokens budget reached (1000 of 1000; --budget tokens)"
    assert run("session", "end").rc == 0
    tracker.run_over = None
    tracker.session_ended(1)
    with pytest.raises(Negative, match="the run's tokens budget reached"):
        tracker.check_run()


def test_the_cost_an_agent_printed_is_read_from_its_output(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets(), tmp_path)
    (tmp_path / "session-3.log").write_text('noise\n{"type": "result", "total_cost_usd": 0.25}\n')
    assert tracker.cost_of(3) == 0.25
    assert tracker.cost_of(4) is None


def test_a_limit_wait_that_would_pass_the_run_time_budget_is_named(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets({"time": 3600}), tmp_path)
    assert tracker.wait_passes_run(600) is None
    said = tracker.wait_passes_run(7200)
    assert said is not None and said.startswith("the run's time budget would be reached while waiting 7200s "
                                                "for a limit")
    assert said.endswith("of 3600s; --budget time)")
    assert budgets.Tracker(_store(repo), budgets.Budgets({"tokens": 10}), tmp_path).wait_passes_run(1e9) is None


def test_a_task_over_its_budget_is_set_aside_and_reopen_gives_it_back(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "A", "--id", "t1", "--check", "true").rc == 0
    assert run("session", "start").rc == 0
    assert run("claim", "t1").rc == 0
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {"id": "m", "usage": {
        "input_tokens": 900, "output_tokens": 100}}}) + "\n")
    payload = {"session_id": "s", "cwd": str(repo), "transcript_path": str(transcript)}
    assert run("hook", "claude-stop", stdin=json.dumps(payload)).rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets({"task-tokens": 500}), tmp_path)
    tracker.check_run()
    reason = tracker.over(1)
    assert reason == "task t1: a task's tokens budget reached (1000 of 500; --budget task-tokens)"
    tracker.ended = (1, reason)  # as end_session leaves it, its agent ended
    assert run("session", "end").rc == 0
    tracker.session_ended(1)
    task = run("show", "t1", "--json").json()
    assert task["status"] == "failed" and task["tokens"] == 1000
    assert task["error_log"][-1].startswith(f"[BUDGET] {reason} at ")
    assert run("reopen", "t1", "--reason", "budget raised").rc == 0
    assert run("show", "t1", "--json").json()["status"] == "pending"
    assert run("claim", "t1").rc == 0  # claimable again, its attempts notwithstanding


def test_a_limit_waited_out_is_not_the_session_time(repo: Path, tmp_path: Path) -> None:
    """A session that waited an hour for a limit is not ended by a session-time budget of a
    minute as soon as its agent is launched again."""
    assert run("init").rc == 0
    assert run("session", "start").rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets({"session-time": 60}), tmp_path)
    tracker.check_run()
    tracker.session_started -= 50  # the agent ran 50 s
    tracker.waited(3600)
    tracker.session_started -= 3600  # the wait
    assert tracker.over(1) is None
    tracker.session_started -= 11
    tracker.checked_at = 0.0
    assert tracker.over(1) == "the session's time budget reached (61s of 60s; --budget session-time)"


# -- a task's cost and its held time (issue 42) ------------------------------------------------------


def test_task_cost_and_task_time_budgets_are_set_like_the_others(repo: Path) -> None:
    assert run("init").rc == 0
    git("config", "handoff.budget.taskTime", "2h", cwd=repo)
    found = budgets.configured(_store(repo).repo, ["task-cost=$0.50"])
    assert found.limits == {"task-time": 7200, "task-cost": 0.5}
    with pytest.raises(UsageError, match="is not an amount"):
        budgets.configured(_store(repo).repo, ["task-cost=cheap"])
    with pytest.raises(UsageError, match="is not a duration"):
        budgets.configured(_store(repo).repo, ["task-time=long"])
    git("config", "handoff.budget.sessionCost", "1.25", cwd=repo)
    assert budgets.configured(_store(repo).repo).limits == {"session-cost": 1.25, "task-time": 7200}
    with pytest.raises(UsageError, match="is not an amount"):
        budgets.configured(_store(repo).repo, ["session-cost=lots"])


def test_a_task_over_its_cost_when_the_agent_exits_is_set_aside(repo: Path, tmp_path: Path) -> None:
    """The cost is printed as the agent exits (Claude Code's JSON result): once the session
    ended, its cost is shared among its tasks, and a task still held over its cost budget is
    set aside, logged BUDGET, as one found while the agent ran."""
    assert run("init").rc == 0
    for task_id in ("t1", "t2"):
        assert run("add", task_id.upper(), "--id", task_id, "--check", "true").rc == 0
    assert run("session", "start").rc == 0
    assert run("claim", "t1").rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets({"task-cost": 0.25}), tmp_path)
    tracker.check_run()
    assert tracker.over(1) is None  # nothing printed yet
    sessions.end(_store(repo), cost=0.3)
    tracker.session_ended(1)
    task = run("show", "t1", "--json").json()
    assert task["cost_micro_usd"] == 300_000 and task["status"] == "failed"
    reason = "task t1: a task's cost budget reached ($0.30 of $0.25; --budget task-cost)"
    assert task["error_log"][-1].startswith(f"[BUDGET] {reason} at ")
    assert run("log").out.count("[BUDGET]") == 2  # the session's line and the task's
    assert run("session", "show", "1", "--json").json()["budget"] == reason
    assert "cost:          $0.3000" in run("show", "t1").out


def test_a_sessions_cost_is_shared_among_its_tasks(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0
    for task_id in ("t1", "t2", "t3"):
        assert run("add", task_id.upper(), "--id", task_id, "--check", "true").rc == 0
    assert run("session", "start").rc == 0
    assert run("claim", "t1").rc == 0
    assert run("done", "t1").rc == 0
    assert run("claim", "t2").rc == 0
    sessions.end(_store(repo), cost=0.000003)
    shown = {t: run("show", t, "--json").json().get("cost_micro_usd") for t in ("t1", "t2", "t3")}
    assert shown == {"t1": 2, "t2": 1, "t3": None}  # the remainder to the first, as tokens


def test_a_tasks_held_time_adds_its_claims_across_sessions(repo: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """task-time: the wall time the task was claimed, over all its claims (here a claim of
    100 s released, then one of 50 s so far, in the next session)."""
    assert run("init").rc == 0
    assert run("add", "A", "--id", "t1", "--check", "true").rc == 0
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-12-07T10:00:00Z")
    assert run("session", "start").rc == 0
    assert run("claim", "t1").rc == 0
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-12-07T10:01:40Z")
    assert run("release", "t1").rc == 0
    assert run("show", "t1", "--json").json()["held_seconds"] == 100
    assert run("session", "end").rc == 0
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-12-07T11:00:00Z")
    assert run("session", "start").rc == 0
    assert run("claim", "t1").rc == 0
    tracker = budgets.Tracker(_store(repo), budgets.Budgets({"task-time": 150}), tmp_path)
    tracker.check_run()
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-12-07T11:00:49Z")
    assert tracker.over(2) is None  # 149 s
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-12-07T11:00:50Z")
    tracker.checked_at = 0.0
    reason = tracker.over(2)
    assert reason == "task t1: a task's time budget reached (150s of 150s; --budget task-time)"
    assert tracker.over_tasks == ["t1"]
    assert run("done", "t1").rc == 0
    assert run("show", "t1", "--json").json()["held_seconds"] == 150  # a claim's end adds it
