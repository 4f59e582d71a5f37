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


def parent_of(pid: int) -> int:
    """The parent's pid (0 when `pid` is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def kill_agent_cli(cli: str, tool: list[bytes], timeout: float = 60.0) -> int:
    """SIGKILL the agent CLI (a relay's agent: its processes carry HANDOFF_AGENT_TOKEN)
    whose tool runs the command line `tool` (e.g. [b"sleep", b"60"]), once that runs: the
    nearest ancestor of the tool whose command names `cli` and is no shell. Its pid, or 0
    when none was found within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in os.listdir("/proc"):
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")[:-1]
                env = Path(f"/proc/{name}/environ").read_bytes()
            except OSError:
                continue
            if b"HANDOFF_AGENT_TOKEN=" not in env or [a.rsplit(b"/", 1)[-1] for a in argv[:1]] + argv[1:] != tool:
                continue
            parent = parent_of(int(name))
            while parent > 1:
                try:
                    first = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    break
                if any(cli.encode() in part for part in first[:2]) and not first[0].endswith(b"sh"):
                    os.kill(parent, signal.SIGKILL)
                    return parent
                parent = parent_of(parent)
        time.sleep(0.2)
    return 0
