"""The hooks and the relay against the real Claude Code CLI.

Only the model is a stub (tests/support/stubs/anthropic.py, on 127.0.0.1): the real
`claude` runs the scripted agent's tool calls and its hooks for real, and every test
checks, from the CLI's own debug log, that it accepted the JSON each hook printed.
The version tested is the one .ci/run installs (tests/support/claude_cli.PINNED_VERSION).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict, Unpack

import pytest

from tests.support.claude_cli import (
    PINNED_VERSION,
    ClaudeRun,
    claude_env,
    require_claude,
    run_claude,
)
from tests.support.cmdserver import served, stop_servers
from tests.support.repo import git, run, run_exe
from tests.support.stubs.anthropic import Idle, Lazy, Reply, Request, StubServer, bash, say, tool

pytestmark = pytest.mark.slow


@pytest.fixture
def stub() -> Iterator[StubServer]:
    require_claude()
    with StubServer(Lazy(), lifetime=240) as server:
        yield server
        assert not server.errors, server.errors


def _plan(repo: Path, count: int, *, per_session: int = 100, mode: str = "exclusive") -> list[str]:
    assert run("init", "--mode", mode, "--max-tasks-per-session", str(per_session)).rc == 0
    ids = [f"t{n:02d}" for n in range(1, count + 1)]
    for task_id in ids:
        assert run("add", f"Write {task_id}.txt", "--id", task_id, "--check", f"test -f {task_id}.txt").rc == 0
    assert run("hooks", "install", "--agent", "claude").rc == 0
    return ids


class ClaudeOptions(TypedDict, total=False):
    """The keywords of run_claude that _claude passes on."""

    extra_args: list[str] | None
    env: dict[str, str] | None
    timeout: float
    permission: str


def _claude(repo: Path, stub: StubServer, prompt: str = "Work on this repository.",
            **kw: Unpack[ClaudeOptions]) -> ClaudeRun:
    result = run_claude(repo, stub.url, prompt, home=repo.parent / "claude-home", **kw)
    result.assert_hooks_accepted()
    return result


def _statuses(repo: Path) -> dict[str, str]:
    return {t["id"]: t["status"] for t in run("list", "--json", cwd=repo).json()}


LAZY_WORK = "echo done > {id}.txt"


def test_installed_version_is_the_pinned_one() -> None:
    exe = require_claude()
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    assert out.split()[0] == PINNED_VERSION, f"tests are written against {PINNED_VERSION}, found {out!r}"


def test_session_start_injects_the_prompt_and_acks(repo: Path, stub: StubServer) -> None:
    _plan(repo, 1)
    stub.policy = Lazy(LAZY_WORK)
    result = _claude(repo, stub)
    assert result.rc == 0, result.stderr
    first = stub.main_requests()[0].all_text()
    assert "# git handoff: continue the work" in first and "[t01] Write t01.txt" in first
    started = result.hook_responses("SessionStart")
    assert len(started) == 1
    context = json.loads(started[0]["stdout"])["hookSpecificOutput"]["additionalContext"]
    assert "[t01]" in context
    shown = run("session", "show", "1", "--json").json()
    assert shown["ack"]["status"] == "accepted"
    assert "Debug" not in result.stderr


def test_a_lazy_agent_is_kept_working_through_ten_tasks(repo: Path, stub: StubServer) -> None:
    ids = _plan(repo, 10)
    lazy = Lazy(LAZY_WORK)
    stub.policy = lazy
    result = _claude(repo, stub)
    assert result.rc == 0, result.stderr
    assert lazy.followed == ids  # each stop was blocked naming the next task, in order
    assert set(_statuses(repo).values()) == {"completed"}
    assert len(result.blocks("Stop")) == 10
    assert result.hook_responses("Stop")[-1]["stdout"].strip() == ""  # finally allowed


def test_with_the_command_server_on_the_hooks_run_through_the_fast_client(repo: Path, stub: StubServer) -> None:
    """handoff.commandServer on: the installed hooks start the server's fast client; Claude
    Code runs them (through its shell) as it runs the plain ones, and they are served."""
    git("config", "handoff.commandServer", "true", cwd=repo)
    git("config", "--add", "notes.rewriteRef", "refs/notes/harness", cwd=repo)  # no server goes stale on it
    try:
        ids = _plan(repo, 3)
        stop = json.loads((repo / ".claude" / "settings.json").read_text())["hooks"]["Stop"][0]["hooks"][0]
        assert " -I -S -c " in stop["command"]
        lazy = Lazy(LAZY_WORK)
        stub.policy = lazy
        result = _claude(repo, stub)
        assert result.rc == 0, result.stderr
        assert lazy.followed == ids
        assert set(_statuses(repo).values()) == {"completed"}
        assert len(result.blocks("Stop")) == 3
        assert [c for c in served(repo) if c == "hook claude-stop"]
    finally:
        stop_servers(repo)


@pytest.mark.parametrize("cap", [None, "100"], ids=["cli-cap-default", "cli-cap-raised"])
def test_the_valve_releases_an_idle_agent(repo: Path, stub: StubServer, cap: str | None) -> None:
    _plan(repo, 3)
    stub.policy = Idle()
    env = {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": cap} if cap else None
    result = _claude(repo, stub, env=env, timeout=180)
    assert result.rc == 0, result.stderr
    blocks = result.blocks("Stop")
    assert 1 <= len(blocks) <= 8
    if cap is not None:  # the CLI would go on: our valve lets go after 8, and says so
        assert len(blocks) == 8
        last = json.loads(result.hook_responses("Stop")[-1]["stdout"])
        assert "safety valve opened" in last["systemMessage"]
    assert set(_statuses(repo).values()) == {"pending"}


def test_pre_compact_on_manual_compaction_and_not_on_nothing_to_compact(repo: Path, stub: StubServer) -> None:
    _plan(repo, 1)
    stub.policy = Lazy(LAZY_WORK)
    empty = _claude(repo, stub, "/compact")
    assert empty.rc == 0 and "Not enough messages to compact" in empty.stdout
    assert empty.ran("PreCompact") == ["PreCompact:manual"]
    assert [d["trigger"] for d in run("doc", "list", "--json").json()] == ["session-end"]

    first = _claude(repo, stub)
    assert first.rc == 0 and first.session_id
    manual = _claude(repo, stub, "/compact", extra_args=["--resume", first.session_id])
    assert manual.rc == 0, manual.stderr
    assert manual.ran("PreCompact") == ["PreCompact:manual"]
    assert "SessionStart:compact" in manual.ran("SessionStart")
    docs = run("doc", "list", "--json").json()
    assert "pre-compact" in [d["trigger"] for d in docs]


class Compacting(Lazy):
    """Lazy, and its first answer reports a context nearly full: the CLI auto-compacts."""

    def __init__(self, work: str) -> None:
        super().__init__(work)
        self.reported = False

    def __call__(self, req: Request) -> Reply:
        reply = super().__call__(req)
        if not req.is_summary() and not self.reported and self.followed:
            self.reported = True
            reply.input_tokens = 990_000
        return reply


def test_auto_compaction_writes_the_document_and_the_agent_is_still_kept_working(repo: Path,
                                                                                   stub: StubServer) -> None:
    ids = _plan(repo, 3)
    agent = Compacting(LAZY_WORK)
    stub.policy = agent
    result = _claude(repo, stub, timeout=180)
    assert result.rc == 0, result.stderr
    assert result.ran("PreCompact") == ["PreCompact:auto"], result.hooks_run()
    assert "SessionStart:compact" in result.ran("SessionStart")
    assert any(r.is_summary() for r in stub.requests)
    docs = run("doc", "list", "--json").json()
    assert docs and docs[0]["trigger"] == "pre-compact"
    assert agent.followed == ids and set(_statuses(repo).values()) == {"completed"}


def test_a_foreground_subagent_is_not_held_on_pending_work(repo: Path, stub: StubServer) -> None:
    _plan(repo, 1)
    lazy = Lazy(LAZY_WORK)
    errands: list[Request] = []

    def policy(req: Request) -> Reply:
        if "ERRAND:" in req.first_user_text():
            errands.append(req)
            return say("The errand is done.")
        if len(stub.main_requests()) == 1:
            return tool("Agent", {"description": "one-line errand", "subagent_type": "general-purpose",
                                  "prompt": "ERRAND: say that the errand is done."})
        return lazy(req)

    stub.policy = policy
    result = _claude(repo, stub)
    assert result.rc == 0, result.stderr
    assert len(errands) == 1  # one model turn for the subagent: not held
    assert result.ran("SubagentStop") and not result.blocks("SubagentStop")
    assert _statuses(repo) == {"t01": "completed"}


def test_hooks_are_silent_in_a_repository_that_is_not_initialized(repo: Path, stub: StubServer) -> None:
    assert run("hooks", "install", "--agent", "claude").rc == 0
    stub.policy = Idle("git status --short")
    result = _claude(repo, stub)
    assert result.rc == 0, result.stderr
    assert {name.split(":")[0] for name, _, _ in result.hooks_run()} >= {"SessionStart", "Stop"}
    assert all((e.get("output") or "") == "" and (e.get("stderr") or "") == "" for e in result.hook_responses())
    assert git("for-each-ref", "refs/harness", cwd=repo) == ""


def test_install_and_uninstall_beside_the_users_own_settings(repo: Path, stub: StubServer) -> None:
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    marker = repo.parent / "user-stop-hook-ran"
    own = {"permissions": {"deny": ["Read(./.env)"]},
           "hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"touch {marker}"}]}]}}
    settings.write_text(json.dumps(own, indent=2))
    _plan(repo, 1)
    stub.policy = Lazy(LAZY_WORK)
    result = _claude(repo, stub)
    assert result.rc == 0 and marker.exists()
    assert result.blocks("Stop") and _statuses(repo) == {"t01": "completed"}

    assert run("hooks", "uninstall", "--agent", "claude").rc == 0
    assert json.loads(settings.read_text()) == own
    marker.unlink()
    assert run("add", "Another", "--id", "t02", "--check", "true").rc == 0
    after = _claude(repo, stub)
    assert after.rc == 0 and marker.exists()
    assert not any("git handoff" in json.dumps(e) for e in after.hook_responses())
    assert _statuses(repo)["t02"] == "pending"


def test_session_end_closes_the_session_with_its_document(repo: Path, stub: StubServer) -> None:
    _plan(repo, 2, per_session=100)
    stub.policy = Lazy(LAZY_WORK)
    result = _claude(repo, stub)
    assert result.rc == 0
    # (the CLI does not always get to log SessionEnd before it exits: the state says it ran)
    doc = run("doc", "show", "1", "--json").json()
    assert doc["trigger"] == "session-end" and sorted(t["id"] for t in doc["status"]["completed"]) == ["t01", "t02"]
    assert run("session", "show", "1", "--json").json()["ended_at"]
    # a second plain run is a new session that accepts the first one's document
    run("add", "Third", "--id", "t03", "--check", "test -f t03.txt")
    _claude(repo, stub)
    assert run("doc", "list", "--json").json()[0]["accepted_by"] == 2


def test_a_failed_attempt_keeps_the_hooks(repo: Path, stub: StubServer) -> None:
    _plan(repo, 2)
    steps = ["git handoff claim t01 && echo scratch > scratch.txt && "
             "git handoff fail t01 --reason 'the approach does not work'"]

    def policy(req: Request) -> Reply:
        if steps and not req.last_is_tool_result():
            return bash(steps.pop(0))
        return Lazy(LAZY_WORK)(req)

    stub.policy = policy
    result = _claude(repo, stub)
    assert result.rc == 0
    assert (repo / ".claude" / "settings.json").exists()
    assert run("hooks", "status", "--json").json()["claude"] is True
    assert _statuses(repo) == {"t01": "completed", "t02": "completed"}
    assert len(result.blocks("Stop")) >= 2  # the Stop hook still ran after the rollback


# -- the relay ---------------------------------------------------------------------------------


def _relay_env(repo: Path, stub: StubServer) -> dict[str, str]:
    home = repo.parent / "claude-home"
    home.mkdir(exist_ok=True)
    return claude_env(home, stub.url)


def _assert_relay_sessions(repo: Path, sessions: int) -> None:
    assert set(_statuses(repo).values()) == {"completed"}
    for n in range(1, sessions + 1):
        assert run("session", "show", str(n), "--json").json()["ack"]["status"] == "accepted"
    log = (repo / ".git" / "handoff" / "relay" / "session-1.log").read_text(errors="replace")
    assert "Hook JSON output validation failed" not in log


def test_relay_of_six_tasks_two_per_session_as_a_child(repo: Path, stub: StubServer) -> None:
    _plan(repo, 6, per_session=2)
    stub.policy = Lazy(LAZY_WORK)
    agent = 'claude -p --dangerously-skip-permissions "$(cat {prompt_file})"'
    r = run_exe("relay", "--agent", agent, "--ack-timeout", "60", cwd=repo, env=_relay_env(repo, stub), timeout=240)
    assert r.rc == 0, r.out + r.err
    assert "all 6 task(s) completed" in r.out
    _assert_relay_sessions(repo, 3)


def _trust_workspace(home: Path, repo: Path, api_key: str) -> None:
    """What a person answers once in an interactive first run: onboarding done, the
    folder trusted, the API key in the environment approved."""
    config = home / ".claude.json"
    data = json.loads(config.read_text()) if config.exists() else {}
    data.update({"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True,
                 "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []}})
    projects = data.setdefault("projects", {})
    projects.setdefault(str(repo), {}).update({"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True})
    config.write_text(json.dumps(data))


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
@pytest.mark.parametrize("mode", ["print", "interactive"])
def test_relay_of_six_tasks_two_per_session_in_tmux(repo: Path, stub: StubServer, mode: str) -> None:
    _plan(repo, 6, per_session=2)
    stub.policy = Lazy(LAZY_WORK)
    env = _relay_env(repo, stub)
    _trust_workspace(Path(env["HOME"]), repo, env["ANTHROPIC_API_KEY"])
    socket_name = f"handoff-claude-{os.getpid()}-{mode}"
    flag = "-p " if mode == "print" else ""
    agent = f'claude {flag}--dangerously-skip-permissions "$(cat {{prompt_file}})"'
    try:
        r = run_exe("relay", "--tmux", "--tmux-socket", socket_name, "--agent", agent, "--ack-timeout", "60",
                    "--handoff-grace", "3", cwd=repo, env=env, timeout=300)
        assert r.rc == 0, r.out + r.err
        assert f"tmux -L {socket_name} attach -t handoff-repo-1" in r.out
        _assert_relay_sessions(repo, 3)
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)


def test_the_variadic_allowed_tools_pitfall_is_a_launch_failure(repo: Path, stub: StubServer) -> None:
    _plan(repo, 2)
    agent = 'claude -p --allowedTools Bash "$(cat {prompt_file})"'  # the flag swallows the prompt
    r = run_exe("relay", "--agent", agent, "--ack-timeout", "60", cwd=repo, env=_relay_env(repo, stub), timeout=240)
    assert r.rc == 1
    assert "failed to start 3 time(s) in a row" in r.err and "after its ACK" in r.err, r.out + r.err


def test_the_python_running_the_tests_runs_the_hooks() -> None:
    """The hooks call `git handoff` from PATH: claude_env puts this interpreter's scripts first."""
    env = claude_env(Path("/nonexistent-home"), "http://127.0.0.1:9")
    first = env["PATH"].split(os.pathsep)[0]
    assert first == os.path.dirname(sys.executable)
    assert Path(first, "git-handoff").exists()


