"""Sessions: start/end/show, limits, decisions and blockers."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.repo import git, run, state_head


def _init(*extra: str) -> None:
    assert run("init", *extra).rc == 0


def test_start_numbers_sessions_and_records_the_base(repo: Path) -> None:
    _init()
    r = run("session", "start", "--worker", "w1", "--json")
    assert r.rc == 0, r.err
    rec = r.json()
    assert rec["session"] == 1 and rec["worker"] == "w1"
    assert rec["base"] == git("rev-parse", "HEAD", cwd=repo)
    local = json.loads((repo / ".git" / "handoff" / "session.json").read_text())
    assert local["session"] == 1 and local["ended_at"] is None and local["base"] == rec["base"]
    assert run("status", "--json").json()["session_count"] == 1
    lines = run("log", "--session", "1").out
    assert "[SESSION-1] INIT Session 1 started" in lines


def test_log_lines_carry_the_open_session(repo: Path) -> None:
    _init()
    run("session", "start")
    run("add", "A task", "--id", "t1")
    assert "[SESSION-1] INIT [t1] Added A task" in run("log").out


def test_end_writes_stats_and_closes(repo: Path) -> None:
    _init()
    run("add", "x", "--id", "x", "--check", "true")
    run("session", "start")
    r = run("session", "end", "--json")
    assert r.rc == 0, r.err
    assert r.json()["ended_at"]
    assert ("[SESSION-1] STATS tasks_total=1 completed=0 failed=0 pending=1 blocked=0 attempts_total=0 "
            "checkpoints=0") in run("log").out
    local = json.loads((repo / ".git" / "handoff" / "session.json").read_text())
    assert local["ended_at"]
    # outside a session log lines are SESSION-0 again
    run("add", "y", "--id", "y")
    assert "[SESSION-0] INIT [y] Added y" in run("log").out


def test_end_without_session_is_usage_error(repo: Path) -> None:
    _init()
    before = state_head(repo)
    r = run("session", "end")
    assert r.rc == 2 and r.err.startswith("error: ") and "session start" in r.err
    assert state_head(repo) == before


def test_max_sessions_after_an_ended_session_does_not_repeat_its_stats_line(repo: Path) -> None:
    _init("--max-sessions", "1")
    assert run("session", "start").rc == 0
    assert run("session", "end").rc == 0
    r = run("session", "start")
    assert r.rc == 1 and "max_sessions (1)" in r.err
    assert len(run("log", "--type", "STATS").out.splitlines()) == 1
    assert run("add", "More", "--id", "more").rc == 0  # the figures changed: the refusal says them
    assert run("session", "start").rc == 1
    stats = run("log", "--type", "STATS").out.splitlines()
    assert len(stats) == 2 and "tasks_total=1" in stats[1]


def test_max_sessions_refuses_with_stats_line(repo: Path) -> None:
    _init("--max-sessions", "2")
    assert run("session", "start").rc == 0
    assert run("session", "start").rc == 0
    r = run("session", "start")
    assert r.rc == 1
    assert "max_sessions (2)" in r.err
    log = run("log", "--type", "STATS").out
    assert "STATS tasks_total=0" in log
    assert run("status", "--json").json()["session_count"] == 2


def test_start_closes_a_session_left_open(repo: Path) -> None:
    _init()
    run("session", "start")
    run("session", "start")
    first = run("session", "show", "1", "--json").json()
    assert first["ended_at"] and first["ended_by"] == "next session start"
    assert run("session", "show", "--json").json()["session"] == 2


def test_show_variants_and_errors(repo: Path) -> None:
    _init()
    r = run("session", "show")
    assert r.rc == 1  # no session yet: a negative answer
    run("session", "start", "--worker", "me")
    out = run("session", "show").out
    assert "session 1 (open in this worktree)" in out and "me" in out
    assert run("session", "show", "7").rc == 2
    assert run("session", "show", "0").rc == 2


def test_decide_and_blocker_record_facts(repo: Path) -> None:
    _init()
    run("session", "start")
    assert run("decide", "RS256 over HS256", "--why", "services verify with the public key").rc == 0
    assert run("blocker", "user table lacks refresh_token_hash").rc == 0
    rec = run("session", "show", "--json").json()
    assert rec["decisions"][0]["what"] == "RS256 over HS256"
    assert rec["decisions"][0]["why"] == "services verify with the public key"
    assert rec["blockers"][0]["text"] == "user table lacks refresh_token_hash"


def test_decide_and_blocker_bad_input(repo: Path) -> None:
    _init()
    before = state_head(repo)
    assert run("decide", "x", "--why", "y").rc == 2  # no session
    run("session", "start")
    before = state_head(repo)
    assert run("decide", "x").rc == 2  # --why missing
    assert run("decide", "  ", "--why", "y").rc == 2
    assert run("decide", "x", "--why", " ").rc == 2
    assert run("blocker", "").rc == 2
    assert state_head(repo) == before


def test_not_initialized(repo: Path) -> None:
    for args in (("session", "start"), ("session", "show"), ("doc", "list"), ("prompt",), ("ack",)):
        r = run(*args)
        assert r.rc == 2, args
        assert "git handoff init" in r.err


def test_health_check_runs_init_command(repo: Path) -> None:
    run("init", "--init-command", "echo ok > health.txt")
    r = run("session", "start")
    assert r.rc == 0, r.err
    assert (repo / "health.txt").read_text() == "ok\n"
    assert "Environment health check: PASS" in run("log").out


def test_health_check_failing_twice_stops_the_session(repo: Path) -> None:
    run("init", "--init-command", "echo run >> tries.txt; exit 3")
    r = run("session", "start")
    assert r.rc == 1
    assert "[ENV_SETUP]" in r.err
    assert (repo / "tries.txt").read_text() == "run\nrun\n"
    log = run("log").out
    assert log.count("[ENV_SETUP] Environment health check failed") == 2
    assert "STATS" in log
    assert json.loads((repo / ".git" / "handoff" / "session.json").read_text())["ended_at"]


def test_health_check_retry_succeeds(repo: Path) -> None:
    run("init", "--init-command", "if [ -f once ]; then exit 0; fi; touch once; exit 1")
    r = run("session", "start")
    assert r.rc == 0, r.err
    assert "PASS (retry)" in run("log").out


def test_end_notes_the_commits_of_a_claimed_task(repo: Path) -> None:
    _init()
    run("add", "Noted", "--id", "n1", "--check", "true")
    run("session", "start")
    assert run("claim", "n1").rc == 0
    (repo / "w.txt").write_text("w\n")
    git("add", "w.txt", cwd=repo)
    git("commit", "-qm", "work for n1", cwd=repo)
    assert git("notes", "--ref=harness", "list", cwd=repo, check=False) == ""
    assert run("session", "end").rc == 0
    note = git("notes", "--ref=harness", "show", "HEAD", cwd=repo)
    assert "task: n1" in note and "session: 1" in note
