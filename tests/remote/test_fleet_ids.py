# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""A fleet of real clones of one remote (a bare repository, or one served by git
daemon): session numbers two clones mint offline, a title edited after seeing another
clone's edit by a clone whose clock is an hour behind, and the fleet relay lock."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from git_handoff.core.record_schemas import SessionRecord
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops.payloads import SessionRow, SessionShown, SessionStarted
from git_handoff.remote import fleet_lock
from git_handoff.state import identity
from tests.support.remotes import clones, ok, remote_url, shared_pair, task  # noqa: F401
from tests.support.repo import git, run


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_two_clones_start_a_session_offline_and_both_are_kept(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("add", "x", "--id", "t"))
    first: SessionStarted = ok("session", "start", "--json", cwd=a)
    second: SessionStarted = ok("session", "start", "--json", cwd=b)
    assert first["session"] == second["session"] == 1  # each minted 1, offline
    ok("decide", "use a", "--why", "clone a", cwd=a)
    ok("decide", "use b", "--why", "clone b", cwd=b)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    ok("sync", cwd=a)
    for where in (a, b):
        rows: list[SessionRow] = ok("session", "list", "--json", cwd=where)
        assert sorted((r["session"], r["clone"]) for r in rows) == sorted(
            [(1, first["clone"]), (1, second["clone"])])
        assert first["clone"] != second["clone"]
        assert [r["here"] for r in rows if r["clone"] == identity.clone_id(Repo.discover(where))] == [True]
        # each record kept its own facts: nothing was fused
        names = git("ls-tree", "--name-only", "refs/harness/state:sessions", cwd=where).splitlines()
        assert sorted(names) == sorted(f"1@{c}.json" for c in (first["clone"], second["clone"]))
        records: list[SessionRecord] = [json.loads(git("show", f"refs/harness/state:sessions/{n}", cwd=where))
                                        for n in names]
        assert sorted(d["what"] for r in records for d in r["decisions"]) == ["use a", "use b"]
        # both show in the log, and max_sessions counts both
        log = ok("log", "--session", "1", cwd=where)
        assert log.count("Session 1 started") == 2
        assert ok("status", "--json", cwd=where)["session_count"] == 2
        shown: SessionShown = ok("session", "show", "1", "--json", cwd=where)
        assert shown["clone"] == identity.clone_id(Repo.discover(where)) and len(shown["also"]) == 1
    # the next session anywhere is numbered after both
    ok("session", "end", cwd=a)
    assert ok("session", "start", "--json", cwd=a)["session"] == 3


def test_max_sessions_counts_the_sessions_started_fleet_wide(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("init", "--max-sessions", "2"))
    ok("session", "start", cwd=a)
    ok("session", "start", cwd=b)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    ok("session", "end", cwd=b)
    refused = run("session", "start", cwd=b)
    assert refused.rc == 1 and "max_sessions (2) reached: 2 sessions were started" in refused.err


