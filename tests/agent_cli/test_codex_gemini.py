"""The Codex CLI and Gemini CLI hooks, fast: each adapter fed the payloads the real
programs send (recorded from codex-cli 0.171.0 and gemini-cli 0.61.0), and the
install/uninstall/status of their configuration, keeping every user entry."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.agent_cli.test_claude import ENDED, HookOutput
from tests.support.repo import run, run_exe, state_head

SESSION = "01a2311b-6bde-7e51-911c-a02f362276fb"


def _codex(event: str, **fields: object) -> str:
    base = {"session_id": SESSION, "cwd": str(Path.cwd()), "hook_event_name": event, "model": "stub-model",
            "permission_mode": "bypassPermissions", "transcript_path": "/nonexistent/rollout.jsonl"}
    return json.dumps({**base, **fields})


def _gemini(event: str, **fields: object) -> str:
    base = {"session_id": SESSION, "cwd": str(Path.cwd()), "hook_event_name": event,
            "timestamp": "2026-12-01T10:18:07.634Z", "transcript_path": "/nonexistent/session.jsonl"}
    return json.dumps({**base, **fields})


def _hook(name: str, payload: str) -> HookOutput | None:
    r = run("hook", name, stdin=payload)
    assert r.rc == 0, r.err
    out: HookOutput | None = json.loads(r.out) if r.out.strip() else None
    return out


def _plan(*ids: str) -> None:
    assert run("init").rc == 0
    for task_id in ids:
        assert run("add", f"Title of {task_id}", "--id", task_id, "--check", "true").rc == 0


def _complete(task_id: str) -> None:
    assert run("claim", task_id).rc == 0
    assert run("done", task_id).rc == 0


# -- the adapters --------------------------------------------------------------------------


@pytest.mark.parametrize("hook", ["codex-session-start", "codex-stop", "codex-subagent-stop", "codex-pre-compact",
                                  "codex-session-end", "gemini-session-start", "gemini-after-agent",
                                  "gemini-pre-compress", "gemini-session-end"])
@pytest.mark.parametrize("payload", ["", "{not json", "[1]", "null", json.dumps({"cwd": 7, "session_id": []})])
def test_bad_payloads_never_fail_the_agent(repo: Path, hook: str, payload: str) -> None:
    _plan("a")
    r = run("hook", hook, stdin=payload)
    assert r.rc == 0, r.err
    if r.out.strip():
        assert isinstance(json.loads(r.out), dict)


@pytest.mark.parametrize("hook", ["codex-session-start", "codex-stop", "gemini-session-start", "gemini-after-agent"])
def test_not_initialized_is_silent(repo: Path, hook: str) -> None:
    r = run("hook", hook, stdin=_codex("Stop"))
    assert (r.rc, r.out) == (0, "")


def test_codex_session_start_injects_the_prompt_and_acks(repo: Path) -> None:
    _plan("first", "second")
    out = _hook("codex-session-start", _codex("SessionStart", source="startup"))
    assert out is not None
    hso = out["hookSpecificOutput"]
    assert hso["hookEventName"] == "SessionStart"
    assert "Next eligible task: [first] Title of first" in hso["additionalContext"]
    session = run("session", "show", "--json").json()
    assert session["session"] == 1 and session["ack"]["status"] == "accepted"


def test_codex_resume_and_compact_keep_the_session_startup_begins_one(repo: Path) -> None:
    _plan("a")
    _hook("codex-session-start", _codex("SessionStart", source="startup"))
    _hook("codex-session-start", _codex("SessionStart", source="resume"))
    _hook("codex-session-start", _codex("SessionStart", source="compact"))
    assert run("session", "show", "--json").json()["session"] == 1
    _hook("codex-session-start", _codex("SessionStart", source="startup"))
    assert run("session", "show", "--json").json()["session"] == 2


def test_codex_stop_blocks_with_the_next_task_then_lets_go(repo: Path) -> None:
    _plan("a", "b")
    _hook("codex-session-start", _codex("SessionStart", source="startup"))
    out = _hook("codex-stop", _codex("Stop", stop_hook_active=False, last_assistant_message="done"))
    assert out is not None
    assert out == {"decision": "block", "reason": out["reason"]}
    assert "Next task: [a] Title of a" in out["reason"]
    _complete("a")
    out = _hook("codex-stop", _codex("Stop", stop_hook_active=True))
    assert out is not None and "Next task: [b]" in out["reason"]
    _complete("b")
    assert _hook("codex-stop", _codex("Stop", stop_hook_active=True)) is None


def test_at_the_session_limit_claude_ends_the_turn_and_codex_only_lets_go(repo: Path) -> None:
    """The session's end: Claude Code is told `continue: false` (its /goal's Stop hook must not send
    the agent back); Codex is told nothing (0.171.0 honours `continue: false`, yet an interactive
    Codex's goal continuation starts the next turn anyway: docs/agent-clis.md)."""
    _plan("a", "b")
    assert run("init", "--max-tasks-per-session", "1").rc == 0
    _hook("codex-session-start", _codex("SessionStart", source="startup"))
    _complete("a")
    assert _hook("codex-stop", _codex("Stop", stop_hook_active=True)) is None
    assert _hook("claude-stop", json.dumps({"session_id": "c", "stop_hook_active": True})) == ENDED


def test_codex_pre_compact_then_session_start_compact_writes_the_document(repo: Path) -> None:
    _plan("a", "b")
    _hook("codex-session-start", _codex("SessionStart", source="startup"))
    assert _hook("codex-pre-compact", _codex("PreCompact", trigger="auto")) is None
    assert run("doc", "list", "--json").json() == []  # announced, not yet written
    _hook("codex-session-start", _codex("SessionStart", source="compact"))
    docs = run("doc", "list", "--json").json()
    assert [d["trigger"] for d in docs] == ["pre-compact"] and docs[0]["session"] == 1


def test_codex_session_end_closes_the_session_with_a_document(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFF_HOOK_DETACHED", "1")  # the detached child's own run, in this process
    _plan("a")
    _hook("codex-session-start", _codex("SessionStart", source="startup"))
    assert _hook("codex-session-end", _codex("SessionEnd", reason="other")) is None
    assert run("session", "show", "--json").json()["ended_at"]
    assert [d["trigger"] for d in run("doc", "list", "--json").json()] == ["session-end"]


def test_codex_session_end_returns_at_once_and_closes_the_session_detached(repo: Path) -> None:
    """Codex kills a SessionEnd hook after 1 s: the real executable hands the work to a
    detached process and returns without waiting for it."""
    _plan("a")
    _hook("codex-session-start", _codex("SessionStart", source="startup"))
    r = run_exe("hook", "codex-session-end", cwd=repo, stdin=_codex("SessionEnd", reason="other"))
    assert (r.rc, r.out, r.err) == (0, "", "")
    deadline = time.monotonic() + 30
    session = run("session", "show", "--json").json()
    while not session.get("ended_at") and time.monotonic() < deadline:
        time.sleep(0.1)
        session = run("session", "show", "--json").json()
    assert session.get("ended_at")
    assert [d["trigger"] for d in run("doc", "list", "--json").json()] == ["session-end"]


def test_gemini_session_start_and_after_agent(repo: Path) -> None:
    _plan("a", "b")
    out = _hook("gemini-session-start", _gemini("SessionStart", source="startup"))
    assert out is not None and "[a] Title of a" in out["hookSpecificOutput"]["additionalContext"]
    assert run("session", "show", "--json").json()["ack"]["status"] == "accepted"
    out = _hook("gemini-after-agent", _gemini("AfterAgent", prompt="do it", prompt_response="done",
                                              stop_hook_active=False))
    assert out is not None and out["decision"] == "deny" and "Next task: [a]" in out["reason"]
    _complete("a")
    _complete("b")
    assert _hook("gemini-after-agent", _gemini("AfterAgent", stop_hook_active=False)) is None


def test_gemini_valve_opens_although_the_cli_never_sets_stop_hook_active(repo: Path) -> None:
    """Gemini CLI 0.61.0 sends stop_hook_active=false on every retry: the valve counts
    blocks per agent session without a completed task instead."""
    _plan("a")
    _hook("gemini-session-start", _gemini("SessionStart", source="startup"))
    outcomes = [_hook("gemini-after-agent", _gemini("AfterAgent", stop_hook_active=False)) for _ in range(9)]
    assert all(o is not None and o.get("decision") == "deny" for o in outcomes[:8])
    assert outcomes[8] is not None and "decision" not in outcomes[8]
    assert "safety valve" in outcomes[8]["systemMessage"]


def _transcript(path: Path, tokens: int, model: str = "gemini-2.5-flash") -> Path:
    lines = [{"sessionId": SESSION, "kind": "main"},
             {"id": "u1", "type": "user", "content": [{"text": "do it"}]},
             {"id": "g1", "type": "gemini", "content": "ok", "tokens": {"input": 10, "output": 1, "total": 11},
              "model": model},
             {"id": "g2", "type": "gemini", "content": "", "tokens": {"input": tokens, "output": 1}, "model": model},
             {"$set": {"lastUpdated": "2026-12-01T10:18:08.444Z"}}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_gemini_pre_compress_below_the_threshold_writes_nothing(repo: Path, tmp_path: Path) -> None:
    """0.61.0 fires PreCompress at every compression check, compressing or not."""
    _plan("a")
    _hook("gemini-session-start", _gemini("SessionStart", source="startup"))
    small = _transcript(tmp_path / "small.jsonl", 1000)
    assert _hook("gemini-pre-compress", _gemini("PreCompress", trigger="auto", transcript_path=str(small))) is None
    assert _hook("gemini-pre-compress", _gemini("PreCompress", trigger="auto")) is None  # no transcript: unknown
    assert run("doc", "list", "--json").json() == []


def test_gemini_pre_compress_that_compresses_writes_the_document(repo: Path, tmp_path: Path) -> None:
    _plan("a")
    _hook("gemini-session-start", _gemini("SessionStart", source="startup"))
    big = _transcript(tmp_path / "big.jsonl", 600_000)  # over 0.5 x 1,048,576
    _hook("gemini-pre-compress", _gemini("PreCompress", trigger="auto", transcript_path=str(big)))
    assert [d["trigger"] for d in run("doc", "list", "--json").json()] == ["pre-compact"]


def test_gemini_threshold_comes_from_the_project_settings(repo: Path, tmp_path: Path) -> None:
    _plan("a")
    _hook("gemini-session-start", _gemini("SessionStart", source="startup"))
    (repo / ".gemini").mkdir()
    (repo / ".gemini" / "settings.json").write_text(json.dumps({"model": {"compressionThreshold": 0.01}}))
    mid = _transcript(tmp_path / "mid.jsonl", 20_000)  # over 0.01 x 1,048,576
    _hook("gemini-pre-compress", _gemini("PreCompress", trigger="auto", transcript_path=str(mid)))
    assert len(run("doc", "list", "--json").json()) == 1


def test_gemini_manual_compress_writes_the_document(repo: Path) -> None:
    _plan("a")
    _hook("gemini-session-start", _gemini("SessionStart", source="startup"))
    _hook("gemini-pre-compress", _gemini("PreCompress", trigger="manual"))
    assert len(run("doc", "list", "--json").json()) == 1


def test_unknown_hook_event_is_a_warning_and_exit_0(repo: Path) -> None:
    """To Claude Code a hook's exit 2 means "block": an event from a newer version's
    settings, or a typo, must not turn every Stop into a block."""
    _plan("a")
    before = state_head(repo)
    r = run("hook", "codex-nonsense", stdin="{}")
    assert r.rc == 0 and r.out == ""
    assert len(r.err.splitlines()) == 1
    assert "unknown hook event 'codex-nonsense'" in r.err and "gemini-after-agent" in r.err
    assert state_head(repo) == before
    r = run("hook", "claude-nonsense", "--json", stdin="{}")
    assert r.rc == 0 and r.json() == {"event": "claude-nonsense", "output": None,
                                      "problem": r.json()["problem"]}
    assert "unknown hook event" in r.json()["problem"]


# -- install / uninstall / status -------------------------------------------------------------


USER_CODEX: dict[str, Any] = {
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "my-own-stop.sh", "timeout": 5}]}],
              "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}]},
    "other": {"kept": True}}
