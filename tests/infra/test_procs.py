"""Ending an agent's whole process tree, daemons that left it included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from git_handoff.infra import procs
from tests.support.processes import processes_with


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


# A foreground `dispatch run` waits for its backend under signals_as_interrupt(deferred=True)
# and procs.wait. The program below does what it does, with the signal landing where an
# exception raised from a signal handler is lost: inside a `__del__` (Python prints
# "Exception ignored" and goes on), or inside subprocess's own wait right after it took
# its lock (the lock stays held: the cleanup's proc.wait() then waits for ever).
_WAIT_PROGRAM = """
import signal, subprocess, sys, threading
from git_handoff.infra import procs

class Dropped:
    def __del__(self):
        signal.raise_signal(signal.SIGTERM)

class LockThatSignals:
    def __init__(self):
        self.lock = threading.Lock()
    def acquire(self, *args):
        taken = self.lock.acquire(*args)
        if taken:
            signal.raise_signal(signal.SIGTERM)
        return taken
    def release(self):
        self.lock.release()
    def __enter__(self):
        return self.acquire()
    def __exit__(self, *exc):
        self.release()

with procs.signals_as_interrupt(deferred=True) as interrupts:
    proc = subprocess.Popen(["sleep", sys.argv[2]])
    if sys.argv[1] == "del":
        Dropped()
    else:
        proc._waitpid_lock = LockThatSignals()
    try:
        procs.wait(proc, interrupts)
    except KeyboardInterrupt as exc:
        procs.kill_tree(proc.pid)
        proc.wait()
        print("interrupted", exc.signum, proc.returncode)
        sys.exit(0)
print("not interrupted", proc.returncode)
"""


@pytest.mark.parametrize("where", ["del", "lock"])
def test_a_signal_whose_raise_would_be_lost_still_ends_the_wait_and_its_cleanup_runs(where: str) -> None:
    marker = f"{7000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6}"
    proc = subprocess.run([sys.executable, "-c", _WAIT_PROGRAM, where, marker], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["interrupted", str(int(signal.SIGTERM)), str(-signal.SIGTERM)], proc.stdout
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not processes_with(marker)
