"""A simulated week: one `git handoff relay` run drives 120 tasks, four to a session (30 and
more sessions), through the real Claude Code, Gemini CLI and Codex, in that order of
preference, against their loopback model stubs, which inject from a seeded script what a
week of unattended work meets. Time is scaled: an hour is 20 s (`--switch-after 20`, the
recipe's 1 h); a plan limit of Claude Code or Codex resets about a minute after it is hit
("hours": they print the reset to the minute); Gemini CLI's quota in 960 s ("two days":
it does not come back within the run).

- Claude Code: a 429 burst (retry-after 90 s: `claude -p` gives up at once, the relay waits
  its backoff), a SIGKILL mid-task, its 5-hour plan limit twice (the subscription's 429 with
  the reset header: it prints the reset time), a 529 outage, and a launch that never sends
  its ACK (a `claude` first on PATH, in front of the real one, armed by the script, sleeps).
- Gemini CLI: a 429 it retries itself, then, once Claude Code is limited the second time, a
  quota that resets "days" away (429 RESOURCE_EXHAUSTED, retry delay 960 s: it prints the
  delay and stops; its per-day quota prints no reset time at all).
- Codex: a hung model request (the relay's --hang-timeout ends it), a 500 outage, and its
  plan limit (429 usage_limit_reached with resets_at: it prints the time), hit when Claude
  Code's reset is at most 15 s away, so that every agent is limited and the relay waits for
  the earliest reset, Claude Code's.

So the relay switches away on each long limit (Claude Code -> Gemini CLI twice, Gemini CLI
-> Codex) and back to Claude Code (once its reset has passed; once every agent is limited
and its reset comes first). At the end: every task completed exactly once; two switches
and more each way (to a later agent of the order, back to an earlier one), each a LIMIT
log line with its reason; no session or attempt spent on a limit (each session that met no
kill, hang or missing ACK completed its four tasks; only the killed and the hung task took
a second attempt); the tokens the three stubs served are the tokens the sessions recorded,
and the tasks'. Then a second, shorter run with a token budget stops at the first session
that reached it, exit 1 and one line.

Before ops/relay_agents.py a second --agent replaced the first (no switch: the test fails
on its switch counts), before ops/usage.py no tokens were recorded, and before this
test's fix Claude Code's 429 under a plan login was taken for a launch failure.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import (
    CODEX_OFFLINE,
    codex_home,
    install_hooks,
    plan,
    require_codex,
    require_gemini,
)
from tests.support.claude_cli import claude_env, require_claude
from tests.support.processes import agents_left, kill_agent_cli
from tests.support.repo import assert_fsck_clean, git, run
from tests.support.stubs import gemini as gemini_stub
from tests.support.stubs.anthropic import Reply, Request, StubServer, bash, say, summary
from tests.support.stubs.faults import Fault
from tests.support.stubs.gemini import GeminiStub
from tests.support.stubs.loopback import (
    IN_PROGRESS,
    NEXT_TASK,
    Exchange,
    Run,
    Say,
    Turn,
    lazy_agent,
)
from tests.support.stubs.openai_responses import ResponsesStub

pytestmark = pytest.mark.slow

TASKS = 120
PER_SESSION = 4
SEED = 20261207
HOUR = 20  # seconds: the scaled hour (--switch-after)
ACK = 25  # --ack-timeout: each CLI acknowledged within 1-5 s here; the launch that never does costs this
DAYS = 48 * HOUR  # Gemini CLI's quota resets "two days" away
ORDER = ("claude", "gemini", "codex")
CLAUDE = 'claude -p --dangerously-skip-permissions "$(cat {prompt_file})"'
GEMINI = 'gemini --yolo -p "Work on the tasks git handoff gives you."'
CODEX = 'codex exec --trust -s danger-full-access "Work on the tasks git handoff gives you."'
CLAIM = re.compile(r"git handoff claim (\S+) >/dev/null && ")


def minute_reset(at_least: float) -> float:
    """Seconds from now to one second past the first whole minute at least `at_least` s
    away: Claude Code and Codex print a reset to the minute, so the time they print is
    the reset's own minute."""
    now = time.time()
    return -(-(now + at_least) // 60) * 60 + 1 - now


@dataclass
class Week:
    """The seeded script the three stubs' policies share. Each task the relay's agents are
    told to start for the first time is that CLI's next "fresh" task; the script names what
    happens at some of them (the rest are done at once). The limit events that need the
    other CLIs' state are conditions, not counts."""

    noack_armed: Path
    stubs: dict[str, Any] = field(default_factory=dict)
    fresh: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ORDER, 0))
    seen: set[str] = field(default_factory=set)
    happened: list[tuple[str, str, str]] = field(default_factory=list)  # (cli, task, event)
    resets: dict[str, float] = field(default_factory=dict)  # cli -> epoch its last plan limit resets at
    claude_back_at: int = 0  # Claude Code's fresh count when it first came back after its limit
    flat: bool = False  # every Claude Code answer 50 tokens in, 10 out (the budget's run)
    release: threading.Event = field(default_factory=threading.Event)
    held: int = 0
    killed: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        rng = random.Random(SEED)
        burst, kill = rng.sample([1, 2, 3], 2)
        self.script: dict[tuple[str, int], str] = {
            ("claude", burst): "429", ("claude", kill): "kill", ("claude", 4 + rng.randint(0, 2)): "limit",
            ("gemini", 1): "429-retried", ("codex", 1): "hang", ("codex", 2): "500",
        }
        self.after_return = {1 + rng.randint(0, 1): "529", 3: "noack", 4: "limit"}

    def event(self, cli: str, task: str) -> str | None:
        with self.lock:
            if task in self.seen:
                return None  # a task started before (the killed one, the hung one, one claimed before a limit)
            self.seen.add(task)
            self.fresh[cli] += 1
            n = self.fresh[cli]
            done = [what for who, _, what in self.happened if who == cli]
            now = time.time()
            what = self.script.get((cli, n))
            if cli == "claude" and "limit" in done:
                if not self.claude_back_at:
                    self.claude_back_at = n
                since = n - self.claude_back_at
                what = self.after_return.get(since)  # the second limit: Gemini CLI goes on
            if cli == "gemini" and [w for c, _, w in self.happened if c == "claude"].count("limit") == 2 \
                    and "days-limit" not in done:
                what = "days-limit"  # Codex goes on
            if cli == "codex" and what is None and "limit" not in done and now >= self.resets.get("claude", 0) - 15 \
                    and self.resets.get("claude", 0) > now and "500" in done:
                what = "limit"  # every agent limited: the relay waits for Claude Code's reset
            if what is not None:
                self.happened.append((cli, task, what))
            return what

    def command(self, cli: str, task: str) -> str:
        """The shell command the agent runs for `task` (a task its session holds already, it
        renews), with the script's event for it."""
        claim = f"{{ git handoff claim {task} >/dev/null 2>&1 || git handoff renew {task} >/dev/null; }}"
        work = (f"echo done-{task} > {task}.txt && git add {task}.txt && git commit -q -m 'task {task}' && "
                f"git handoff done {task}")
        what = self.event(cli, task)
        faults = self.stubs[cli].faults
        if what == "kill":
            threading.Thread(target=lambda: self.killed.append(kill_agent_cli(cli, [b"sleep", b"61"])),
                             daemon=True).start()
            return f"{claim} && sleep 61"
        if what == "hang":
            return f"{claim} && echo HOLD-HERE"
        if what == "noack":
            self.noack_armed.touch()  # the next launch of `claude` never acknowledges
        elif what == "429":
            faults.fail(Fault("rate_limit", reset_in=90), times=2)
        elif what == "429-retried":
            faults.fail(Fault("rate_limit", reset_in=2), times=1)
        elif what == "529":
            faults.fail(Fault("overloaded"), times=2)
        elif what == "500":
            faults.fail(Fault("server_error"), times=1)
        elif what == "days-limit":
            self.resets[cli] = time.time() + DAYS
            faults.fail(Fault("rate_limit", reset_in=DAYS), times=1)
        elif what == "limit":
            reset_in = minute_reset({"codex": 25, "claude": 45 if self.claude_back_at else 25}[cli])
            self.resets[cli] = time.time() + reset_in
            faults.fail(Fault("usage_limit", reset_in=reset_in), times=1)
        if what in ("429", "429-retried", "529", "500", "days-limit", "limit"):
            return f"{claim} && echo claimed"
        return f"{claim} && {work}"

    def hold(self) -> None:
        """The hung model request: answered only when the test ends."""
        with self.lock:
            self.held += 1
        self.release.wait(600)


