"""The fleet's relay lock (git_handoff.remote.fleet_lock), its parts read alone: whether a
relay takes it, when a record's lease ends as this clone counts it, and a lock commit read
through its parser. tests/remote/test_fleet_ids.py runs the lock itself over a remote."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import fleet_lock
from tests.support.repo import git

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _record(**fields: Any) -> Any:
    return {"clone": "0" * 16, "host": "h", "pid": 1, "acquired_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-01T00:01:00Z", "lease_seconds": 60, **fields}


def test_a_relay_takes_the_lock_by_flag_or_setting(repo: Path) -> None:
    r = Repo.discover(repo)
    assert fleet_lock.wanted(r, True) and not fleet_lock.wanted(r, False)
    git("config", "handoff.relayLock", "Fleet", cwd=repo)
    assert fleet_lock.wanted(Repo.discover(repo), False)
    git("config", "handoff.relayLock", "everywhere", cwd=repo)
    with pytest.raises(UsageError, match="handoff.relayLock is 'everywhere'"):
        fleet_lock.wanted(Repo.discover(repo), False)
    assert fleet_lock.staging_ref("origin") == "refs/remotes/origin/harness/locks/relay"


def test_a_lease_ends_no_later_than_one_lease_after_its_last_write() -> None:
    assert fleet_lock.lock_deadline(_record(), NOW) == NOW + timedelta(seconds=60)
    until_8999 = _record(expires_at="8999-01-01T00:00:00Z")
    assert fleet_lock.lock_deadline(until_8999, NOW) == NOW + timedelta(seconds=60)
    renewed = _record(renewed_at="2026-01-01T00:00:30Z", expires_at="2026-01-01T00:10:00Z")
    assert fleet_lock.lock_deadline(renewed, NOW) == NOW + timedelta(seconds=90)
    bad_lease = _record(lease_seconds=10**9, expires_at="8999-01-01T00:00:00Z")
    assert fleet_lock.lock_deadline(bad_lease, NOW) == NOW + timedelta(seconds=fleet_lock.DEFAULT_LEASE_SECONDS)
    written_ahead = _record(acquired_at="2030-01-01T00:00:00Z", expires_at="2030-01-01T00:01:00Z")
    assert fleet_lock.lock_deadline(written_ahead, NOW) == NOW  # a clock far ahead: over at once


def _lock_commit(r: Repo, files: dict[str, bytes]) -> str:
    tree = r.update_tree(None, {name: r.write_blob(data) for name, data in files.items()})
    return r.create_commit(tree, [], "lock")


def test_a_lock_commit_is_read_through_its_parser(repo: Path) -> None:
    r = Repo.discover(repo)
    good = _lock_commit(r, {fleet_lock.RECORD_NAME: json.dumps(_record()).encode()})
    assert fleet_lock.read_record(r, good, "the lock")["pid"] == 1
    blob = r.write_blob(b"x")
    for oid, message in ((blob, "the lock points at a blob, not a lock commit"),
                         (_lock_commit(r, {"other.json": b"{}"}), "holds exactly one lock.json"),
                         (_lock_commit(r, {fleet_lock.RECORD_NAME: b"{}", "x": b""}), "holds exactly one lock.json"),
                         (_lock_commit(r, {fleet_lock.RECORD_NAME: b'{"pid": 1}'}), "a lock record needs")):
        with pytest.raises(InvalidState, match=message):
            fleet_lock.read_record(r, oid, "the lock")


def test_without_a_fleet_lock_nothing_is_taken() -> None:
    assert fleet_lock.NO_LOCK.acquire() == {} and fleet_lock.NO_LOCK.release() is False
