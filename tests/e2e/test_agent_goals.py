"""The CLIs' own goal loops beside git handoff's Stop hook, with the real binaries against
their loopback model stubs (docs/agent-clis.md, "Claude `/goal` and Codex goals").

Claude Code 2.1.332: `claude -p "/goal CONDITION"` sets the goal (a session Stop hook of type
"prompt": after each turn a separate model call, the evaluator, judges the condition from the
transcript and blocks the stop while it is not met). That hook and ours run side by side: our
block keeps the agent on its task, and at the session's end our `continue: false` ends the
turn whatever the evaluator says (without it, an agent that makes a tool call between the
goal's blocks is sent back for ever: Claude Code's block cap counts only blocks in a row).

Codex 0.171.0: goals are on by default (`[features] goals`); `codex exec` offers the model
`create_goal`/`get_goal`/`update_goal` (a `/goal` prompt is only text there), and a goal set so
stays active in `$CODEX_HOME/goals_1.sqlite` but `codex exec` ends with its turn: no goal
continuation follows our Stop hook's allowing the stop. The interactive CLI does continue, turn
after turn, whatever our hook says: in a relay the pane is ended after the handoff grace;
`goals = false` in config.toml's [features] turns goals off.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_claude_cli import _trust_workspace
from tests.support.agent_clis import codex_env, codex_home, install_hooks, plan, require_codex, run_codex, statuses
from tests.support.claude_cli import ClaudeRun, claude_env, require_claude, run_claude
from tests.support.repo import git, run, run_exe
from tests.support.stubs.anthropic import NEXT_TASK, Reply, Request, StubServer, bash, say, summary
from tests.support.stubs.loopback import NEXT_ELIGIBLE, Call, Exchange, Run, Say, Turn, do_task
from tests.support.stubs.openai_responses import ResponsesStub

pytestmark = pytest.mark.slow

GOAL = "every git handoff task is completed"
EVALUATOR = "You are evaluating a stop-condition hook"  # the system prompt of /goal's evaluator (2.1.332)
IN_PROGRESS = re.compile(r"task \[([A-Za-z0-9._-]+)\] .* is in progress")


class GoalModel:
    """The model behind Claude Code with a /goal set. As the goal's evaluator it answers `met`
    (JSON `{"ok": ...}`). As the agent it does what our Stop hook names (the next task, or the
    one in progress); sent back by the goal alone it keeps busy with one shell command per
    turn (a tool call between two blocks, so Claude Code's block cap never ends the turn), at
    most `patience` times; its very first turn only claims `first_claim` when one is given."""

    def __init__(self, *, met: bool = False, patience: int = 25, first_claim: str | None = None) -> None:
        self.met = met
        self.patience = patience
        self.first_claim = first_claim
        self.evaluations = 0
        self.busy = 0  # turns the goal alone sent it back for
        self.followed: list[str] = []
        self.feedback: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, req: Request) -> Reply:
        if EVALUATOR in req.system_text():
            with self.lock:
                self.evaluations += 1
            verdict = "the tasks are completed" if self.met else "tasks remain, per the transcript"
            return say(json.dumps({"ok": self.met, "reason": verdict}))
        if req.is_summary():
            return summary("Work on the git handoff tasks.")
        feedback = req.hook_feedback()
        if feedback:
            self.feedback.append(feedback)
            found = NEXT_TASK.search(feedback) or IN_PROGRESS.search(feedback)
            if found:
                task = found.group(1)
                self.followed.append(task)
                # claimed already when it is the task in progress: the claim's answer is not read
                return bash(f"git handoff claim {task} >/dev/null 2>&1; echo done-{task} > {task}.txt && "
                            f"git add {task}.txt && git commit -q -m 'task {task}' && git handoff done {task}")
            with self.lock:
                if self.busy < self.patience:
                    self.busy += 1
                    return bash("git handoff list")
            return say("Stopping.")
        if req.last_is_tool_result():
            return say("Turn over.")
        if self.first_claim:
            task, self.first_claim = self.first_claim, None
            return bash(f"git handoff claim {task}")
        return say("Goal noted.")


@pytest.fixture
def stub() -> Iterator[StubServer]:
    require_claude()
    with StubServer(GoalModel(), lifetime=280) as server:
        yield server
        assert not server.errors, server.errors


def _plan(count: int, per_session: int) -> list[str]:
    ids = plan(count, "--max-tasks-per-session", str(per_session))
    assert run("hooks", "install", "--agent", "claude").rc == 0
    return ids


def _goal_claude(repo: Path, stub: StubServer) -> ClaudeRun:
    result = run_claude(repo, stub.url, f"/goal {GOAL}", home=repo.parent / "claude-home", timeout=200)
    result.assert_hooks_accepted()
    return result


def _stop_outputs(result: ClaudeRun) -> list[dict[str, object]]:
    """What our Stop hook printed at each stop ({} for nothing)."""
    outs: list[dict[str, object]] = []
    for e in result.hook_responses("Stop"):
        text = (e.get("stdout") or "").strip()
        outs.append(json.loads(text) if text else {})
    return outs


def test_claude_goal_at_the_session_limit_the_turn_ends_whatever_the_goal_says(repo: Path,
                                                                                stub: StubServer) -> None:
    """The goal is never met and the agent answers each of its re-prompts with a tool call:
    our Stop hook still names each task (the agent follows it), and once the session's limit
    is reached its `continue: false` ends the turn at once; the goal is not left to drive the
    agent past the session's end (before: 25 more turns, ended only by the stub's patience)."""
    _plan(4, per_session=2)
    model = GoalModel()
    stub.policy = model
    result = _goal_claude(repo, stub)
    assert result.rc == 0, result.stderr
    assert model.evaluations >= 1  # the goal was active: its evaluator judged the stops
    assert model.followed == ["t1", "t2"]
    assert model.busy == 0, f"the goal sent the agent back {model.busy} times after the session's end"
    assert (result.result() or {}).get("terminal_reason") == "stop_hook_prevented"
    last = _stop_outputs(result)[-1]
    assert last["continue"] is False and "session is over" in str(last["stopReason"])
    assert statuses() == {"t1": "completed", "t2": "completed", "t3": "pending", "t4": "pending"}
    docs = run("doc", "list", "--json").json()
    assert [(d["session"], d["trigger"]) for d in docs] == [(1, "stop")]


def test_claude_goal_met_does_not_release_a_task_in_progress(repo: Path, stub: StubServer) -> None:
    """The goal's evaluator says met at the first stop (the goal clears), while a task is
    claimed and unfinished: our hook keeps the agent on it, then on the next task, and lets
    it stop (plainly: no session limit here) when the work is done."""
    _plan(2, per_session=10)
    model = GoalModel(met=True, first_claim="t1")
    stub.policy = model
    result = _goal_claude(repo, stub)
    assert result.rc == 0, result.stderr
    assert model.evaluations == 1  # met once, then the goal is gone
    assert "[t1] Write t1.txt is in progress. Finish it" in model.feedback[0]
    assert model.followed == ["t1", "t2"] and model.busy == 0
    assert statuses() == {"t1": "completed", "t2": "completed"}
    assert _stop_outputs(result)[-1] == {}  # no session's end: nothing to override


@pytest.mark.parametrize("mode", ["child", "interactive"])
def test_claude_goal_in_every_relay_session_ends_with_the_session(repo: Path, stub: StubServer, mode: str) -> None:
    """A relay whose agent command sets a never-met goal (`claude -p "/goal ..."` as its child, or
    interactive `claude "/goal ..."` in tmux): each session does its two tasks and ends there,
    the next one starts normally (ACK), and the goal never sends an agent back after its
    session's end (interactive: the goal is paused, "a hook ended the turn")."""
    ids = _plan(4, per_session=2)
    model = GoalModel()
    stub.policy = model
    home = repo.parent / "claude-home"
    home.mkdir()
    env = claude_env(home, stub.url)
    relay = ["relay", "--ack-timeout", "60"]
    socket_name = f"handoff-claude-goal-{os.getpid()}"
    if mode == "interactive":
        if shutil.which("tmux") is None:
            pytest.skip("tmux is not installed (.ci/run installs it)")
        _trust_workspace(home, repo, env["ANTHROPIC_API_KEY"])
        relay += ["--tmux", "--tmux-socket", socket_name, "--handoff-grace", "3"]
    flag = "-p " if mode == "child" else ""
    try:
        r = run_exe(*relay, "--agent", f'claude {flag}--dangerously-skip-permissions "/goal {GOAL}"', cwd=repo,
                    env=env, timeout=260)
    finally:
        if mode == "interactive":
            subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert r.rc == 0, r.out + r.err
    assert "all 4 task(s) completed" in r.out
    assert statuses() == dict.fromkeys(ids, "completed")
    assert model.busy == 0 and model.evaluations >= 2
    for n in (1, 2):
        shown = run("session", "show", str(n), "--json").json()
        assert shown["ack"]["status"] == "accepted" and len(shown["completed"]) == 2, shown
    assert run("session", "show", "3", "--json").rc != 0
    if mode == "interactive":
        pane = (repo / ".git" / "handoff" / "relay" / "session-1.log").read_text(errors="replace")
        assert "Goal paused" in pane and "a hook ended the turn" in pane


