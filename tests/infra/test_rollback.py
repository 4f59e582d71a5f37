"""A work tree kept and returned to (git_handoff.infra.rollback): the snapshot a claim
takes, the rollback's journal, the rollback itself, and a restore of an attempt's files.
tests/ops/test_rollback.py runs them through `claim`, `fail` and `restore`."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra import rollback
from git_handoff.infra.gitrepo import Repo
from git_handoff.infra.rollback import RollbackPlan
from tests.support.repo import git


def test_a_clean_work_tree_takes_no_snapshot(repo: Path) -> None:
    r = Repo.discover(repo)
    assert rollback.take_snapshot(r) is None
    assert not rollback.uncommitted_since_claim(r, None)


def test_a_snapshot_keeps_the_work_tree_and_the_index_and_a_rollback_returns_to_it(repo: Path) -> None:
    (repo / "untracked.txt").write_text("mine before the claim\n")
    (repo / "staged.txt").write_text("staged\n")
    git("add", "staged.txt", cwd=repo)
    r = Repo.discover(repo)
    base = r.head()
    assert base is not None
    commit = rollback.take_snapshot(r)
    assert commit is not None and r.ref_target(rollback.CLAIMS_PREFIX + commit) == commit
    snap = rollback.read_snapshot(r, commit)
    assert snap is not None and snap.head == base
    assert r.tree_lookup(snap.worktree, "untracked.txt") is not None
    assert r.tree_lookup(snap.index, "staged.txt") is not None and r.tree_lookup(snap.index, "untracked.txt") is None
    assert rollback.read_snapshot(r, base) is None  # not of a snapshot's shape
    assert not rollback.uncommitted_since_claim(r, commit)  # what was there at the claim is not the attempt's
    (repo / "attempt.txt").write_text("the attempt's work\n")
    (repo / "README").write_text("changed by the attempt\n")
    assert rollback.uncommitted_since_claim(r, commit)
    rollback.roll_back(r, RollbackPlan(task="a", base=base, snapshot=commit, attempt_ref=None, operation=None))
    assert not (repo / "attempt.txt").exists() and (repo / "README").read_text() == "hello\n"
    assert (repo / "untracked.txt").read_text() == "mine before the claim\n"
    assert git("diff", "--cached", "--name-only", cwd=repo) == "staged.txt"
    assert r.ref_target(rollback.CLAIMS_PREFIX + commit) is None


def test_the_journal_is_written_read_and_a_damaged_one_dropped(repo: Path) -> None:
    r = Repo.discover(repo)
    assert rollback.read_journal(r) is None and not rollback.has_journal(r)
    plan = RollbackPlan(task="a", base="b" * 40, snapshot=None, attempt_ref="refs/harness/attempts/a/1",
                        operation="merge")
    rollback.write_journal(r, plan)
    assert rollback.has_journal(r) and rollback.read_journal(r) == plan
    rollback.clear_journal(r)
    assert not rollback.has_journal(r)
    path = r.git_dir / "handoff" / rollback.JOURNAL
    path.write_text('{"task": 5}')
    assert rollback.read_journal(r) is None and not path.exists()


def test_restore_picture_writes_the_attempts_files_and_removes_what_it_dropped(repo: Path) -> None:
    r = Repo.discover(repo)
    head = r.head()
    assert head is not None
    since = r.commit_tree(head)
    source = r.update_tree(since, {"README": None, "new/file.txt": r.write_blob(b"from the attempt\n")})
    done = rollback.restore_picture(r, source=source, since=since, index=None, force=False)
    assert done.written == ["new/file.txt"] and done.deleted == ["README"] and done.index is False
    assert (repo / "new" / "file.txt").read_text() == "from the attempt\n" and not (repo / "README").exists()