def claude_policy(week: Week) -> Callable[[Request], Reply]:
    turns = [0]

    def answer(req: Request) -> Reply:
        turns[0] += 1
        reply = _claude_turn(week, req)
        if not week.flat:
            reply.input_tokens, reply.output_tokens = 40 + turns[0] % 50, 5 + turns[0] % 7  # no two alike
        return reply

    return answer


def _claude_turn(week: Week, req: Request) -> Reply:
    if req.is_summary():
        return summary("The agent works through the git handoff tasks.")
    feedback = req.hook_feedback() or ""
    found = NEXT_TASK.search(feedback) or IN_PROGRESS.search(feedback)
    if found is None:
        return say("I am done for now.")
    return bash(week.command("claude", found.group(1)))


def loop_policy(week: Week, cli: str) -> Callable[[Exchange], Turn]:
    """lazy_agent (Codex, Gemini CLI), each task's command the script's."""
    lazy = lazy_agent()

    def answer(ex: Exchange) -> Turn:
        if ex.tool_outputs and "HOLD-HERE" in ex.tool_outputs[-1] and not week.held:  # (a hook's words may follow)
            week.hold()
            return Say("Sorry, I was away.")
        turn = lazy(ex)
        if isinstance(turn, Run) and (found := CLAIM.match(turn.command)):
            return Run(week.command(cli, found.group(1)))
        return turn

    return answer


