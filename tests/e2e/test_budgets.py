"""Use and budgets against the real Claude Code CLI (and the use of Codex, Gemini CLI, Qwen
Code and Copilot CLI): the tokens the loopback stub served are
the tokens recorded, per session and per task, and each budget the relay holds ends a
session (or the run) where it should. Only the model is a stub
(tests/support/stubs/anthropic.py): it reports the `usage` each answer carries, and counts it."""

from __future__ import annotations

import datetime
import json
import re
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import (
    codex_home,
    copilot_env,
    install_hooks,
    opencode_env,
    plan,
    qwen_env,
    require_codex,
    require_copilot,
    require_gemini,
    require_opencode,
    require_qwen,
    run_codex,
    run_gemini,
)
from tests.support.claude_cli import claude_env, require_claude
from tests.support.repo import Result, run, run_exe
from tests.support.stubs.anthropic import Lazy, Reply, Request, RunEach, StubServer
from tests.support.stubs.gemini import GeminiStub
from tests.support.stubs.loopback import Run, lazy_agent
from tests.support.stubs.openai_chat import ChatStub
from tests.support.stubs.openai_responses import ResponsesStub

pytestmark = pytest.mark.slow

AGENT = 'claude -p --dangerously-skip-permissions --output-format json "$(cat {prompt_file})"'


