"""Processes in the process table, as the relay's tests look for what an agent left."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from git_handoff.infra import procs


def processes_with(marker: str) -> list[int]:
    """The live processes whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and procs.alive(int(name)):
                found.append(int(name))
    return found


def agents_left(repo: Path) -> list[int]:
    """Processes still running a session of this repository's relay (the agent CLI and its
    children: each carries HANDOFF_AGENT_TOKEN and works under `repo`)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes()
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        if b"HANDOFF_AGENT_TOKEN=" in env and cwd.startswith(str(repo)) and procs.alive(int(name)):
            found.append(int(name))
    return found


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, what: str = "condition") -> None:
    """Poll `predicate` every 50 ms; AssertionError naming `what` once `timeout` seconds passed."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def sigkill_once(proc: subprocess.Popen[str], ready: Callable[[], object]) -> None:
    """Once `ready()` returned, SIGKILL `proc` (a crash, a reboot) and reap it; `proc` is
    ended and reaped whatever `ready` raised."""
    try:
        ready()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@contextmanager
def ended_afterwards(proc: subprocess.Popen[str], marker: str) -> Iterator[None]:
    """Around a test's steps and assertions on `proc` (the leader of its own process
    group): afterwards, whatever the outcome, the whole group is SIGKILLed if `proc` still
    runs (through git, git-handoff too: it holds the pipes, and a communicate() would wait
    for it for ever) and so is what carries `marker` (what an agent left, in its own
    session), so that a failure fails instead of hanging or leaving processes behind."""
    try:
        yield
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
        for pid in processes_with(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
