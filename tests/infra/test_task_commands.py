"""The command runner: categories, bounded output, timeouts that leave no process behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

from git_handoff.infra.task_commands import TAIL_BYTES, run_command
from tests.support.repo import run


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie not yet reaped by its new parent still counts as gone
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except (OSError, IndexError):
            return True
        time.sleep(0.05)
    return False


def test_pass(tmp_path: Path) -> None:
    result = run_command("echo hello; pwd", tmp_path, 10)
    assert result.ok and result.category is None and result.exit_code == 0 and not result.timed_out
    assert result.output_tail.splitlines() == ["hello", str(tmp_path)]


def test_non_zero_exit_is_test_fail(tmp_path: Path) -> None:
    result = run_command("echo broken >&2; exit 3", tmp_path, 10)
    assert not result.ok and result.category == "TEST_FAIL" and result.exit_code == 3
    assert "broken" in result.output_tail
    assert result.summary() == "exit 3: broken"


def test_missing_binary_is_env_setup(tmp_path: Path) -> None:
    result = run_command("no-such-binary-for-handoff --x", tmp_path, 10)
    assert result.category == "ENV_SETUP" and result.exit_code == 127


def test_output_tail_is_bounded(tmp_path: Path) -> None:
    result = run_command("i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done", tmp_path, 30)
    assert result.ok
    assert len(result.output_tail.encode()) <= TAIL_BYTES
    assert result.output_tail.endswith("line-2999\n")


def test_output_tail_starts_at_a_whole_line_or_word(tmp_path: Path) -> None:
    """What came before the last TAIL_BYTES bytes cuts no line (a secret's front) in two."""
    head = "x" * 200
    result = run_command(f"printf '{head}%.0s\\n' $(seq 40); echo last", tmp_path, 30)
    lines = result.output_tail.splitlines()
    assert lines[-1] == "last" and set(lines[:-1]) == {head} and len(result.output_tail.encode()) <= TAIL_BYTES
    words = run_command(f"printf '{head} %.0s' $(seq 40)", tmp_path, 30)
    assert set(words.output_tail.split()) == {head}
    solid = run_command("printf 'A%.0s' $(seq 5000)", tmp_path, 30)
    assert solid.output_tail == ""  # no line, no word: nothing whole to keep


def test_env_is_passed(tmp_path: Path) -> None:
    result = run_command('test "$HANDOFF_X" = yes', tmp_path, 10, env={"HANDOFF_X": "yes"})
    assert result.ok


def test_timeout_kills_grandchildren(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    # sh -c (ours) -> sh (child) -> sleep (grandchild)
    command = f"sh -c 'sleep 60 & echo $! > {pidfile}; wait'"
    started = time.monotonic()
    result = run_command(command, tmp_path, 2)
    elapsed = time.monotonic() - started
    assert result.category == "TIMEOUT" and result.timed_out and not result.ok
    assert elapsed < 15
    assert _gone(int(pidfile.read_text()))


def test_timeout_kills_a_group_that_ignores_term(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    command = f"trap '' TERM; sh -c 'trap \"\" TERM; sleep 60 & echo $! > {pidfile}; wait'"
    started = time.monotonic()
    result = run_command(command, tmp_path, 1)
    assert result.category == "TIMEOUT"
    assert time.monotonic() - started < 15
    assert _gone(int(pidfile.read_text()))


def test_background_leftovers_are_ended_when_the_command_exits(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    started = time.monotonic()
    result = run_command(f"sleep 60 & echo $! > {pidfile}; exit 0", tmp_path, 30)
    assert result.ok
    assert time.monotonic() - started < 15
    assert _gone(int(pidfile.read_text()))


def test_done_with_a_check_that_times_out(repo: Path) -> None:
    pidfile = repo.parent / "pid"
    assert run("init").rc == 0
    check = f"sh -c 'sleep 60 & echo $! > {pidfile}; wait'"
    assert run("add", "Slow", "--id", "slow", "--check", check, "--timeout", "2").rc == 0
    assert run("claim").rc == 0
    started = time.monotonic()
    result = run("done", "slow")
    assert result.rc == 1
    assert time.monotonic() - started < 20
    assert "[TIMEOUT]" in result.err
    shown = run("show", "slow", "--json").json()
    assert shown["status"] == "failed"
    assert shown["error_log"][0].startswith("[TIMEOUT] Validation failed: timed out")
    assert _gone(int(pidfile.read_text()))
