"""A one-shot `git handoff` leaves without the interpreter's teardown (git_handoff/infra/exit_fast.py):
what must happen at exit still happens, in-process and served by the command server alike.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cmdserver import (
    blocked_reading_stdin,
    client_env,
    console_script,
    served,
    stop_servers,
    wait_for,
    wait_until_serving,
)
from tests.support.repo import git, run

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["in-process", "served"])
def env(request: pytest.FixtureRequest, repo: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    bin_dir = tmp_path / "bin"
    console_script(bin_dir)
    (repo / "plan.toml").write_text("".join(
        f'[[task]]\nid = "t{n:03d}"\ntitle = "Task number {n} with a title long enough to fill lines"\n'
        f'check = "true"\n\n' for n in range(400)))
    assert run("init").rc == 0 and run("import", "plan.toml").rc == 0
    git("add", "plan.toml", cwd=repo)
    git("commit", "-q", "-m", "plan", cwd=repo)
    served_mode = request.param == "served"
    environ = client_env(bin_dir, server="1" if served_mode else "0")
    environ["GIT_HANDOFF_LOCK_TIMEOUT"] = "0.5"  # read at import: the server is started with it too
    if served_mode:
        subprocess.run(["git-handoff", "status"], cwd=repo, env=environ, capture_output=True, check=True)
        wait_until_serving(repo)
    environ["_MODE"] = request.param
    try:
        yield environ
    finally:
        stop_servers(repo)


def _was_served(repo: Path, env: dict[str, str], count: int) -> None:
    assert len(served(repo)) == (count if env["_MODE"] == "served" else 0)


def test_output_is_flushed_to_a_pipe_and_to_a_file(repo: Path, env: dict[str, str], tmp_path: Path) -> None:
    want = run("list", "--json").out
    assert len(want) > 3 * 65536  # more than a pipe holds: written while the reader reads
    piped = subprocess.run(["git-handoff", "list", "--json"], cwd=repo, env=env, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stdout == want
    out = tmp_path / "out.json"
    with open(out, "w") as f:
        code = subprocess.run(["git", "handoff", "list", "--json"], cwd=repo, env=env, stdout=f).returncode
    assert code == 0 and out.read_text() == want
    small = tmp_path / "small.txt"  # a short answer sits in the buffer until the end
    with open(small, "w") as f:
        assert subprocess.run(["git-handoff", "next"], cwd=repo, env=env, stdout=f).returncode == 0
    assert small.read_text() == run("next").out
    _was_served(repo, env, 3)
    assert len(json.loads(want)) == 400


def test_the_state_lock_is_released(repo: Path, env: dict[str, str]) -> None:
    from filelock import FileLock

    assert subprocess.run(["git-handoff", "claim", "t000"], cwd=repo, env=env, capture_output=True).returncode == 0
    lock = FileLock(str(repo / ".git" / "handoff" / "state.lock"), timeout=0)
    with lock:  # free at once: no process is left holding it
        pass
    second = subprocess.run(["git-handoff", "checkpoint", "t000", "step"], cwd=repo, env=env, capture_output=True,
                            text=True)
    assert second.returncode == 0, second.stderr
    _was_served(repo, env, 2)


def test_exit_codes_are_kept(repo: Path, env: dict[str, str]) -> None:
    from filelock import FileLock

    def code(*args: str) -> int:
        return subprocess.run(["git-handoff", *args], cwd=repo, env=env, capture_output=True).returncode

    assert code("next") == 0
    assert code("show", "nope") == 2
    assert code("next", "--bogus") == 2
    with FileLock(str(repo / ".git" / "handoff" / "state.lock"), timeout=5):
        assert code("claim", "t001") == 3  # contention
    assert code("claim", "t001") == 0
    assert run("edit", "t001", "--check", "false").rc == 0
    assert code("done", "t001") == 1  # its check failed: a negative answer
    proc = subprocess.Popen(["git-handoff", "hook", "claude-stop"], cwd=repo, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    def reader() -> int | None:
        return _worker(repo) if env["_MODE"] == "served" else proc.pid

    wait_for(lambda: (pid := reader()) is not None and blocked_reading_stdin(pid), "the hook to read its payload")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 130
    _was_served(repo, env, 7)


def _worker(repo: Path) -> int | None:
    lines = [line for line in (repo / ".git/handoff/cmdserver/log").read_text().splitlines()
             if line.endswith(": hook claude-stop")]
    return int(lines[-1].split()[2][:-1]) if lines else None


def test_the_background_repack_is_still_started(repo: Path, env: dict[str, str]) -> None:
    """Past GC_LOOSE_OBJECTS loose objects, about one transaction in eight starts a
    repack in the background: a process that outlives the command that started it."""
    (repo / "blobs").mkdir()
    paths = []
    for n in range(1500):
        path = repo / "blobs" / f"b{n}"
        path.write_text(f"blob {n}\n")
        paths.append(str(path))
    subprocess.run(["git", "hash-object", "-w", "--stdin-paths"], cwd=repo, input="\n".join(paths), text=True,
                   check=True, capture_output=True)
    loose_before = _loose(repo)
    assert loose_before > 1000
    marker = repo / ".git" / "handoff" / "gc.running"
    started = False
    for n in range(120):  # (7/8)^120: a chance in ten million of never drawing the check
        got = subprocess.run(["git-handoff", "checkpoint", "t002", f"step {n}"] if n else
                             ["git-handoff", "claim", "t002"], cwd=repo, env=env, capture_output=True, text=True)
        assert got.returncode == 0, got.stderr
        if marker.exists() or _loose(repo) < loose_before // 2:
            started = True
            break
    assert started
    wait_for(lambda: not marker.exists(), "the background repack", limit=120)
    assert _loose(repo) < loose_before // 2


def _loose(repo: Path) -> int:
    objects = repo / ".git" / "objects"
    return sum(len(os.listdir(d)) for d in objects.iterdir() if len(d.name) == 2)


# -- exit_fast.leave itself, in a process of its own ---------------------------------------

def _leave(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "leave.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_leave_runs_atexit_handlers_then_flushes(tmp_path: Path) -> None:
    got = _leave("import atexit, sys, tempfile\n"
                 "from git_handoff.infra import exit_fast\n"
                 "keep = tempfile.TemporaryDirectory()\n"
                 f"open({str(tmp_path / 'where')!r}, 'w').write(keep.name)\n"
                 "atexit.register(lambda: print('atexit ran'))\n"
                 "print('buffered', end=' ')\n"
                 "sys.stderr.write('err without newline')\n"
                 "exit_fast.leave(5)\n", tmp_path)
    assert (got.returncode, got.stdout, got.stderr) == (5, "buffered atexit ran\n", "err without newline")
    assert not Path((tmp_path / "where").read_text()).exists()  # its finalizer ran at exit


def test_leave_gives_sys_exit_statuses(tmp_path: Path) -> None:
    for arg, status, err in (("None", 0, ""), ("'a message'", 1, "a message\n"), ("130", 130, ""), ("256", 0, "")):
        got = _leave(f"from git_handoff.infra import exit_fast\nexit_fast.leave({arg})\n", tmp_path)
        assert (got.returncode, got.stderr) == (status, err), arg


def test_leave_waits_for_a_running_thread(tmp_path: Path) -> None:
    got = _leave("import threading, time\n"
                 "from git_handoff.infra import exit_fast\n"
                 "def late():\n"
                 "    time.sleep(0.3)\n"
                 "    print('thread done', flush=True)\n"
                 "threading.Thread(target=late).start()\n"
                 "exit_fast.leave(4)\n", tmp_path)
    assert (got.returncode, got.stdout) == (4, "thread done\n")


def test_leave_on_a_closed_pipe_is_status_120(tmp_path: Path) -> None:
    script = tmp_path / "leave.py"
    script.write_text("import sys\nfrom git_handoff.infra import exit_fast\n"
                      "sys.stdout.write('x' * 100)\n"
                      "import time; time.sleep(0.5)\n"
                      "exit_fast.leave(0)\n")
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**buffered, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before the flush
    start = time.monotonic()
    assert proc.wait(timeout=30) == 120
    assert time.monotonic() - start < 30
