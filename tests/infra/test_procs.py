"""Ending an agent's whole process tree, daemons that left it included."""

from __future__ import annotations

import os
import subprocess
import time

from git_handoff.infra import procs


def _wait_until(predicate, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def test_kill_tree_ends_children_grandchildren_and_escaped_daemons(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pids = tmp_path / "pids"
    script = (
        f"sleep 300 & echo $! >> {pids}; "
        f"(setsid sleep 300 & echo $! >> {pids}) ; "  # a daemon in its own session, parent gone
        f"sh -c 'sleep 300 & echo $! >> {pids}; wait' & "
        "wait"
    )
    token = f"tok-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True,
                            env=dict(os.environ, HANDOFF_AGENT_TOKEN=token))
    assert _wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 3)
    started = [int(p) for p in pids.read_text().split()]
    assert all(procs.alive(p) for p in started)
    # the daemon has escaped once the subshell that started it is gone (it was re-parented);
    # the pid file is written a moment before that
    assert _wait_until(lambda: _parent(started[1]) not in procs.tree(proc.pid) | {proc.pid})
    without_token = procs.tree(proc.pid)
    assert started[1] not in without_token  # the escaped daemon is not in the tree...
    assert set(started) <= procs.tree(proc.pid, token)  # ...but carries the token
    procs.kill_tree(proc.pid, token)
    proc.wait(timeout=10)
    assert _wait_until(lambda: not any(procs.alive(p) for p in started))


def test_alive_and_kill_tree_of_a_gone_process_do_nothing() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert not procs.alive(proc.pid)
    assert not procs.alive(0)
    procs.kill_tree(proc.pid)  # nothing to end, nothing raised
    assert procs.tree(proc.pid) == set()
