"""Run a task's validation or cleanup command: `sh -c` at the worktree root, in its
own process group, under a timeout that kills the whole group (no orphans).

Outcome categories (the error categories of `fail`): exit 0 passes; exit 127 (command not found) is
ENV_SETUP; any other non-zero exit is TEST_FAIL; running out of time is TIMEOUT.

Inside `streaming(sink)` (the CLI's choice, at a terminal), the command's stdout and
stderr are read from two pipes and handed to `sink` as they arrive, each to its own
stream, while the same bytes, interleaved in arrival order, are kept for the record.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from git_handoff.core.model import printable

# sink(stream, chunk): stream is "stdout" or "stderr"; called from reader threads.
Sink = Callable[[str, bytes], None]
_SINK: contextvars.ContextVar[Sink | None] = contextvars.ContextVar("runner_sink", default=None)


@contextlib.contextmanager
def streaming(sink: Sink | None) -> Iterator[None]:
    """Commands run inside this block pass their output to `sink` live (None: don't)."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)

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
        # the output is the check's own: colors and other control characters would make
        # an error log entry every other clone's edge refuses (model.printable)
        last = [line for line in map(printable, self.output_tail.splitlines()) if line]
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
    """Drains one or more pipes in threads, keeping only the last TAIL_BYTES bytes of
    what they produced together (in arrival order), and passing each chunk to the sink."""

    def __init__(self, streams: dict[str, object], sink: Sink | None = None) -> None:
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._cut = False  # chunks were dropped from the front
        self._lock = threading.Lock()
        self._sink = sink
        self._threads = [threading.Thread(target=self._drain, args=(name, stream), daemon=True)
                         for name, stream in streams.items() if stream is not None]
        for thread in self._threads:
            thread.start()

    def _drain(self, name: str, stream: object) -> None:
        read = stream.read1 if hasattr(stream, "read1") else stream.read  # type: ignore[attr-defined]  # a pipe: read1 or read
        try:
            while True:
                chunk = read(65536)
                if not chunk:
                    break
                with self._lock:
                    self._chunks.append(chunk)
                    self._size += len(chunk)
                    while self._size - len(self._chunks[0]) >= TAIL_BYTES and len(self._chunks) > 1:
                        self._size -= len(self._chunks.popleft())
                        self._cut = True
                    if self._sink is not None:
                        try:
                            self._sink(name, chunk)
                        except (OSError, ValueError):
                            self._sink = None  # the terminal went away: keep recording
        except (OSError, ValueError):
            pass

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def text(self) -> str:
        """The last TAIL_BYTES bytes, from the first whole line (else word) when more came
        before them: a secret whose front was cut off would be text no secret rule knows."""
        whole = b"".join(self._chunks)
        data = whole[-TAIL_BYTES:]
        if len(whole) > TAIL_BYTES or self._cut:
            at = data.find(b"\n")
            if at < 0:
                at = next((i for i, byte in enumerate(data) if byte in b" \t\r"), len(data))
            data = data[at + 1:]  # no space at all: nothing kept
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
    sink = _SINK.get()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            ["sh", "-c", command],
            cwd=str(cwd),
            env=run_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # live: two pipes, so stderr reaches stderr; otherwise one, in exact order
            stderr=subprocess.PIPE if sink is not None else subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        return RunResult(False, "ENV_SETUP", None, False, f"cannot start sh: {exc}", 0.0)
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    tail = _Tail({"stdout": proc.stdout, "stderr": proc.stderr}, sink)
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
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
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