def test_the_compaction_summarizer_is_never_held_while_a_task_is_claimed(repo: Path, stub: StubServer) -> None:
    """The agent claims a task and its answer reports a context nearly full: the CLI
    auto-compacts with the task in progress. Its summarizer ends with a SubagentStop,
    which must not get `decision: block` ("task … is in progress. Finish it")."""
    _plan(repo, 1)
    steps: list[str] = []

    def policy(req: Request) -> Reply:
        if req.is_summary():
            steps.append("summary")
            return Lazy()(req)  # the scripted summary
        if "claim" not in steps:
            steps.append("claim")
            reply = bash("git handoff claim t01")
            reply.input_tokens = 990_000  # the CLI compacts before its next turn
            return reply
        if "work" not in steps:
            steps.append("work")
            return bash("echo done > t01.txt && git handoff done t01")
        return say("Finished.")

    stub.policy = policy
    result = _claude(repo, stub, timeout=180)
    assert result.rc == 0, result.stderr
    assert result.ran("PreCompact") == ["PreCompact:auto"], result.hooks_run()
    assert "SessionStart:compact" in result.ran("SessionStart")
    assert steps.index("claim") < steps.index("summary") < steps.index("work"), steps
    assert result.ran("SubagentStop"), result.hooks_run()  # the summarizer's
    assert not result.blocks("SubagentStop")
    assert _statuses(repo) == {"t01": "completed"}
