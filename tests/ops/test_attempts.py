"""git_handoff/ops/attempts.py: `fail`'s plan (plan_fail, FailPlan), pure, one test per decision.

The plan's execution (saving, recording, rolling back) is tested on real repositories in
tests/ops/test_work.py and tests/ops/test_rollback.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.core.model import Task
from git_handoff.infra.task_commands import RunResult
from git_handoff.ops.attempts import NO_LOCAL_CLAIM, FailPlan, plan_fail
from git_handoff.ops.payloads import FailOutcome, SavedAttempt

BASE = "a" * 40
SNAP = "b" * 40


def plan(**facts: object) -> FailPlan:
    """plan_fail of a claim this worktree journalled, its base a commit, no snapshot; `facts` change that."""
    given: dict[str, object] = {
        "reason": "broke it", "category": "TASK_EXEC", "keep_worktree": False, "force": False,
        "end_operation": None, "base": BASE, "base_is_commit": True, "journalled": True,
        "snapshot_name": None, "snapshot": None,
    }
    given.update(facts)
    return plan_fail(**given)  # type: ignore[arg-type]  # the facts' types are plan_fail's


def decisions(p: FailPlan) -> tuple[bool, bool, bool, bool]:
    return p.saves, p.rolls_back, p.snapshot_lost, p.unjournalled


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        ({}, (True, True, False, False)),  # the plain case: saved, rolled back
        ({"snapshot_name": SNAP, "snapshot": SNAP}, (True, True, False, False)),
        ({"keep_worktree": True}, (True, False, False, False)),
        ({"keep_worktree": True, "journalled": False}, (True, False, False, False)),  # kept: nothing to warn of
        ({"base_is_commit": False}, (False, False, False, False)),
        ({"base": None, "base_is_commit": False}, (False, False, False, False)),
        ({"base": "", "base_is_commit": True}, (False, False, False, False)),  # an empty base is none
        ({"base_is_commit": False, "journalled": False}, (False, False, False, False)),
        ({"base_is_commit": False, "snapshot_name": SNAP}, (False, False, False, False)),  # no base: not "lost"
        ({"snapshot_name": SNAP}, (True, False, True, False)),  # named, not there
        ({"snapshot_name": SNAP, "keep_worktree": True}, (True, False, True, False)),
        ({"snapshot_name": ""}, (True, True, False, False)),  # an empty name names nothing
        ({"journalled": False}, (True, False, False, True)),
    ],
)
def test_what_fail_does_follows_from_what_it_found(facts: dict[str, object], expected: tuple[bool, ...]) -> None:
    """(saves, rolls_back, snapshot_lost, unjournalled) for each combination of the facts."""
    assert decisions(plan(**facts)) == expected


@pytest.mark.parametrize(
    ("force", "end_operation", "ends"),
    [(False, None, False), (True, None, True), (True, False, False), (False, True, True)],
)
def test_an_operation_in_progress_is_ended_with_force_unless_told(force: bool, end_operation: bool | None,
                                                                  ends: bool) -> None:
    assert plan(force=force, end_operation=end_operation).ends_operation is ends


def test_the_reason_becomes_one_printable_line() -> None:
    p = plan(reason="  exit 1:\n\x1b[31mFAILED\x1b[0m  test_x\n")
    assert p.reason == "exit 1: FAILED test_x"
    assert (p.category, p.base, p.snapshot, p.snapshot_name) == ("TASK_EXEC", BASE, None, None)


@pytest.mark.parametrize("reason", ["", "   ", "\n\t"])
def test_an_empty_reason_is_refused(reason: str) -> None:
    with pytest.raises(UsageError, match="fail needs a --reason"):
        plan(reason=reason)


def test_an_unknown_category_is_refused_before_the_reason() -> None:
    with pytest.raises(UsageError, match="invalid category 'NOPE'"):
        plan(category="NOPE", reason="")


def test_the_plan_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan().rolls_back = False  # type: ignore[misc]  # a frozen field: the assignment must fail


@pytest.mark.parametrize(
    ("saves", "counted", "max_attempts", "after"),
    [(True, 0, 3, 1), (True, 4, 3, 5), (False, 0, 3, 3), (False, 1, 3, 3), (False, 5, 3, 6)],
)
def test_a_saved_attempt_counts_once_an_unsaved_one_uses_them_all(saves: bool, counted: int, max_attempts: int,
                                                                  after: int) -> None:
    p = plan() if saves else plan(base_is_commit=False)
    assert p.attempts(Task(id="t1", title="t", attempts=counted, max_attempts=max_attempts)) == after


def test_the_log_of_a_rollback_names_the_base_the_snapshot_and_the_operation_ended() -> None:
    p = plan(snapshot_name=SNAP, snapshot=SNAP)
    assert p.log_lines(None) == [
        ("ERROR", "broke it", "TASK_EXEC"),
        ("ROLLBACK", "git reset --hard aaaaaaa; work tree, index and untracked files as at the claim (bbbbbbb)", None),
    ]
    assert p.log_lines("rebase")[1] == ("ROLLBACK", "git rebase ended (--force)", None)
    assert plan().log_lines(None)[1:] == [("ROLLBACK", "git reset --hard aaaaaaa", None)]


@pytest.mark.parametrize(
    ("facts", "second"),
    [
        ({"base_is_commit": False}, ("ERROR", f"started_at_commit {BASE} is missing from the repository: "
                                              "no rollback, attempts set to max", "TASK_EXEC")),
        ({"base": None, "base_is_commit": False}, ("ERROR", "started_at_commit (none) is missing from the "
                                                            "repository: no rollback, attempts set to max",
                                                            "TASK_EXEC")),
        ({"snapshot_name": SNAP}, ("ERROR", "the claim's snapshot bbbbbbb is missing: no rollback "
                                            "(the work tree is as the attempt left it)", "TASK_EXEC")),
        ({"journalled": False}, ("WARN", NO_LOCAL_CLAIM, None)),
    ],
)
def test_the_log_says_why_there_is_no_rollback(facts: dict[str, object], second: tuple[str, str, str | None]) -> None:
    assert plan(**facts).log_lines("rebase") == [("ERROR", "broke it", "TASK_EXEC"), second]


def test_a_kept_worktree_logs_the_reason_only() -> None:
    assert plan(keep_worktree=True).log_lines(None) == [("ERROR", "broke it", "TASK_EXEC")]


def test_the_outcome_reports_the_plan_the_saved_attempt_and_the_check() -> None:
    task = Task(id="t1", title="t", status="failed", attempts=1)
    saved: SavedAttempt = {"attempt": 2, "ref": "refs/harness/attempts/t1/2", "commit": "c" * 40,
                           "files": [{"status": "A", "path": "x"}], "base": BASE, "head": BASE,
                           "local_only": False, "secret_files": {}}
    check = RunResult(ok=False, category="TEST_FAIL", exit_code=1, timed_out=False, output_tail="no")
    out = plan(snapshot_name=SNAP, snapshot=SNAP).outcome(task, saved, "merge", check)
    assert out["task"]["id"] == "t1" and out["task"]["status"] == "failed"
    assert {k: v for k, v in out.items() if k != "task"} == {
        "category": "TASK_EXEC", "reason": "broke it", "attempt": 2, "attempt_ref": "refs/harness/attempts/t1/2",
        "attempt_commit": "c" * 40, "attempt_local_only": False, "secret_files": {},
        "files": [{"status": "A", "path": "x"}], "base": BASE, "rolled_back": True,
        "snapshot": SNAP, "snapshot_missing": False, "no_local_claim": False, "operation_ended": "merge",
        "cleanup": None, "validation": check.to_json(),
    }


def test_the_outcome_of_an_unsaved_attempt_names_none() -> None:
    out = plan(base="0" * 40, base_is_commit=False).outcome(Task(id="t1", title="t"), None, None, None)
    assert (out["attempt"], out["attempt_ref"], out["attempt_commit"], out["files"]) == (None, None, None, [])
    assert (out["base"], out["rolled_back"], out["validation"], out["cleanup"]) == ("0" * 40, False, None, None)
    assert list(out) == list(FailOutcome.__annotations__)