class Counted:
    """A policy whose answers each report a different number of tokens (so that a token
    counted twice, or lost, shows)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.turn = 0

    def __call__(self, req: Request) -> Reply:
        reply: Reply = self.policy(req)
        self.turn += 1
        reply.input_tokens = 40 + self.turn
        reply.output_tokens = 5 + self.turn % 7
        return reply


@pytest.fixture
def stub() -> Iterator[StubServer]:
    require_claude()
    with StubServer(Lazy(), lifetime=280) as server:
        yield server
        assert not server.errors, server.errors


def _plan(count: int, per_session: int) -> list[str]:
    assert run("init", "--max-tasks-per-session", str(per_session)).rc == 0
    ids = [f"t{n:02d}" for n in range(1, count + 1)]
    for task_id in ids:
        assert run("add", f"Write {task_id}.txt", "--id", task_id, "--check", f"test -f {task_id}.txt").rc == 0
    assert run("hooks", "install", "--agent", "claude").rc == 0
    return ids


def _relay(repo: Path, stub: StubServer, *args: str) -> Result:
    home = repo.parent / "claude-home"
    home.mkdir(exist_ok=True)
    return run_exe("relay", "--agent", AGENT, "--ack-timeout", "60", *args, cwd=repo,
                   env=claude_env(home, stub.url), timeout=240)


def _sessions(repo: Path) -> list[dict[str, Any]]:
    rows = run("session", "list", "--json", cwd=repo).json()
    return [run("session", "show", str(row["session"]), "--json", cwd=repo).json() for row in rows]


def _tasks(repo: Path) -> dict[str, dict[str, Any]]:
    return {t["id"]: run("show", t["id"], "--json", cwd=repo).json() for t in run("list", "--json", cwd=repo).json()}


def _served(stub: StubServer) -> tuple[int, int]:
    return sum(i for i, _ in stub.served), sum(o for _, o in stub.served)


def test_the_tokens_served_are_the_tokens_recorded_per_session_and_per_task(repo: Path, stub: StubServer) -> None:
    _plan(4, per_session=2)
    stub.policy = Counted(Lazy("echo done > {id}.txt"))
    r = _relay(repo, stub)
    assert r.rc == 0, r.out + r.err
    served_in, served_out = _served(stub)
    sessions = _sessions(repo)
    assert len(sessions) == 2
    used = [s["usage"] for s in sessions]
    assert sum(u["input_tokens"] for u in used) == served_in
    assert sum(u["output_tokens"] for u in used) == served_out
    assert sum(u["turns"] for u in used) == len(stub.served)
    for u in used:
        assert u["tokens"] == u["input_tokens"] + u["output_tokens"] and u["turns"] > 0 and u["clis"] == ["claude"]
        assert u["cost_usd"] is not None and u["cost_usd"] > 0  # Claude Code's JSON result prints it
    tasks = _tasks(repo)
    assert sum(t["tokens"] for t in tasks.values()) == served_in + served_out
    assert all(t["tokens"] > 0 for t in tasks.values())
    # a session's tokens are its two tasks' tokens
    for s in sessions:
        assert sum(tasks[t]["tokens"] for t in s["completed"]) == s["usage"]["tokens"]
    status = run("status", "--json", cwd=repo).json()
    assert status["usage"]["tokens"] == served_in + served_out
    assert "tokens" in run("status", cwd=repo).out


def test_a_run_token_budget_stops_the_relay_at_the_session_that_reached_it(repo: Path, stub: StubServer) -> None:
    _plan(6, per_session=1)
    stub.policy = Lazy("echo done > {id}.txt")  # every answer 50 in, 10 out
    r = _relay(repo, stub, "--budget", "tokens=300")
    assert r.rc == 1, r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: relay stopped: the run's tokens budget reached ("), r.err
    sessions = _sessions(repo)
    spent = 0
    for number, s in enumerate(sessions, 1):
        if number < len(sessions):
            assert spent + s["usage"]["tokens"] < 300 or number == len(sessions)
        spent += s["usage"]["tokens"]
    # it stopped at the first session whose tokens took the run to its budget, and started no other
    before_last = spent - sessions[-1]["usage"]["tokens"]
    assert before_last < 300 <= spent
    assert spent == sum(i + o for i, o in stub.served)
    assert f"after {len(sessions)} session(s)" in lines[0]
    # the tasks hold the tokens of the sessions that worked on one (a session ended before it
    # claimed a task keeps its tokens to itself)
    charged = [int(m.group(1)) for m in re.finditer(r"STATS usage tokens=(\d+) .* tasks=\S+", run("log", cwd=repo).out)]
    assert charged and sum(t["tokens"] for t in _tasks(repo).values()) == sum(charged)


def _endless() -> RunEach:
    """Claims t01, then works on and on (each turn one command of a second: the relay, which
    looks at the session's use every second, ends it within a few answers even on a loaded
    machine; at 0.2 s a turn a loaded CI let six answers through)."""
    return RunEach(["git handoff claim t01", *["sleep 1"] * 400])


@pytest.mark.parametrize("claim", ["release", "keep"])
def test_a_session_token_budget_ends_the_session_and_releases_or_keeps_the_claim(repo: Path, stub: StubServer,
                                                                                claim: str) -> None:
    _plan(1, per_session=1)
    stub.policy = _endless()
    r = _relay(repo, stub, "--budget", "session-tokens=500", "--budget", "sessions=1", "--budget", f"claim={claim}")
    assert r.rc == 1, r.out + r.err
    assert r.err.strip() == "error: relay stopped: the run's sessions budget reached (1 of 1; --budget sessions) " \
                            "after 1 session(s)", r.err
    (session,) = _sessions(repo)
    assert session["budget"].startswith("the session's tokens budget reached (")
    assert 500 <= session["usage"]["tokens"] < 500 + 5 * 60  # ended within a few answers of its budget
    assert session["handoff"] is not None  # its document written
    budget_lines = run("log", cwd=repo).out.count("BUDGET")
    assert budget_lines == 1
    task = _tasks(repo)["t01"]
    assert task["status"] == ("pending" if claim == "release" else "in_progress")
    assert task["tokens"] == session["usage"]["tokens"]


def test_a_task_token_budget_sets_the_task_aside(repo: Path, stub: StubServer) -> None:
    _plan(1, per_session=1)
    stub.policy = _endless()
    r = _relay(repo, stub, "--budget", "task-tokens=400")
    assert r.rc == 1, r.out + r.err
    assert "no eligible task left: 1 failed" in r.err
    task = _tasks(repo)["t01"]
    assert task["status"] == "failed"
    assert any(e.startswith("[BUDGET] task t01: a task's tokens budget reached (") for e in task["error_log"])
    assert task["tokens"] >= 400
    assert (repo / ".git").exists() and run("log", cwd=repo).out.count("BUDGET") == 2  # the session's and the task's


def test_a_task_cost_budget_sets_the_task_aside_once_the_cost_is_printed(repo: Path, stub: StubServer) -> None:
    """Claude Code prints its cost in its JSON result as it exits: the session's cost is
    charged to the task it held, which is over its cost budget, so it is set aside (failed,
    BUDGET) before another session takes it."""
    _plan(1, per_session=1)
    stub.policy = RunEach(["git handoff claim t01"], final="I stop here.")  # then it ends its turn, t01 held
    r = _relay(repo, stub, "--budget", "task-cost=0.000001")
    assert r.rc == 1, r.out + r.err
    assert "no eligible task left: 1 failed" in r.err
    (session,) = _sessions(repo)
    task = _tasks(repo)["t01"]
    assert task["status"] == "failed" and task["cost_micro_usd"] == round(session["usage"]["cost_usd"] * 1e6) > 0
    assert any(e.startswith("[BUDGET] task t01: a task's cost budget reached ($") for e in task["error_log"])
    assert session["budget"].startswith("task t01: a task's cost budget reached ($") and session["handoff"]
    assert run("log", cwd=repo).out.count("BUDGET") == 2  # the session's and the task's
    assert "a task's cost budget reached" in r.out


def test_a_task_time_budget_counts_its_claims_across_sessions(repo: Path, stub: StubServer) -> None:
    """task-time is the wall time the task was held under claims, summed over its claims: each
    session here ends by its token budget, its claim released, well before the task's time
    budget; the session that reached it was shorter than the budget itself."""
    _plan(1, per_session=1)
    stub.policy = RunEach(["git handoff claim t01 >/dev/null 2>&1; sleep 1"] * 400)  # claims t01 whenever free
    r = _relay(repo, stub, "--budget", "session-tokens=300", "--budget", "task-time=30s", "--budget", "sessions=8",
               "--max-idle-sessions", "8")  # sessions that only hold the task make no progress
    assert r.rc == 1, r.out + r.err
    assert "no eligible task left: 1 failed" in r.err
    sessions = _sessions(repo)
    assert len(sessions) >= 2
    assert all(s["budget"].startswith("the session's tokens budget reached (") for s in sessions[:-1]), sessions
    last = sessions[-1]
    assert last["budget"].startswith("task t01: a task's time budget reached (")
    assert last["usage"]["seconds"] < 30  # its own claim alone did not reach the budget
    task = _tasks(repo)["t01"]
    assert task["status"] == "failed" and task["held_seconds"] >= 30
    assert any(e.startswith("[BUDGET] task t01: a task's time budget reached (") for e in task["error_log"])
    assert run("log", cwd=repo).out.count("[BUDGET]") == len(sessions) + 1


def test_a_session_time_budget_ends_the_session(repo: Path, stub: StubServer) -> None:
    _plan(1, per_session=1)
    stub.policy = _endless()
    r = _relay(repo, stub, "--budget", "session-time=4s", "--budget", "sessions=1")
    assert r.rc == 1, r.out + r.err
    (session,) = _sessions(repo)
    assert session["budget"].startswith("the session's time budget reached (")
    assert session["usage"]["seconds"] < 60


def test_a_run_time_budget_stops_the_relay(repo: Path, stub: StubServer) -> None:
    _plan(1, per_session=1)
    stub.policy = _endless()
    r = _relay(repo, stub, "--budget", "time=4s")
    assert r.rc == 1, r.out + r.err
    assert r.err.startswith("error: relay stopped: the run's time budget reached (") and r.err.count("\n") == 1
    (session,) = _sessions(repo)
    assert session["budget"].startswith("the run's time budget reached (")


def test_a_run_cost_budget_stops_the_relay_before_the_next_session(repo: Path, stub: StubServer) -> None:
    _plan(3, per_session=1)
    stub.policy = Lazy("echo done > {id}.txt")
    r = _relay(repo, stub, "--budget", "cost=0.000001")
    assert r.rc == 1, r.out + r.err
    assert r.err.startswith("error: relay stopped: the run's cost budget reached ($") and r.err.count("\n") == 1
    (session,) = _sessions(repo)  # the cost is printed when the agent exits: the next session is not started
    assert session["usage"]["cost_usd"] > 0
    assert json.loads(json.dumps(session["usage"]))["clis"] == ["claude"]


def test_a_limit_wait_past_the_run_time_budget_stops_the_relay_at_once(repo: Path) -> None:
    """A limit that resets in hours, a run's time budget of a minute: the relay stopped (exit 1,
    one line) instead of waiting hours and launching the agent again (it waited the whole reset)."""
    assert run("init").rc == 0
    assert run("add", "Write t1", "--id", "t1", "--check", "test -f t1.txt").rc == 0
    away = (datetime.datetime.now().astimezone() + datetime.timedelta(hours=5)).replace(minute=2)
    printed = (f"You've hit your weekly limit · resets {away.strftime('%b')} {away.day}, "
               f"{away.strftime('%I:%M%p').lower()}")
    agent = f"git handoff ack; git handoff claim t1 >/dev/null 2>&1; echo {shlex.quote(printed)}; exit 1"
    r = run_exe("relay", "--agent", agent, "--ack-timeout", "30", "--budget", "time=60s", cwd=repo, timeout=50)
    assert r.rc == 1, r.out + r.err
    assert r.err.startswith("error: relay stopped: the run's time budget would be reached while waiting ") \
        and r.err.count("\n") == 1, r.err
    (session,) = _sessions(repo)
    assert session["budget"].startswith("the run's time budget would be reached") and session["handoff"] is not None
    assert _tasks(repo)["t1"]["status"] == "pending" and _tasks(repo)["t1"]["attempts"] == 0  # released, no attempt
    log = run("log", cwd=repo).out
    assert log.count("[BUDGET]") == 1 and "waiting until" not in log, log


# -- Codex and Gemini CLI: their hooks name their transcripts as Claude Code's do ----------------


def test_codex_sessions_record_the_tokens_its_stub_served(repo: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    require_codex()
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))  # hooks install records the hooks' trust there
    plan(3)
    assert install_hooks("codex")["trusted"]
    with ResponsesStub(lazy_agent(), usage_tokens=lambda n: 100 + 7 * n) as stub:
        codex_home(home, stub.port)
        r = run_codex(repo, home, "Work on the tasks git handoff gives you.")
        served = list(stub.served)
    assert r.rc == 0, r.stderr[-2000:]
    session = _ended(repo)
    assert session["usage"]["clis"] == ["codex"]
    assert (session["usage"]["input_tokens"], session["usage"]["output_tokens"]) == \
        (sum(i for i, _ in served), sum(o for _, o in served))
    assert session["usage"]["turns"] == len(served)
    assert sum(t["tokens"] for t in _tasks(repo).values()) == session["usage"]["tokens"]


def test_gemini_sessions_record_the_tokens_of_its_model_turns(repo: Path, tmp_path: Path) -> None:
    require_gemini()
    home = tmp_path / "gemini-home"
    home.mkdir()
    plan(3)
    install_hooks("gemini")
    with GeminiStub(lazy_agent(), prompt_tokens=lambda n: 100 + 7 * n) as stub:
        r = run_gemini(repo, home, stub.port, "Work on the tasks git handoff gives you.")
        served = list(stub.served)
    assert r.rc == 0, r.stderr[-2000:]
    session = _ended(repo)
    assert session["usage"]["clis"] == ["gemini"]
    # its chat file holds its model turns; its side calls (routing, next speaker) are not in it
    assert (session["usage"]["input_tokens"], session["usage"]["output_tokens"]) == \
        (sum(i for i, _ in served), sum(o for _, o in served))
    assert session["usage"]["turns"] == len(served)
    assert sum(t["tokens"] for t in _tasks(repo).values()) == session["usage"]["tokens"]


# -- Qwen Code, Copilot CLI, OpenCode: their chat file / session events / our plugin's transcript --

PRICE = (3.0, 15.0)  # OpenCode's model priced, in dollars per million input and output tokens: its cost
CHAT_CLIS: dict[str, tuple[Callable[[], str], Callable[[int], dict[str, str]], str]] = {
    "qwen": (require_qwen, qwen_env, 'qwen --yolo --auth-type openai -p "Work on the tasks git handoff gives you."'),
    "copilot": (require_copilot, copilot_env,
                'copilot --allow-all-tools --trust-folder -p "Work on the tasks git handoff gives you."'),
    "opencode": (require_opencode, lambda port: opencode_env(port, price=PRICE),
                 'opencode run --auto "Work on the tasks git handoff gives you."'),
}


@pytest.mark.parametrize("cli", sorted(CHAT_CLIS))
def test_chat_completions_clis_record_the_tokens_their_stub_served_per_session_and_per_task(repo: Path,
                                                                                           cli: str) -> None:
    """Two relayed sessions of two tasks each: each session's use is what the stub served to
    its agent's model turns, the tasks' tokens add up to the sessions'."""
    require, env_of, command = CHAT_CLIS[cli]
    require()
    ids = plan(4, "--max-tasks-per-session", "2")
    install_hooks(cli)
    with ChatStub(lazy_agent(), usage_tokens=lambda n: 100 + 7 * n) as stub:
        r = run_exe("relay", "--agent", command, "--ack-timeout", "60", cwd=repo, env=env_of(stub.port), timeout=400)
        served, side = list(stub.served), list(stub.side_served)
    assert r.rc == 0, r.out[-2000:] + r.err[-2000:]
    # OpenCode asks a title of each session aside (its messages do not hold it, so it is not counted);
    # the others ask nothing aside
    assert len(side) == (2 if cli == "opencode" else 0), side
    sessions = _sessions(repo)
    assert len(sessions) == 2 and [t for s in sessions for t in s["completed"]] == ids
    used = [s["usage"] for s in sessions]
    assert all(u["clis"] == [cli] and u["turns"] > 0 and u["seconds"] >= 0 for u in used), used
    assert (sum(u["input_tokens"] for u in used), sum(u["output_tokens"] for u in used)) == \
        (sum(i for i, _ in served), sum(o for _, o in served))
    assert sum(u["turns"] for u in used) == len(served)
    tasks = _tasks(repo)
    for s in sessions:
        assert sum(tasks[t]["tokens"] for t in s["completed"]) == s["usage"]["tokens"] > 0
    if cli == "opencode":  # its cost, from the model's price: shared among the tasks too
        expected = sum(i * PRICE[0] + o * PRICE[1] for i, o in served) / 1e6
        assert sum(u["cost_usd"] for u in used) == pytest.approx(expected)
        assert sum(t["cost_micro_usd"] for t in tasks.values()) == sum(round(u["cost_usd"] * 1e6) for u in used)
    else:
        assert all(u["cost_usd"] is None for u in used)  # neither prints a cost in dollars
    assert run("status", "--json", cwd=repo).json()["usage"]["tokens"] == sum(u["tokens"] for u in used)


