"""Processes: is one alive, and ending a whole process tree (what an agent started
included, even when it moved to its own process group)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from git_handoff.core.errors import Signalled


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _table() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every process."""
    rows: list[tuple[int, int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        names = []
    if names:
        for name in names:
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                rows.append((int(name), int(fields[1]), int(fields[2])))
            except (OSError, IndexError, ValueError):
                continue
        return rows
    proc = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,pgid="], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            rows.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return rows


def _tagged(token: str) -> set[int]:
    """Processes whose environment holds `token` (inherited by everything an agent starts,
    daemons that left the process tree included)."""
    needle = _entry(token)
    found = set()
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if needle in b"\0" + fh.read() + b"\0":
                        found.add(int(name))
            except OSError:
                continue
    return found


def _entry(token: str) -> bytes:
    """The whole environment entry, not any text that contains the token ("HOME=" would
    match every process)."""
    return f"\0{TOKEN_VAR}={token}\0".encode()


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in b"\0" + fh.read() + b"\0"
    except OSError:
        return False


def launched_with(pid: int, token: str) -> bool:
    """Whether `pid` is still the process launched with `token` in its environment (it,
    or a child: a tmux pane's shell exports it to the agent it starts), not another that
    got the number after a reboot, or one a copied record names. Without /proc: alive."""
    if not alive(pid):
        return False
    if not os.path.isdir("/proc"):
        return True
    needle = _entry(token)
    return _environ_has(pid, needle) or any(_environ_has(p, needle) for p, ppid, _ in _table() if ppid == pid)


def kill_tagged(token: str, grace: float = 3.0) -> None:
    """End every process that carries `token` (what an agent left running once it was gone)."""
    members = _tagged(token)
    _signal_all(members, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while members and time.monotonic() < deadline:
        members = {m for m in members if alive(m)}
        time.sleep(0.05)
    _signal_all(members | _tagged(token), signal.SIGKILL)


def tree(pid: int, token: str | None = None) -> set[int]:
    """`pid`, its descendants, every member of the process groups they lead, and (with
    `token`) every process whose environment carries it."""
    rows = _table()
    children: dict[int, list[int]] = {}
    for p, ppid, _ in rows:
        children.setdefault(ppid, []).append(p)
    found = {pid} if alive(pid) else set()
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    leaders = set(found) | {pid}
    found.update(p for p, _, pgid in rows if pgid in leaders)
    if token:
        found.update(_tagged(token))
    found.discard(os.getpid())
    return found


def kill_tree(pid: int, token: str | None = None, grace: float = 3.0) -> None:
    """SIGTERM the tree of `pid`, then SIGKILL what is left after `grace` seconds."""
    members = tree(pid, token)
    _signal_all(members, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        members = {m for m in members if alive(m)}
        if not members:
            return
        time.sleep(0.05)
    _signal_all(members | tree(pid, token), signal.SIGKILL)


def _signal_all(pids: set[int], sig: int) -> None:
    for member in pids:
        try:
            os.kill(member, sig)
        except (ProcessLookupError, PermissionError):
            pass


TOKEN_VAR = "HANDOFF_AGENT_TOKEN"  # what the launcher tags an agent (and all it starts) with
TERMINATING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupts:
    """The terminating signals that came while `signals_as_interrupt` was on, in order."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.raised = False

    def check(self) -> None:
        """Raise errors.Signalled for the first signal that came, once (later calls, and
        later signals, do nothing: the cleanup it starts must run to its end)."""
        if self.received and not self.raised:
            self.raised = True
            raise Signalled(self.received[0])


@contextmanager
def signals_as_interrupt(*, deferred: bool = False) -> Iterator[Interrupts]:
    """Ctrl-C, SIGTERM and SIGHUP raise errors.Signalled (a KeyboardInterrupt naming the
    signal) the first time; every later one is ignored, so that the cleanup the first one
    started (ending an agent, closing its session, releasing a lock) runs to its end.
    A signal ignored when the block starts stays ignored: `nohup git handoff relay` asks
    the relay to outlive its terminal, and the terminal's hang-up must not end it.
    Through `git`, one Ctrl-C arrives twice: from the terminal, and again from git, which
    forwards it to its child and waits for it. Once a signal came, the signals stay
    ignored, and blocked, after the block: the process is on its way out, and Python's
    own shutdown gives a signal it handled back its default action, which a late copy of
    the signal would then take (death by the signal instead of the exit status).

    With `deferred`, the handler only records the signal and the block raises it itself,
    at a point of its choosing (`Interrupts.check`, or `wait`): an exception raised from
    a signal handler lands in whatever code runs at that moment, and there it can be
    discarded (a `__del__`, a callback) or leave that code half done (subprocess's wait
    holding its lock, a child started but not yet known), after which nothing raises
    again and nothing cleans up."""
    interrupts = Interrupts()

    def handler(signum: int, frame: Any) -> None:
        interrupts.received.append(signum)
        if not deferred:
            interrupts.check()

    saved = {}
    for sig in TERMINATING:
        if signal.getsignal(sig) == signal.SIG_IGN:
            continue  # ignored by whoever started us (`nohup` ignores SIGHUP): it stays ignored
        try:
            saved[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread
            pass
    try:
        yield interrupts
    finally:
        for sig, old in saved.items():
            signal.signal(sig, int(signal.SIG_IGN) if interrupts.received else old)
        if interrupts.received:
            signal.pthread_sigmask(signal.SIG_BLOCK, TERMINATING)


def wait(proc: subprocess.Popen[bytes], interrupts: Interrupts, step: float = 0.2) -> int:
    """`proc`'s exit status; errors.Signalled once a signal `signals_as_interrupt(deferred=True)`
    recorded came (checked every `step` seconds, and once more when `proc` exited)."""
    while True:
        interrupts.check()
        try:
            code = proc.wait(timeout=step)
        except subprocess.TimeoutExpired:
            continue
        interrupts.check()
        return code
