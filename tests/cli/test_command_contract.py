"""The command contract (docs/git-handoff.md, EXIT STATUS): every verb's spelling, exit codes and the
--json / error-line contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.repo import run


def test_hooks_status_accepts_agent_claude(repo: Path) -> None:
    assert run("init").rc == 0
    before = run("hooks", "status", "--agent", "claude", "--json")
    assert before.rc == 0, before.err
    assert json.loads(before.out)["installed"] is False
    assert run("hooks", "install", "--agent", "claude").rc == 0
    after = run("hooks", "status", "--agent", "claude", "--json")
    assert after.rc == 0 and json.loads(after.out)["installed"] is True
    human = run("hooks", "status", "--agent", "claude")
    assert human.rc == 0 and "installed" in human.out


def _one_json(out: str) -> object:
    value = json.loads(out)
    assert isinstance(value, (dict, list))
    return value


def test_json_negative_answers_still_print_one_json_object(repo: Path) -> None:
    assert run("init", "--max-sessions", "1").rc == 0
    nothing = run("next", "--json")
    assert nothing.rc == 1
    assert _one_json(nothing.out) == {"error": nothing.err[len("error: "):].strip(), "exit_code": 1}
    assert nothing.err.startswith("error: ") and len(nothing.err.splitlines()) == 1
    claim = run("claim", "--json")
    assert claim.rc == 1 and isinstance(_one_json(claim.out), dict)
    no_session = run("session", "show", "--json")
    assert no_session.rc == 1 and isinstance(_one_json(no_session.out), dict)
    assert run("session", "start").rc == 0
    assert run("session", "end").rc == 0
    limit = run("session", "start", "--json")
    assert limit.rc == 1 and isinstance(_one_json(limit.out), dict)
    # without --json, stdout stays empty
    plain = run("next")
    assert plain.rc == 1 and plain.out == ""


def test_json_dispatch_result_of_unfinished_run_prints_the_record(repo: Path) -> None:
    from tests.support.repo import git

    assert run("init").rc == 0
    git("config", "handoff.backend.echo.command", "cat", cwd=repo)
    run_id = run("dispatch", "new", "--backend", "echo", "--slug", "pending", stdin="hi\n").out.strip()
    unfinished = run("dispatch", "result", run_id, "--json")
    assert unfinished.rc == 1
    record = _one_json(unfinished.out)
    assert isinstance(record, dict) and record["run_id"] == run_id and record["status"] == "new"
    assert len(unfinished.err.splitlines()) == 1


def test_interrupt_exits_130_with_exactly_one_error_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from git_handoff.ops import views as ops

    assert run("init").rc == 0

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ops, "status", interrupted)
    r = run("status")
    assert r.rc == 130
    assert r.err == "error: interrupted\n"
    assert r.out == ""


def test_log_filters_by_type_and_refuses_an_unknown_type(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "A", "--id", "a").rc == 0
    init_lines = run("log", "--type", "INIT")
    assert init_lines.rc == 0 and len(init_lines.out.splitlines()) == 2
    assert run("log", "--type", "ERROR").out == ""
    before = run("log").out
    bad = run("log", "--type", "BOGUS")
    assert bad.rc == 2
    assert bad.out == "" and bad.err.startswith("error: ") and len(bad.err.splitlines()) == 1
    assert run("log").out == before


def _leaf_commands() -> list[tuple[str, ...]]:
    import click

    from git_handoff.cli import COMMANDS, cli

    ctx = click.Context(cli)
    found: list[tuple[str, ...]] = []

    def walk(cmd: click.Command | None, path: tuple[str, ...]) -> None:
        assert cmd is not None, path
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), (*path, name))
        else:
            found.append(path)

    for name in COMMANDS:
        walk(cli.get_command(ctx, name), (name,))
    return found


def test_every_command_accepts_json() -> None:
    import click

    from git_handoff.cli import cli

    ctx = click.Context(cli)
    missing = []
    for path in _leaf_commands():
        cmd: click.Command | None = cli
        for name in path:
            assert isinstance(cmd, click.Group)
            cmd = cmd.get_command(ctx, name)
        assert cmd is not None
        if not any("--json" in getattr(p, "opts", []) for p in cmd.params):
            missing.append(" ".join(path))
    assert missing == []


def test_hook_json_prints_one_object(repo: Path) -> None:
    assert run("init").rc == 0
    r = run("hook", "post-commit", "--json")
    assert r.rc == 0 and _one_json(r.out) == {"event": "post-commit", "output": None}
    start = run("hook", "claude-session-start", "--json", stdin='{"source": "startup"}')
    assert start.rc == 0
    value = _one_json(start.out)
    assert isinstance(value, dict) and value["event"] == "claude-session-start"
    assert "hookSpecificOutput" in value["output"]


@pytest.mark.slow
def test_relay_json_prints_only_the_summary(repo: Path) -> None:
    from tests.support.repo import run_exe

    assert run("init").rc == 0
    assert run("add", "A", "--id", "a", "--check", "test -f a.txt").rc == 0
    agent = ("git handoff ack && git handoff claim a >/dev/null && echo a > a.txt && git add a.txt "
             "&& git commit -qm a && git handoff done a")
    r = run_exe("relay", "--agent", agent, "--json", cwd=repo, timeout=180)
    assert r.rc == 0, r.err
    summary = _one_json(r.out)
    assert isinstance(summary, dict) and summary["completed"] is True and summary["sessions"] == 1


def test_a_task_blob_that_is_not_utf8_is_invalid_state_in_plain_words(repo: Path) -> None:
    import os
    import subprocess

    from tests.support.repo import git

    assert run("init").rc == 0
    assert run("add", "A", "--id", "a").rc == 0
    path = next(p for p in git("ls-tree", "-r", "--name-only", "refs/harness/state", cwd=repo).split()
                if p.startswith("tasks/"))
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], input=b"\xc2", cwd=repo,
                          capture_output=True, check=True).stdout.decode().strip()
    env = dict(os.environ, GIT_INDEX_FILE=str(repo / ".git" / "qa-index"))
    subprocess.run(["git", "read-tree", "refs/harness/state"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "update-index", "--cacheinfo", f"100644,{blob},{path}"], cwd=repo, env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=repo, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()
    commit = git("commit-tree", tree, "-p", "refs/harness/state", "-m", "corrupt", cwd=repo).strip()
    git("update-ref", "refs/harness/state", commit, cwd=repo)
    r = run("list", "--json")
    assert r.rc == 2
    assert json.loads(r.out) == {"error": r.err[len("error: "):].strip(), "exit_code": 2}  # the --json error contract
    assert r.err.startswith("error: ") and len(r.err.splitlines()) == 1
    assert "not UTF-8" in r.err and "codec" not in r.err and "unexpected" not in r.err
