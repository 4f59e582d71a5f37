"""Every fetched value counts only within bounds set by now and by its own record
(docs/threat-model.md, bounded values): a far-future clock stamp is not adopted, a session count
no records stand behind does not use up the sessions, a lease or a relay lock "until
8999" holds no longer than the lease its own record declares. Each case is pushed to
the shared remote by an attacker's clone; the victim keeps working and writes nothing
its peers would refuse.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from git_handoff.core import field_checks, hlc
from tests.support.hostile import BLOB, World, jbytes, make_world, put, task_path, task_record
from tests.support.repo import git, run
from tests.support.templates import Templates

FAR = "9999999999999.999999.ffffffffffffffff"  # the year 2286, the largest stamp an edge reads
DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def world(tmp_path: Path, templates: Templates) -> Iterator[World]:
    yield from make_world(tmp_path, templates)


def ok(w: World, *args: str, where: Path | None = None) -> Any:
    res = run(*args, cwd=where or w.victim)
    assert res.rc == 0, (args, res.err)
    return res


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def stamp_at(moment: datetime) -> str:
    return f"{int(moment.timestamp() * 1000):013d}.000000.ffffffffffffffff"


def current(w: World, path: str) -> dict[str, Any]:
    return dict(json.loads(git("show", f"refs/harness/state:{path}", cwd=w.victim)))


def far_future(record: dict[str, Any]) -> dict[str, Any]:
    out = dict(record, hlc=FAR)
    out["field_clock"] = {"title": [FAR, "000000000000"], "claim": [FAR, "000000000000"]}
    return out


# -- a far-future clock -----------------------------------------------------------------------


def _stamps_near_now(value: Any) -> list[str]:
    """Every clock stamp in `value` further ahead of now than a day (none expected)."""
    limit = int(time.time() * 1000) + DAY_MS
    found: list[str] = []
    if isinstance(value, dict):
        for v in value.values():
            found += _stamps_near_now(v)
    elif isinstance(value, list):
        for v in value:
            found += _stamps_near_now(v)
    elif isinstance(value, str) and len(value.split(".")) == 3 and value.split(".")[0].isdigit():
        if len(value.split(".")[0]) != 13 or int(value.split(".")[0]) > limit:
            found.append(value)
    return found


WRITERS: dict[str, tuple[tuple[str, ...], str]] = {
    "edit": (("edit", "api", "--title", "Add the API, v2"), task_path("api")),
    "claim": (("claim", "schema"), task_path("schema")),
    "session start": (("session", "start"), "meta.json"),
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_far_future_clock_is_not_adopted_by_the_victims_writes(world: World, writer: str) -> None:
    a = world.attacker
    node = a.state_node()
    for task_id in ("schema", "api"):
        record = json.loads(a.blob_data(node["tasks"][task_path(task_id).split("/")[1]]
                                        [task_path(task_id).split("/")[2]][f"{task_id}.json"][1]))
        put(node, task_path(task_id), (BLOB, a.blob(jbytes(far_future(record)))))
    meta = json.loads(a.blob_data(node["meta.json"][1]))
    put(node, "meta.json", (BLOB, a.blob(jbytes(dict(meta, hlc=FAR)))))
    a.push_state(node)
    ok(world, "trust", "--all")
    ok(world, "sync")
    assert current(world, task_path("schema"))["hlc"] == FAR  # adopted as data
    args, path = WRITERS[writer]
    ok(world, *args)
    written = current(world, path)
    assert _stamps_near_now({"hlc": written["hlc"], "field_clock": written.get("field_clock")}) == [], written
    ok(world, "sync")
    res = run("sync", cwd=world.evil)  # every other clone still reads what the victim wrote
    assert res.rc == 0, res.err


# -- a session count no records stand behind ------------------------------------------------


def _exhausted_counter(w: World) -> None:
    a = w.attacker
    node = a.state_node()
    meta = json.loads(a.blob_data(node["meta.json"][1]))
    meta.update(session_count=10**18 - 1, sessions_by_clone={"0123456789abcdef": 10**18 - 1})
    put(node, "meta.json", (BLOB, a.blob(jbytes(meta))))
    a.push_state(node)
    ok(w, "sync")


def test_a_foreign_session_count_of_10_18_does_not_stop_session_start(world: World) -> None:
    _exhausted_counter(world)
    record = ok(world, "session", "start", "--json").json()
    assert 1 <= record["session"] <= 10
    ok(world, "session", "end")
    assert ok(world, "session", "start", "--json").json()["session"] == record["session"] + 1
    ok(world, "sync")
    assert run("sync", cwd=world.evil).rc == 0


@pytest.mark.slow
def test_a_foreign_session_count_of_10_18_does_not_stop_the_relay(world: World) -> None:
    _exhausted_counter(world)
    proc = subprocess.run(["git", "handoff", "relay", "--agent", "true", "--max-launch-failures", "1",
                           "--ack-timeout", "5"], cwd=world.victim, capture_output=True, text=True, timeout=120)
    assert "max_sessions" not in proc.stderr and "cannot start session" not in proc.stderr, proc.stderr
    assert "relay: session" in proc.stdout + proc.stderr, (proc.stdout, proc.stderr)


# -- a lease until 8999 ---------------------------------------------------------------------


@pytest.mark.parametrize("written", ["two hours ago", "in the year 2286"])
def test_a_lease_until_8999_holds_no_longer_than_its_record_declares(world: World, written: str) -> None:
    a = world.attacker
    node = a.state_node()
    when = datetime.now(UTC) - timedelta(hours=2)
    record = task_record("schema", title="Write the schema", status="in_progress", claimed_by="mallory",
                         started_at_commit=git("rev-parse", "HEAD", cwd=world.victim),
                         validation={"command": "true", "timeout_seconds": 300},
                         lease_expires_at="8999-01-01T00:00:00Z", lease_seconds=60, claimed_at=iso(when),
                         updated_at=iso(when), hlc=stamp_at(when) if written == "two hours ago" else FAR)
    put(node, task_path("schema"), (BLOB, a.blob(jbytes(record))))
    a.push_state(node)
    ok(world, "sync")
    assert current(world, task_path("schema"))["lease_expires_at"] == "8999-01-01T00:00:00Z"
    git("stash", "-u", "-q", cwd=world.victim)
    res = run("claim", "schema", "--json", cwd=world.victim)
    assert res.rc == 0, res.err
    assert res.json()["claimed_by"] != "mallory"
    assert "Lease expired (claimed_by=mallory)" in run("log", "--task", "schema", cwd=world.victim).out


# -- a relay lock until 8999 ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("written", ["two hours ago", "in the year 8999"])
def test_a_fleet_relay_lock_until_8999_does_not_block_every_relay(world: World, written: str) -> None:
    a = world.attacker
    when = datetime.now(UTC) - timedelta(hours=2)
    at = iso(when) if written == "two hours ago" else "8999-01-01T00:00:00Z"
    lock = {"clone": "0123456789abcdef", "host": "evil", "pid": 4242, "acquired_at": at, "renewed_at": at,
            "expires_at": "8999-01-01T00:00:00Z", "lease_seconds": 120}
    commit = a.commit(a.raw_tree({"lock.json": (BLOB, a.blob(jbytes(lock)))}), [], "relay lock\n")
    a.push(commit, "refs/harness/locks/relay")
    proc = subprocess.run(["git", "handoff", "relay", "--agent", "true", "--fleet-lock", "--max-launch-failures", "1",
                           "--ack-timeout", "5"], cwd=world.victim, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 3 and "holds the fleet lock" not in proc.stderr, proc.stderr
    assert "relay: session" in proc.stdout + proc.stderr, (proc.stdout, proc.stderr)


# -- the clock, as a property -----------------------------------------------------------------


@given(ms=st.integers(0, 10**13 - 1), logical=st.integers(0, 999_999),
       now_ms=st.integers(1_700_000_000_000, 4_000_000_000_000))
def test_a_write_after_any_readable_stamp_is_readable_and_near_the_clock(ms: int, logical: int, now_ms: int) -> None:
    previous = hlc.stamp(ms, logical, "f" * 16)
    written = hlc.next_stamp(previous, now_ms, "0123456789abcdef")
    assert field_checks.HLC_STAMP.fullmatch(written), written  # what every peer's edge reads
    assert now_ms <= hlc.key(written)[0] <= now_ms + hlc.MAX_SKEW_MS + 1
    if ms <= now_ms + hlc.MAX_SKEW_MS:
        assert hlc.key(written) > hlc.key(previous)  # a credible stamp is still followed
