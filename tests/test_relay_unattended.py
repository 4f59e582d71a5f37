"""The relay unattended, against the real Claude Code CLI (`claude -p`): limits and
outages are waits, a hung agent is ended, and the soak test that throws all of it at
one relay run.

Only the model is a stub (tests/support/stubs/anthropic.py, on 127.0.0.1), with the
scripted faults of tests/support/stubs/faults.py: 429s with the reset headers the
real API sends, 529s. The relay runs as users run it: `git handoff relay` (through
git), the real `claude` under it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from git_handoff import procs
from tests.support.claude_cli import claude_env, require_claude
from tests.support.repo import git, run, run_exe
from tests.support.stubs.anthropic import Lazy, Reply, Request, StubServer, bash, say, summary

pytestmark = pytest.mark.slow

CLAUDE = 'claude -p --dangerously-skip-permissions "$(cat {prompt_file})"'


@pytest.fixture
def stub() -> Iterator[StubServer]:
    require_claude()
    with StubServer(Lazy(), lifetime=600) as server:
        yield server
        assert not server.errors, server.errors


def plan(repo: Path, count: int, per_session: int) -> list[str]:
    assert run("init", "--max-tasks-per-session", str(per_session)).rc == 0
    ids = [f"t{n:02d}" for n in range(1, count + 1)]
    for task_id in ids:
        assert run("add", f"Write {task_id}.txt", "--id", task_id, "--check", f"test -f {task_id}.txt").rc == 0
    assert run("hooks", "install", "--agent", "claude").rc == 0
    git("add", ".claude", cwd=repo)
    git("commit", "-q", "-m", "hooks", cwd=repo)
    return ids


def relay_env(repo: Path, stub: StubServer, **extra: str) -> dict[str, str]:
    home = repo.parent / "claude-home"
    home.mkdir(exist_ok=True)
    env = claude_env(home, stub.url, extra)
    env["HANDOFF_RELAY_TEST"] = "1"
    return env


def statuses(repo: Path) -> dict[str, str]:
    return {t["id"]: t["status"] for t in run("list", "--json", cwd=repo).json()}


def log_lines(repo: Path, kind: str | None = None) -> list[str]:
    res = run("log", *(["--type", kind] if kind else []), cwd=repo)
    assert res.rc == 0, res.err
    return res.out.splitlines()


def agents_left(repo: Path) -> list[int]:
    """Processes still running a session of this repository's relay (claude and its children)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes()
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        if b"HANDOFF_AGENT_TOKEN=" in env and cwd.startswith(str(repo)) and procs.alive(int(name)):
            found.append(int(name))
    return found


def assert_sessions_acked_and_closed(repo: Path) -> int:
    count = int(run("status", "--json", cwd=repo).json()["session_count"])
    for n in range(1, count + 1):
        shown = run("session", "show", str(n), "--json", cwd=repo).json()
        assert shown["ack"] and shown["ack"]["status"] == "accepted", (n, shown)
        assert shown["ended_at"], (n, shown)
        assert run("doc", "show", str(n), "--json", cwd=repo).rc == 0, n
    return count


class Scripted(Lazy):
    """Lazy, with one-off behaviours keyed by the task the Stop hook names: `hang` (claim
    the task, then hold the next model request until released), `kill` (claim it, then
    SIGKILL the claude process while its tool runs)."""

    def __init__(self, hang: str | None = None, kill: str | None = None) -> None:
        super().__init__("echo done > {id}.txt")
        self.hang, self.kill = hang, kill
        self.release = threading.Event()
        self.held = 0
        self.killed: list[int] = []

    def __call__(self, req: Request) -> Reply:
        if req.is_summary():
            return summary("The agent works through the git handoff tasks.")
        if "\nHOLD-HERE" in req.last_user_text() and self.held == 0:  # the claim's output
            self.held += 1
            self.release.wait(300)  # the CLI waits on a model that never answers
            return say("Sorry, I was away.")
        feedback = req.hook_feedback() or ""
        for task, what in ((self.hang, "hang"), (self.kill, "kill")):
            if task and f"Next task: [{task}]" in feedback:
                if what == "hang":
                    self.hang = None
                    return bash(f"git handoff claim {task} && echo HOLD-HERE")
                self.kill = None
                threading.Thread(target=self._kill_claude, daemon=True).start()
                return bash(f"git handoff claim {task} && sleep 60")
        return super().__call__(req)

    def _kill_claude(self) -> None:
        """SIGKILL the claude process of the running session, once its tool (sleep 60) runs."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for name in os.listdir("/proc"):
                try:
                    cmd = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
                    env = Path(f"/proc/{name}/environ").read_bytes()
                except OSError:
                    continue
                if b"HANDOFF_AGENT_TOKEN=" not in env:
                    continue
                if any(part.endswith(b"sleep") for part in cmd[:1]) and b"60" in cmd:
                    parent = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
                    while parent > 1:  # up to the claude process itself
                        pcmd = Path(f"/proc/{parent}/cmdline").read_bytes()
                        if b"claude" in pcmd and b"/bin/sh" not in pcmd.split(b"\0")[0]:
                            os.kill(parent, signal.SIGKILL)
                            self.killed.append(parent)
                            return
                        parent = int(Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()[1])
            time.sleep(0.2)


def test_a_hung_agent_is_ended_like_a_crash_and_the_next_session_finishes(repo: Path, stub: StubServer) -> None:
    plan(repo, 2, per_session=10)
    agent = Scripted(hang="t01")
    stub.policy = agent
    try:
        r = run_exe("relay", "--agent", CLAUDE, "--hang-timeout", "8", "--ack-timeout", "90", cwd=repo,
                    env=relay_env(repo, stub), timeout=400)
    finally:
        agent.release.set()
    assert r.rc == 0, r.out + r.err
    assert agent.held == 1
    hung = [line for line in log_lines(repo, "ERROR") if "hung: no progress" in line]
    assert len(hung) == 1 and "[SESSION_TIMEOUT]" in hung[0] and "[SESSION-1]" in hung[0], hung
    assert statuses(repo) == {"t01": "completed", "t02": "completed"}
    assert assert_sessions_acked_and_closed(repo) == 2
    assert run("doc", "show", "1", "--json", cwd=repo).json()["trigger"] in ("relay", "session-end")  # git facts
    assert not agents_left(repo)
