"""A new ref whose directories a concurrent `git pack-refs --all` removes while libgit2
makes them (the background repack packs the refs and prunes the directories it leaves
empty): the compare-and-swap tries again, as git's own ref writes do, instead of failing
the command (CI: a fleet clone's `sync` under gitolite failed on a new clone's tracking
ref; a loop of 20,000 new refs beside two `pack-refs` loops failed 4 times before, none
after)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pygit2
import pytest

from git_handoff.core.errors import GitFailure
from git_handoff.infra.gitrepo import Repo


class _Racing:
    """The repository's libgit2 handle, whose first `failures` ref creations fail as
    libgit2 fails when a parent directory it just made is removed before the child is made."""

    def __init__(self, raw: Any, where: Path, failures: int) -> None:
        self._raw, self._where, self.left = raw, where, failures

    def create_reference_direct(self, name: str, *args: Any, **kw: Any) -> Any:
        if self.left:
            self.left -= 1
            parent = (self._where / name).parent.parent
            raise pygit2.GitError(f"failed to make directory '{parent}': No such file or directory")
        return self._raw.create_reference_direct(name, *args, **kw)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._raw, attr)


def _head(path: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_a_new_ref_whose_directory_vanished_while_made_is_made_again(repo: Path) -> None:
    r = Repo.discover(repo)
    racing = _Racing(r.raw, r.common_dir, failures=2)
    r.raw = racing
    name = "refs/remotes/origin/harness/clones/c1/state"
    assert r.cas_ref(name, _head(repo), None, "test") is True
    assert racing.left == 0
    assert subprocess.run(["git", "rev-parse", name], cwd=repo, capture_output=True,
                          text=True).stdout.strip() == _head(repo)


def test_a_directory_that_never_can_be_made_is_still_an_error(repo: Path) -> None:
    r = Repo.discover(repo)
    r.raw = _Racing(r.raw, r.common_dir, failures=1000)
    with pytest.raises(GitFailure, match="cannot update refs/remotes/x/state: failed to make directory"):
        r.cas_ref("refs/remotes/x/state", _head(repo), None, "test")


@pytest.mark.parametrize("where", ["/srv/blocks/repo/.git", "/home/me/it exists/.git", "/home/o'lock/x'exists/.git"])
def test_a_path_that_says_lock_or_exists_does_not_turn_a_failure_into_a_lost_race(repo: Path, where: str) -> None:
    """libgit2's message quotes the directory: a repository under `blocks/` failed the
    same way returned False (another writer got there first) after the tries ran out,
    and callers that ignore the result went on as if the ref were written."""
    r = Repo.discover(repo)
    r.raw = _Racing(r.raw, Path(where), failures=1000)
    with pytest.raises(GitFailure, match="failed to make directory"):
        r.cas_ref("refs/remotes/x/state", _head(repo), None, "test")


def test_a_held_lock_is_still_a_lost_race(repo: Path) -> None:
    r = Repo.discover(repo)
    lock = r.common_dir / "refs" / "heads" / "held.lock"
    lock.write_text("")  # another writer's, fresh
    assert r.cas_ref("refs/heads/held", _head(repo), None, "test") is False
    assert subprocess.run(["git", "rev-parse", "--verify", "-q", "refs/heads/held"], cwd=repo).returncode == 1