USER_CONFIG = '# my codex config\nmodel = "o3"\n\n[projects."/elsewhere"]\ntrust_level = "trusted"\n'


@pytest.fixture
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    return home


def test_codex_install_keeps_user_entries_and_trusts_only_ours(repo: Path, codex_home: Path) -> None:
    import tomllib

    (repo / ".codex").mkdir()
    (repo / ".codex" / "hooks.json").write_text(json.dumps(USER_CODEX))
    (codex_home / "config.toml").write_text(USER_CONFIG)
    r = run("hooks", "install", "--agent", "codex", "--json")
    assert r.rc == 0, r.err
    out = r.json()
    assert out["installed"] and out["trusted"] and not out["project_trusted"]
    assert out["added"] == ["SessionStart", "Stop", "SubagentStop", "PreCompact", "SessionEnd"]
    data = json.loads((repo / ".codex" / "hooks.json").read_text())
    assert data["other"] == {"kept": True} and data["hooks"]["PreToolUse"] == USER_CODEX["hooks"]["PreToolUse"]
    assert data["hooks"]["Stop"][0] == USER_CODEX["hooks"]["Stop"][0]  # the user's first, ours after
    assert data["hooks"]["Stop"][1]["hooks"][0]["command"] == "git handoff hook codex-stop"
    text = (codex_home / "config.toml").read_text()
    assert text.startswith(USER_CONFIG)  # comments and the user's tables survive
    state = tomllib.loads(text)["hooks"]["state"]
    path = (repo / ".codex" / "hooks.json").resolve()
    assert set(state) == {f"{path}:session_start:0:0", f"{path}:stop:1:0", f"{path}:subagent_stop:0:0",
                          f"{path}:pre_compact:0:0", f"{path}:session_end:0:0"}
    identity = {"event_name": "stop", "hooks": [{"type": "command", "command": "git handoff hook codex-stop",
                                                 "timeout": 600, "async": False}]}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert state[f"{path}:stop:1:0"]["trusted_hash"] == "sha256:" + digest
    # idempotent
    again = run("hooks", "install", "--agent", "codex", "--json").json()
    assert again["added"] == [] and (codex_home / "config.toml").read_text() == text
    assert json.loads((repo / ".codex" / "hooks.json").read_text()) == data
    # uninstall: byte-for-byte back
    r = run("hooks", "uninstall", "--agent", "codex", "--json")
    assert r.rc == 0 and r.json()["removed"] == ["PreCompact", "SessionEnd", "SessionStart", "Stop", "SubagentStop"]
    assert json.loads((repo / ".codex" / "hooks.json").read_text()) == USER_CODEX
    assert (codex_home / "config.toml").read_text() == USER_CONFIG