def _ended(repo: Path) -> dict[str, Any]:
    """Session 1 once its SessionEnd hook closed it (Codex runs that hook detached)."""
    deadline = time.monotonic() + 30
    session: dict[str, Any] = run("session", "show", "1", "--json", cwd=repo).json()
    while not session.get("ended_at") and time.monotonic() < deadline:
        time.sleep(0.2)
        session = run("session", "show", "1", "--json", cwd=repo).json()
    assert session.get("ended_at") and "usage" in session, session
    return session


def test_a_session_cost_budget_ends_the_session_as_its_cost_grows(repo: Path) -> None:
    """OpenCode reports each answer's cost as it goes (its messages, through our plugin): a
    session-cost budget ends the session while the agent works on, its claim released, and
    the run's sessions budget then stops the relay. (Claude Code prints its cost only as it
    exits: for it the session's cost counts at a relaunch within the session.)"""
    require_opencode()
    plan(1, "--max-tasks-per-session", "1")
    install_hooks("opencode")
    price = (1000.0, 1000.0)  # dollars per million tokens: an answer of 100+ tokens in and 10 out costs $0.11+
    with ChatStub(lambda ex: Run("git handoff claim t1 >/dev/null 2>&1; sleep 1"),
                  usage_tokens=lambda n: 100 + 7 * n) as stub:
        r = run_exe("relay", "--agent", CHAT_CLIS["opencode"][2], "--ack-timeout", "60",
                    "--budget", "session-cost=0.5", "--budget", "sessions=1", cwd=repo,
                    env=opencode_env(stub.port, price=price), timeout=300)
        served = list(stub.served)
    assert r.rc == 1, r.out[-2000:] + r.err[-2000:]
    assert r.err.strip() == "error: relay stopped: the run's sessions budget reached (1 of 1; --budget sessions) " \
                            "after 1 session(s)", r.err
    (session,) = _sessions(repo)
    assert session["budget"].startswith("the session's cost budget reached ($"), session["budget"]
    assert session["handoff"] is not None  # its document written
    cost = session["usage"]["cost_usd"]
    assert 0.5 <= cost < 0.5 + 5 * 0.35, (cost, served)  # ended within a few answers of its budget
    each = [(i * price[0] + o * price[1]) / 1e6 for i, o in served]
    # what OpenCode recorded: every answer it finished; the answer the stub sent as the agent was
    # ended may not have been (the kill comes between the stub's reply and OpenCode's message)
    assert sum(each) - each[-1] - 1e-9 <= cost <= sum(each) + 1e-9, (cost, each)
    task = _tasks(repo)["t1"]
    assert task["status"] == "pending" and task["cost_micro_usd"] == round(cost * 1e6)  # released, charged
    assert run("log", cwd=repo).out.count("BUDGET") == 1
