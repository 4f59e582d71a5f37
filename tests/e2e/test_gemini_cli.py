"""The real Gemini CLI (gemini -p) with the hooks `hooks install --agent gemini` wrote,
against the loopback Gemini-API stub: only the model is a stub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import (
    assert_relayed,
    gemini_env,
    install_hooks,
    plan,
    require_gemini,
    run_gemini,
    statuses,
)
from tests.support.repo import run, run_exe
from tests.support.stubs.gemini import GeminiStub
from tests.support.stubs.loopback import NEXT_TASK, lazy_agent

pytestmark = pytest.mark.slow

README_GEMINI = 'GEMINI_CLI_TRUST_WORKSPACE=true gemini --yolo -p "Work on the tasks git handoff gives you."'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    require_gemini()
    path = tmp_path / "gemini-home"
    path.mkdir()
    return path


def _user_texts(body: dict[str, Any]) -> list[str]:  # a request to the Gemini API, its JSON
    return [p["text"] for c in body.get("contents", []) if c.get("role") == "user"
            for p in c.get("parts", []) if isinstance(p.get("text"), str)]


def test_session_start_context_reaches_the_first_request_and_is_acknowledged(repo: Path, home: Path) -> None:
    plan(1)
    install_hooks("gemini")
    with GeminiStub(lazy_agent()) as stub:
        r = run_gemini(repo, home, stub.port, "Work on the tasks git handoff gives you.")
        first = stub.model_requests()[0].body
    assert r.rc == 0, r.stderr[-2000:]
    assert any("Next eligible task: [t1] Write t1.txt" in t for t in _user_texts(first)), \
        "the SessionStart context is not in Gemini CLI's first model request"
    session = run("session", "show", "--json").json()
    assert session["session"] == 1 and session["ack"]["status"] == "accepted"
    assert session.get("ended_at"), "the SessionEnd hook did not close the session"
    assert statuses() == {"t1": "completed"}


def test_a_lazy_agent_is_kept_working_through_six_tasks(repo: Path, home: Path) -> None:
    ids = plan(6)
    install_hooks("gemini")
    with GeminiStub(lazy_agent(first_task_from_prompt=False)) as stub:
        r = run_gemini(repo, home, stub.port, "Say hello.")
        reqs = stub.model_requests()
    assert r.rc == 0, r.stderr[-2000:]
    assert statuses() == dict.fromkeys(ids, "completed")
    named = []
    for req in reqs:
        last = req.body["contents"][-1]
        texts = [p.get("text", "") for p in last.get("parts", []) if last.get("role") == "user"]
        found = NEXT_TASK.search(" ".join(t for t in texts if isinstance(t, str)))
        if found:
            named.append(found.group(1))
    assert named == ids  # each task named by the AfterAgent hook, in order, nothing after the last


def test_the_pre_compress_hook_writes_a_document(repo: Path, home: Path) -> None:
    plan(2)
    install_hooks("gemini")
    # the model's answer that ends the first task reports a prompt past half the window:
    # the CLI compresses its history when the AfterAgent hook's prompt starts the next
    # turn, and PreCompress (which runs at every such check) sees it
    with GeminiStub(lazy_agent(), prompt_tokens=lambda n: 700_000 if n == 1 else 100) as stub:
        r = run_gemini(repo, home, stub.port, "Work on the tasks git handoff gives you.")
        compressions = stub.compressions
    assert r.rc == 0, r.stderr[-2000:]
    assert compressions >= 1
    docs = run("doc", "list", "--json").json()
    assert [(d["session"], d["trigger"]) for d in docs] == [(1, "pre-compact")]
    assert statuses() == {"t1": "completed", "t2": "completed"}


def test_no_document_from_the_compression_checks_that_do_not_compress(repo: Path, home: Path) -> None:
    ids = plan(3)
    install_hooks("gemini")
    with GeminiStub(lazy_agent()) as stub:
        r = run_gemini(repo, home, stub.port, "Work on the tasks git handoff gives you.")
        compressions = stub.compressions
    assert r.rc == 0, r.stderr[-2000:]
    assert compressions == 0
    assert statuses() == dict.fromkeys(ids, "completed")
    assert [d["trigger"] for d in run("doc", "list", "--json").json()] == ["session-end"]


def test_skip_trust_comes_too_late_for_the_projects_hooks(repo: Path, home: Path) -> None:
    """Evidence for the advice in docs/agent-clis.md: with 0.61.0's --skip-trust (and no
    GEMINI_CLI_TRUST_WORKSPACE) the project's .gemini/settings.json hooks do not run."""
    import subprocess

    plan(1)
    install_hooks("gemini")
    with GeminiStub(lazy_agent()) as stub:
        env = gemini_env(home, stub.port)
        env.pop("GEMINI_CLI_TRUST_WORKSPACE")
        proc = subprocess.run([require_gemini(), "--skip-trust", "--yolo", "-p", "hello"], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        first = stub.model_requests()[0].body
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not any("Next eligible task" in t for t in _user_texts(first))
    assert run("session", "show", "--json").rc != 0  # no SessionStart hook: no session


def test_relay_of_six_tasks_in_three_gemini_sessions(repo: Path, home: Path) -> None:
    ids = plan(6, "--max-tasks-per-session", "2")
    install_hooks("gemini")
    guide = (Path(__file__).resolve().parents[2] / "docs" / "agent-clis.md").read_text()
    assert f"git handoff relay --agent '{README_GEMINI}'" in guide  # the guide's example, verbatim
    with GeminiStub(lazy_agent()) as stub:
        env = gemini_env(home, stub.port)
        env.pop("GEMINI_CLI_TRUST_WORKSPACE")  # the example itself must trust the workspace
        r = run_exe("relay", "--agent", README_GEMINI, "--ack-timeout", "60", cwd=repo, env=env, timeout=400)
    assert r.rc == 0, r.out[-2000:] + r.err[-2000:]
    assert_relayed(repo, ids, sessions=3, per_session=2)
