"""The relay unattended, against the real Claude Code CLI (`claude -p`): limits and
outages are waits, a hung agent is ended, and the soak test that throws all of it at
one relay run.

Only the model is a stub (tests/support/stubs/anthropic.py, on 127.0.0.1), with the
scripted faults of tests/support/stubs/faults.py: 429s with the reset headers the
real API sends, 529s. The relay runs as users run it: `git handoff relay` (through
git), the real `claude` under it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from git_handoff.dashboard import pages
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.store import StateStore
from tests.support.claude_cli import claude_env, require_claude
from tests.support.processes import agents_left
from tests.support.repo import Result, git, run
from tests.support.stubs.anthropic import Lazy, Reply, Request, StubServer, bash, say, summary
from tests.support.stubs.faults import Fault

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


def relay_env(repo: Path, stub: StubServer, *, oauth: bool = False, **extra: str) -> dict[str, str]:
    """The environment of the relay (and so of claude): only the model is a stub. `oauth`:
    a subscription login, under which plan limits come with their reset time."""
    home = repo.parent / "claude-home"
    home.mkdir(exist_ok=True)
    env = claude_env(home, stub.url, extra)
    if oauth:
        del env["ANTHROPIC_API_KEY"]
        env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-stub-not-a-real-token"
    return env


def start_relay(repo: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`git handoff relay ARGS` through git, as users run it, in exactly `env`, in a
    process group of its own (see `end_relay`)."""
    return subprocess.Popen(["git", "handoff", "relay", *args], cwd=repo, env=env, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def end_relay(proc: subprocess.Popen[str]) -> None:
    """A relay still running when the test gives up gets SIGTERM (it ends its agent and
    closes its session), then SIGKILL: nothing outlives the test."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
                proc.communicate(timeout=wait)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue


def relay(repo: Path, env: dict[str, str], *args: str, timeout: float = 600) -> Result:
    proc = start_relay(repo, env, *args)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        end_relay(proc)
    return Result(proc.returncode, out, err)


def statuses(repo: Path) -> dict[str, str]:
    return {t["id"]: t["status"] for t in run("list", "--json", cwd=repo).json()}


def log_lines(repo: Path, kind: str | None = None) -> list[str]:
    res = run("log", *(["--type", kind] if kind else []), cwd=repo)
    assert res.rc == 0, res.err
    return res.out.splitlines()


def assert_sessions_acked_and_closed(repo: Path) -> int:
    count = int(run("status", "--json", cwd=repo).json()["session_count"])
    for n in range(1, count + 1):
        shown = run("session", "show", str(n), "--json", cwd=repo).json()
        assert shown["ack"] and shown["ack"]["status"] == "accepted", (n, shown)
        assert shown["ended_at"], (n, shown)
        assert run("doc", "show", str(n), "--json", cwd=repo).rc == 0, n
    return count


IN_PROGRESS = re.compile(r"task \[([A-Za-z0-9._-]+)\] .* is in progress\. Finish it")


class Scripted(Lazy):
    """Lazy (told the next task, it claims, does and completes it), finishing a task it
    is told is in progress, with one-off faults keyed by the task the Stop hook names:

    - "hang": claim it, then hold the next model request until released;
    - "kill": claim it, then SIGKILL the claude process while its tool runs;
    - a fault of tests/support/stubs/faults.py (Fault): claim it, then the stub answers
      the next `times` model requests with that fault.
    """

    def __init__(self, stub: StubServer, faults: dict[str, str | tuple[Fault, int]]) -> None:
        super().__init__("echo done > {id}.txt")
        self.stub = stub
        self.faults = dict(faults)
        self.release = threading.Event()
        self.held = 0
        self.killed: list[int] = []

    def __call__(self, req: Request) -> Reply:
        if req.is_summary():
            return summary("The agent works through the git handoff tasks.")
        text = req.last_user_text()
        if "\nHOLD-HERE" in text and self.held == 0:  # the claim's output
            self.held += 1
            self.release.wait(300)  # the CLI waits on a model that never answers
            return say("Sorry, I was away.")
        feedback = req.hook_feedback() or ""
        for task, what in list(self.faults.items()):
            if f"Next task: [{task}]" not in feedback:
                continue
            del self.faults[task]
            if what == "hang":
                return bash(f"git handoff claim {task} && echo HOLD-HERE")
            if what == "kill":
                threading.Thread(target=self._kill_claude, daemon=True).start()
                return bash(f"git handoff claim {task} && sleep 60")
            assert isinstance(what, tuple)
            fault, times = what
            self.stub.faults.fail(fault, times=times)
            return bash(f"git handoff claim {task} && echo claimed")
        found = IN_PROGRESS.search(feedback)
        if found:
            task = found.group(1)
            self.followed.append(task)
            return bash(f"echo done > {task}.txt && git handoff done {task}")
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
                if b"HANDOFF_AGENT_TOKEN=" not in env or not cmd[0].endswith(b"sleep") or b"60" not in cmd:
                    continue
                parent = _parent(int(name))
                while parent > 1:  # up to the claude process itself
                    try:
                        first = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
                    except OSError:
                        break
                    if any(b"claude" in part for part in first[:2]) and not first[0].endswith(b"sh"):
                        os.kill(parent, signal.SIGKILL)
                        self.killed.append(parent)
                        return
                    parent = _parent(parent)
            time.sleep(0.2)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def test_a_hung_agent_is_ended_like_a_crash_and_the_next_session_finishes(repo: Path, stub: StubServer) -> None:
    plan(repo, 2, per_session=10)
    agent = Scripted(stub, {"t01": "hang"})
    stub.policy = agent
    try:
        r = relay(repo, relay_env(repo, stub), "--agent", CLAUDE, "--hang-timeout", "8", "--ack-timeout", "90")
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


def limit_lines(repo: Path) -> list[str]:
    return [line for line in log_lines(repo, "WARN") if "[LIMIT]" in line]


def completed_in_session(repo: Path) -> dict[str, list[int]]:
    """task id -> the sessions whose log says it was completed (each once, if all is well)."""
    out: dict[str, list[int]] = {}
    for line in log_lines(repo, "Completed"):
        found = re.search(r"\[SESSION-(\d+)\] Completed \[([A-Za-z0-9._-]+)\]", line)
        if found:
            out.setdefault(found.group(2), []).append(int(found.group(1)))
    return out


CLAUDE_JSON = 'claude -p --dangerously-skip-permissions --output-format json "$(cat {prompt_file})"'


@pytest.mark.parametrize(("kind", "agent_command"), [("rate_limit", CLAUDE), ("usage_limit", CLAUDE),
                                                     ("usage_limit", CLAUDE_JSON), ("overloaded", CLAUDE_JSON)],
                         ids=["rate_limit", "usage_limit", "usage_limit-json", "overloaded-json"])
def test_a_limit_mid_task_is_waited_out_in_the_same_session_with_the_claim_kept(repo: Path, stub: StubServer,
                                                                              kind: str, agent_command: str) -> None:
    """claude -p exits 1 on a 429 it will not wait for (retry-after over 60 s), or a 529 after
    its retries: the relay waits, then launches it again into the same session; the claimed
    task is finished there, no attempt counted, no second session, no launch failure. With
    `--output-format json` the error is inside its result line (before, a launch failure)."""
    plan(repo, 3, per_session=10)
    fault = Fault(kind, reset_in=90 if kind == "rate_limit" else 20)
    agent = Scripted(stub, {"t02": (fault, 2)})
    stub.policy = agent
    retries = {"CLAUDE_CODE_MAX_RETRIES": "1"} if kind == "overloaded" else {}  # its 529s: the request, one retry
    env = relay_env(repo, stub, oauth=kind == "usage_limit", **retries)
    proc = start_relay(repo, env, "--agent", agent_command, "--limit-backoff", "2", "--limit-backoff-max", "4",
                       "--ack-timeout", "90")
    shown: dict[str, str] = {}
    deadline = time.monotonic() + 600
    try:
        while proc.poll() is None and time.monotonic() < deadline:  # while it waits, status and dashboard say so
            if "status" not in shown:
                line = [x for x in run("status", cwd=repo).out.splitlines() if x.startswith("relay: waiting for")]
                if line:
                    shown["status"] = line[0]
                    shown["dashboard"] = pages.relay_html(StateStore(Repo.discover(repo)).snapshot())
            time.sleep(0.1)
        out, err = proc.communicate(timeout=30)
    finally:
        end_relay(proc)
    r = Result(proc.returncode, out, err)
    assert r.rc == 0, r.out + r.err
    words = {"usage_limit": "the usage limit", "rate_limit": "the rate limit", "overloaded": "the API outage"}[kind]
    assert shown["status"].startswith(f"relay: waiting for {words}, resumes at "), shown
    assert 'data-relay-field="waiting"' in shown["dashboard"] and words in shown["dashboard"]
    assert [served[1] for served in stub.faults.served] == [fault.kind] * 2
    tasks = {t["id"]: t for t in run("list", "--json", cwd=repo).json()}
    assert {t["status"] for t in tasks.values()} == {"completed"}
    assert tasks["t02"]["attempts"] == 0  # the claim was kept through the waits
    assert int(run("status", "--json", cwd=repo).json()["session_count"]) == 1  # no session spent
    assert completed_in_session(repo) == {"t01": [1], "t02": [1], "t03": [1]}
    waits = [line for line in limit_lines(repo) if "waiting until" in line]
    assert waits and all("[SESSION-1]" in line for line in waits), limit_lines(repo)
    assert "waiting for the " in r.out and "resumes at " in r.out
    assert "launch 2/3" not in r.out and not log_lines(repo, "ERROR")  # no launch failure, no crash
    assert_sessions_acked_and_closed(repo)
    assert not agents_left(repo)


def test_soak_twenty_tasks_through_the_faults_of_a_night(repo: Path, stub: StubServer, tmp_path: Path) -> None:
    """20 tasks, 2 per session, the real claude -p under `git handoff relay`, while the stub
    answers a burst of 429s with reset headers (t03), a burst of 529s (t11) and seeded
    random 500s, claude is SIGKILLed mid-task (t07), one launch never acknowledges
    (session 9's first), and one model request hangs (t15)."""
    ids = plan(repo, 20, per_session=2)
    agent = Scripted(stub, {"t03": (Fault("rate_limit", reset_in=90), 3), "t07": "kill",
                            "t11": (Fault("overloaded"), 4), "t15": "hang"})
    stub.policy = agent
    stub.faults.at_random(seed=23, probability=0.03, fault=Fault("server_error"))
    marker = tmp_path / "never-acked"
    command = f'if [ "$HANDOFF_SESSION" = 9 ] && mkdir {marker} 2>/dev/null; then exec sleep 600; fi; {CLAUDE}'
    env = relay_env(repo, stub, CLAUDE_CODE_MAX_RETRIES="1")
    try:
        r = relay(repo, env, "--agent", command, "--ack-timeout", "30", "--hang-timeout", "10",
                  "--limit-backoff", "2", "--limit-backoff-max", "4", timeout=1200)
    finally:
        agent.release.set()
    assert r.rc == 0, r.out + r.err
    assert "all 20 task(s) completed" in r.out
    assert agent.killed and agent.held == 1 and marker.is_dir()

    # every task completed exactly once; only the killed and the hung one took a second attempt
    done = completed_in_session(repo)
    assert sorted(done) == ids and all(len(sessions) == 1 for sessions in done.values()), done
    attempts = {t["id"]: t["attempts"] for t in run("list", "--json", cwd=repo).json()}
    assert {tid for tid, n in attempts.items() if n} == {"t07", "t15"}, attempts

    # every session acknowledged and closed with its document; a limit spent no session
    assert assert_sessions_acked_and_closed(repo) >= 10
    waits = [line for line in limit_lines(repo) if "waiting until" in line]
    for task, kind in (("t03", "rate limit"), ("t11", "outage")):
        session = done[task][0]
        assert any(f"[SESSION-{session}]" in line and f"[LIMIT] relay: session {session}: {kind}:" in line
                   for line in waits), (task, waits)

    # each fault in the log with its category
    errors = log_lines(repo, "ERROR")
    assert any("[TASK_EXEC]" in line and "status 137" in line for line in errors), errors
    assert any("[ENV_SETUP]" in line and "[SESSION-9]" in line and "did not acknowledge" in line
               for line in errors), errors
    assert any("[SESSION_TIMEOUT]" in line and "hung: no progress" in line for line in errors), errors
    assert not [line for line in errors if "launch failure" in line], errors

    # nothing left behind, nothing broken
    assert not agents_left(repo)
    fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and not fsck.stdout.strip(), fsck.stdout + fsck.stderr


KEY_TAIL = "sk-stub-not-a-real-key"[-20:]  # claude_env's ANTHROPIC_API_KEY


def _answered(repo: Path, *keys: str) -> dict[str, object]:
    """~/.claude.json with the first-run screens' answers named by `keys`."""
    config: dict[str, object] = {}
    if "onboarding" in keys:
        config["hasCompletedOnboarding"] = True
    if "trust" in keys:
        config["projects"] = {str(repo): {"hasTrustDialogAccepted": True}}
    if "key" in keys:
        config["customApiKeyResponses"] = {"approved": [KEY_TAIL], "rejected": []}
    if "mcp" in keys:
        project = config.setdefault("projects", {str(repo): {}})
        assert isinstance(project, dict)
        project[str(repo)]["enabledMcpjsonServers"] = ["handoff"]
    return config


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
@pytest.mark.parametrize(("answered", "setting", "where"), [
    ((), "hasCompletedOnboarding", "~/.claude.json"),  # a fresh HOME: the onboarding needs api.anthropic.com, exits 1
    (("onboarding",), "hasTrustDialogAccepted", "~/.claude.json"),  # the trust screen: waits for a person
    (("onboarding", "trust"), "enabledMcpjsonServers", ".claude/settings.local.json"),  # .mcp.json's server
    (("onboarding", "trust", "mcp"), "customApiKeyResponses", "~/.claude.json"),
    (("onboarding", "trust", "mcp", "key"), "bypassPermissionsModeAccepted", "~/.claude.json"),
], ids=["onboarding", "trust", "mcp-server", "api-key", "bypass"])
def test_interactive_claude_on_a_first_run_screen_stops_the_relay_naming_the_setting(
        repo: Path, stub: StubServer, answered: tuple[str, ...], setting: str, where: str) -> None:
    """Each screen the interactive CLI shows before its prompt, met in turn: the relay names
    it with its setting within 45 s and stops by itself (exit 1), instead of waiting out
    its ACK timeouts and blaming the agent command (the MCP server's approval was not
    known before)."""
    plan(repo, 1, per_session=10)
    assert (repo / ".mcp.json").exists()  # hooks install registered the server: its approval is asked
    env = relay_env(repo, stub)
    (Path(env["HOME"]) / ".claude.json").write_text(json.dumps(_answered(repo, *answered)))
    socket_name = f"handoff-first-run-{os.getpid()}-{len(answered)}"
    started = time.monotonic()
    try:
        r = relay(repo, env, "--tmux", "--tmux-socket", socket_name, "--agent",
                  'claude --dangerously-skip-permissions "$(cat {prompt_file})"', "--ack-timeout", "120",
                  timeout=400)
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    took = time.monotonic() - started
    assert r.rc == 1, r.out + r.err
    (said,) = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert "for a person" in said and setting in said and where in said, said
    assert took < 45 and "did not acknowledge" not in r.out + r.err, (took, r.out)  # not the ACK timeout's 120 s
    assert any("[ENV_SETUP]" in line and setting in line for line in log_lines(repo, "ERROR"))
    assert not agents_left(repo)
    assert subprocess.run(["tmux", "-L", socket_name, "list-sessions"], capture_output=True).returncode != 0


class IdleFirstSession(Lazy):
    """Session 1's agent never takes a task and ends its turn (the CLI's own Stop-hook block
    cap overrides the hook); every later session works as Lazy does. `idle_at`: the moment
    of session 1's last model request."""

    def __init__(self) -> None:
        super().__init__("touch {id}.txt")
        self.idle_at = 0.0

    def __call__(self, req: Request) -> Reply:
        if "No handoff document yet" in req.first_user_text() and not req.is_summary():
            self.idle_at = time.time()
            return say("I will not take a task now.")
        return super().__call__(req)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
def test_an_interactive_agent_that_ends_its_turn_with_work_left_is_followed_by_the_next_session(
        repo: Path, stub: StubServer) -> None:
    """The interactive CLI would end its turn with eligible work left and nothing in progress
    at its own Stop-hook block cap (1 here, before the hook's valve): the hook reads the
    cap, lets the turn end itself at it instead of blocking into it, and the session's
    document says so (before ops/stop_cap.py: the CLI overrode the hook, the relay saw the
    pane rest at its prompt, and no document named the cap); the next session starts
    within 30 s (the relay never waits for an exit that an interactive CLI never makes)."""
    plan(repo, 2, per_session=10)
    git("add", ".mcp.json", cwd=repo)
    git("commit", "-q", "-m", "mcp", cwd=repo)
    policy = IdleFirstSession()
    stub.policy = policy
    env = relay_env(repo, stub, CLAUDE_CODE_STOP_HOOK_BLOCK_CAP="1")
    config = {"bypassPermissionsModeAccepted": True, **_answered(repo, "onboarding", "trust", "mcp", "key")}
    (Path(env["HOME"]) / ".claude.json").write_text(json.dumps(config))
    socket_name = f"handoff-turn-{os.getpid()}"
    try:
        r = relay(repo, env, "--tmux", "--tmux-socket", socket_name, "--agent",
                  'claude --dangerously-skip-permissions "$(cat {prompt_file})"', timeout=300)
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert r.rc == 0, r.out + r.err
    assert statuses(repo) == {"t01": "completed", "t02": "completed"}
    assert "session 1: handed off" in r.out, r.out
    doc = run("doc", "show", "1", "--json", cwd=repo).json()
    assert doc["trigger"] == "stop" and any("Stop-hook block cap (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=1)" in b
                                            for b in doc["blockers"]), doc
    second = run("session", "show", "2", "--json", cwd=repo).json()
    started = datetime.datetime.strptime(second["started_at"], "%Y-%m-%dT%H:%M:%SZ")
    waited = started.replace(tzinfo=datetime.UTC).timestamp() - policy.idle_at
    assert policy.idle_at and waited < 30, f"session 2 started {waited:.0f} s after session 1's last turn"
    assert assert_sessions_acked_and_closed(repo) == 2
    assert not any("hung" in line for line in log_lines(repo, "ERROR")), log_lines(repo, "ERROR")
    assert not agents_left(repo)
