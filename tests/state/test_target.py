"""state/target.py: which branch is the target, and where this clone reads its tip."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.target import resolve, tip, track_of
from tests.support.repo import git, make_repo


def test_without_a_remote_the_main_worktree_branch_is_the_target_even_from_a_linked_worktree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    git("worktree", "add", "-q", "-b", "w1", str(tmp_path / "w1"), cwd=repo)
    for where in (repo, tmp_path / "w1"):
        target = resolve(Repo.discover(where))
        assert (target.branch, target.remote, target.ref, target.name) == ("main", None, "refs/heads/main", "main")
        assert tip(Repo.discover(where), target) == git("rev-parse", "main", cwd=repo).strip()


def test_a_clone_targets_its_remote_default_branch_and_the_setting_wins(tmp_path: Path) -> None:
    origin = make_repo(tmp_path / "origin")
    git("branch", "trunk", cwd=origin)
    git("clone", "-q", str(origin), str(tmp_path / "c"), cwd=tmp_path)
    clone = Repo.discover(tmp_path / "c")
    target = resolve(clone)
    assert (target.name, target.ref) == ("origin/main", "refs/remotes/origin/main")
    git("config", "handoff.target", "trunk", cwd=tmp_path / "c")
    assert resolve(Repo.discover(tmp_path / "c")).name == "origin/trunk"


@pytest.mark.parametrize("bad", ["-x", "a..b", "x.lock", "a b", "a~1", "/main", "main/", "a:b"])
def test_a_target_that_is_not_a_branch_name_is_refused(tmp_path: Path, bad: str) -> None:
    repo = make_repo(tmp_path / "r")
    git("config", "handoff.target", bad, cwd=repo)
    with pytest.raises(UsageError, match="handoff.target"):
        resolve(Repo.discover(repo))


def test_a_remote_that_does_not_exist_is_named(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    with pytest.raises(UsageError, match="no remote 'nowhere'"):
        resolve(Repo.discover(repo), "nowhere")


def test_a_url_remote_is_tracked_under_a_digest_of_it() -> None:
    assert track_of("origin", True) == "origin"
    assert track_of("/srv/x.git", False).startswith("handoff-") and len(track_of("/srv/x.git", False)) == 18