def test_codex_status_sees_a_moved_handler_as_untrusted(repo: Path, codex_home: Path) -> None:
    assert run("hooks", "install", "--agent", "codex").rc == 0
    path = repo / ".codex" / "hooks.json"
    data = json.loads(path.read_text())
    data["hooks"]["Stop"].insert(0, {"hooks": [{"type": "command", "command": "mine.sh"}]})
    path.write_text(json.dumps(data))
    st = run("hooks", "status", "--agent", "codex", "--json").json()
    assert st["installed"] and not st["trusted"]
    assert "run `git handoff hooks install --agent codex` again" in run("hooks", "status", "--agent", "codex").out
    assert run("hooks", "install", "--agent", "codex").rc == 0
    assert run("hooks", "status", "--agent", "codex", "--json").json()["trusted"]
    import tomllib

    state = tomllib.loads((codex_home / "config.toml").read_text())["hooks"]["state"]
    assert len(state) == 5  # the stale entry of ours went


def test_codex_fresh_install_and_uninstall_leave_nothing(repo: Path, codex_home: Path) -> None:
    assert run("hooks", "install", "--agent", "codex").rc == 0
    assert (repo / ".codex" / "hooks.json").exists()
    assert run("hooks", "uninstall", "--agent", "codex").rc == 0
    assert not (repo / ".codex").exists()
    assert (codex_home / "config.toml").read_text() == ""


