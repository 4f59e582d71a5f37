"""The real Codex CLI (codex exec) with the hooks `hooks install --agent codex` wrote,
against the loopback Responses-API stub: only the model is a stub."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.agent_clis import (
    assert_relayed,
    codex_env,
    codex_home,
    install_hooks,
    plan,
    require_codex,
    run_codex,
    statuses,
)
from tests.support.repo import run, run_exe
from tests.support.stubs.loopback import NEXT_TASK, lazy_agent
from tests.support.stubs.openai_responses import ResponsesStub

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require_codex()
    path = tmp_path / "codex-home"
    path.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(path))
    return path


def test_session_start_context_reaches_the_first_request_and_is_acknowledged(repo: Path, home: Path) -> None:
    plan(1)
    assert install_hooks("codex")["trusted"]
    with ResponsesStub(lazy_agent()) as stub:
        codex_home(home, stub.port)
        r = run_codex(repo, home, "Work on the tasks git handoff gives you.")
        first = stub.model_requests()[0].body
    assert r.rc == 0, r.stderr[-2000:]
    developer = [c["text"] for item in first["input"] if item.get("role") == "developer"
                 for c in item.get("content", []) if "text" in c]
    injected = [t for t in developer if "Next eligible task: [t1] Write t1.txt" in t]
    assert injected, "the SessionStart context is not in Codex's first model request"
    session = run("session", "show", "--json").json()
    assert session["session"] == 1 and session["ack"]["status"] == "accepted"
    # SessionEnd (given 1 s by Codex) closes the session from a detached process
    deadline = time.monotonic() + 30
    while not session.get("ended_at") and time.monotonic() < deadline:
        time.sleep(0.2)
        session = run("session", "show", "--json").json()
    assert session.get("ended_at"), "the SessionEnd hook did not close the session"
    assert "ACK" in run("log", "--type", "ACK").out
    assert statuses() == {"t1": "completed"}


def test_a_lazy_agent_is_kept_working_through_six_tasks(repo: Path, home: Path) -> None:
    ids = plan(6)
    assert install_hooks("codex")["trusted"]
    with ResponsesStub(lazy_agent(first_task_from_prompt=False)) as stub:
        codex_home(home, stub.port)
        r = run_codex(repo, home, "Say hello.")
        reqs = stub.model_requests()
    assert r.rc == 0, r.stderr[-2000:]
    assert statuses() == dict.fromkeys(ids, "completed")
    # each task was named to the model by the Stop hook, in order, and nothing after the last
    named = []
    for req in reqs:
        items = req.body["input"]
        last = items[-1]
        if last.get("type") == "message" and last.get("role") == "user":
            text = " ".join(c.get("text", "") for c in last.get("content", []))
            found = NEXT_TASK.search(text)
            if found:
                named.append(found.group(1))
    assert named == ids
    assert "Stop Blocked" in r.stderr


def test_the_pre_compaction_hook_writes_a_document(repo: Path, home: Path) -> None:
    plan(2)
    assert install_hooks("codex")["trusted"]
    # the first model turn reports a huge context: Codex auto-compacts (PreCompact, then
    # SessionStart source=compact) before going on
    with ResponsesStub(lazy_agent(), usage_tokens=lambda n: 50_000 if n == 0 else 100) as stub:
        codex_home(home, stub.port, compact_limit=10_000)
        r = run_codex(repo, home, "Work on the tasks git handoff gives you.")
        compactions = stub.compactions
    assert r.rc == 0, r.stderr[-2000:]
    assert compactions >= 1 and "PreCompact" in r.stderr
    docs = run("doc", "list", "--json").json()
    assert [(d["session"], d["trigger"]) for d in docs][:1] == [(1, "pre-compact")]
    assert statuses() == {"t1": "completed", "t2": "completed"}  # and the agent went on after it


README_CODEX = 'codex exec --trust -s danger-full-access "Work on the tasks git handoff gives you."'


def test_relay_of_six_tasks_in_three_codex_sessions(repo: Path, home: Path) -> None:
    ids = plan(6, "--max-tasks-per-session", "2")
    assert install_hooks("codex")["trusted"]
    guide = (Path(__file__).resolve().parents[2] / "docs" / "agent-clis.md").read_text()
    assert f"git handoff relay --agent '{README_CODEX}'" in guide  # the guide's example, verbatim
    with ResponsesStub(lazy_agent()) as stub:
        codex_home(home, stub.port)
        r = run_exe("relay", "--agent", README_CODEX, "--ack-timeout", "60", cwd=repo, env=codex_env(home),
                    timeout=400)
    assert r.rc == 0, r.out[-2000:] + r.err[-2000:]
    assert_relayed(repo, ids, sessions=3, per_session=2)
    docs = run("doc", "list", "--json").json()
    assert {d["session"] for d in docs} >= {1, 2}


def test_hooks_listed_as_trusted_by_codex_itself(repo: Path, home: Path) -> None:
    """Codex's own app-server reports every handler `hooks install` wrote as trusted."""
    import subprocess

    plan(1)
    assert install_hooks("codex")["trusted"]
    codex_home(home, 1)
    with (home / "config.toml").open("a") as f:  # the project trusted, as the user would when Codex asks
        f.write(f'\n[projects."{repo.resolve()}"]\ntrust_level = "trusted"\n')
    proc = subprocess.Popen([require_codex(), "app-server"], cwd=repo, env=codex_env(home), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        for message in ({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"clientInfo": {"name": "test", "version": "1"}}},
                        {"jsonrpc": "2.0", "method": "initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(repo)]}}):
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        answer = None
        for _ in range(50):
            line = proc.stdout.readline()
            if not line:
                break
            data = json.loads(line)
            if data.get("id") == 2:
                answer = data
                break
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert answer is not None and "result" in answer, answer
    hooks = [h for entry in answer["result"]["data"] for h in entry["hooks"]]
    ours = {h["command"]: h["trustStatus"] for h in hooks if h["command"].startswith("git handoff hook codex-")}
    import tomllib

    state = tomllib.loads((home / "config.toml").read_text())["hooks"]["state"]
    assert all(state[h["key"]]["trusted_hash"] == h["currentHash"] for h in hooks
               if h["command"].startswith("git handoff hook codex-"))
    assert ours == {f"git handoff hook codex-{e}": "trusted"
                    for e in ("session-start", "stop", "subagent-stop", "pre-compact", "session-end")}
