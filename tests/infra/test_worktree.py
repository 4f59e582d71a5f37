"""The work tree as git sees it (git_handoff.infra.worktree): what is uncommitted, a
picture of it as trees without touching the index, and operations in progress."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra import worktree
from git_handoff.infra.gitrepo import Repo
from tests.support.repo import git


def test_a_clean_work_tree_has_nothing_uncommitted(repo: Path) -> None:
    r = Repo.discover(repo)
    assert worktree.dirty(r) == [] and not worktree.uncommitted(r)
    assert worktree.worktree_status(r) == []
    head = r.head()
    assert head is not None and worktree.current_tree(r) == r.commit_tree(head)


def test_changes_staged_unstaged_and_untracked_are_seen(repo: Path) -> None:
    (repo / "README").write_text("changed\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "staged.txt").write_text("staged\n")
    git("add", "staged.txt", cwd=repo)
    r = Repo.discover(repo)
    assert sorted(worktree.dirty(r)) == ["README", "new.txt", "staged.txt"] and worktree.uncommitted(r)
    kinds = {e.paths[0]: (e.kind, e.staged) for e in worktree.worktree_status(r)}
    assert kinds == {b"README": ("1", False), b"new.txt": ("?", False), b"staged.txt": ("1", True)}
    assert worktree.files_changed(r, None) == ["README", "new.txt", "staged.txt"]


def test_a_picture_holds_the_files_as_on_disk_and_leaves_the_index_alone(repo: Path) -> None:
    (repo / "README").write_text("changed\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "staged.txt").write_text("staged\n")
    git("add", "staged.txt", cwd=repo)
    index_before = (repo / ".git" / "index").read_bytes()
    r = Repo.discover(repo)
    head = r.head()
    assert head is not None
    shot = worktree.picture(r, head)
    assert shot.head == head
    assert git("show", f"{shot.worktree}:README", cwd=repo) == "changed"
    assert git("show", f"{shot.worktree}:new.txt", cwd=repo) == "new"
    assert shot.index is not None and git("ls-tree", "--name-only", shot.index, cwd=repo).split() == [
        "README", "staged.txt"]
    assert git("show", f"{shot.index}:README", cwd=repo) == "hello"
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert worktree.worktree_tree(r, head) == shot.worktree
    assert worktree.changed_paths(r, r.commit_tree(head), shot.worktree) == [
        ("M", "README"), ("A", "new.txt"), ("A", "staged.txt")]


def test_files_changed_counts_commits_since_the_base(repo: Path) -> None:
    r = Repo.discover(repo)
    base = r.head()
    (repo / "committed.txt").write_text("c\n")
    git("add", "committed.txt", cwd=repo)
    git("commit", "-q", "-m", "c", cwd=repo)
    (repo / "later.txt").write_text("l\n")
    assert worktree.files_changed(Repo.discover(repo), base) == ["committed.txt", "later.txt"]


def test_an_operation_in_progress_is_named_and_ended(repo: Path) -> None:
    git("checkout", "-q", "-b", "other", cwd=repo)
    (repo / "README").write_text("theirs\n")
    git("commit", "-qam", "theirs", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    (repo / "README").write_text("ours\n")
    git("commit", "-qam", "ours", cwd=repo)
    git("merge", "other", cwd=repo, check=False)
    r = Repo.discover(repo)
    assert worktree.operation_in_progress(r) == "merge"
    assert worktree.end_operation(r) == "merge"
    assert worktree.operation_in_progress(r) is None and worktree.end_operation(r) is None
    assert (repo / "README").read_text() == "ours\n"


def test_a_temp_index_is_removed_on_exit(repo: Path) -> None:
    r = Repo.discover(repo)
    head = r.head()
    assert head is not None
    with worktree.TempIndex(r, copy=True) as ix:
        assert ix.path.exists() and ix.tree() == r.commit_tree(head)
    assert not ix.path.exists()
    assert worktree.submodule_changes(r, head) == []