@pytest.mark.parametrize("bad", ["{nope", "[1]", json.dumps({"hooks": []}), json.dumps({"hooks": {"Stop": {}}})])
def test_codex_refuses_a_broken_hooks_json_unchanged(repo: Path, codex_home: Path, bad: str) -> None:
    (repo / ".codex").mkdir()
    (repo / ".codex" / "hooks.json").write_text(bad)
    r = run("hooks", "install", "--agent", "codex")
    assert r.rc == 2 and r.err.startswith("error: ") and "nothing was changed" in r.err
    assert (repo / ".codex" / "hooks.json").read_text() == bad
    assert not (codex_home / "config.toml").exists()


def test_codex_refuses_a_broken_config_toml_before_writing_anything(repo: Path, codex_home: Path) -> None:
    (codex_home / "config.toml").write_text("model = [unterminated\n")
    r = run("hooks", "install", "--agent", "codex")
    assert r.rc == 2 and "not valid TOML" in r.err
    assert not (repo / ".codex").exists()
    assert (codex_home / "config.toml").read_text() == "model = [unterminated\n"


def test_codex_status_reports_project_trust_and_the_feature_switch(repo: Path, codex_home: Path) -> None:
    (codex_home / "config.toml").write_text(f'[projects."{repo.resolve()}"]\ntrust_level = "trusted"\n'
                                            "[features]\nhooks = false\n")
    assert run("hooks", "install", "--agent", "codex").rc == 0
    st = run("hooks", "status", "--agent", "codex", "--json").json()
    assert st["project_trusted"] and st["hooks_feature"] is False
    assert "hooks = false" in run("hooks", "status", "--agent", "codex").out


