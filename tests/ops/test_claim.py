"""Claims across worktrees: modes, leases, takeover, and a storm of concurrent claimers."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.repo import git, run, state_head

ROOT = Path(__file__).resolve().parents[2]


def handoff(*args: str, cwd: Path, rc: int = 0):
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
