"""An interactive Claude Code pane that continues by itself at a plan limit's reset is left
alone: the real `claude` in the relay's tmux pane, logged in with a subscription, gets a
plan limit from its loopback model stub mid-task and shows "Usage limit reached · set to
continue automatically at 3:52pm"; the relay neither kills it nor starts a new session
(a --hang-timeout shorter than the wait included), says so (its output, `status`, the log
under LIMIT), and the CLI goes on by itself at the reset, in the same session and launch.
Before ops/relay_watch.py's _pane_waits the relay said nothing of the wait (`status`
showed no waiting line, the log no LIMIT line): the test fails there."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_relay_unattended import (
    _answered,
    end_relay,
    log_lines,
    plan,
    relay_env,
    start_relay,
    statuses,
)
from tests.support.claude_cli import require_claude
from tests.support.processes import agents_left
from tests.support.repo import Result, git, run
from tests.support.stubs.anthropic import NEXT_TASK, Lazy, Reply, Request, StubServer, bash
from tests.support.stubs.faults import Fault

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")]

@pytest.fixture
def stub() -> Iterator[StubServer]:
    require_claude()
    with StubServer(Lazy(), lifetime=600) as server:
        yield server
        assert not server.errors, server.errors


IN_PROGRESS = re.compile(r"task \[([A-Za-z0-9._-]+)\] .* is in progress\. Finish it")


class LimitOnce(Lazy):
    """Lazy, finishing a task it is told is in progress; at the first task it claims it and
    the stub answers the next request with the plan limit, resetting one second after a
    whole minute 25 to 85 s away (the pane prints the minute)."""

    def __init__(self, stub: StubServer) -> None:
        super().__init__("echo done > {id}.txt")
        self.stub = stub
        self.reset_at = 0.0

    def __call__(self, req: Request) -> Reply:
        feedback = req.hook_feedback() or ""
        found = NEXT_TASK.search(feedback)
        if found and not self.reset_at:
            now = time.time()
            self.reset_at = -(-(now + 25) // 60) * 60 + 1
            self.stub.faults.fail(Fault("usage_limit", reset_in=self.reset_at - now), times=1)
            return bash(f"git handoff claim {found.group(1)} && echo claimed")
        held = IN_PROGRESS.search(feedback)
        if held:
            return bash(f"echo done > {held.group(1)}.txt && git handoff done {held.group(1)}")
        return super().__call__(req)


def test_an_interactive_claude_that_continues_by_itself_at_the_reset_is_left_alone(
        repo: Path, stub: StubServer) -> None:
    plan(repo, 2, per_session=10)
    git("add", ".mcp.json", cwd=repo)
    git("commit", "-q", "-m", "mcp", cwd=repo)
    policy = LimitOnce(stub)
    stub.policy = policy
    env = relay_env(repo, stub, oauth=True)
    config = {"bypassPermissionsModeAccepted": True, **_answered(repo, "onboarding", "trust", "mcp")}
    (Path(env["HOME"]) / ".claude.json").write_text(json.dumps(config))
    socket_name = f"handoff-pane-limit-{os.getpid()}"
    proc = start_relay(repo, env, "--tmux", "--tmux-socket", socket_name, "--hang-timeout", "15", "--agent",
                       'claude --dangerously-skip-permissions "$(cat {prompt_file})"')
    shown = ""
    deadline = time.monotonic() + 400
    try:
        while proc.poll() is None and time.monotonic() < deadline:  # while it waits, status says so
            if not shown:
                shown = next((x for x in run("status", cwd=repo).out.splitlines()
                              if x.startswith("relay: waiting for the usage limit")), "")
            time.sleep(0.5)
        out, err = proc.communicate(timeout=30)
    finally:
        end_relay(proc)
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    r = Result(proc.returncode, out, err)
    assert r.rc == 0, r.out + r.err
    assert [served[1] for served in stub.faults.served] == ["usage_limit"]
    assert statuses(repo) == {"t01": "completed", "t02": "completed"}
    assert "continues by itself" in r.out and "left alone until then" in r.out, r.out
    assert shown.startswith("relay: waiting for the usage limit, resumes at "), shown
    assert r.out.count("agent launched") == 1, r.out  # never killed, never launched again
    assert int(run("status", "--json", cwd=repo).json()["session_count"]) == 1  # no new session
    limits = [line for line in log_lines(repo, "WARN") if "[LIMIT]" in line]
    assert any("on the agent's pane" in line and "left alone" in line for line in limits), limits
    assert any("it went on" in line for line in limits), limits
    assert not log_lines(repo, "ERROR"), log_lines(repo, "ERROR")  # no hang, no crash
    done = [line for line in log_lines(repo, "Completed") if "[t01]" in line]
    assert done and done[0].split("]")[0].lstrip("[") >= time.strftime(  # t01 finished after the reset
        "%Y-%m-%dT%H:%M:%S", time.gmtime(policy.reset_at - 1)), done
    assert run("show", "t01", "--json", cwd=repo).json()["attempts"] == 0
    assert not agents_left(repo)
