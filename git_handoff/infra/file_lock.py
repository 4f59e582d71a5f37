"""An exclusive lock on a file between processes: the state's, the notes', each fetch's."""

from __future__ import annotations

import os
import random
import time
from typing import Any

from git_handoff.core.errors import Contention, UsageError


class StateLock:
    """An exclusive lock on a file, held by this process between enter and exit.

    `fcntl.flock` directly: the `filelock` package costs ~25 ms to import, paid by
    every command. The kernel drops the lock when a holder dies, so none goes stale.
    """

    def __init__(self, path: Any, timeout: float) -> None:
        self.path = str(path)
        self.timeout = timeout
        self._held: Any = None

    def __enter__(self) -> StateLock:
        try:
            import fcntl
        except ModuleNotFoundError:  # not POSIX: fall back to the filelock package
            from filelock import FileLock, Timeout

            lock = FileLock(self.path, timeout=self.timeout)
            try:
                lock.acquire()
            except Timeout:
                raise self._contention() from None
            self._held = lock
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:  # a repository this process can not write to (Repo.handoff_dir)
            if os.access(os.path.dirname(self.path), os.W_OK):
                raise
            raise UsageError(f"cannot write here: {self.path}: {exc.strerror or exc} (this repository is "
                             "read-only to this process: reading commands and `serve` work, nothing "
                             "that changes the state)") from None
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise self._contention() from None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.05)
        self._held = fd
        return self

    def __exit__(self, *exc: object) -> None:
        held, self._held = self._held, None
        if isinstance(held, int):
            import fcntl

            try:
                fcntl.flock(held, fcntl.LOCK_UN)
            finally:
                os.close(held)
        elif held is not None:
            held.release()

    def _contention(self) -> Contention:
        return Contention(
            f"another git handoff process held the state lock for {self.timeout:.0f}s; nothing was changed, retry"
        )
