"""The relay switches agent CLIs on a long limit and comes back, with the real Claude Code
and Codex CLIs against their loopback model stubs (only the models are stubs).

docs/agent-clis.md's "Running for a week" recipe as written (the agents Claude Code then Codex
in handoff.agents; its 1 h threshold scaled to 5 s), then `git handoff relay` with the recipe's
options: Claude Code claims the
first task and stops on a plan limit that resets in REST seconds (a subscription's 429,
its reset time printed). That is further away than the threshold, so Codex goes on at
once in the same session, from the same prompt, and finishes the task Claude claimed
(no attempt counted, no session spent); the next sessions run Codex while Claude is
limited, and the first session that starts after Claude's reset runs Claude again.
Before ops/relay_agents.py, a second --agent replaced the first and no switch
happened (the test fails there: no switch in the log, session 1 run by one CLI).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from git_handoff.dashboard import pages
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.store import StateStore
from tests.support.agent_clis import codex_home, install_hooks, plan, require_codex
from tests.support.claude_cli import claude_env, require_claude
from tests.support.processes import agents_left
from tests.support.repo import assert_fsck_clean, git, run
from tests.support.stubs.anthropic import NEXT_TASK, Lazy, Reply, Request, StubServer, bash
from tests.support.stubs.faults import Fault
from tests.support.stubs.loopback import Exchange, Run, Turn, lazy_agent
from tests.support.stubs.openai_responses import ResponsesStub

pytestmark = pytest.mark.slow

CLAUDE = 'claude -p --dangerously-skip-permissions "$(cat {prompt_file})"'
CODEX = 'codex exec --trust -s danger-full-access "Work on the tasks git handoff gives you."'
CODEX_TURN = 4.0  # seconds the Codex stub takes per model turn: a Codex session lasts 10 s or more


IN_PROGRESS = re.compile(r"task \[([A-Za-z0-9._-]+)\] .* is in progress\. Finish it")


class LimitedAtFirstClaim(Lazy):
    """Lazy (what do_task writes, so that the tasks' checks pass; a task it is told is in
    progress it finishes); the first task it is told to do it claims, and the stub answers
    Claude's next request with its plan limit (one request: `claude -p` does not retry a
    plan limit). Claude prints the reset to the minute ("resets 6:56am (UTC)"): the limit
    resets one second after a whole minute 25 to 85 s away, so that the time printed is
    the reset's own minute."""

    def __init__(self, stub: StubServer) -> None:
        super().__init__("echo done-{id} > {id}.txt")
        self.stub = stub
        self.limited_at = 0.0

    def __call__(self, req: Request) -> Reply:
        feedback = req.hook_feedback() or ""
        found = NEXT_TASK.search(feedback)
        if found and not self.limited_at:
            self.limited_at = now = time.time()
            reset_in = -(-(now + 25) // 60) * 60 + 1 - now
            self.stub.faults.fail(Fault("usage_limit", reset_in=reset_in), times=1)
            return bash(f"git handoff claim {found.group(1)} && echo claimed")
        held = IN_PROGRESS.search(feedback)
        if held:
            return bash(f"echo done-{held.group(1)} > {held.group(1)}.txt && git handoff done {held.group(1)}")
        return super().__call__(req)


def codex_agent() -> Callable[[Exchange], Turn]:
    """lazy_agent, taking CODEX_TURN seconds per turn, and carrying on with a task its
    session holds already (the one Claude claimed) where it would claim it."""
    lazy = lazy_agent()

    def answer(ex: Exchange) -> Turn:
        time.sleep(CODEX_TURN)
        turn = lazy(ex)
        if isinstance(turn, Run):
            found = re.match(r"git handoff claim (\S+) >/dev/null && ", turn.command)
            if found:
                task = found.group(1)
                turn = Run(f"{{ git handoff claim {task} >/dev/null 2>&1 || git handoff renew {task} >/dev/null; }} && "
                           + turn.command[found.end():])
        return turn

    return answer


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "agent-clis.md"


def recipe() -> tuple[list[str], list[str]]:
    """docs/agent-clis.md's "Running for a week": its setup lines as written, and the
    options of its relay line."""
    text = GUIDE.read_text()
    at = text.index("### Running for a week")
    block = text[text.index("```sh\n", at) + 6:text.index("```", text.index("```sh\n", at) + 6)]
    lines = [line for line in block.splitlines() if line.strip()]
    *setup, relay = lines
    assert relay.startswith("nohup git-handoff relay ") and relay.endswith(" > relay.out 2>&1 &"), relay
    return setup, shlex.split(relay.removeprefix("nohup git-handoff relay ").removesuffix(" > relay.out 2>&1 &"))


def _env(repo: Path, claude_url: str, codex: Path) -> dict[str, str]:
    """Both CLIs' settings in one environment: Claude Code logged in with a subscription
    (its plan limits carry their reset time), Codex's home pointing at its stub."""
    home = repo.parent / "claude-home"
    home.mkdir(exist_ok=True)
    env = claude_env(home, claude_url)
    del env["ANTHROPIC_API_KEY"]
    env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-stub-not-a-real-token"
    env.update({"CODEX_HOME": str(codex), "STUB_API_KEY": "stub-key", "RUST_LOG": "warn"})
    env = {k: v for k, v in env.items() if not k.startswith(("OPENAI_", "GEMINI_", "GOOGLE_"))}
    return env


def test_claude_on_a_long_limit_is_followed_by_codex_in_the_same_session_and_comes_back(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_claude()
    require_codex()
    ids = plan(10, "--max-tasks-per-session", "1")
    codex = tmp_path / "codex-home"
    codex.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex))
    setup, options = recipe()
    for line in setup:  # as written: the hooks, the agents, the thresholds
        done = subprocess.run(line, shell=True, cwd=repo, capture_output=True, text=True)
        assert done.returncode == 0, (line, done.stderr)
    assert install_hooks("codex")["trusted"]  # (again: the recipe's install recorded the hooks' trust)
    assert git("config", "--get-all", "handoff.agents", cwd=repo).splitlines() == [CLAUDE, CODEX]
    budgets = [git("config", f"handoff.budget.{key}", cwd=repo).strip() for key in ("tokens", "taskTime")]
    assert budgets == ["50M", "30h"]  # read by the relay below: a value it cannot read would stop it (exit 2)
    git("config", "handoff.switchAfter", "5s", cwd=repo)  # the recipe's 1 h, scaled to the test's minute
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "hooks", cwd=repo)
    with StubServer(Lazy(), lifetime=600) as claude_stub, ResponsesStub(codex_agent()) as codex_stub:
        policy = LimitedAtFirstClaim(claude_stub)
        claude_stub.policy = policy
        codex_home(codex, codex_stub.port)
        env = _env(repo, claude_stub.url, codex)
        proc = subprocess.run(["git", "handoff", "relay", *options,
                               "--ack-timeout", "90", "--limit-backoff", "2", "--limit-backoff-max", "4"],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        assert not claude_stub.errors, claude_stub.errors
        served = [kind for _, kind, *_ in claude_stub.faults.served]
    relay_dir = repo / ".git" / "handoff" / "relay"
    print(proc.stdout, run("log", "--session", "1").out, run("log", "--type", "ERROR").out,  # shown on a failure
          (relay_dir / "session-1.log").read_text(errors="replace")[-6000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert served and set(served) == {"usage_limit"}, served

    # the switch and the return, each its own log line under LIMIT, with its reason
    switches = [line for line in run("log", "--type", "WARN").out.splitlines() if "switching agent" in line]
    assert len(switches) == 2, (switches, proc.stdout[-4000:])
    assert all("[LIMIT]" in line for line in switches), switches
    away, back = switches
    assert "[SESSION-1]" in away and "claude -> codex" in away and "usage limit until" in away, away
    assert "codex -> claude" in back and "back to claude: its limit reset at" in back, back
    assert "switching agent claude -> codex" in proc.stdout

    # no wait for Claude's reset, no session and no attempt spent: Codex finished the claimed task in session 1
    assert not [line for line in run("log", "--type", "WARN").out.splitlines() if "waiting until" in line]
    tasks = {t["id"]: t for t in run("list", "--json").json()}
    assert {t["status"] for t in tasks.values()} == {"completed"} and set(tasks) == set(ids)
    assert all(t["attempts"] == 0 for t in tasks.values()), tasks
    count = int(run("status", "--json").json()["session_count"])
    assert count == 10, count  # one task per session, the switch spent none
    shown = [run("session", "show", str(n), "--json").json() for n in range(1, count + 1)]
    assert [s["ack"]["status"] for s in shown] == ["accepted"] * count
    ran = [s.get("agents") for s in shown]
    assert ran[0] == ["claude", "codex"] and shown[0]["completed"] == ["t1"], ran
    first_back = next(n for n, agents in enumerate(ran) if n and agents == ["claude"])
    assert all(agents == ["codex"] for agents in ran[1:first_back]), ran
    reset = re.search(r"usage limit until (\S+Z)", away).group(1)  # type: ignore[union-attr]
    assert shown[first_back]["started_at"] >= reset, (reset, shown[first_back]["started_at"])  # after its reset
    assert first_back >= 2, ran  # Codex ran a session of its own in between
    assert all(agents == ["claude"] for agents in ran[first_back:]), ran
    assert "agents:     claude -> codex" in run("session", "show", "1").out

    # status and the dashboard name the last switch
    status = run("status").out
    assert re.search(r"relay: agent claude \(switched from codex at .*\): back to claude", status), status
    html = pages.relay_html(StateStore(Repo.discover(repo)).snapshot())
    assert 'data-relay-field="switched"' in html and "back to claude" in html
    assert not agents_left(repo)
    assert_fsck_clean(repo)
