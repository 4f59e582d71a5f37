"""The Qwen Code and Copilot CLI hooks, fast: each adapter fed the payloads the real
programs send (recorded from @qwen-code/qwen-code 0.24.4 and @github/copilot 1.0.102
against the chat-completions stub), what each answers, and install/uninstall of their
files keeping every user entry. The real CLIs: tests/e2e/test_qwen_copilot_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.repo import run

SESSION = "2fd86979-2dfe-43ca-ba2f-518bd811e531"


def _qwen(event: str, **fields: object) -> str:
    base = {"session_id": SESSION, "transcript_path": f"/nonexistent/{SESSION}.jsonl", "cwd": str(Path.cwd()),
            "hook_event_name": event, "timestamp": "2026-12-07T06:52:00.970Z", "permission_mode": "yolo"}
    return json.dumps({**base, **fields})


def _copilot(**fields: object) -> str:  # its payloads are camelCase and name no event
    return json.dumps({"sessionId": SESSION, "timestamp": 1796626366013, "cwd": str(Path.cwd()), **fields})


def _hook(name: str, payload: str) -> dict[str, object] | None:
    r = run("hook", name, stdin=payload)
    assert r.rc == 0, r.err
    out: dict[str, object] | None = json.loads(r.out) if r.out.strip() else None
    return out


def _plan(*ids: str) -> None:
    assert run("init").rc == 0
    for task_id in ids:
        assert run("add", f"Title of {task_id}", "--id", task_id, "--check", "true").rc == 0


@pytest.mark.parametrize("hook", ["qwen-session-start", "qwen-stop", "qwen-subagent-stop", "qwen-pre-compact",
                                  "qwen-session-end", "copilot-session-start", "copilot-agent-stop",
                                  "copilot-subagent-stop", "copilot-pre-compact", "copilot-session-end"])
@pytest.mark.parametrize("payload", ["", "{not json", "[1]", json.dumps({"cwd": 7, "sessionId": []})])
def test_bad_payloads_never_fail_the_agent(repo: Path, hook: str, payload: str) -> None:
    _plan("a")
    r = run("hook", hook, stdin=payload)
    assert r.rc == 0, r.err


def test_qwen_session_start_injects_the_prompt_and_its_stop_keeps_it_working(repo: Path) -> None:
    _plan("a", "b")
    out = _hook("qwen-session-start", _qwen("SessionStart", source="startup", model="stub-model"))
    assert out is not None
    specific = out["hookSpecificOutput"]
    assert isinstance(specific, dict) and specific["hookEventName"] == "SessionStart"
    assert "Next eligible task: [a] Title of a" in str(specific["additionalContext"])
    assert run("session", "show", "--json").json()["ack"]["status"] == "accepted"
    stop = _hook("qwen-stop", _qwen("Stop", stop_hook_active=False, last_assistant_message="done",
                                    context_usage=0.0005, context_limit=200000, input_tokens=100))
    assert stop is not None and stop["decision"] == "block" and "Next task: [a]" in str(stop["reason"])


def test_copilot_reads_its_camel_case_payload_and_answers_in_its_shape(repo: Path) -> None:
    _plan("a")
    out = _hook("copilot-session-start", _copilot(source="new", initialPrompt="do it"))
    assert out is not None and set(out) == {"additionalContext"}
    assert "Next eligible task: [a] Title of a" in str(out["additionalContext"])
    session = run("session", "show", "--json").json()
    assert session["ack"]["status"] == "accepted"
    stop = _hook("copilot-agent-stop", _copilot(transcriptPath="/nonexistent/events.jsonl", stopReason="end_turn",
                                                stop_hook_active=False))
    assert stop is not None and stop["decision"] == "block" and "Next task: [a]" in str(stop["reason"])
    # its camelCase transcriptPath is noted as the session's transcript: where its use is read
    sources = json.loads((repo / ".git" / "handoff" / "usage-sources.json").read_text())
    assert sources == {"session": 1, "sources": [["copilot", "/nonexistent/events.jsonl"]]}


@pytest.mark.parametrize("agent", ["qwen", "copilot"])
def test_their_pre_compaction_writes_the_document_at_once(repo: Path, agent: str) -> None:
    """Both run it only when they really compact, and no event follows: the document now."""
    _plan("a")
    if agent == "qwen":
        _hook("qwen-session-start", _qwen("SessionStart", source="startup"))
        payload = _qwen("PreCompact", trigger="auto", custom_instructions="")
    else:
        _hook("copilot-session-start", _copilot(source="new"))
        payload = _copilot(transcriptPath="/nonexistent/events.jsonl", trigger="auto", customInstructions="")
    assert _hook(f"{agent}-pre-compact", payload) is None
    docs = run("doc", "list", "--json").json()
    assert [(d["session"], d["trigger"]) for d in docs] == [(1, "pre-compact")]


@pytest.mark.parametrize(("agent", "config", "mcp"), [
    ("qwen", ".qwen/settings.json", ".qwen/settings.json"),
    ("copilot", ".github/hooks/handoff.json", ".github/mcp.json"),
])
def test_install_keeps_the_users_entries_and_uninstall_leaves_them(repo: Path, agent: str, config: str,
                                                                    mcp: str) -> None:
    _plan("a")
    path = repo / config
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = {"hooks": {"Stop" if agent == "qwen" else "agentStop": [
        {"hooks": [{"type": "command", "command": "echo mine"}]}]}, "theme": "dark"}
    path.write_text(json.dumps(mine))
    r = run("hooks", "install", "--agent", agent, "--json")
    assert r.rc == 0, r.err
    data = json.loads(path.read_text())
    commands = [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]]
    assert "echo mine" in commands and f"git handoff hook {agent}-session-start" in commands
    assert "handoff" in json.loads((repo / mcp).read_text())["mcpServers"]
    assert run("hooks", "status", "--json").json()[agent] is True
    assert run("hooks", "uninstall", "--agent", agent).rc == 0
    assert json.loads(path.read_text()) == mine
    assert run("hooks", "status", "--json").json()[agent] is False


def test_install_refuses_a_broken_file_and_changes_nothing(repo: Path) -> None:
    _plan("a")
    path = repo / ".github" / "hooks" / "handoff.json"
    path.parent.mkdir(parents=True)
    path.write_text("{broken")
    r = run("hooks", "install", "--agent", "copilot")
    assert r.rc == 2 and r.err.startswith("error: ") and len(r.err.strip().splitlines()) == 1
    assert path.read_text() == "{broken" and not (repo / ".github" / "mcp.json").exists()


@pytest.mark.parametrize(("agent", "files"), [
    ("qwen", [".qwen/settings.json"]),
    ("copilot", [".github/hooks/handoff.json", ".github/mcp.json"]),
])
def test_uninstall_removes_the_files_install_created(repo: Path, agent: str, files: list[str]) -> None:
    """Copilot's hooks file is one of our own among the repository's (docs/agent-clis.md):
    uninstall takes it away when nothing else was put in it, and so for Qwen's settings."""
    _plan("a")
    assert run("hooks", "install", "--agent", agent).rc == 0
    assert all((repo / f).is_file() for f in files)
    assert run("hooks", "uninstall", "--agent", agent).rc == 0
    assert [f for f in files if (repo / f).exists()] == []
