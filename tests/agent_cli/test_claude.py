"""The Claude Code hook contract: SessionStart, Stop/SubagentStop, PreCompact, and the
settings.json merge."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest

from git_handoff.ops.hook_decisions import SESSION_OVER
from tests.support.repo import git, run, run_exe

STOP = json.dumps({"session_id": "abc", "hook_event_name": "Stop", "stop_hook_active": False})
STOP_ACTIVE = json.dumps({"session_id": "abc", "hook_event_name": "Stop", "stop_hook_active": True})


# The hook JSON Claude Code reads, and Codex and Gemini CLI in the same shape
# (hook_data.claude_shaped_output, gemini.render; Gemini's block says "deny"); `continue` and
# `stopReason` are Claude Code's alone (claude.render: the session's end ends the turn whatever
# another Stop hook, such as /goal's, says). The functional form: `continue` is a keyword.
HookOutput = TypedDict("HookOutput", {"decision": str, "reason": str, "systemMessage": str,
                                      "hookSpecificOutput": dict[str, str], "continue": bool, "stopReason": str},
                       total=False)
# what the Stop hook says at the session's end (a limit reached, a relay waiting, max_sessions)
ENDED: HookOutput = {"continue": False, "stopReason": SESSION_OVER}


def _stop(payload: str = STOP, event: str = "claude-stop") -> HookOutput | None:
    r = run("hook", event, stdin=payload)
    assert r.rc == 0, r.err
    out: HookOutput | None = json.loads(r.out) if r.out.strip() else None
    return out


def _answered(payload: str = STOP, event: str = "claude-stop") -> HookOutput:
    """`_stop` where the hook must say something (a block or a warning)."""
    out = _stop(payload, event)
    assert out is not None
    return out


def _plan(*tasks: tuple[str, str]) -> None:
    assert run("init").rc == 0
    for task_id, check in tasks:
        assert run("add", f"Title of {task_id}", "--id", task_id, "--check", check).rc == 0


def _complete(task_id: str) -> None:
    assert run("claim", task_id).rc == 0
    r = run("done", task_id)
    assert r.rc == 0, r.err


# -- robustness -------------------------------------------------------------------------


@pytest.mark.parametrize("event", ["claude-session-start", "claude-stop", "claude-subagent-stop",
                                   "claude-pre-compact", "claude-session-end", "post-commit"])
def test_not_initialized_is_a_silent_noop(repo: Path, event: str) -> None:
    r = run("hook", event, stdin=STOP)
    assert (r.rc, r.out, r.err) == (0, "", "")


def test_outside_a_repository_is_a_silent_noop(tmp_path: Path) -> None:
    r = run("hook", "claude-stop", cwd=tmp_path, stdin=STOP)
    assert (r.rc, r.out) == (0, "")


@pytest.mark.parametrize("payload", ["", "   ", "{not json", "[1, 2]", "42", "null", "\"text\""])
def test_empty_invalid_and_non_object_payloads(repo: Path, payload: str) -> None:
    _plan(("a", "true"))
    for event in ("claude-stop", "claude-subagent-stop", "claude-pre-compact", "claude-session-start",
                  "claude-session-end"):
        r = run("hook", event, stdin=payload)
        assert r.rc == 0, (event, r.err)
        if r.out.strip():
            json.loads(r.out)


def test_real_executable_with_malformed_stdin(repo: Path) -> None:
    _plan(("a", "true"))
    r = run_exe("hook", "claude-stop", cwd=repo, stdin="\x00garbage{")
    assert r.rc == 0
    assert json.loads(r.out)["decision"] == "block"


# -- Stop -------------------------------------------------------------------------------


def test_stop_blocks_while_eligible_naming_the_next_task(repo: Path) -> None:
    _plan(("first", "true"), ("second", "true"))
    out = _stop()
    assert out is not None and out["decision"] == "block"
    assert "[first] Title of first" in out["reason"] and "git handoff claim first" in out["reason"]


def test_subagent_stop_is_not_held_on_pending_work(repo: Path) -> None:
    """The harness holds a subagent only on in-progress work its worker owns."""
    _plan(("first", "true"))
    assert _stop(event="claude-subagent-stop") is None
    assert _answered(event="claude-stop")["decision"] == "block"  # the main agent still is


def test_subagent_stop_held_on_own_claim_once(repo: Path) -> None:
    _plan(("first", "true"))
    assert run("claim", "first").rc == 0
    out = _stop(event="claude-subagent-stop")
    assert out is not None and out["decision"] == "block" and "[first]" in out["reason"]
    assert _stop(STOP_ACTIVE, event="claude-subagent-stop") is None  # always lets go when continuing


def test_stop_allowed_when_all_done(repo: Path) -> None:
    _plan(("a", "true"), ("b", "true"))
    _complete("a")
    _complete("b")
    assert _stop() is None


def test_stop_allowed_when_only_failed_dependencies_remain(repo: Path) -> None:
    assert run("init").rc == 0
    run("add", "Base", "--id", "base", "--check", "false", "--max-attempts", "1")
    run("add", "Needs base", "--id", "child", "--after", "base", "--check", "true")
    assert run("claim", "base").rc == 0
    assert run("done", "base").rc == 1  # fails for good (1/1)
    assert _stop() is None


def test_stop_blocks_on_a_retryable_failed_task(repo: Path) -> None:
    _plan(("flaky", "false"))
    assert run("claim", "flaky").rc == 0
    assert run("done", "flaky").rc == 1  # attempt 1/3 failed
    out = _stop()
    assert out is not None and out["decision"] == "block"
    assert "[flaky]" in out["reason"] and "attempt 2/3" in out["reason"]


def test_stop_blocks_on_my_task_in_progress(repo: Path) -> None:
    _plan(("mine", "true"), ("other", "true"))
    assert run("claim", "mine").rc == 0
    out = _stop()
    assert out is not None and "[mine]" in out["reason"] and "git handoff done mine" in out["reason"]


def test_stop_allowed_when_session_limit_reached_and_document_written(repo: Path) -> None:
    _plan(("a", "true"), ("b", "true"), ("c", "true"))
    run("init", "--max-tasks-per-session", "2")
    run("session", "start")
    _complete("a")
    assert _answered()["decision"] == "block"
    _complete("b")
    assert _stop() == ENDED
    doc = run("doc", "show", "--json").json()
    assert doc["session"] == 1 and doc["trigger"] == "stop"


def test_stop_still_blocks_after_a_document_without_a_relay(repo: Path) -> None:
    """A document (here: written by hand; also pre-compact) ends nothing by itself: the
    agent is kept working while eligible work remains and its limits allow."""
    _plan(("a", "true"), ("b", "true"))
    run("session", "start")
    assert _answered()["decision"] == "block"
    run("doc", "write")
    assert _answered()["decision"] == "block"


def test_stop_allowed_after_a_document_when_a_relay_waits(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plan(("a", "true"), ("b", "true"))
    run("session", "start")
    monkeypatch.setenv("HANDOFF_SESSION", "1")  # what the relay's launcher exports
    assert _answered()["decision"] == "block"
    run("doc", "write")
    assert _stop() == ENDED


def test_stop_allowed_at_tasks_per_session(repo: Path) -> None:
    _plan(("a", "true"), ("b", "true"))
    git("config", "handoff.tasksPerSession", "1", cwd=repo)
    run("session", "start")
    _complete("a")  # writes the document (trigger tasks)
    assert _stop() == ENDED


def test_safety_valve_after_eight_blocks_without_progress(repo: Path) -> None:
    _plan(("a", "true"), ("b", "true"))
    assert _answered(STOP)["decision"] == "block"
    for _ in range(7):
        assert _answered(STOP_ACTIVE)["decision"] == "block"
    _assert_valve_opens()  # 8 consecutive blocks without progress: let it stop, and say so
    # a fresh stop (not continuing from a block) is blocked again
    assert _answered(STOP)["decision"] == "block"


def test_state_progress_resets_the_safety_valve(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 15 blocks of one turn: Claude Code's own cap (8) would end it at the 9th, and the hook
    # lets it go there (tests/ops/test_hook_decisions.py); without that cap, the valve's rule
    monkeypatch.setenv("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "0")
    _plan(("a", "true"), ("b", "true"), ("c", "true"))
    _stop(STOP)
    for _ in range(6):
        _stop(STOP_ACTIVE)
    _complete("a")  # progress
    for _ in range(8):
        assert _answered(STOP_ACTIVE)["decision"] == "block"
    _assert_valve_opens()


def _assert_valve_opens() -> None:
    r = run("hook", "claude-stop", stdin=STOP_ACTIVE)
    assert r.rc == 0
    out = json.loads(r.out)
    assert "decision" not in out and "safety valve opened" in out["systemMessage"]
    assert "safety valve opened" in r.err  # the harness warns on stderr


def test_renewing_a_lease_is_not_progress_for_the_valve(repo: Path) -> None:
    """An agent that only renews its lease between stops is released after 8 blocks."""
    _plan(("a", "true"), ("b", "true"))
    assert run("claim", "a").rc == 0
    for i in range(8):
        out = _stop(STOP if i == 0 else STOP_ACTIVE)
        assert out is not None and out["decision"] == "block" and "[a]" in out["reason"]
        assert run("renew", "a").rc == 0
    _assert_valve_opens()


def test_a_new_agent_conversation_starts_the_valve_afresh(repo: Path) -> None:
    _plan(("a", "true"))
    for _ in range(5):
        _stop(STOP_ACTIVE)
    other = json.dumps({"session_id": "other", "hook_event_name": "Stop", "stop_hook_active": True})
    for _ in range(8):
        assert _answered(other)["decision"] == "block"
    _assert_valve_opens_for(other)


def _assert_valve_opens_for(payload: str) -> None:
    r = run("hook", "claude-stop", stdin=payload)
    assert "decision" not in json.loads(r.out) and "safety valve opened" in r.err


# -- SessionStart -------------------------------------------------------------------------


def test_session_start_injects_prompt_with_next_task_and_acks(repo: Path) -> None:
    _plan(("first", "make first"), ("second", "true"))
    run("session", "start")
    run("ack")
    run("decide", "chose X", "--why", "Y")
    run("doc", "write")
    r = run("hook", "claude-session-start", stdin=json.dumps({"source": "startup", "session_id": "s"}))
    assert r.rc == 0, r.err
    out = json.loads(r.out)
    hso = out["hookSpecificOutput"]
    assert hso["hookEventName"] == "SessionStart"
    ctx = hso["additionalContext"]
    assert "Next eligible task: [first] Title of first (check: `make first`)" in ctx
    assert "chose X - why: Y" in ctx
    assert len(ctx.encode()) < 10_000
    assert run("session", "show", "--json").json()["session"] == 2
    assert run("session", "show", "--json").json()["ack"]["status"] == "accepted"
    assert run("doc", "list", "--json").json()[0]["accepted_by"] == 2
    assert "ACK Session 2 accepted the handoff of session 1" in run("log").out


def test_session_start_resume_keeps_the_session(repo: Path) -> None:
    _plan(("a", "true"))
    run("hook", "claude-session-start", stdin=json.dumps({"source": "startup"}))
    run("hook", "claude-session-start", stdin=json.dumps({"source": "resume"}))
    assert run("session", "show", "--json").json()["session"] == 1
    run("hook", "claude-session-start", stdin=json.dumps({"source": "compact"}))
    assert run("session", "show", "--json").json()["session"] == 1
    run("hook", "claude-session-start", stdin=json.dumps({"source": "clear"}))
    assert run("session", "show", "--json").json()["session"] == 2


def test_session_start_adopts_a_session_waiting_for_its_agent(repo: Path) -> None:
    _plan(("a", "true"))
    run("session", "start")  # e.g. the relay, before it launches the agent
    r = run("hook", "claude-session-start", stdin=json.dumps({"source": "startup"}))
    assert r.rc == 0
    shown = run("session", "show", "--json").json()
    assert shown["session"] == 1 and shown["ack"]["status"] == "accepted"


def test_session_start_at_max_sessions_says_stop(repo: Path) -> None:
    _plan(("a", "true"))
    run("init", "--max-sessions", "1")
    run("session", "start")
    run("ack")
    r = run("hook", "claude-session-start", stdin=json.dumps({"source": "startup"}))
    assert r.rc == 0
    assert "max_sessions (1) reached" in json.loads(r.out)["hookSpecificOutput"]["additionalContext"]


# -- PreCompact ----------------------------------------------------------------------------


def test_pre_compact_writes_the_document_once_the_compaction_happened(repo: Path) -> None:
    _plan(("a", "true"))
    run("session", "start")
    run("ack")
    (repo / "wip.txt").write_text("x\n")
    r = run("hook", "claude-pre-compact", stdin=json.dumps({"trigger": "auto"}))
    assert (r.rc, r.out) == (0, "")
    assert run("doc", "list", "--json").json() == []  # not yet: the compaction may not happen
    r = run("hook", "claude-session-start", stdin=json.dumps({"source": "compact"}))
    assert r.rc == 0
    doc = run("doc", "show", "--json").json()
    assert doc["trigger"] == "pre-compact" and doc["files_changed"] == ["wip.txt"]
    run("hook", "claude-pre-compact", stdin="{}")
    run("hook", "claude-session-start", stdin=json.dumps({"source": "compact"}))
    assert len([x for x in run("log", "--type", "HANDOFF").out.splitlines() if x]) == 1
    assert run("session", "show", "--json").json()["session"] == 1  # compaction keeps the session


def test_compact_with_nothing_to_compact_writes_no_document(repo: Path) -> None:
    """`/compact` on an empty conversation runs PreCompact, then no compaction follows."""
    _plan(("a", "true"))
    run("session", "start")
    assert run("hook", "claude-pre-compact", stdin=json.dumps({"trigger": "manual"})).rc == 0
    assert run("hook", "claude-session-end", stdin=json.dumps({"reason": "other"})).rc == 0
    docs = run("doc", "list", "--json").json()
    assert [d["trigger"] for d in docs] == ["session-end"]


# -- settings.json -------------------------------------------------------------------------

USER_SETTINGS: dict[str, Any] = {
    "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(./.env)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "./my-stop.sh"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}],
    },
    "model": "opus",
}


def test_settings_merge_keeps_user_hooks_and_permissions(repo: Path) -> None:
    """The plain form (the command server left off); the fast form is the next test's."""
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(USER_SETTINGS, indent=2))
    assert run("hooks", "install", "--agent", "claude", "--no-command-server").rc == 0
    first = settings.read_bytes()
    assert run("hooks", "install", "--agent", "claude", "--no-command-server").rc == 0
    assert settings.read_bytes() == first  # idempotent
    data = json.loads(first)
    assert data["permissions"] == USER_SETTINGS["permissions"] and data["model"] == "opus"
    assert data["hooks"]["PreToolUse"] == USER_SETTINGS["hooks"]["PreToolUse"]
    stop_cmds = [h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]]
    assert stop_cmds == ["./my-stop.sh", "git handoff hook claude-stop"]
    ss = data["hooks"]["SessionStart"][0]
    assert ss["matcher"] == "startup|resume|compact|clear"
    assert ss["hooks"][0]["command"] == "git handoff hook claude-session-start"
    assert data["hooks"]["SubagentStop"][0]["hooks"][0]["command"] == "git handoff hook claude-subagent-stop"
    assert data["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "git handoff hook claude-pre-compact"
    assert run("hooks", "status", "--json").json()["claude"] is True
    assert run("hooks", "uninstall", "--agent", "claude").rc == 0
    assert json.loads(settings.read_text()) == USER_SETTINGS


def test_with_the_command_server_on_the_hooks_start_the_fast_client(repo: Path) -> None:
    """handoff.commandServer on: each hook's command starts the server's fast client (an
    absolute interpreter without site) and falls back to the plain command; installing
    again after the switch changed replaces ours (never a second handler), the user's stay;
    uninstall takes either form out."""
    from git_handoff import cmdclient

    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(USER_SETTINGS, indent=2))
    git("config", "handoff.commandServer", "true", cwd=repo)
    assert run("hooks", "install", "--agent", "claude", "--no-mcp").rc == 0
    first = settings.read_bytes()
    assert run("hooks", "install", "--agent", "claude", "--no-mcp").rc == 0
    assert settings.read_bytes() == first  # idempotent
    data = json.loads(first)
    stop_cmds = [h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]]
    assert stop_cmds[0] == "./my-stop.sh" and len(stop_cmds) == 2
    words = shlex.split(stop_cmds[1])
    assert words[:3] == ["[", "-x", sys.executable] and sys.executable in words
    assert stop_cmds[1].endswith("; exec git handoff hook claude-stop")
    client = cmdclient.fast_command(["hook", "claude-stop"])
    assert " ".join(shlex.quote(a) for a in client) in stop_cmds[1]
    assert run("hooks", "status", "--json").json()["claude"] is True
    git("config", "handoff.commandServer", "false", cwd=repo)
    assert run("hooks", "install", "--agent", "claude", "--no-mcp").rc == 0
    data = json.loads(settings.read_text())
    assert [h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]] == \
        ["./my-stop.sh", "git handoff hook claude-stop"]
    git("config", "handoff.commandServer", "true", cwd=repo)
    assert run("hooks", "install", "--agent", "claude", "--no-mcp").rc == 0
    assert settings.read_bytes() == first
    assert run("hooks", "uninstall", "--agent", "claude").rc == 0
    assert json.loads(settings.read_text()) == USER_SETTINGS


