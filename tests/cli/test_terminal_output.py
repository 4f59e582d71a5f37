"""A check's output at a terminal: live, stdout to stdout and stderr to stderr, and
still recorded. Driven through real pseudo-terminals."""

from __future__ import annotations

import errno
import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

from tests.support.repo import git, run

# prints a line a second on stdout and one on stderr, three times
TICKING = 'i=1; while [ $i -le 3 ]; do echo out-$i; echo err-$i >&2; sleep 1; i=$((i+1)); done'


def run_at_terminal(*args: str, cwd: Path, timeout: float = 60) -> tuple[int, list[tuple[float, str, str]], float]:
    """`git handoff ARGS` with stdout and stderr on two pseudo-terminals; returns the exit
    code, every (time, stream, text) read, and when the process ended."""
    masters = {}
    slaves = []
    for name in ("stdout", "stderr"):
        master, slave = pty.openpty()
        masters[master] = name
        slaves.append(slave)
    proc = subprocess.Popen(["git", "handoff", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=slaves[0], stderr=slaves[1])
    for fd in slaves:
        os.close(fd)
    events: list[tuple[float, str, str]] = []
    ended: float | None = None
    open_fds = set(masters)
    deadline = time.monotonic() + timeout
    try:
        while open_fds and time.monotonic() < deadline:
            ready, _, _ = select.select(list(open_fds), [], [], 0.05)
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError as exc:  # EIO: the other end is closed
                    if exc.errno != errno.EIO:
                        raise
                    data = b""
                if not data:
                    open_fds.discard(fd)
                    continue
                events.append((time.monotonic(), masters[fd], data.decode(errors="replace")))
            if ended is None and proc.poll() is not None:
                ended = time.monotonic()
        rc = proc.wait(timeout=10)
    finally:
        for fd in masters:
            os.close(fd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return rc, events, ended if ended is not None else time.monotonic()


def text_of(events: list[tuple[float, str, str]], stream: str) -> str:
    return "".join(t for _, s, t in events if s == stream).replace("\r\n", "\n")


def first_seen(events: list[tuple[float, str, str]], stream: str, needle: str) -> float:
    seen = ""
    for at, s, t in events:
        if s == stream:
            seen += t
            if needle in seen:
                return at
    raise AssertionError(f"{needle!r} never appeared on {stream}")


def test_check_output_streams_live_to_the_right_streams(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "Ticks", "--id", "ticks", "--check", TICKING).rc == 0
    rc, events, ended = run_at_terminal("verify", "ticks", cwd=repo)
    assert rc == 0
    out, err = text_of(events, "stdout"), text_of(events, "stderr")
    assert out.splitlines() == ["out-1", "out-2", "out-3", "PASS"]
    assert err.splitlines() == ["err-1", "err-2", "err-3"]
    # the first lines arrived while the check was still running (it runs ~3 s)
    assert ended - first_seen(events, "stdout", "out-1") > 1.5
    assert ended - first_seen(events, "stderr", "err-1") > 1.5
    assert first_seen(events, "stdout", "out-1") < first_seen(events, "stdout", "out-2") - 0.5


def test_streamed_output_is_still_recorded(repo: Path) -> None:
    assert run("init").rc == 0
    check = "echo out-1; echo err-1 >&2; sleep 1; echo out-2; exit 1"
    assert run("add", "Fails", "--id", "fails", "--check", check).rc == 0
    assert run("claim", "fails").rc == 0
    rc, events, _ = run_at_terminal("done", "fails", cwd=repo)
    assert rc == 1
    lines = text_of(events, "stdout").splitlines()
    assert lines[:2] == ["out-1", "out-2"]  # live, and not repeated after the check
    assert lines.count("out-1") == 1 and "err-1" not in lines
    assert lines[2].startswith("Failed fails [TEST_FAIL]")
    assert text_of(events, "stderr").splitlines()[0] == "err-1"
    error = run("show", "fails", "--json").json()["error_log"][-1]
    assert "out-1" in error and "err-1" in error and "out-2" in error


def test_json_at_a_terminal_prints_only_the_json(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "Ticks", "--id", "ticks", "--check", "echo out-1; echo err-1 >&2").rc == 0
    rc, events, _ = run_at_terminal("verify", "ticks", "--json", cwd=repo)
    assert rc == 0
    value = json.loads(text_of(events, "stdout"))
    assert value["ok"] is True and value["output_tail"] == "out-1\nerr-1\n"
    assert text_of(events, "stderr") == ""


def test_output_through_a_pipe_comes_whole_at_the_end(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "Both", "--id", "both", "--check", "echo out-1; echo err-1 >&2").rc == 0
    proc = subprocess.run(["git", "handoff", "verify", "both"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout == "out-1\nerr-1\nPASS\n" and proc.stderr == ""
    assert git("status", "--porcelain", cwd=repo) == ""


def _big_plan(path: Path, count: int) -> Path:
    path.write_text("".join(f'[[task]]\nid = "t{n}"\ntitle = "Task {n}"\n\n' for n in range(count)))
    return path


def test_import_shows_progress_at_a_terminal_only(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0
    plan = _big_plan(tmp_path / "plan.toml", 1000)
    rc, events, _ = run_at_terminal("import", str(plan), cwd=repo)
    assert rc == 0
    err = text_of(events, "stderr")
    assert "import: reading plan.toml" in err and "import: writing 1,000 task(s)" in err
    assert err.endswith("\r\x1b[K")  # the progress line is cleared at the end
    assert "Imported 1000 task(s)" in text_of(events, "stdout")
    # piped, or --json at a terminal: no progress at all
    second = _big_plan(tmp_path / "second.toml", 1)
    (tmp_path / "second.toml").write_text(second.read_text().replace('"t0"', '"other"'))
    proc = subprocess.run(["git", "handoff", "import", str(second)], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    third = tmp_path / "third.toml"
    third.write_text('[[task]]\nid = "third"\ntitle = "Third"\n')
    rc, events, _ = run_at_terminal("import", str(third), "--json", cwd=repo)
    assert rc == 0 and text_of(events, "stderr") == ""
    assert [t["id"] for t in json.loads(text_of(events, "stdout"))] == ["third"]


def test_sync_shows_its_steps_at_a_terminal_only(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=repo)
    assert run("init").rc == 0
    rc, events, _ = run_at_terminal("sync", cwd=repo)
    assert rc == 0
    err = text_of(events, "stderr")
    assert "sync: fetching from origin" in err and "sync: pushing" in err and err.endswith("\r\x1b[K")
    assert "sync origin:" in text_of(events, "stdout")
    piped = subprocess.run(["git", "handoff", "sync"], cwd=repo, capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == ""
