"""Opening a repository as git finds it (git_handoff.infra.gitopen): discovery, its
places, HEAD, and its config as git reads it (the command line's settings first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.core.errors import NotARepository
from git_handoff.infra.gitopen import OpenRepo
from tests.support.repo import git


def test_discover_finds_the_repository_from_a_subdirectory(repo: Path) -> None:
    (repo / "sub" / "deeper").mkdir(parents=True)
    opened = OpenRepo.discover(repo / "sub" / "deeper")
    assert opened.root() == repo.resolve()
    assert opened.git_dir == opened.common_dir == (repo / ".git").resolve()
    assert opened.head() == git("rev-parse", "HEAD", cwd=repo)
    assert opened.head_branch() == "refs/heads/main"


def test_discover_outside_a_repository_is_not_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    (tmp_path / "plain").mkdir()
    with pytest.raises(NotARepository, match="not a git repository"):
        OpenRepo.discover(tmp_path / "plain")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(NotARepository, match="GIT_DIR, or git --git-dir"):
        OpenRepo.discover(tmp_path)


def test_a_linked_worktree_shares_the_common_dir_and_has_its_own_places(repo: Path, tmp_path: Path) -> None:
    git("worktree", "add", "-q", str(tmp_path / "linked"), cwd=repo)
    main, linked = OpenRepo.discover(repo), OpenRepo.discover(tmp_path / "linked")
    assert linked.common_dir == main.common_dir and linked.git_dir != main.git_dir
    assert linked.handoff_dir == main.handoff_dir == main.common_dir / "handoff"
    assert linked.worktree_dir == linked.git_dir / "handoff" != main.worktree_dir
    assert linked.handoff_dir.is_dir() and linked.worktree_dir.is_dir()


def test_config_reads_files_and_the_command_lines_settings_win(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git("config", "handoff.number", "7", cwd=repo)
    git("config", "handoff.flag", "yes", cwd=repo)
    opened = OpenRepo.discover(repo)
    assert opened.config_get("handoff.number") == "7" and opened.config_int("handoff.number") == 7
    assert opened.config_bool("handoff.flag") is True and opened.config_bool("handoff.none", default=True) is True
    assert opened.config_get("handoff.none") is None and opened.config_int("handoff.none") is None
    assert opened.local_config_values("handoff.number") == ["7"]
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'handoff.number'='9'")
    assert OpenRepo.discover(repo).config_int("handoff.number") == 9


def test_an_unborn_head_has_no_commit(tmp_path: Path) -> None:
    git("init", "-q", "-b", "trunk", str(tmp_path / "new"), cwd=tmp_path)
    opened = OpenRepo.discover(tmp_path / "new")
    assert opened.head() is None


def test_git_runs_in_the_repository_and_counts_packs(repo: Path) -> None:
    opened = OpenRepo.discover(repo)
    assert opened.git("rev-parse", "--git-dir").stdout.decode().strip() in (".git", str(repo / ".git"))
    before = opened.pack_count()
    git("repack", "-q", "-a", "-d", cwd=repo)
    assert opened.pack_count() == before + 1 >= 1