def test_a_clone_an_hour_behind_edits_after_seeing_the_other_and_wins(
        clones: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = shared_pair(clones, ("add", "x", "--id", "t"))
    real = datetime.now(UTC)
    monkeypatch.setenv("GIT_HANDOFF_NOW", stamp(real + timedelta(minutes=1)))
    ok("edit", "t", "--title", "by a", cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)  # b sees a's title
    assert task(b, "t")["title"] == "by a"
    monkeypatch.setenv("GIT_HANDOFF_NOW", stamp(real - timedelta(hours=1)))  # b's clock: an hour behind
    ok("edit", "t", "--title", "by b, after a", cwd=b)
    monkeypatch.setenv("GIT_HANDOFF_NOW", stamp(real + timedelta(minutes=2)))
    ok("edit", "t", "--priority", "P0", cwd=a)  # a goes on with the task meanwhile
    ok("sync", cwd=b)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    for where in (a, b):
        t = task(where, "t")
        assert t["title"] == "by b, after a" and t["priority"] == "P0"
    raw = json.loads(git("show", f"refs/harness/state:{state_path('t')}", cwd=a))
    # the wall clock says b wrote first; the hybrid clock says b wrote after a
    title_stamp = raw["field_clock"]["title"][0]
    assert title_stamp.endswith(identity.clone_id(Repo.discover(b)))
    assert int(title_stamp.split(".")[0]) > int((real - timedelta(minutes=30)).timestamp() * 1000)


def state_path(task_id: str) -> str:
    import hashlib

    h = hashlib.sha1(task_id.encode()).hexdigest()
    return f"tasks/{h[0]}/{h[1]}/{task_id}.json"


# -- the fleet relay lock --------------------------------------------------------------


def remote_dir(clone: Path) -> Path:
    url = git("remote", "get-url", "origin", cwd=clone)
    if url.startswith("git://"):
        return clone.parent / "served" / "remote.git"
    return Path(url)


def record_updates(clone: Path) -> Path:
    """An `update` hook on the remote logging every ref update: `ref old new`."""
    log = clone.parent / "updates.log"
    hook = remote_dir(clone) / "hooks" / "update"
    hook.write_text(f"#!/bin/sh\necho \"$1 $2 $3\" >> {log}\n")
    hook.chmod(0o755)
    return log


def lock_updates(log: Path) -> list[tuple[str, str]]:
    zero = "0" * 40
    out = []
    for line in log.read_text().splitlines() if log.exists() else []:
        ref, old, new = line.split()
        if ref == fleet_lock.LOCK_REF:
            out.append(("create" if old == zero else "delete" if new == zero else "take", old))
    return out


def holder(clone: Path, lease: int) -> fleet_lock.FleetLock:
    repo = Repo.discover(clone)
    return fleet_lock.FleetLock(repo, "origin", identity.clone_id(repo), os.getpid(), lease_seconds=lease)


def remote_lock(clone: Path) -> str:
    return git("ls-remote", "origin", fleet_lock.LOCK_REF, cwd=clone)


def test_a_second_relay_on_the_fleet_is_refused_and_the_lock_released(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones)
    first = holder(a, 120)
    record = first.acquire()
    assert remote_lock(b)
    res = run("relay", "--fleet-lock", "--agent", "true", cwd=b)
    assert res.rc == 3
    assert identity.clone_id(Repo.discover(a)) in res.err and record["expires_at"] in res.err
    assert res.err.startswith("error: a relay already holds the fleet lock on origin")
    assert first.release()
    assert remote_lock(b) == ""


DONE = (("add", "x", "--id", "t", "--check", "true"), ("claim", "t"), ("done", "t"))  # a relay then exits 0 at once


def test_relay_takes_the_fleet_lock_and_releases_it_at_exit(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, *DONE)
    log = record_updates(a)
    git("config", "handoff.relayLock", "fleet", cwd=b)
    res = run("relay", "--agent", "true", cwd=b)
    assert res.rc == 0, res.err
    assert [kind for kind, _ in lock_updates(log)] == ["create", "delete"]
    assert remote_lock(a) == ""
    # without the option (and the config), no lock is taken
    git("config", "--unset", "handoff.relayLock", cwd=b)
    assert run("relay", "--agent", "true", cwd=b).rc == 0
    assert len(lock_updates(log)) == 2


def later(seconds: int) -> str:
    """A pinned clock `seconds` ahead of now (GIT_HANDOFF_NOW): a lease that runs out
    without the test waiting for it."""
    return stamp(datetime.now(UTC) + timedelta(seconds=seconds))


def test_an_expired_lock_of_a_dead_machine_is_taken_over(clones: Callable[[str], Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = shared_pair(clones, *DONE)
    log = record_updates(a)
    dead = holder(a, 1)
    dead.acquire()  # and never renewed nor released: the machine died
    held = remote_lock(b).split()[0]
    monkeypatch.setenv("GIT_HANDOFF_NOW", later(5))  # its 1 s lease is over
    res = run("relay", "--fleet-lock", "--agent", "true", cwd=b)
    assert res.rc == 0, res.err
    assert lock_updates(log) == [("create", "0" * 40), ("take", held), ("delete", lock_updates(log)[2][1])]
    assert remote_lock(a) == ""
    # the dead holder coming back does not delete a lock that is no longer its own
    assert not dead.release()


def test_fleet_lock_bad_input(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones)
    res = run("relay", "--fleet-lock", "--lock-remote", "nowhere", "--agent", "true", cwd=b)
    assert res.rc == 2 and "no remote 'nowhere'" in res.err
    res = run("relay", "--fleet-lock", "--lock-lease", "0", "--agent", "true", cwd=b)
    assert res.rc == 2 and "lease" in res.err
    git("config", "handoff.relayLock", "everywhere", cwd=b)
    res = run("relay", "--agent", "true", cwd=b)
    assert res.rc == 2 and "handoff.relayLock" in res.err
    git("config", "--unset", "handoff.relayLock", cwd=b)
    # a remote holding a lock ref that is not a lock record: no lock, taken over by
    # compare-and-swap (it stopped every relay for good), and released as any lock
    empty_tree = git("hash-object", "-t", "tree", "-w", "/dev/null", cwd=a)
    bogus = git("commit-tree", empty_tree, "-m", "not a lock", cwd=a)
    blob = git("hash-object", "-w", "--stdin", cwd=a, input_text="not a lock")
    for junk in (bogus, blob):
        git("push", "-q", "--force", "origin", f"{junk}:{fleet_lock.LOCK_REF}", cwd=a)
        lock = holder(b, 120)
        assert lock.acquire()["clone"] == identity.clone_id(Repo.discover(b))
        assert remote_lock(b).split()[0] == lock.held != junk
        assert lock.release() and remote_lock(b) == ""


def test_sync_reads_a_lock_ref_through_its_parser(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones)
    lock = holder(a, 120)
    lock.acquire()
    ok("sync", cwd=b)  # a real lock fetched with the state: fine
    assert lock.release()
    # a lock ref that holds a malformed record: sync does not read the lock (the relay
    # does, through its parser): it neither fails nor brings the record in
    path = a.parent / "lock.json"
    path.write_text(json.dumps({"clone": "not-hex", "host": "h", "pid": 1, "expires_at": "soon",
                                "lease_seconds": 5}))
    blob = git("hash-object", "-w", str(path), cwd=a)
    tree = subprocess.run(["git", "mktree"], cwd=a, input=f"100644 blob {blob}\tlock.json\n", text=True,
                          capture_output=True, check=True).stdout.strip()
    commit = git("commit-tree", tree, "-m", "crafted", cwd=a)
    git("push", "-q", "origin", f"{commit}:{fleet_lock.LOCK_REF}", cwd=a)
    ok("add", "more", "--id", "t9", cwd=a)
    ok("sync", cwd=a)
    res = run("sync", cwd=b)
    assert res.rc == 0 and res.err == "", res.err
    assert "t9" in run("list", cwd=b).out
    assert "locks" not in git("for-each-ref", "refs/remotes/", cwd=b)
    # the relay reads it through its parser: no lock, so taken over
    lock = holder(b, 120)
    assert lock.acquire()["clone"] == identity.clone_id(Repo.discover(b))
    assert lock.release() and remote_lock(b) == ""


def test_a_lock_taken_over_is_lost_by_its_old_holder_and_never_deleted_by_it(clones: Callable[[str], Path],
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = shared_pair(clones)
    old = holder(a, 1)
    old.acquire()
    assert old.renew() and not old.taken_over  # renewed in time: still ours
    monkeypatch.setenv("GIT_HANDOFF_NOW", later(5))  # its 1 s lease is over
    new = holder(b, 60)
    new.acquire()  # the lease ran out: b takes it over
    assert new.took_over is not None and new.took_over["clone"] == old.clone
    held = remote_lock(a).split()[0]
    assert not old.renew() and old.taken_over and "taken over" in (old.lost or "")
    assert not old.release()
    assert remote_lock(a).split()[0] == held  # b's lock is intact
    assert new.release() and remote_lock(a) == ""