def _env(repo: Path, tmp: Path, claude_url: str, codex: Path, gemini_port: int, armed: Path) -> dict[str, str]:
    """The three CLIs' settings in one environment: Claude Code logged in with a plan (its
    limits carry their reset time), one retry of its own; Codex's home on its stub; Gemini
    CLI's on its stub with two attempts; a `claude` first on PATH that, once the script armed
    it, sleeps instead of starting (it never acknowledges)."""
    home = tmp / "claude-home"
    home.mkdir()
    env = claude_env(home, claude_url, {"CLAUDE_CODE_MAX_RETRIES": "1"})
    del env["ANTHROPIC_API_KEY"]
    env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-stub-not-a-real-token"
    env = {k: v for k, v in env.items() if not k.startswith(("OPENAI_", "GEMINI_", "GOOGLE_", "CODEX_"))}
    env.update({"CODEX_HOME": str(codex), "STUB_API_KEY": "stub-key", "RUST_LOG": "warn"})
    gemini_home = tmp / "gemini-home"
    settings_file = gemini_stub.gemini_home(gemini_home)
    settings = json.loads(settings_file.read_text())
    settings["general"]["maxAttempts"] = 2
    settings_file.write_text(json.dumps(settings))
    env.update(gemini_stub.gemini_env(gemini_port, gemini_home))
    shims = tmp / "shims"
    shims.mkdir()
    real = require_claude()
    shim = shims / "claude"
    shim.write_text(f"#!/bin/sh\nif [ -e {armed} ] && mkdir {armed}.used 2>/dev/null; then exec sleep 600; fi\n"
                    f'exec {real} "$@"\n')
    shim.chmod(0o755)
    env["PATH"] = f"{shims}:{env['PATH']}"
    return env


def _log(*args: str) -> list[str]:
    r = run("log", *args)
    assert r.rc == 0, r.err
    return r.out.splitlines()


def _sessions() -> list[dict[str, Any]]:
    return [run("session", "show", str(row["session"]), "--json").json()
            for row in run("session", "list", "--json").json()]


def _tokens_served(stubs: dict[str, Any]) -> dict[str, int]:
    return {cli: sum(i + o for i, o in stub.served) for cli, stub in stubs.items()}


