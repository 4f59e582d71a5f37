"""An open repository's refs (git_handoff.infra.gitrefs): reading, compare-and-swap,
batched updates, and sweeping what a killed process left."""

from __future__ import annotations

import os
import time
from pathlib import Path

from git_handoff.infra.gitrefs import TMP_REFS, GitRefs
from tests.support.repo import git


def _refs(repo: Path) -> tuple[GitRefs, str, str]:
    first = git("rev-parse", "HEAD", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=repo)
    return GitRefs.discover(repo), first, git("rev-parse", "HEAD", cwd=repo)


def test_cas_ref_creates_moves_and_refuses_a_stale_expectation(repo: Path) -> None:
    refs, one, two = _refs(repo)
    assert refs.cas_ref("refs/harness/x", one, None, "create")
    assert not refs.cas_ref("refs/harness/x", two, None, "create again")
    assert not refs.cas_ref("refs/harness/x", two, two, "wrong expectation")
    assert refs.ref_target("refs/harness/x") == one
    assert refs.cas_ref("refs/harness/x", two, one, "move")
    assert refs.ref_target("refs/harness/x") == two
    assert refs.ref_target("refs/harness/none") is None


def test_cas_ref_removes_a_stale_ref_lock_and_swaps(repo: Path) -> None:
    refs, one, two = _refs(repo)
    assert refs.cas_ref("refs/harness/y", one, None, "create")
    lock = refs.common_dir / "refs/harness/y.lock"
    lock.write_text("")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    assert refs.cas_ref("refs/harness/y", two, one, "move")
    assert refs.ref_target("refs/harness/y") == two and not lock.exists()


def test_refs_under_and_refs_in_list_a_namespace(repo: Path) -> None:
    refs, one, two = _refs(repo)
    refs.update_refs([("refs/harness/a/1", one, None), ("refs/harness/a/2", two, None),
                      ("refs/harness/b/1", one, None)], "batch")
    want = {"refs/harness/a/1": one, "refs/harness/a/2": two}
    assert refs.refs_under("refs/harness/a/") == want
    assert refs.refs_in("refs/harness/a/") == want
    assert refs.refs_in("refs/harness/a/", "refs/harness/b/") == {**want, "refs/harness/b/1": one}
    refs.update_refs([("refs/harness/a/1", None, one)], "delete")
    refs.delete_ref("refs/harness/a/2")
    assert refs.refs_in("refs/harness/a/") == {}


def test_sweep_tmp_refs_deletes_only_those_of_gone_processes(repo: Path) -> None:
    refs, one, _ = _refs(repo)
    gone, live = f"{TMP_REFS}999999999-ab12", f"{TMP_REFS}{os.getppid()}-cd34"
    refs.update_refs([(gone, one, None), (live, one, None)], "scratch")
    assert refs.sweep_tmp_refs() == [gone]
    assert list(refs.refs_under(TMP_REFS)) == [live]


def test_sweep_incoming_deletes_the_namespaces_of_gone_fetches(repo: Path) -> None:
    refs, one, _ = _refs(repo)
    prefix = "refs/handoff-incoming/"
    dead = f"{prefix}origin/999999999-0123abcd/state"
    live = f"{prefix}origin/{os.getppid()}-0123abcd/state"
    refs.update_refs([(dead, one, None), (live, one, None)], "fetched")
    assert refs.sweep_incoming(prefix) == [dead]
    assert list(refs.refs_in(prefix)) == [live]
