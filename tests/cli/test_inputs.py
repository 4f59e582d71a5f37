"""Input at the edge (docs/threat-model.md): numbers in range, deep nesting, non-UTF-8 argv.

Every row refuses with exit 2 and one line `error: …` naming what was wrong, prints
`{"error", "exit_code"}` under --json, and leaves refs/harness/state where it was.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.repo import Result, run, state_head

TEN_YEARS = "316224000"
HUGE = "1" + "0" * 23  # 1e23 written out: far past TOML's 64-bit integers

# (argv, what the one error line must say)
NUMBERS: list[tuple[tuple[str, ...], str]] = [
    (("add", "t", "--timeout", "1e23"), "'--timeout': '1e23' is not a whole number from 1 to 316224000"),
    (("add", "t", "--timeout", HUGE), "'--timeout'"),
    (("add", "t", "--timeout", "0"), "'--timeout': '0' is out of range"),
    (("add", "t", "--timeout", "-5"), "'--timeout': '-5' is out of range"),
    (("add", "t", "--timeout", str(int(TEN_YEARS) + 1)), "from 1 to 316224000"),
    (("add", "t", "--max-attempts", "0"), "'--max-attempts': '0' is out of range"),
    (("add", "t", "--max-attempts", HUGE), "from 1 to 10000"),
    (("edit", "a", "--timeout", "nan"), "'--timeout': 'nan' is not a whole number"),
    (("edit", "a", "--max-attempts", "-1"), "'--max-attempts': '-1' is out of range"),
    (("init", "--max-tasks-per-session", "1e23"), "'--max-tasks-per-session': '1e23' is not a whole number"),
    (("init", "--max-tasks-per-session", HUGE), "TOML's integer range"),
    (("init", "--max-tasks-per-session", "9223372036854775808"), "'--max-tasks-per-session'"),
    (("init", "--max-sessions", "0"), "'--max-sessions': '0' is out of range"),
    (("init", "--max-sessions", HUGE), "'--max-sessions'"),
    (("log", "--session", "-3"), "'--session': '-3' is out of range"),
    (("log", "-n", "-1"), "'-n': '-1' is out of range"),
    (("log", "-n", HUGE), "'-n'"),
    (("claim", "--lease", "999999999999999999h"), "invalid duration"),
    (("claim", "--lease", "0s"), "invalid duration '0s'"),
    (("claim", "--lease", "1e9s"), "invalid duration '1e9s'"),
    (("renew", "a", "--lease", "100000d"), "invalid duration"),
    (("checkpoint", "a", "m", "--step", "0"), "'--step': '0' is out of range"),
    (("checkpoint", "a", "m", "--of", HUGE), "'--of'"),
    (("restore", "a", "0"), "'N': '0' is out of range"),
    (("restore", "a", HUGE), "'N'"),
    (("session", "show", "0"), "'[NUMBER]': '0' is out of range"),
    (("doc", "show", HUGE), "out of range"),
    (("relay", "--agent", "true", "--ack-timeout", "nan"), "'--ack-timeout': 'nan' is out of range"),
    (("relay", "--agent", "true", "--ack-timeout", "inf"), "'--ack-timeout': 'inf' is out of range"),
    (("relay", "--agent", "true", "--ack-timeout", "0"), "'--ack-timeout': '0' is out of range"),
    (("relay", "--agent", "true", "--session-timeout", "1e23"), "'--session-timeout': '1e23' is out of range"),
    (("relay", "--agent", "true", "--handoff-grace", "-1"), "'--handoff-grace': '-1' is out of range"),
    (("relay", "--agent", "true", "--max-idle-sessions", "0"), "'--max-idle-sessions': '0' is out of range"),
    (("relay", "--agent", "true", "--max-launch-failures", HUGE), "from 1 to 1000000"),
    (("dispatch", "wait", "001-a", "--timeout", "-inf"), "'--timeout': '-inf' is out of range"),
    (("dispatch", "wait", "001-a", "--timeout", "x"), "'--timeout': 'x' is not a number of seconds"),
    (("serve", "--port", "70000"), "'--port' / '-p': '70000' is out of range: use a whole number from 0 to 65535"),
    (("serve", "--port", "-1"), "'--port' / '-p': '-1' is out of range"),
    (("relay", "--agent", "true", "--lock-lease", "1e3"), "'--lock-lease': '1e3' is not a whole number"),
    (("relay", "--agent", "true", "--lock-lease", "86401"), "'--lock-lease': '86401' is out of range"),
    (("serve", "--stop-after", "0s"), "invalid duration '0s'"),
]


@pytest.fixture
def planned(repo: Path) -> Path:
    assert run("init").rc == 0
    assert run("add", "A task", "--id", "a", "--check", "true").rc == 0
    return repo


def refused(res: Result, fragment: str) -> None:
    lines = res.err.splitlines()
    assert res.rc == 2, res
    assert len(lines) == 1 and lines[0].startswith("error: "), res.err
    assert fragment in lines[0], lines[0]
    assert "unexpected" not in res.err and "Traceback" not in res.err


@pytest.mark.parametrize(("args", "fragment"), NUMBERS, ids=[" ".join(a) for a, _ in NUMBERS])
def test_numbers_out_of_range_are_refused_and_change_nothing(planned: Path, args: tuple[str, ...],
                                                             fragment: str) -> None:
    before = state_head(planned)
    res = run(*args)
    refused(res, fragment)
    assert state_head(planned) == before
    as_json = run(*args, "--json")
    assert as_json.rc == 2
    assert json.loads(as_json.out) == {"error": as_json.err.splitlines()[0][len("error: "):], "exit_code": 2}
    assert state_head(planned) == before


@pytest.mark.parametrize("args", [("decide", "a\x1b[2Jb", "--why", "w"), ("decide", "what", "--why", "a\x07b"),
                                  ("blocker", "a\x1bb"), ("decide", "x" * 2001, "--why", "w"),
                                  ("ack", "--failed", "bad\x1b]0;owned\x07 reason")])
def test_session_facts_every_clone_would_refuse_are_refused_and_change_nothing(planned: Path,
                                                                             args: tuple[str, ...]) -> None:
    """A decision, blocker or ACK reason that is not one line of text would be a record the
    edge of every clone refuses to read: refused here, with the reason, before it is written."""
    assert run("session", "start").rc == 0
    before = state_head(planned)
    refused(run(*args), "longer than" if len(args[1]) > 2000 else "control character")
    assert state_head(planned) == before


@pytest.mark.parametrize("args", [("add", "t", "--timeout", TEN_YEARS), ("add", "t", "--max-attempts", "10000"),
                                  ("init", "--max-sessions", "9223372036854775807"), ("log", "--session", "0")])
def test_numbers_at_the_edge_of_the_range_are_accepted(planned: Path, args: tuple[str, ...]) -> None:
    res = run(*args)
    assert res.rc == 0, res


def test_git_config_counts_outside_tomls_range_are_refused(planned: Path) -> None:
    from tests.support.repo import git

    git("config", "handoff.tasksPerSession", HUGE, cwd=planned)
    before = state_head(planned)
    res = run("hooks", "status")
    refused(res, "git config handoff.tasksPerSession is out of range")
    assert state_head(planned) == before


# -- nesting ------------------------------------------------------------------------------------

DEEP = 100_000


def _deep_files(root: Path) -> dict[str, str]:
    return {
        "arrays.toml": '[[task]]\ntitle = "x"\ncheck = ' + "[" * DEEP + "]" * DEEP + "\n",
        "tables.toml": '[[task]]\ntitle = "x"\ncheck = ' + "{a = " * 5000 + "1" + "}" * 5000 + "\n",
        "dotted.toml": '[[task]]\ntitle = "x"\n[task.' + "a." * DEEP + "b]\nc = 1\n",
        "tasks.json": '{"version": 2, "tasks": ' + "[" * DEEP + "]" * DEEP + "}",
        "task-field.json": ('{"version": 2, "tasks": [{"id": "a1", "title": "t", "x": '
                            + "[" * DEEP + "]" * DEEP + "}]}"),
    }


# tomllib's own parse of 100,000 dotted keys takes time quadratic in their number (about a
# minute on this machine under load) before the depth check can refuse the plan: that case
# is in the slow layer; the other four shapes refuse at once
@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name == "dotted.toml" else name
                                  for name in sorted(_deep_files(Path()))])
def test_a_plan_nested_100000_deep_is_refused(planned: Path, name: str) -> None:
    plan = planned / name
    plan.write_text(_deep_files(planned)[name])
    before = state_head(planned)
    res = run("import", str(plan))
    refused(res, f"{plan}: nested deeper than 32 levels")
    assert state_head(planned) == before


@pytest.mark.parametrize("hook", ["claude-session-start", "claude-stop", "codex-stop", "gemini-session-start"])
def test_a_hook_payload_nested_100000_deep_is_set_aside(planned: Path, hook: str) -> None:
    """A hook never fails its caller: the payload is handled as `{}` and a warning says so."""
    payload = '{"session_id": ' + "[" * DEEP + "]" * DEEP + "}"
    before = state_head(planned)
    res = run("hook", hook, "--json", stdin=payload)
    assert res.rc == 0, res
    assert "hook payload: nested deeper than 32 levels; the payload was ignored" in res.err
    assert "unexpected" not in res.err and "Traceback" not in res.err and "RecursionError" not in res.out
    assert json.loads(res.out)["event"] == hook
    if hook.endswith("stop"):
        assert state_head(planned) == before


# -- argv -----------------------------------------------------------------------------------------


NOT_UTF8 = [
    [b"add", b"\xff"], [b"add", b"ok", b"--check", b"echo \xff"], [b"decide", b"\xfe", b"--why", b"x"],
    [b"blocker", b"a\xffb"], [b"claim", b"--worker", b"\xff"], [b"import", b"\xff.toml"], [b"\xff"],
    [b"edit", b"a", b"--spec", b"\xff"],
]


def _refused_as_not_utf8(rc: int, out: str, err: str, json_requested: bool) -> None:
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "is not valid UTF-8 text" in err, err
    assert "unexpected" not in err
    if json_requested:
        assert json.loads(out)["exit_code"] == 2
    else:
        assert out == ""


@pytest.mark.parametrize("argv", NOT_UTF8)
def test_arguments_that_are_not_utf8_are_refused(planned: Path, argv: list[bytes]) -> None:
    # in-process, the arguments as Python hands them to the executable's main (the
    # undecodable bytes as lone surrogates: os.fsdecode); the real executable below
    before = state_head(planned)
    for extra in ([], [b"--json"]):
        res = run(*(os.fsdecode(arg) for arg in [*argv, *extra]))
        _refused_as_not_utf8(res.rc, res.out, res.err, bool(extra))
    assert state_head(planned) == before


def test_the_real_executable_refuses_arguments_that_are_not_utf8(planned: Path) -> None:
    argv = NOT_UTF8[1]
    before = state_head(planned)
    for extra in ([], [b"--json"]):
        proc = subprocess.run([b"git", b"handoff", *argv, *extra], cwd=planned, capture_output=True, timeout=120)
        _refused_as_not_utf8(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                             proc.stderr.decode("utf-8", "replace"), bool(extra))
    assert state_head(planned) == before


# -- lines are lines on hook payloads -----------------------------------------------------------

BROKEN_FIELDS = {
    "session_id": "abc\n[completed] forged",
    "trigger": "x" * 100_000,
    "source": "compact\r",
    "cwd": "/tmp\n/etc",
}


@pytest.mark.parametrize("hook", ["claude-session-start", "claude-stop", "claude-pre-compact", "codex-stop",
                                  "gemini-session-start", "gemini-after-agent"])
@pytest.mark.parametrize("field", sorted(BROKEN_FIELDS))
def test_hook_payload_text_that_is_not_one_line_is_set_aside(planned: Path, hook: str, field: str) -> None:
    """Sanitized, not refused: the hook does its work as if the field were absent (exit 0,
    its JSON still for the agent), warns naming the field, and the text reaches nothing."""
    payload = {"session_id": "s-1", "hook_event_name": "Stop", field: BROKEN_FIELDS[field]}
    before = state_head(planned)
    res = run("hook", hook, stdin=json.dumps(payload))
    assert res.rc == 0, res
    assert f"payload field(s) {field} ignored: not one line of text within its length cap" in res.err, res.err
    assert "unexpected" not in res.err and "Traceback" not in res.err
    if res.out.strip():
        json.loads(res.out)  # the agent still gets well-formed hook JSON
    assert BROKEN_FIELDS[field][:20] not in res.out
    handoff_dir = planned / ".git" / "handoff"
    for private in handoff_dir.glob("*.json") if handoff_dir.is_dir() else ():
        assert BROKEN_FIELDS[field][:20] not in private.read_text(), private
    if hook.endswith(("stop", "after-agent")):
        assert state_head(planned) == before
    log = subprocess_log(planned)
    assert BROKEN_FIELDS[field][:20] not in log


def subprocess_log(repo: Path) -> str:
    from tests.support.repo import git

    return git("log", "--format=%B", "refs/harness/state", cwd=repo) + git(
        "ls-tree", "-r", "refs/harness/state", cwd=repo)


def test_a_well_formed_hook_payload_gives_no_warning(planned: Path) -> None:
    res = run("hook", "claude-stop", stdin=json.dumps({"session_id": "s-1", "cwd": str(planned)}))
    assert res.rc == 0 and "ignored" not in res.err, res


def test_a_hook_that_sets_a_field_aside_and_warns_too_says_both_on_one_line(repo: Path) -> None:
    """The payload's field set aside and the core's own warning (here: no session may
    start, max_sessions is spent) share stderr's one line."""
    assert run("init", "--max-sessions", "1").rc == 0
    assert run("add", "A task", "--id", "a", "--check", "true").rc == 0
    assert run("session", "start").rc == 0 and run("session", "end").rc == 0
    payload = {"session_id": "s-1", "source": "startup", "cwd": "/tmp\n/etc"}
    res = run("hook", "claude-session-start", stdin=json.dumps(payload))
    assert res.rc == 0, res
    assert len(res.err.strip().splitlines()) == 1, res.err
    assert "payload field(s) cwd ignored" in res.err and "max_sessions" in res.err, res.err