def test_settings_created_when_absent(repo: Path) -> None:
    r = run("hooks", "install", "--agent", "claude", "--json")
    assert r.rc == 0
    data = json.loads((repo / ".claude" / "settings.json").read_text())
    assert set(data["hooks"]) == {"SessionStart", "Stop", "SubagentStop", "PreCompact", "SessionEnd"}
    run("hooks", "uninstall", "--agent", "claude")
    assert json.loads((repo / ".claude" / "settings.json").read_text()) == {}


@pytest.mark.parametrize("content", ["{broken", "[1]", '{"hooks": []}'])
def test_invalid_settings_refused_unchanged(repo: Path, content: str) -> None:
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(content)
    r = run("hooks", "install", "--agent", "claude")
    assert r.rc == 2 and r.err.startswith("error:")
    assert settings.read_text() == content


# -- the real executable, a whole cycle -----------------------------------------------------


@pytest.mark.slow  # several processes racing: the slow layer
def test_two_agent_sessions_through_the_real_hooks(repo: Path) -> None:
    """What Claude Code would do: SessionStart, work, Stop blocked, limit, Stop allowed;
    the next SessionStart accepts the document and names the remaining task."""
    assert run_exe("init", "--max-tasks-per-session", "1", cwd=repo).rc == 0
    run_exe("add", "Write a.txt", "--id", "a", "--check", "test -f a.txt", cwd=repo)
    run_exe("add", "Write b.txt", "--id", "b", "--check", "test -f b.txt", "--after", "a", cwd=repo)
    assert run_exe("hooks", "install", "--agent", "claude", cwd=repo).rc == 0

    start = run_exe("hook", "claude-session-start", cwd=repo, stdin=json.dumps({"source": "startup"}))
    assert start.rc == 0, start.err
    assert "Next eligible task: [a]" in json.loads(start.out)["hookSpecificOutput"]["additionalContext"]
    blocked = run_exe("hook", "claude-stop", cwd=repo, stdin=STOP)
    assert json.loads(blocked.out)["decision"] == "block"
    assert run_exe("claim", cwd=repo).rc == 0
    (repo / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=repo)
    git("commit", "-qm", "a", cwd=repo)
    assert run_exe("decide", "plain text files", "--why", "the checks test for files", cwd=repo).rc == 0
    assert run_exe("done", "a", cwd=repo).rc == 0
    allowed = run_exe("hook", "claude-stop", cwd=repo, stdin=STOP_ACTIVE)
    assert allowed.rc == 0 and json.loads(allowed.out) == ENDED  # the session limit: stop, document written
    doc = run_exe("doc", "show", "--json", cwd=repo).json()
    assert doc["trigger"] == "stop" and doc["completed_this_session"] == ["a"]
    # as git sees it: untracked too (hooks install wrote the settings and the MCP entry)
    assert doc["files_changed"] == [".claude/settings.json", ".mcp.json", "a.txt"]

    nxt = run_exe("hook", "claude-session-start", cwd=repo, stdin=json.dumps({"source": "startup"}))
    ctx = json.loads(nxt.out)["hookSpecificOutput"]["additionalContext"]
    assert "Next eligible task: [b] Write b.txt (check: `test -f b.txt`)" in ctx
    assert "plain text files - why: the checks test for files" in ctx
    docs = run_exe("doc", "list", "--json", cwd=repo).json()
    assert docs[0]["accepted_by"] == 2
    assert json.loads(run_exe("hook", "claude-stop", cwd=repo, stdin=STOP).out)["decision"] == "block"


def test_the_installed_hook_table_matches_the_claude_adapter() -> None:
    # ops/hook_install.py sits below agent_cli/claude.py in the layers, so it spells the table out.
    from git_handoff.agent_cli import claude
    from git_handoff.ops import hook_install

    assert hook_install.CLAUDE_HOOKS == claude.settings_entries()
    assert hook_install.CLAUDE_COMMAND_PREFIX == claude.COMMAND_PREFIX
