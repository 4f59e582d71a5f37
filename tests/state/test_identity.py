"""This clone's identity (git_handoff.state.identity): its public id, the handoff.cloneId
setting, and the seals that prove a claim or a relay record was written here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.core.model import Task
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import identity
from tests.support.repo import make_repo


def test_clone_id_setting_whole_or_a_prefix() -> None:
    derived = "0123456789abcdef"
    assert identity.configured_id(None, derived) == derived
    assert identity.configured_id("AA", derived) == "aa23456789abcdef"
    assert identity.configured_id(" ffffffffffffffff ", derived) == "f" * 16
    for bad in ("", "xyz", "0123456789abcdef0", "a-b", "a a"):
        with pytest.raises(UsageError, match="handoff.cloneId is"):
            identity.configured_id(bad, derived)


def test_a_clone_id_is_16_hex_digits_its_own_and_stable(repo: Path, tmp_path: Path) -> None:
    mine = identity.clone_id(Repo.discover(repo))
    assert re.fullmatch(r"[0-9a-f]{16}", mine)
    identity._ids.clear()  # as a new process: derived again from the clone's secret
    assert identity.clone_id(Repo.discover(repo)) == mine
    other = make_repo(tmp_path / "other")
    assert identity.clone_id(Repo.discover(other)) != mine


def test_a_claim_seal_verifies_only_over_the_same_fields(repo: Path) -> None:
    r = Repo.discover(repo)
    seal = identity.claim_seal(r, "a", "2026-01-01T00:00:00Z", "/w", "b" * 40, "me")
    assert len(seal) == 32
    claim = Task(id="a", title="A", status="in_progress", started_at_commit="b" * 40, claimed_by="me",
                 extra={"claimed_at": "2026-01-01T00:00:00Z", "worktree": "/w", "clone_seal": seal})
    assert identity.claim_is_mine(r, claim)
    assert not identity.claim_is_mine(r, claim.evolve(claimed_by="someone else"))
    assert not identity.claim_is_mine(r, claim.with_extra(clone_seal="0" * 32))
    assert not identity.sealed_here(r, 5, "claim")


def test_a_relay_record_is_mine_only_as_sealed(repo: Path) -> None:
    r = Repo.discover(repo)
    record = {"host": "h", "pid": 12, "started_at": "t", "session": 3, "agent_pid": 13, "agent_token": "k"}
    record["clone_seal"] = identity.relay_seal(r, record)
    assert identity.relay_is_mine(r, record)
    assert not identity.relay_is_mine(r, {**record, "agent_pid": 14})
    assert not identity.relay_is_mine(r, [record])
