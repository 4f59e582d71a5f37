# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""A claim decided from a stale fetch must not take a task another clone claimed,
finished and synced in the meantime (the ABA of a deleted claim ref, found by the fleet
model: docs/fleet-simulation.md). Deterministic: a pre-receive hook on the remote holds
clone B's claim push, after B fetched and decided, while clone A runs its whole
claim -> done -> sync; then lets B's push through to the server's compare-and-swap."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.remotes import Clones, clones, ok, remote_url, shared_pair, task  # noqa: F401
from tests.support.repo import Result, git, run_exe

HOOK = """#!/bin/sh
input=$(cat)
case "$input" in *" refs/harness/claims/t"*) ;; *) exit 0 ;; esac
mv "{ctl}/armed" "{ctl}/held" 2>/dev/null || exit 0
touch "{ctl}/arrived"
i=0
while [ ! -e "{ctl}/release" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
exit 0
"""


def _wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def test_stale_claim_cannot_take_a_task_finished_and_synced_meanwhile(clones: Callable[[str], Path],
                                                                      tmp_path: Path) -> None:
    a, b = shared_pair(clones, ("add", "x", "--id", "t", "--check", "true"))
    assert isinstance(clones, Clones)
    bare = clones.bare()
    if bare is None:  # served by git daemon: its directory is the fixture's
        bare = tmp_path / "served" / "remote.git"
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(HOOK.format(ctl=ctl))
    hook.chmod(0o755)
    git("config", "handoff.worker", "bob", cwd=b)
    (ctl / "armed").touch()
    got: list[Result] = []
    racer = threading.Thread(target=lambda: got.append(run_exe("claim", "--remote", "origin", "--json", cwd=b)))
    racer.start()
    try:
        _wait_for(ctl / "arrived")  # B fetched (t pending, no claim ref), decided on t, and pushes
        ok("claim", "t", "--remote", "origin", cwd=a)
        ok("done", "t", cwd=a)
        ok("sync", cwd=a)
        assert task(a, "t")["status"] == "completed"
    finally:
        (ctl / "release").touch()
        racer.join(timeout=120)
    assert got, "B's claim did not finish"
    r = got[0]
    # B must not hold t: its push was decided on a state where t was pending, and t has
    # been completed since; it looks again and finds nothing eligible
    assert r.rc == 1, f"B claimed a task already completed: rc={r.rc} out={r.out} err={r.err}"
    ok("sync", cwd=b)
    assert task(b, "t")["status"] == "completed"
    assert task(b, "t").get("claimed_by") != "bob"