def test_a_simulated_week_of_three_agent_clis(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_claude()
    require_codex()
    require_gemini()
    ids = plan(TASKS, "--max-tasks-per-session", str(PER_SESSION))
    codex = tmp_path / "codex-home"
    codex.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex))  # hooks install records the Codex hooks' trust there
    for cli in ORDER:
        install_hooks(cli)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "hooks", cwd=repo)
    armed = tmp_path / "noack-armed"
    week = Week(armed)
    with StubServer(claude_policy(week), lifetime=900) as claude_stub, \
            GeminiStub(loop_policy(week, "gemini"), prompt_tokens=lambda n: 100 + 7 * (n % 40), lifetime=900) \
            as gemini, ResponsesStub(loop_policy(week, "codex"), usage_tokens=lambda n: 120 + 3 * (n % 50),
                                     lifetime=900) as codex_stub:
        week.stubs.update({"claude": claude_stub, "gemini": gemini, "codex": codex_stub})
        codex_home(codex, codex_stub.port)
        assert CODEX_OFFLINE in (codex / "config.toml").read_text()
        env = _env(repo, tmp_path, claude_stub.url, codex, gemini.port, armed)
        started = time.monotonic()
        try:
            proc = subprocess.run(["git", "handoff", "relay", "--agent", CLAUDE, "--agent", GEMINI, "--agent", CODEX,
                                   "--switch-after", str(HOUR), "--ack-timeout", str(ACK), "--hang-timeout", "15",
                                   "--limit-backoff", "2", "--limit-backoff-max", "4", "--max-idle-sessions", "5"],
                                  cwd=repo, env=env, capture_output=True, text=True, timeout=840,
                                  stdin=subprocess.DEVNULL)
            took = time.monotonic() - started
            served = _tokens_served(week.stubs)  # before the hung request is answered (no CLI reads it)
            faults = {cli: [kind for _, kind, *_ in stub.faults.served] for cli, stub in week.stubs.items()}
        finally:
            week.release.set()
        assert not claude_stub.errors, claude_stub.errors
        print(f"the week took {took:.0f} s", proc.stdout[-6000:], "\n".join(_log("--type", "WARN")[-60:]),
              "\n".join(_log("--type", "ERROR")), week.happened, faults, served, sep="\n")  # shown on a failure
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert f"all {TASKS} task(s) completed" in proc.stdout

        # what the script injected, each once, on the CLI it names
        events = {(cli, what) for cli, _, what in week.happened}
        assert events == {("claude", "429"), ("claude", "kill"), ("claude", "limit"), ("claude", "529"),
                          ("claude", "noack"), ("gemini", "429-retried"), ("gemini", "days-limit"),
                          ("codex", "hang"), ("codex", "500"), ("codex", "limit")}, week.happened
        assert [what for _, _, what in week.happened].count("limit") == 3, week.happened
        assert week.killed and week.killed[0] > 0 and week.held == 1 and Path(f"{armed}.used").is_dir()
        assert faults["claude"].count("usage_limit") == 2 and faults["codex"].count("usage_limit") == 1, faults
        assert {"rate_limit", "overloaded"} <= set(faults["claude"]) and "server_error" in faults["codex"], faults
        assert faults["gemini"] == ["rate_limit", "rate_limit"], faults

        # every task completed exactly once
        tasks = {t["id"]: run("show", t["id"], "--json").json() for t in run("list", "--json").json()}
        assert set(tasks) == set(ids) and {t["status"] for t in tasks.values()} == {"completed"}
        completed = [m.group(1) for line in _log("--type", "Completed")
                     if (m := re.search(r"\] Completed \[([A-Za-z0-9._-]+)\]", line))]
        assert sorted(completed) == sorted(ids), [t for t in set(completed) if completed.count(t) > 1]
        killed_task = next(task for cli, task, what in week.happened if what == "kill")
        hung_task = next(task for cli, task, what in week.happened if what == "hang")
        assert {i for i, t in tasks.items() if t["attempts"]} == {killed_task, hung_task}, \
            {i: t["attempts"] for i, t in tasks.items() if t["attempts"]}  # no attempt spent on a limit or outage

        # the switches: each a LIMIT line with its reason; away (later in the order) and back
        switches = [line for line in _log("--type", "WARN") if "switching agent" in line]
        assert all("[LIMIT]" in line for line in switches), switches
        moves = [re.search(r"switching agent (\w+) -> (\w+): (.+)", line) for line in switches]
        assert all(moves), switches
        away = [m for m in moves if m and ORDER.index(m.group(2)) > ORDER.index(m.group(1))]
        back = [m for m in moves if m and ORDER.index(m.group(2)) < ORDER.index(m.group(1))]
        assert len(away) >= 2 and len(back) >= 2, switches
        assert all(re.search(r"stopped on its (usage|rate) limit until \S+Z, further than the switch threshold "
                             r"20 s: .+", m.group(3)) for m in away), switches
        assert all("back to claude: its limit reset at" in m.group(3) or "every agent is limited and claude's"
                   in m.group(3) for m in back), switches
        assert {(m.group(1), m.group(2)) for m in away} == {("claude", "gemini"), ("gemini", "codex")}, switches

        # no session spent on a limit: every session that met no kill, hang or missing ACK
        # completed its four tasks (the last one what was left), and each ran its agents in turn
        sessions = _sessions()
        errors = _log("--type", "ERROR")
        faulted = {int(m.group(1)) for line in errors if (m := re.search(r"\[SESSION-(\d+)\]", line))}
        assert any("status 137" in line for line in errors) and any("hung: no progress" in line for line in errors)
        assert any(f"did not acknowledge within {ACK}s" in line for line in errors), errors
        short = [s["session"] for s in sessions[:-1] if len(s["completed"]) != PER_SESSION
                 and s["session"] not in faulted]
        assert not short, [(s["session"], s["completed"], s.get("agents")) for s in sessions]
        assert len(sessions) >= 30, len(sessions)
        ran = {cli for s in sessions for cli in s.get("agents") or []}
        assert ran == set(ORDER), ran
        waits = [line for line in _log("--type", "WARN") if "[LIMIT]" in line and "waiting until" in line]
        for line in switches + waits:  # a switch or wait never ends its session: work was done in it after
            number = int(re.search(r"\[SESSION-(\d+)\]", line).group(1))  # type: ignore[union-attr]
            assert sessions[number - 1]["completed"], (line, sessions[number - 1])
        assert all(s["ended_at"] for s in sessions)

        # tokens: what the three stubs served is what the sessions recorded, and the tasks'
        used = [s["usage"] for s in sessions if s.get("usage")]
        assert sum(u["tokens"] for u in used) == sum(served.values()), (served, used)
        assert sum(t["tokens"] for t in tasks.values()) == sum(served.values()), served
        assert all(t["tokens"] > 0 for t in tasks.values())
        assert {cli for u in used for cli in u["clis"]} == set(ORDER)
        assert run("status", "--json").json()["usage"]["tokens"] == sum(served.values())
        assert not agents_left(repo)

        # the tail: a run's token budget stops the relay at the first session that reached it (a
        # session of four tasks is 9 answers of 60 tokens: the second session reaches 800)
        week.flat = True
        budget = 800
        more = [f"u{n}" for n in range(1, 13)]
        for task_id in more:
            assert run("add", f"Write {task_id}.txt", "--id", task_id, "--check", f"test -f {task_id}.txt").rc == 0
        before = sum(_tokens_served(week.stubs).values())
        tail = subprocess.run(["git", "handoff", "relay", "--agent", CLAUDE, "--agent", GEMINI, "--agent", CODEX,
                               "--switch-after", str(HOUR), "--ack-timeout", "90", "--budget", f"tokens={budget}"],
                              cwd=repo, env=env, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        tail_served = sum(_tokens_served(week.stubs).values()) - before
    assert tail.returncode == 1, tail.stdout[-3000:] + tail.stderr
    (line,) = tail.stderr.strip().splitlines()
    assert line.startswith("error: relay stopped: the run's tokens budget reached ("), tail.stderr
    new = _sessions()[len(sessions):]
    spent = [s["usage"]["tokens"] for s in new]
    assert sum(spent) == tail_served
    assert sum(spent[:-1]) < budget <= sum(spent), (budget, spent)  # the first session that reached it, no later one
    assert f"after {len(new)} session(s)" in line and len(new) == 2, (line, spent)
    left = [i for i in more if run("show", i, "--json").json()["status"] != "completed"]
    assert left, "the budget stopped nothing"
    assert not agents_left(repo)
    assert_fsck_clean(repo)