# -- Codex ----------------------------------------------------------------------------------------


def _goal_then_lazy(ex: Exchange) -> Turn:
    """Creates the goal on its first turn (the user asked for one), then does what our Stop
    hook names, one task a turn; told nothing, it stops."""
    if ex.index == 0:
        return Call("create_goal", {"objective": GOAL})
    if ex.last_was_tool_output:
        return Say("Task finished. I am done for now.")
    found = NEXT_TASK.search(ex.last_text())
    return Run(do_task(found.group(1))) if found else Say("Nothing to do.")


def test_codex_exec_goal_stays_active_and_the_run_ends_with_our_stop(repo: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    require_codex()
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    plan(4, "--max-tasks-per-session", "2")
    assert install_hooks("codex")["trusted"]
    with ResponsesStub(_goal_then_lazy) as stub:
        codex_home(home, stub.port)
        r = run_codex(repo, home, f"Set a goal: {GOAL}.", timeout=200)
        requests = stub.model_requests()
    assert r.rc == 0, r.stderr[-2000:]
    offered = {t.get("name") for t in requests[0].body.get("tools", [])}
    assert {"create_goal", "get_goal", "update_goal"} <= offered
    with sqlite3.connect(home / "goals_1.sqlite") as db:
        goals = db.execute("SELECT objective, status FROM thread_goals").fetchall()
    assert goals == [(GOAL, "active")]  # set, and never met
    # our hook named t1 and t2; at the session's limit it let the stop happen and exec ended:
    # no "Continue working toward the active thread goal" turn came after it
    assert len(requests) == 6
    assert not any("active thread goal" in text for req in requests for text in _texts(req.body))
    assert statuses() == {"t1": "completed", "t2": "completed", "t3": "pending", "t4": "pending"}
    assert r.stderr.count("hook: Stop Blocked") == 2 and "hook: Stop Completed" in r.stderr
    assert [d["trigger"] for d in run("doc", "list", "--json").json()] == ["stop"]


def _texts(body: object) -> list[str]:
    out: list[str] = []
    for item in (body.get("input") if isinstance(body, dict) else None) or []:
        if isinstance(item, dict) and isinstance(item.get("content"), list):
            out += [str(c.get("text", "")) for c in item["content"] if isinstance(c, dict)]
    return out


def test_codex_disable_goals_offers_no_goal_tools(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`codex --disable goals` (what docs/agent-clis.md gives relay sessions) turns the feature off."""
    require_codex()
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    plan(1)
    assert install_hooks("codex")["trusted"]
    with ResponsesStub(lambda ex: Say("Nothing to do.")) as stub:
        codex_home(home, stub.port)
        r = run_codex(repo, home, "Say hello.", extra=["--disable", "goals"], timeout=120)
        requests = stub.model_requests()
    assert r.rc == 0, r.stderr[-2000:]
    offered = {t.get("name") for req in requests for t in req.body.get("tools", [])}
    assert offered and not offered & {"create_goal", "get_goal", "update_goal"}


class CodexGoalThreads:
    """Interactive Codex's model in a relay: each conversation's first turn creates the goal (the
    user asked for one), then it does the task the prompt or our Stop hook names; a turn with
    nothing named (the goal's continuation after our hook let the stop happen) says so."""

    def __init__(self) -> None:
        self.continuations = 0

    def __call__(self, ex: Exchange) -> Turn:
        latest = ex.last_text()
        if "create_goal" in ex.tools and not ex.tool_outputs:
            return Call("create_goal", {"objective": GOAL})
        if "active thread goal" in latest or "<goal" in latest:
            self.continuations += 1
        if ex.last_was_tool_output and len(ex.tool_outputs) > 1:
            return Say("Task finished. I am done for now.")
        found = NEXT_TASK.search(latest) or (NEXT_ELIGIBLE.search(ex.all_text()) if len(ex.tool_outputs) == 1
                                             else None)
        return Run(do_task(found.group(1))) if found else Say("Nothing to do.")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
@pytest.mark.parametrize("goals", ["on", "disabled"])
def test_codex_interactive_goal_in_a_relay_the_pane_is_ended_and_the_next_session_starts(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, goals: str) -> None:
    """Interactive Codex (0.171.0) with a goal: once our Stop hook lets a stop through at the
    session's limit, Codex starts goal continuation turns by itself, one after another (our hook's
    output cannot stop them). The relay ends the pane after its handoff grace, the next session
    starts normally, and no task is claimed past a session's limit (`claim` refuses it). With
    `goals = false` in config.toml's [features] no goal is set and no continuation comes
    (`codex --disable goals` stops interactive Codex on "Background server has incompatible
    feature settings", a screen for a person)."""
    require_codex()
    monkeypatch.delenv("CODEX_HOME", raising=False)
    ids = plan(4, "--max-tasks-per-session", "2")
    home = tmp_path / "codex-home"
    home.mkdir()
    env = codex_env(home)
    os.environ["CODEX_HOME"] = str(home)  # hooks install records the hooks' trust there (monkeypatch restores)
    model = CodexGoalThreads()
    socket_name = f"handoff-codex-goal-{os.getpid()}-{goals}"
    with ResponsesStub(model) as stub:
        install_hooks("codex")
        config = codex_home(home, stub.port) / "config.toml"
        text = config.read_text()
        if goals == "disabled":  # in config.toml: `codex --disable goals` is refused by its background server
            text = text.replace("[features]\n", "[features]\ngoals = false\n", 1)
        config.write_text(text + f'\n[projects."{repo.resolve()}"]\ntrust_level = "trusted"\n')
        git("add", "-A", cwd=repo)
        git("commit", "-q", "-m", "hooks", cwd=repo)
        try:
            r = run_exe("relay", "--tmux", "--tmux-socket", socket_name, "--agent",
                        'codex -s danger-full-access "$(cat {prompt_file})"', "--ack-timeout", "60",
                        "--handoff-grace", "3", cwd=repo, env=env, timeout=300)
        finally:
            subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert r.rc == 0, r.out[-2000:] + r.err[-2000:]
    assert "all 4 task(s) completed in 2 session(s)" in r.out
    assert statuses() == dict.fromkeys(ids, "completed")
    for n in (1, 2):
        shown = run("session", "show", str(n), "--json").json()
        assert shown["ack"]["status"] == "accepted" and len(shown["completed"]) == 2, shown
    db = home / "goals_1.sqlite"
    if goals == "on":
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT objective, status FROM thread_goals").fetchall()
        assert rows == [(GOAL, "active")] * 2  # one goal per session's conversation, never met
        assert model.continuations > 0  # the goal's own loop ran on after our stop ...
        assert r.out.count("agent still running after the handoff: ending it") == 2  # ... until the relay ended it
    else:
        assert model.continuations == 0
        if db.exists():
            with sqlite3.connect(db) as conn:
                assert conn.execute("SELECT count(*) FROM thread_goals").fetchone() == (0,)
