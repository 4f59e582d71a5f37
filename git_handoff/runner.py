"""Run a task's validation or cleanup command: `sh -c` at the worktree root, in its
own process group, under a timeout that kills the whole group (no orphans).

Outcome categories (SPEC §5): exit 0 passes; exit 127 (command not found) is
ENV_SETUP; any other non-zero exit is TEST_FAIL; running out of time is TIMEOUT.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

# What is kept of a command's combined stdout/stderr: its last bytes.
TAIL_BYTES = 4000
# After SIGTERM to the group, how long the processes get before SIGKILL.
TERM_GRACE_SECONDS = 1.0
# After the command ends, how long a reader waits for the pipe to close.
READER_JOIN_SECONDS = 2.0


@dataclass(frozen=True)
class RunResult:
    ok: bool
    category: str | None  # None | 'TEST_FAIL' | 'TIMEOUT' | 'ENV_SETUP'
    exit_code: int | None
    timed_out: bool
    output_tail: str
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: what happened, for an error log entry."""
        if self.ok:
            return "passed"
        if self.timed_out:
            head = "timed out"
        elif self.category == "ENV_SETUP":
            head = f"command not found (exit {self.exit_code})"
        else:
            head = f"exit {self.exit_code}"
        last = [line.strip() for line in self.output_tail.splitlines() if line.strip()]
        if last:
            tail = " | ".join(last[-3:])
            if len(tail) > 300:
                tail = "..." + tail[-297:]
            return f"{head}: {tail}"
        return head

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "category": self.category,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "output_tail": self.output_tail,
            "seconds": round(self.seconds, 3),
        }


class _Tail:
    """Drains a pipe in a thread, keeping only the last TAIL_BYTES bytes."""

    def __init__(self, stream: object) -> None:
        self._stream = stream
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        read = self._stream.read1 if hasattr(self._stream, "read1") else self._stream.read  # type: ignore[attr-defined]
        try:
            while True:
                chunk = read(65536)
                if not chunk:
                    break
                self._chunks.append(chunk)
                self._size += len(chunk)
                while self._size - len(self._chunks[0]) >= TAIL_BYTES and len(self._chunks) > 1:
                    self._size -= len(self._chunks.popleft())
        except (OSError, ValueError):
            pass

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        data = b"".join(self._chunks)[-TAIL_BYTES:]
        return data.decode("utf-8", errors="replace")


def _kill_group(pgid: int, sig: int) -> bool:
    """Signal every process of the group; False when none is left."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _end_group(proc: subprocess.Popen[bytes], pgid: int) -> None:
    """TERM the group, give it a moment, then KILL what is left; reap the leader."""
    if _kill_group(pgid, signal.SIGTERM):
        deadline = time.monotonic() + TERM_GRACE_SECONDS
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _group_alive(pgid):
                break
            time.sleep(0.02)
        _kill_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def run_command(command: str, cwd: Path, timeout: int, env: dict[str, str] | None = None) -> RunResult:
    """Run `command` with `sh -c` in `cwd`, at most `timeout` seconds; never raises on failure."""
    run_env = dict(os.environ)
    if env:
        run_env.update(env)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            ["sh", "-c", command],
            cwd=str(cwd),
            env=run_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return RunResult(False, "ENV_SETUP", None, False, f"cannot start sh: {exc}", 0.0)
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    tail = _Tail(proc.stdout)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _end_group(proc, pgid)
    except BaseException:
        _end_group(proc, pgid)
        raise
    else:
        # The command is over; anything it left running in its group goes too.
        if _group_alive(pgid):
            _kill_group(pgid, signal.SIGKILL)
    tail.join(READER_JOIN_SECONDS)
    if proc.stdout is not None:
        try:
            proc.stdout.close()
        except OSError:
            pass
    seconds = time.monotonic() - started
    code = proc.returncode
    output = tail.text()
    if timed_out:
        return RunResult(False, "TIMEOUT", code, True, output, seconds)
    if code == 0:
        return RunResult(True, None, 0, False, output, seconds)
    if code == 127:
        return RunResult(False, "ENV_SETUP", code, False, output, seconds)
    return RunResult(False, "TEST_FAIL", code, False, output, seconds)
