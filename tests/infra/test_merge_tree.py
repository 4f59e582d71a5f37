"""infra/merge_tree.py: merging where nobody works, the scratch worktree, a checked-out branch."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra import merge_tree
from git_handoff.infra.gitrepo import Repo
from tests.support.repo import git, make_repo


def _commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git("add", name, cwd=repo)
    git("commit", "-q", "-m", name, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).strip()


def test_merge_gives_a_tree_or_the_conflicting_files_and_touches_no_work_tree(tmp_path: Path) -> None:
    path = make_repo(tmp_path / "r")
    base = git("rev-parse", "HEAD", cwd=path).strip()
    ours = _commit(path, "a.txt", "a\n")
    git("checkout", "-q", "--detach", base, cwd=path)
    theirs = _commit(path, "b.txt", "b\n")
    clash = _commit(path, "a.txt", "other\n")
    repo = Repo.discover(path)
    merged = merge_tree.merge(repo, ours, theirs)
    assert merged.tree is not None and merged.conflicts == ()
    assert {name for name, _, _ in repo.tree_entries(merged.tree)} >= {"a.txt", "b.txt"}
    conflicted = merge_tree.merge(repo, ours, clash)
    assert conflicted.tree is None and conflicted.conflicts == ("a.txt",)
    assert git("status", "--porcelain", cwd=path) == ""


def test_the_scratch_worktree_is_exactly_the_commit_each_time(tmp_path: Path) -> None:
    path = make_repo(tmp_path / "r")
    first = _commit(path, "a.txt", "a\n")
    second = _commit(path, "b.txt", "b\n")
    scratch = merge_tree.Scratch(Repo.discover(path))
    where = scratch.at(second)
    (where / "built.o").write_text("left by a check")
    (where / "a.txt").write_text("changed by a check")
    again = scratch.at(first)
    assert again == where
    assert sorted(p.name for p in where.iterdir() if p.name != ".git") == sorted(
        p.name for p in path.iterdir() if p.name not in (".git", "b.txt"))
    assert (where / "a.txt").read_text() == "a\n"
    assert git("status", "--porcelain", cwd=path) == ""  # the person's worktree untouched


def test_a_checked_out_branch_is_found_and_brought_forward_only_when_it_can_be(tmp_path: Path) -> None:
    path = make_repo(tmp_path / "r")
    git("worktree", "add", "-q", "-b", "w", str(tmp_path / "w"), cwd=path)
    ahead = _commit(tmp_path / "w", "w.txt", "w\n")
    repo = Repo.discover(path)
    assert merge_tree.checked_out_at(repo, "main") == path.resolve()
    assert merge_tree.checked_out_at(repo, "nowhere") is None
    (path / "w.txt").write_text("mine\n")  # would be overwritten: git refuses, nothing lost
    assert merge_tree.fast_forward(path, ahead) is not None and (path / "w.txt").read_text() == "mine\n"
    (path / "w.txt").unlink()
    assert merge_tree.clean(path) and merge_tree.fast_forward(path, ahead) is None
    assert git("rev-parse", "main", cwd=path).strip() == ahead


def test_reset_keep_moves_the_branch_off_diverged_work_and_never_over_a_change(tmp_path: Path) -> None:
    path = make_repo(tmp_path / "r")
    base = git("rev-parse", "HEAD", cwd=path).strip()
    mine = _commit(path, "refused.txt", "refused\n")
    git("update-ref", "refs/harness/work/T/1", mine, cwd=path)
    git("checkout", "-q", "-b", "other", base, cwd=path)
    tip = _commit(path, "tip.txt", "tip\n")
    git("checkout", "-q", "main", cwd=path)
    (path / "tip.txt").write_text("a change of mine\n")  # untracked, and the tip has it: refused
    assert merge_tree.reset_keep(path, tip) is not None
    assert git("rev-parse", "main", cwd=path).strip() == mine and (path / "tip.txt").read_text() == "a change of mine\n"
    (path / "tip.txt").unlink()
    assert merge_tree.reset_keep(path, tip) is None
    assert git("rev-parse", "main", cwd=path).strip() == tip and not (path / "refused.txt").exists()
