"""Talking to a remote (git_handoff.remote.transport): its fetch configuration here, a push
without force (with leases, atomic), a refusal by rule, the backoff between tries. Real
bare repositories on disk."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import transport
from git_handoff.remote.layout import Remote
from tests.support.repo import git


@pytest.fixture
def origin(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "bare.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=repo)
    return bare


def test_use_remote_sets_the_refspecs_once_and_replaces_the_old_ones(repo: Path, origin: Path) -> None:
    r = Repo.discover(repo)
    remote = transport.named_remote(r, "origin")
    legacy = remote.legacy_refspecs()[0]
    git("config", "--add", "remote.origin.fetch", legacy, cwd=repo)
    changed = transport.use_remote(r, remote)
    assert changed == {"added": remote.refspecs(), "removed": [legacy]}
    assert git("config", "handoff.remote", cwd=repo) == "origin"
    fetch = git("config", "--get-all", "remote.origin.fetch", cwd=repo).splitlines()
    assert set(remote.refspecs()) <= set(fetch) and legacy not in fetch
    assert transport.add_refspecs(Repo.discover(repo), remote) == {"added": [], "removed": []}
    assert transport.add_refspecs(r, Remote(r, str(origin))) == {"added": [], "removed": []}  # a path: no config
    with pytest.raises(UsageError, match="unknown remote 'nosuch'"):
        transport.named_remote(r, "nosuch")


def test_a_push_with_a_lease_moves_the_ref_only_from_what_it_expects(repo: Path, origin: Path) -> None:
    r = Repo.discover(repo)
    remote = transport.named_remote(r, "origin")
    first = git("rev-parse", "HEAD", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=repo)
    second = git("rev-parse", "HEAD", cwd=repo)
    ref = "refs/harness/claims/t1"
    assert transport.push(r, remote, []).refs == {}
    created = transport.push(r, remote, [f"{first}:{ref}"], leases={ref: None}, atomic=True)
    assert created.refs and git("rev-parse", ref, cwd=origin) == first
    stale = transport.push(r, remote, [f"{second}:{ref}"], leases={ref: second})
    assert not stale.ok(ref)  # the lease expected another value: refused
    assert git("rev-parse", ref, cwd=origin) == first
    assert transport.push(r, remote, [f"{second}:{ref}"], leases={ref: first}).ok(ref)
    assert git("rev-parse", ref, cwd=origin) == second


def test_a_refusal_by_rule_is_contention_that_says_it_is_not_a_race(repo: Path, origin: Path) -> None:
    remote = transport.named_remote(Repo.discover(repo), "origin")
    error = transport.refused_error(remote, "refs/harness/claims/t1")
    assert error.exit_code == 3
    assert error.message.startswith("origin refused refs/harness/claims/t1: a rule on the server, not a race")


def test_backoff_waits_a_little_and_at_most_two_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    transport.backoff(0)
    transport.backoff(10, contenders=1000)
    assert 0.005 <= waits[0] <= 0.02 and 0.005 <= waits[1] <= 2.0
