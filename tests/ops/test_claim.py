"""Claims across worktrees: modes, leases, takeover, and a storm of concurrent claimers."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from git_handoff.core.errors import Contention, Negative, UsageError
from git_handoff.core.model import Task
from git_handoff.ops import claim_plan
from tests.support.repo import Result, git, run, state_head

ROOT = Path(__file__).resolve().parents[2]


def handoff(*args: str, cwd: Path, rc: int = 0) -> Result:
    result = run(*args, cwd=cwd)
    assert result.rc == rc, f"git handoff {' '.join(args)}: rc={result.rc}\nout={result.out}\nerr={result.err}"
    return result


def add_worktree(repo: Path, name: str) -> Path:
    path = repo.parent / name
    git("worktree", "add", "-q", "-b", name, str(path), cwd=repo)
    return path


@pytest.fixture
def two(repo: Path) -> tuple[Path, Path]:
    handoff("init", cwd=repo)
    for n in (1, 2):
        handoff("add", f"Task {n}", "--id", f"t{n}", "--check", "true", cwd=repo)
    return repo, add_worktree(repo, "wt-b")


def test_exclusive_mode_refuses_a_second_worktree(two: tuple[Path, Path]) -> None:
    a, b = two
    handoff("claim", "--worker", "alice", cwd=a)
    before = state_head(a)
    result = handoff("claim", cwd=b, rc=3)
    assert "exclusive mode" in result.err and "t1" in result.err and "alice" in result.err and str(a) in result.err
    assert state_head(a) == before
    handoff("done", "t1", cwd=a)
    assert handoff("claim", "--json", cwd=b).json()["id"] == "t2"


def test_exclusive_mode_can_be_forced(two: tuple[Path, Path]) -> None:
    a, b = two
    handoff("claim", cwd=a)
    assert handoff("claim", "--force", "--json", cwd=b).json()["id"] == "t2"


def test_concurrent_mode_allows_one_claim_per_worktree(two: tuple[Path, Path]) -> None:
    a, b = two
    handoff("init", "--mode", "concurrent", cwd=a)
    assert handoff("claim", "--json", cwd=a).json()["id"] == "t1"
    assert handoff("claim", "--json", cwd=b).json()["id"] == "t2"
    assert "already holds task t2" in handoff("claim", cwd=b, rc=2).err


def test_claiming_a_task_another_worktree_holds_is_contention(two: tuple[Path, Path]) -> None:
    a, b = two
    handoff("init", "--mode", "concurrent", cwd=a)
    handoff("claim", "t1", "--worker", "alice", cwd=a)
    before = state_head(a)
    result = handoff("claim", "t1", cwd=b, rc=3)
    assert "claimed by alice" in result.err
    assert state_head(a) == before


def test_another_worktrees_claim_needs_force(two: tuple[Path, Path]) -> None:
    a, b = two
    handoff("claim", "t1", "--worker", "alice", cwd=a)
    before = state_head(a)
    for args in (("done", "t1"), ("fail", "t1", "--reason", "x"), ("checkpoint", "t1", "m"),
                 ("renew", "t1"), ("release", "t1")):
        assert "claimed by alice" in handoff(*args, cwd=b, rc=2).err
    assert state_head(a) == before
    handoff("checkpoint", "t1", "taking a look", "--force", cwd=b)


def test_force_done_of_any_in_progress_task(two: tuple[Path, Path]) -> None:
    a, b = two
    handoff("claim", "t1", "--worker", "alice", cwd=a)
    assert handoff("done", "t1", "--force", "--json", cwd=b).json()["status"] == "completed"


@pytest.mark.parametrize("mode", ["exclusive", "concurrent"])
def test_expired_lease_is_taken_over_by_a_second_worker(two: tuple[Path, Path], mode: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = two
    handoff("init", "--mode", mode, cwd=a)
    handoff("edit", "t2", "--after", "t1", cwd=a)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    handoff("claim", "--worker", "alice", "--lease", "60s", cwd=a)
    handoff("claim", cwd=b, rc=3 if mode == "exclusive" else 1)  # lease still valid
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:01:01Z")
    taken = handoff("claim", "--worker", "bob", "--json", cwd=b).json()
    assert taken["id"] == "t1" and taken["claimed_by"] == "bob"
    assert taken["attempts"] == 1
    assert taken["error_log"] == ["[SESSION_TIMEOUT] Lease expired (claimed_by=alice)"]
    assert taken["worktree"] == str(b)
    lines = handoff("log", cwd=a).out.splitlines()
    assert "ERROR [t1] [SESSION_TIMEOUT] Lease expired (claimed_by=alice)" in lines[-2]
    assert "Starting [t1]" in lines[-1]
    # the first worker lost the claim
    assert "claimed by bob" in handoff("done", "t1", cwd=a, rc=2).err
    handoff("done", "t1", cwd=b)


def test_expired_lease_can_still_be_renewed_by_its_holder(two: tuple[Path, Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    a, _ = two
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    handoff("claim", "--lease", "60s", cwd=a)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:05:00Z")
    assert handoff("renew", "t1", "--json", cwd=a).json()["lease_expires_at"] == "2026-07-01T10:06:00Z"


WORKER = textwrap.dedent(
    """
    import sys
    from git_handoff.core.errors import Contention, Negative
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.ops import claim, work
    from git_handoff.state.store import StateStore

    store = StateStore(Repo.discover(sys.argv[1]))
    done = []
    while True:
        try:
            task = claim.claim(store, worker=sys.argv[2])
        except Negative:
            break
        except Contention:
            continue
        work.done(store, task.id)
        done.append(task.id)
    print(" ".join(done))
    """
)


@pytest.mark.slow  # several processes racing: the slow layer
def test_claim_storm_five_worktrees_forty_tasks(repo: Path) -> None:
    handoff("init", "--mode", "concurrent", cwd=repo)
    plan = "".join(f'[[task]]\nid = "s{n:02d}"\ntitle = "Storm {n}"\ncheck = "true"\n\n' for n in range(40))
    (repo.parent / "plan.toml").write_text(plan)
    handoff("import", str(repo.parent / "plan.toml"), cwd=repo)
    trees = [repo] + [add_worktree(repo, f"storm-{n}") for n in range(1, 5)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(tree), f"w{n}"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n, tree in enumerate(trees)
    ]
    finished = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        finished.extend(out.split())
    assert sorted(finished) == [f"s{n:02d}" for n in range(40)]
    lines = handoff("log", cwd=repo).out.splitlines()
    starting = collections.Counter(line.split("[")[3].split("]")[0] for line in lines if " Starting [" in line)
    assert len([line for line in lines if " Starting [" in line]) == 40
    assert set(starting.values()) == {1} and len(starting) == 40
    assert len([line for line in lines if " Completed [" in line]) == 40
    listed = handoff("list", "--json", cwd=repo).json()
    assert {t["status"] for t in listed} == {"completed"}
    assert all(t["attempts"] == 0 for t in listed)


# -- the plan (pure): which task, or which refusal --------------------------------------------
#
# plan_claim is called with plain tasks, as selection.prepare returns them: no repository, no
# transaction. Each refusal carries the error class (hence the exit code) and the message the
# user reads; `record` says whether what the preparation changed is written before it.

NOW = "2026-07-01T10:00:00Z"


def _task(tid: str, **fields: Any) -> Task:
    return Task(id=tid, title=f"Task {tid}", created_at=NOW, **fields)


def _held(tid: str, by: str = "alice", where: str = "/wt-a") -> Task:
    """A claim of an hour written at NOW (a lease counts from the record's write time)."""
    return _task(tid, status="in_progress", claimed_by=by, lease_expires_at="2026-07-01T11:00:00Z",
                 updated_at=NOW, extra={"worktree": where, "lease_seconds": 3600})


def _plan(tasks: list[Task], task_id: str | None = None, **kw: Any) -> claim_plan.Pick | claim_plan.Refusal:
    args: dict[str, Any] = {"here": frozenset(), "mode": "concurrent", "force": False}
    args.update(kw)
    return claim_plan.plan_claim({t.id: t for t in tasks}, task_id=task_id, **args)


def _refusal(plan: claim_plan.Pick | claim_plan.Refusal) -> claim_plan.Refusal:
    assert isinstance(plan, claim_plan.Refusal), plan
    return plan


def _pool(plan: claim_plan.Pick | claim_plan.Refusal) -> list[str]:
    assert isinstance(plan, claim_plan.Pick), plan
    return [t.id for t in plan.pool]


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_HANDOFF_NOW", NOW)


def test_plan_selection_takes_the_best_priority_then_creation_order() -> None:
    tasks = [_task("a", priority="P2"), _task("b"), _task("c", priority="P0"), _task("d", priority="P0")]
    assert _pool(_plan(tasks)) == ["c"]


def test_plan_selection_skips_taken_waiting_completed_and_failed_for_good_tasks() -> None:
    tasks = [_task("done", status="completed"), _task("wait", depends_on=("open",)), _task("open"),
             _task("gone", status="failed", attempts=3, max_attempts=3), _task("retry", status="failed", attempts=1),
             _task("fresh", priority="P2")]
    assert _pool(_plan(tasks, taken=frozenset({"open"}))) == ["fresh"]  # fresh before retried at any priority
    assert _pool(_plan(tasks, taken=frozenset({"open", "fresh"}))) == ["retry"]


def test_plan_selection_with_nothing_eligible_is_an_empty_pick() -> None:
    assert _plan([_task("done", status="completed"), _task("wait", depends_on=("done2",))]) == claim_plan.Pick(())
    assert _plan([]) == claim_plan.Pick(())


def test_plan_selection_among_clones_offers_this_clones_share_of_the_best_priority() -> None:
    tasks = [_task(f"s{n}", priority="P0") for n in range(12)] + [_task("later", priority="P2")]
    shares = [_pool(_plan(tasks, slot=(rank, 3))) for rank in range(3)]
    for rank, share in enumerate(shares):
        assert share and all(claim_plan._slot_of(tid, 3) == rank for tid in share)
    assert sorted(sum(shares, [])) == sorted(t.id for t in tasks[:12])  # each P0 in exactly one share
    alone = [_task("only", priority="P0"), _task("later", priority="P2")]
    other_rank = 1 - claim_plan._slot_of("only", 2)
    assert _pool(_plan(alone, slot=(other_rank, 2))) == ["only"]  # no task of its slot: the whole best tier


def test_plan_named_task_is_picked_alone() -> None:
    assert _pool(_plan([_task("a", priority="P0"), _task("b")], "b")) == ["b"]


def test_plan_refuses_a_task_that_does_not_exist() -> None:
    refusal = _refusal(_plan([_task("a")], "zz"))
    assert refusal == claim_plan.Refusal(UsageError, "no task 'zz' (see `git handoff list`)")


def test_plan_refuses_a_completed_task() -> None:
    refusal = _refusal(_plan([_task("a", status="completed")], "a"))
    assert refusal.error is UsageError and "already completed" in refusal.message and not refusal.record


def test_plan_refuses_a_task_in_progress_elsewhere_as_contention(pinned: None) -> None:
    refusal = _refusal(_plan([_held("a", by="bob", where="/wt-b")], "a"))
    assert refusal.error is Contention
    assert refusal.message == ("task a is in progress, claimed by bob in /wt-b (lease until 2026-07-01T11:00:00Z); "
                               "try another task or wait for the lease to expire")


def test_plan_refuses_a_task_claimed_on_the_remote_as_contention() -> None:
    refusal = _refusal(_plan([_task("a")], "a", taken=frozenset({"a"})))
    assert refusal.error is Contention and "claimed on the remote by another machine" in refusal.message


def test_plan_refuses_a_task_failed_for_good() -> None:
    task = _task("a", status="failed", attempts=3, max_attempts=3, error_log=("[CHECK] boom",))
    refusal = _refusal(_plan([task], "a"))
    assert refusal.error is UsageError
    assert refusal.message.startswith("task a failed for good (3/3 attempts; [CHECK] boom)")
    assert "--max-attempts N" in refusal.message


def test_plan_refuses_a_waiting_task_as_negative_and_records_the_preparation() -> None:
    tasks = [_task("dep"), _task("done", status="completed"), _task("a", depends_on=("done", "dep", "ghost"))]
    refusal = _refusal(_plan(tasks, "a"))
    assert refusal == claim_plan.Refusal(Negative, "task a is not ready: it waits on dep, ghost", record=True)


def test_plan_refuses_a_second_claim_in_the_same_worktree(pinned: None) -> None:
    tasks = [_held("a"), _task("b")]
    refusal = _refusal(_plan(tasks, here=frozenset({"a"})))
    assert refusal.error is UsageError and "this worktree already holds task a (in progress)" in refusal.message
    assert "(--force overrides)" in refusal.message
    renew = _refusal(_plan(tasks, "a", here=frozenset({"a"})))
    assert renew == claim_plan.Refusal(
        UsageError, "task a is already claimed by this worktree (use `git handoff renew a`)")
    assert _pool(_plan(tasks, here=frozenset({"a"}), force=True, mode=None)) == ["b"]


def test_plan_refuses_a_claim_beside_another_workers_claim_in_this_worktree(
        pinned: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFF_WORKER", "carol")
    refusal = _refusal(_plan([_held("a"), _task("b")], here=frozenset({"a"})))
    assert refusal.error is Contention
    assert refusal.message.startswith("this worktree already holds task a: it is claimed by alice, another worker")
    monkeypatch.setenv("HANDOFF_WORKER", "alice")  # its own claim: the ordinary refusal
    assert _refusal(_plan([_held("a"), _task("b")], here=frozenset({"a"}))).error is UsageError


def test_plan_refuses_any_second_claim_in_exclusive_mode(pinned: None) -> None:
    tasks = [_held("a", by="bob", where="/wt-b"), _task("b")]
    refusal = _refusal(_plan(tasks, mode="exclusive"))
    assert refusal.error is Contention
    assert refusal.message.startswith("exclusive mode: task a is in progress, claimed by bob in /wt-b")
    assert _pool(_plan(tasks, mode="concurrent")) == ["b"]
    assert _pool(_plan(tasks, mode=None, force=True)) == ["b"]
    assert _refusal(_plan(tasks, "a", mode=None, force=True)).error is Contention  # --force takes no held task
