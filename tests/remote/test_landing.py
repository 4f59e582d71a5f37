"""remote/landing.py: the target fetched and moved by compare-and-swap, never forced."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.core.errors import Contention
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import landing
from git_handoff.state.target import resolve
from tests.support.repo import git, make_repo


def _commit(repo: Path, name: str) -> str:
    (repo / name).write_text(name)
    git("add", name, cwd=repo)
    git("commit", "-q", "-m", name, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo).strip()


def _pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    a = make_repo(tmp_path / "a")
    git("remote", "add", "origin", str(bare), cwd=a)
    git("push", "-q", "origin", "main", cwd=a)
    git("clone", "-q", str(bare), str(tmp_path / "b"), cwd=tmp_path)
    return bare, a, tmp_path / "b"


def test_a_move_lands_only_on_the_tip_it_was_built_on(tmp_path: Path) -> None:
    bare, a, b = _pair(tmp_path)
    old = git("rev-parse", "HEAD", cwd=a).strip()
    mine = _commit(a, "mine")
    theirs = _commit(b, "theirs")
    git("push", "-q", "origin", "main", cwd=b)  # the target moved meanwhile
    repo = Repo.discover(a)
    target = resolve(repo)
    with pytest.raises(Contention, match="moved"):
        landing.move(repo, target, mine, old)
    assert git("rev-parse", "main", cwd=bare).strip() == theirs
    assert landing.bring(repo, target) == theirs
    merged = git("commit-tree", "-p", theirs, "-p", mine, "-m", "m", git("rev-parse", "HEAD^{tree}", cwd=a).strip(),
                 cwd=a).strip()
    assert landing.move(repo, target, merged, theirs) is True
    assert git("rev-parse", "main", cwd=bare).strip() == merged
    assert git("rev-parse", "refs/remotes/origin/main", cwd=a).strip() == merged
    # another clone built the very same commit and pushed it first: git says "up to date"
    # (no lease is checked then), and the move says it was not this one's
    assert landing.move(repo, target, merged, theirs) is False
    assert git("rev-parse", "main", cwd=bare).strip() == merged


def test_a_server_that_refuses_the_branch_is_said_so(tmp_path: Path) -> None:
    bare, a, _ = _pair(tmp_path)
    hook = bare / "hooks" / "update"
    hook.write_text('#!/bin/sh\n[ "$1" = refs/heads/main ] && { echo "protected branch" >&2; exit 1; }\nexit 0\n')
    hook.chmod(0o755)
    old = git("rev-parse", "HEAD", cwd=a).strip()
    new = _commit(a, "x")
    repo = Repo.discover(a)
    with pytest.raises(Contention, match="refused to move main"):
        landing.move(repo, resolve(repo), new, old)
    assert git("rev-parse", "main", cwd=bare).strip() == old


def test_a_refusal_of_the_work_ref_in_the_same_atomic_push_is_not_a_moved_target(tmp_path: Path) -> None:
    """The target and the work ref go in one atomic push: a server that refuses the work ref
    takes neither, and git marks the target "atomic push failed". That is said as the
    server's refusal of the work ref (Contention, not TargetMoved: retrying cannot help)."""
    bare, a, _ = _pair(tmp_path)
    hook = bare / "hooks" / "update"
    hook.write_text('#!/bin/sh\ncase "$1" in refs/harness/work/*) echo "no work refs" >&2; exit 1;; esac\nexit 0\n')
    hook.chmod(0o755)
    old = git("rev-parse", "HEAD", cwd=a).strip()
    new = _commit(a, "x")
    repo = Repo.discover(a)
    with pytest.raises(Contention) as raised:
        landing.move(repo, resolve(repo), new, old, also=[f"{new}:refs/harness/work/T/1"])
    assert not isinstance(raised.value, landing.TargetMoved)
    assert "took no part of the landing of main" in str(raised.value)
    assert "refs/harness/work/T/1" in str(raised.value), raised.value
    assert git("rev-parse", "main", cwd=bare).strip() == old
    assert not git("for-each-ref", "refs/harness/work/", cwd=bare).strip()
