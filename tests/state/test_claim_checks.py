"""The checks a claimed task passes before a command acts on it
(git_handoff.state.claim_checks): held here, by whom, on which branch, still the same
claim, and its lease. The claims are real: taken with `git handoff claim`."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.core.model import Task
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import claim_checks
from git_handoff.state.store import StateStore
from tests.support.repo import git, run


@pytest.fixture
def claimed(repo: Path) -> Path:
    for args in (("init",), ("add", "A", "--id", "a"), ("add", "B", "--id", "b"), ("claim", "a")):
        assert run(*args).rc == 0, args
    return repo


def test_held_by_is_the_worktree_else_the_worker() -> None:
    assert claim_checks.held_by("/w", "x", "/w", "me")
    assert not claim_checks.held_by("/w", "me", "/other", "me")
    assert claim_checks.held_by(None, "me", "/anywhere", "me")
    assert not claim_checks.held_by(None, "x", "/anywhere", "me")
    assert claim_checks.short("0123456789abcdef") == "0123456" and claim_checks.short(None) == ""


def test_a_claim_taken_here_passes_and_a_pending_task_does_not(claimed: Path) -> None:
    store = StateStore(Repo.discover(claimed), session=0)
    task = claim_checks.claimed_task(store, "a", "release", force=False)
    assert task.status == "in_progress"
    assert claim_checks.held_here(task, str(claimed.resolve()), "anyone", store.repo)
    assert not claim_checks.held_here(task, "/elsewhere", "anyone", store.repo)
    assert claim_checks.holder(task).startswith(f"task a is in progress, claimed by {task.claimed_by} in ")
    with pytest.raises(UsageError, match="cannot release task b: it is pending, not in progress"):
        claim_checks.claimed_task(store, "b", "release", force=False)
    with pytest.raises(UsageError, match="no task 'zz'"):
        claim_checks.claimed_task(store, "zz", "release", force=False)


def test_a_claim_not_sealed_here_is_refused_unless_forced(claimed: Path) -> None:
    store = StateStore(Repo.discover(claimed), session=0)
    task = claim_checks.claimed_task(store, "a", "done", force=False)
    forged = task.with_extra(clone_seal="0" * 32)
    with pytest.raises(UsageError, match=r"cannot done task a: it is claimed by .* \(--force acts anyway\)"):
        claim_checks.require_owner(forged, store.repo, "done", force=False)
    claim_checks.require_owner(forged, store.repo, "done", force=True)


def test_another_declared_worker_in_this_worktree_is_refused(claimed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = StateStore(Repo.discover(claimed), session=0)
    task = claim_checks.claimed_task(store, "a", "done", force=False)
    monkeypatch.setenv("HANDOFF_WORKER", "agent-2")
    assert "another worker in this worktree" in (claim_checks.other_workers(task) or "")
    with pytest.raises(UsageError, match="you are agent-2 \\(HANDOFF_WORKER\\)"):
        claim_checks.require_owner(task, store.repo, "done", force=False)
    monkeypatch.setenv("HANDOFF_WORKER", task.claimed_by or "")
    assert claim_checks.other_workers(task) is None


def test_the_branch_a_task_was_claimed_on(claimed: Path) -> None:
    store = StateStore(Repo.discover(claimed), session=0)
    task = claim_checks.claimed_task(store, "a", "done", force=False)
    claim_checks.require_branch(task, store.repo, "done", force=False)
    git("checkout", "-q", "-b", "elsewhere", cwd=claimed)
    with pytest.raises(UsageError, match="it was claimed on refs/heads/main, this worktree is on refs/heads/elsewhere"):
        claim_checks.require_branch(task, Repo.discover(claimed), "done", force=False)
    claim_checks.require_branch(task, Repo.discover(claimed), "done", force=True)


def test_same_claim_and_leases() -> None:
    seen = Task(id="a", title="A", status="in_progress", claimed_by="me", started_at_commit="b",
                extra={"claimed_at": "t1", "lease_seconds": 90})
    assert claim_checks.same_claim(seen, seen)
    assert not claim_checks.same_claim(seen.with_extra(claimed_at="t2"), seen)
    assert not claim_checks.same_claim(seen.evolve(status="completed"), seen)
    assert claim_checks.lease_of(seen) == 90 and claim_checks.lease_of(seen, 5) == 5
    assert claim_checks.lease_of(Task(id="b", title="B")) == claim_checks.DEFAULT_LEASE_SECONDS
    for bad in (0, -1, True):
        with pytest.raises(UsageError, match="a lease must be a positive number of seconds"):
            claim_checks.check_lease(bad)


def test_expires_is_the_pinned_now_plus_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-01-01T00:00:00Z")
    assert claim_checks.expires(90) == "2026-01-01T00:01:30Z"
