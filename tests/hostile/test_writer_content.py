"""A writer is who wrote the content (handoff.allowedSigners; docs/allowed-signers.md, "Who
wrote a task"): the commit that carried a record is not its writer when it only merged
it, cut the history above it, or rewrote it as a side effect.

Real ssh keys, a real bare remote, and three clones: Alice (signs with a key the allowed
file lists, but does not enforce the setting herself), Mallory (signs with a key nobody
listed) and a new machine that enforces it and joins the fleet after them, in full or one
commit deep (`handoff.join shallow`). Mallory's task must stay marked, and never offered,
whichever way the new machine joined, when

(a) Alice's merge took in Mallory's head before the new machine joined one commit deep;
(b) Alice claimed and released Mallory's task (her commits moved only the claim);
(c) a person on the new machine renamed (or removed with --force, or reopened) a task
    Mallory's task depends on, rewriting Mallory's task in its own commit;

and both joins of one remote then give the same marks, task by task.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.test_allowed_signers import Fleet, _clone, _keygen, ok
from tests.support.repo import git, run

pytestmark = pytest.mark.needs("ssh-keygen")  # real keys, real signatures

JOINS = ("full", "shallow")


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    """Alice's state with her task `a1`; Mallory's tasks `m` (P0), which depends on `a1`,
    and `n` (P0)."""
    (tmp_path / "keys").mkdir()
    keys = {name: _keygen(tmp_path / "keys" / name) for name in ("victim", "alice", "mallory")}
    allowed = tmp_path / "allowed_signers"
    allowed.write_text("".join(f'{who}@example.com namespaces="git" {keys[who].with_suffix(".pub").read_text()}'
                               for who in ("victim", "alice")))
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    f = Fleet(tmp_path, remote, allowed, keys, {})
    alice = _clone(f, "alice", "alice")  # an approved writer that does not enforce the setting
    ok(alice, "init")
    ok(alice, "add", "task a1", "--id", "a1", "--priority", "P2", "--check", "true")
    ok(alice, "sync")
    mallory = _clone(f, "mallory", "mallory")
    ok(mallory, "sync")
    ok(mallory, "add", "task m", "--id", "m", "--priority", "P0", "--check", "true", "--after", "a1")
    ok(mallory, "add", "task n", "--id", "n", "--priority", "P0", "--check", "true")
    ok(mallory, "sync")
    return f


def _join(fleet: Fleet, name: str, how: str) -> Path:
    """A new machine that enforces the setting (and signs with the victim's key) joins."""
    clone = _clone(fleet, name, "victim", allowed=True)
    git("config", "handoff.join", how, cwd=clone)
    ok(clone, "sync")
    return clone


def _marks(clone: Path) -> dict[str, str]:
    return {t["id"]: t["unapproved_writer"] for t in ok(clone, "list") if "unapproved_writer" in t}


def _not_offered(fleet: Fleet, clone: Path, task_id: str) -> None:
    """`task_id` is marked Mallory's and never offered on `clone`."""
    assert _marks(clone).get(task_id) == f"key {fleet.fingerprint('mallory')}", _marks(clone)
    assert task_id not in {t["id"] for t in ok(clone, "list", "--ready")}
    res = run("claim", task_id, cwd=clone)
    assert res.rc == 2 and "unapproved writer" in res.err, res


@pytest.mark.parametrize("how", JOINS)
def test_a_merge_at_the_shallow_cut_does_not_make_its_writer_the_writer(fleet: Fleet, how: str) -> None:
    """(a) Alice merges Mallory's head (her own change beside it: a merge commit, signed by
    her), Mallory fast-forwards to that merge: every head on the remote is Alice's merge,
    the one commit a shallow join fetches."""
    alice, mallory = fleet.clones["alice"], fleet.clones["mallory"]
    ok(alice, "add", "task a2", "--id", "a2", "--priority", "P2", "--check", "true")
    ok(alice, "sync")
    ok(mallory, "sync")
    assert git("rev-parse", "refs/harness/state", cwd=alice) == git("rev-parse", "refs/harness/state", cwd=mallory)
    assert len(git("rev-list", "--parents", "-n", "1", "refs/harness/state", cwd=alice).split()) == 3  # a merge
    clone = _join(fleet, "joiner", how)
    _not_offered(fleet, clone, "m")
    _not_offered(fleet, clone, "n")
    assert set(_marks(clone)) == {"m", "n"}  # Alice's tasks stay hers
    assert {t["id"] for t in ok(clone, "list", "--ready")} == {"a1", "a2"}


@pytest.mark.parametrize("how", JOINS)
def test_a_claim_and_release_by_an_approved_writer_leaves_the_task_its_writers(fleet: Fleet, how: str) -> None:
    """(b) Alice's machine, which does not enforce the setting, claims Mallory's task and
    releases it: her two commits moved only the claim."""
    alice = fleet.clones["alice"]
    ok(alice, "sync")
    ok(alice, "edit", "a1", "--priority", "P1")  # a change of Alice's own beside it
    assert ok(alice, "claim", "n")["id"] == "n"
    ok(alice, "release", "n")
    ok(alice, "sync")
    clone = _join(fleet, "joiner", how)
    _not_offered(fleet, clone, "n")
    assert set(_marks(clone)) == {"m", "n"}


@pytest.mark.parametrize("how", JOINS)
@pytest.mark.parametrize("change", ("rename", "rm --force", "reopen"))
def test_rewriting_a_dependent_here_leaves_it_its_writers(fleet: Fleet, how: str, change: str) -> None:
    """(c) A person on the new machine renames `a1` (or removes it with --force, or
    reopens it after it failed for good and took `m` with it): the change rewrites `m` in
    this clone's own commit."""
    clone = _join(fleet, "joiner", how)
    _not_offered(fleet, clone, "m")
    if change == "rename":
        ok(clone, "rename", "a1", "a1x")
        assert ok(clone, "show", "m")["depends_on"] == ["a1x"]
    elif change == "rm --force":
        ok(clone, "rm", "a1", "--force")
        assert ok(clone, "show", "m")["depends_on"] == []
    else:
        ok(clone, "edit", "a1", "--max-attempts", "1")
        ok(clone, "claim", "a1")
        ok(clone, "fail", "a1", "--reason", "gone")
        ok(clone, "add", "task j", "--id", "j", "--check", "true")
        assert ok(clone, "claim")["id"] == "j"  # on the way, the selection fails m with a1
        assert ok(clone, "show", "m")["status"] == "failed", ok(clone, "show", "m")
        assert "m" in _marks(clone)  # the selection's failing it was no edit either
        ok(clone, "reopen", "a1", "--reason", "try again")
        assert ok(clone, "show", "m")["status"] == "pending"
    _not_offered(fleet, clone, "m")
    assert set(_marks(clone)) == {"m", "n"}
    # and a machine joining afterwards, either way, agrees
    ok(clone, "sync")
    for again in JOINS:
        assert _marks(_join(fleet, f"after-{again}", again)) == _marks(clone), again
