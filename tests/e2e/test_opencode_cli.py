"""The real OpenCode (`opencode run`) with the plugin `hooks install --agent opencode` wrote,
against the loopback chat-completions stub: only the model is a stub. The session start's
context reaches the model and is acknowledged, a stop while work is left keeps it working
in the same `opencode run`, its compaction writes the document, its MCP configuration gives
the model our tools, and a relay of six tasks in three sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent_clis import (
    assert_relayed,
    install_hooks,
    opencode_env,
    plan,
    require_opencode,
    run_opencode,
    statuses,
)
from tests.support.repo import run, run_exe
from tests.support.stubs.loopback import NEXT_TASK, Call, Exchange, Say, Turn, lazy_agent
from tests.support.stubs.openai_chat import ChatStub

pytestmark = pytest.mark.slow

README_OPENCODE = 'opencode run --auto "Work on the tasks git handoff gives you."'


@pytest.fixture(autouse=True)
def _opencode() -> None:
    require_opencode()  # skips, saying how to install it, where it is missing


def _texts(body: dict[str, object], role: str) -> list[str]:
    texts = []
    for message in body.get("messages") or []:  # type: ignore[attr-defined]
        if isinstance(message, dict) and message.get("role") == role:
            content = message.get("content")
            texts += [content] if isinstance(content, str) else [
                p["text"] for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return texts


def test_session_start_context_reaches_the_first_request_and_is_acknowledged(repo: Path) -> None:
    plan(1)
    assert install_hooks("opencode")["installed"]
    with ChatStub(lazy_agent()) as stub:
        r = run_opencode(repo, stub.port, "Work on the tasks git handoff gives you.")
        first = stub.model_requests()[0].body
    assert r.rc == 0, r.stderr[-2000:]
    # the plugin adds it to the system prompt of the session's requests
    assert any("Next eligible task: [t1] Write t1.txt" in t for t in _texts(first, "system")), \
        "the session start's context is not in OpenCode's first model request"
    session = run("session", "show", "--json").json()
    assert session["session"] == 1 and session["ack"]["status"] == "accepted"
    assert statuses() == {"t1": "completed"}


def test_a_lazy_agent_is_kept_working_through_six_tasks_in_one_run(repo: Path) -> None:
    ids = plan(6)
    install_hooks("opencode")
    with ChatStub(lazy_agent(first_task_from_prompt=False)) as stub:
        r = run_opencode(repo, stub.port, "Say hello.")
        reqs = stub.model_requests()
    assert r.rc == 0, r.stderr[-2000:]
    assert statuses() == dict.fromkeys(ids, "completed")
    named = []  # each task named to the model by the stop hook, in order, nothing after the last
    for req in reqs:
        texts = _texts(req.body, "user")
        last = req.body["messages"][-1]
        found = NEXT_TASK.search(texts[-1]) if texts and last.get("role") == "user" else None
        if found:
            named.append(found.group(1))
    assert named == ids
    assert run("status", "--json").json()["session_count"] == 1


def test_a_compaction_writes_the_document(repo: Path) -> None:
    """The first answer reports 19,000 prompt tokens of the model's 20,000 window (its
    `limit.context` in the provider's configuration; the later ones 100): OpenCode compacts the
    session after that turn (its `experimental.session.compacting`, the plugin's
    opencode-compacting), asks for a summary and goes on."""
    plan(2)
    install_hooks("opencode")
    with ChatStub(lazy_agent(), usage_tokens=lambda n: 19_000 if n == 0 else 100) as stub:
        r = run_opencode(repo, stub.port, "Work on the tasks git handoff gives you.",
                         env=opencode_env(stub.port, context=20_000))
        summaries = stub.side_requests
    assert r.rc == 0, r.stderr[-2000:]
    docs = run("doc", "list", "--json").json()
    assert [(d["session"], d["trigger"]) for d in docs][:1] == [(1, "pre-compact")], docs
    assert summaries >= 1
    assert statuses() == {"t1": "completed", "t2": "completed"}


def test_the_mcp_server_it_registered_gives_the_model_our_tools(repo: Path) -> None:
    """`hooks install --agent opencode` registers `git handoff mcp` in opencode.json; OpenCode
    starts it and offers its tools (as handoff_<tool>): the model claims the task through it."""
    plan(1)
    install_hooks("opencode")
    offered: list[list[str]] = []

    def policy(ex: Exchange) -> Turn:
        offered.append(ex.tools)
        if ex.last_was_tool_output:
            return Say("Claimed.")
        return Call("claim", {"id": "t1"})

    with ChatStub(policy) as stub:
        r = run_opencode(repo, stub.port, "Claim the task.")
    assert r.rc == 0, r.stderr[-2000:]
    assert any(name.startswith("handoff_") for name in offered[0]), offered[0]
    assert statuses() == {"t1": "in_progress"}


def test_relay_of_six_tasks_in_three_sessions(repo: Path) -> None:
    ids = plan(6, "--max-tasks-per-session", "2")
    install_hooks("opencode")
    guide = (Path(__file__).resolve().parents[2] / "docs" / "agent-clis.md").read_text()
    assert f"git handoff relay --agent '{README_OPENCODE}'" in guide  # the guide's example, verbatim
    with ChatStub(lazy_agent()) as stub:
        r = run_exe("relay", "--agent", README_OPENCODE, "--ack-timeout", "60", cwd=repo,
                    env=opencode_env(stub.port), timeout=400)
    assert r.rc == 0, r.out[-2000:] + r.err[-2000:]
    assert_relayed(repo, ids, sessions=3, per_session=2)


def test_hooks_install_writes_the_plugin_and_uninstall_takes_it_away(repo: Path) -> None:
    plan(1)
    answer = install_hooks("opencode")
    plugin = repo / ".opencode" / "plugins" / "git-handoff.js"
    assert Path(str(answer["settings"])) == plugin and plugin.is_file()
    assert all(f'hook("{hook}"' in plugin.read_text()
               for hook in ("opencode-session-start", "opencode-stop", "opencode-compacting"))
    status = run("hooks", "status", "--agent", "opencode", "--json").json()
    assert status["installed"] and all(status["events"].values()) and status["mcp"]["registered"]
    assert run("hooks", "uninstall", "--agent", "opencode").rc == 0
    assert not plugin.exists()
    assert not run("hooks", "status", "--agent", "opencode", "--json").json()["installed"]