USER_GEMINI: dict[str, Any] = {
    "theme": "Dracula", "hooks": {"AfterAgent": [{"hooks": [{"type": "command", "command": "x.sh"}]}]},
    "hooksConfig": {"notifications": False}}


def test_gemini_install_keeps_user_settings(repo: Path) -> None:
    (repo / ".gemini").mkdir()
    (repo / ".gemini" / "settings.json").write_text(json.dumps(USER_GEMINI))
    r = run("hooks", "install", "--agent", "gemini", "--json")
    assert r.rc == 0, r.err
    assert r.json()["installed"] and r.json()["added"] == ["SessionStart", "AfterAgent", "PreCompress", "SessionEnd"]
    data = json.loads((repo / ".gemini" / "settings.json").read_text())
    assert data["theme"] == "Dracula" and data["hooksConfig"] == {"notifications": False}
    assert data["hooks"]["AfterAgent"][0] == USER_GEMINI["hooks"]["AfterAgent"][0]
    assert data["hooks"]["AfterAgent"][1]["hooks"][0] == {"name": "git-handoff-after-agent", "type": "command",
                                                          "command": "git handoff hook gemini-after-agent"}
    assert run("hooks", "status", "--json").json()["gemini"] is True
    assert run("hooks", "install", "--agent", "gemini", "--json").json()["added"] == []
    assert run("hooks", "uninstall", "--agent", "gemini").rc == 0
    assert json.loads((repo / ".gemini" / "settings.json").read_text()) == USER_GEMINI
    assert run("hooks", "status", "--agent", "gemini", "--json").json()["installed"] is False


def test_every_installed_command_is_a_known_hook_event(repo: Path, codex_home: Path) -> None:
    from git_handoff.ops import hook_entry

    for agent, rel in (("codex", ".codex/hooks.json"), ("gemini", ".gemini/settings.json")):
        assert run("hooks", "install", "--agent", agent).rc == 0
        data = json.loads((repo / rel).read_text())
        commands = [h["command"] for groups in data["hooks"].values() for g in groups for h in g["hooks"]]
        assert commands and all(c.split()[-1] in hook_entry.EVENTS for c in commands)
