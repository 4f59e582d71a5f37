"""An exclusive lock on a file between processes (git_handoff.infra.file_lock.StateLock)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from git_handoff.core.errors import Contention, UsageError
from git_handoff.infra.file_lock import StateLock

HOLD = """
import sys, time
from git_handoff.infra.file_lock import StateLock
with StateLock(sys.argv[1], timeout=5):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(path: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_lock_held_by_another_process_is_contention_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "state.lock"
    holder = _holder(path, 30)
    try:
        started = time.monotonic()
        with pytest.raises(Contention, match="held the state lock for 0s; nothing was changed, retry"), \
                StateLock(path, timeout=0.3):
            pass
        assert time.monotonic() - started >= 0.3
    finally:
        holder.kill()
        holder.wait()
    with StateLock(path, timeout=5):  # the kernel dropped the dead holder's lock
        assert path.exists()


def test_a_lock_is_taken_again_once_released(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    holder = _holder(path, 0.2)
    with StateLock(path, timeout=10) as lock:  # waits the holder out
        assert lock.path == str(path)
    holder.wait()
    with StateLock(path, timeout=0), StateLock(tmp_path / "other", timeout=0):
        pass


def test_a_lock_where_nothing_can_be_written_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a read-only repository looks to a process that is not root (the tests may run as
    root, which writes everywhere: the refusal of the file system is made here)."""
    def refused(path: str, *args: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refused)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(UsageError, match=r"^cannot write here: .*/lock: Permission denied \(this repository is "
                       "read-only to this process"), StateLock(tmp_path / "lock", timeout=1):
        pass
