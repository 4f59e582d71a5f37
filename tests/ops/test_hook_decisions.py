"""The harness skill's semantics for the agent hooks, one test per behaviour, fed the
payloads Claude Code sends, through `git handoff hook`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.agent_cli.test_claude import ENDED, HookOutput
from tests.ops.test_tasks import harness_tasks_json
from tests.support.repo import git, make_repo, run

STOP = json.dumps({"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": False})
STOP_ACTIVE = json.dumps({"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": True})
START = json.dumps({"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup"})


def _hook(event: str, payload: str, cwd: Path | None = None) -> tuple[HookOutput | None, str]:
    r = run("hook", event, stdin=payload, cwd=cwd)
    assert r.rc == 0, r.err
    out: HookOutput | None = json.loads(r.out) if r.out.strip() else None
    return out, r.err


def _plan(*ids: str, check: str | None = "true") -> None:
    assert run("init").rc == 0
    for task_id in ids:
        args = ["add", f"Title of {task_id}", "--id", task_id] + (["--check", check] if check else [])
        assert run(*args).rc == 0


# -- 4. max_sessions reached: one instruction, not two -------------------------------------


def test_at_max_sessions_session_start_says_stop_and_stop_does_not_block(repo: Path) -> None:
    _plan("a")
    run("init", "--max-sessions", "1")
    run("session", "start")
    run("ack")
    run("session", "end")
    out, _ = _hook("claude-session-start", START)
    assert out is not None
    assert "max_sessions (1) reached" in out["hookSpecificOutput"]["additionalContext"]
    assert "stop here" in out["hookSpecificOutput"]["additionalContext"]
    assert _hook("claude-stop", STOP)[0] == ENDED  # not "Next task ... claim": the turn ends
    # ... and the claim the agent might still try is refused too, changing nothing
    head = git("rev-parse", "refs/harness/state", cwd=repo)
    claimed = run("claim", "--json")
    assert claimed.rc == 1 and "max_sessions (1) reached" in claimed.err
    assert claimed.json()["exit_code"] == 1
    assert git("rev-parse", "refs/harness/state", cwd=repo) == head
    assert run("show", "a", "--json").json()["status"] == "pending"
    run("init", "--max-sessions", "2")  # raising the limit lets work go on
    assert run("claim").rc == 0


def test_claims_outside_sessions_are_unaffected_while_no_session_was_started(repo: Path) -> None:
    _plan("a")
    run("init", "--max-sessions", "1")
    assert run("claim").rc == 0  # no session ever started: max_sessions has not been reached


# -- 6. a damaged state is told to the agent -------------------------------------------------


def _damage(repo: Path, name: str) -> None:
    """Commit onto refs/harness/state a tree whose record `name` is not valid JSON."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "damage-index")}
    listing = git("ls-tree", "-r", "--name-only", "refs/harness/state", cwd=repo).splitlines()
    path = next(p for p in listing if p.rsplit("/", 1)[-1] == name)
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input="{not json",
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["git", "read-tree", "refs/harness/state"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "update-index", "--cacheinfo", f"100644,{blob},{path}"], cwd=repo, env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()
    commit = git("commit-tree", tree, "-p", "refs/harness/state", "-m", "damaged", cwd=repo)
    git("update-ref", "refs/harness/state", commit, cwd=repo)


@pytest.mark.parametrize("name", ["meta.json", "a.json"])
def test_a_damaged_state_blocks_once_and_is_injected_as_context(repo: Path, name: str) -> None:
    _plan("a")
    _damage(repo, name)
    assert run("status").rc == 2  # the state really is unreadable
    out, err = _hook("claude-session-start", START)
    assert out is not None and "the state cannot be read" in out["hookSpecificOutput"]["additionalContext"]
    blocked, _ = _hook("claude-stop", STOP)
    assert blocked is not None and blocked["decision"] == "block" and "cannot be read" in blocked["reason"]
    released, err = _hook("claude-stop", STOP_ACTIVE)  # once: then the agent may stop
    assert released is not None and "decision" not in released and "cannot be read" in err


# -- 7. the payload's cwd, then CLAUDE_PROJECT_DIR ----------------------------------------------


def test_the_payload_cwd_finds_the_repository(repo: Path, tmp_path: Path) -> None:
    _plan("a")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    payload = json.dumps({"session_id": "s1", "stop_hook_active": False, "cwd": str(repo)})
    out, _ = _hook("claude-stop", payload, cwd=elsewhere)
    assert out is not None and "[a]" in out["reason"]
    assert _hook("claude-stop", STOP, cwd=elsewhere)[0] is None  # no cwd: where it runs, nothing


def test_claude_project_dir_when_the_payload_has_no_cwd(repo: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _plan("a")
    elsewhere = make_repo(tmp_path / "other")  # an uninitialized repository
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(repo))
    out, _ = _hook("claude-stop", STOP, cwd=elsewhere)
    assert out is not None and "[a]" in out["reason"]


# -- 10. migration from the harness skill -----------------------------------------------------


def test_tasks_json_without_version_is_read_as_version_2(repo: Path) -> None:
    assert run("init").rc == 0
    data = harness_tasks_json()
    del data["version"]
    (repo / "tasks.json").write_text(json.dumps(data))
    r = run("import", "tasks.json")
    assert r.rc == 0, r.err
    assert {t["id"] for t in run("list", "--json").json()} == {"task-001", "task-002", "task-003"}
    (repo / "v3.json").write_text(json.dumps({**data, "version": 3}))
    assert run("import", "v3.json").rc == 2  # a version that is there and not 2 is still refused


def test_session_count_carries_over_so_max_sessions_keeps_counting(repo: Path) -> None:
    assert run("init").rc == 0
    data = harness_tasks_json()
    data["session_config"]["max_sessions"] = 2
    (repo / "tasks.json").write_text(json.dumps(data))
    assert run("import", "tasks.json").rc == 0
    assert run("session", "start", "--json").json()["session"] == 2
    run("session", "end")
    assert run("session", "start").rc == 1  # 2 of 2 sessions: the harness's one counted


def test_done_without_a_validation_command_logs_the_config_error(repo: Path) -> None:
    _plan("a", check=None)
    assert run("claim", "a").rc == 0
    r = run("done", "a")
    assert r.rc == 2 and "[CONFIG] Missing validation.command" in r.err
    errors = run("log", "--type", "ERROR").out
    assert "ERROR [a] [CONFIG] Missing validation.command" in errors
    assert run("show", "a", "--json").json()["status"] == "in_progress"


def test_exclusive_mode_unowned_in_progress_keeps_the_agent_working_and_is_recovered(repo: Path) -> None:
    assert run("init", "--mode", "exclusive").rc == 0
    data = harness_tasks_json()
    data["session_config"]["concurrency_mode"] = "exclusive"
    data["tasks"][2]["status"] = "in_progress"  # task-003, as the harness left it: no claimed_by
    data["tasks"][2]["started_at_commit"] = git("rev-parse", "HEAD", cwd=repo)
    (repo / "tasks.json").write_text(json.dumps(data))
    assert run("import", "tasks.json").rc == 0
    out, _ = _hook("claude-stop", STOP)
    assert out is not None and out["decision"] == "block" and "[task-003]" in out["reason"]
    started = run("session", "start", "--json").json()
    assert [a["task"] for a in started["recovery"]] == ["task-003"]


# -- 1. after a compaction the agent is still kept working ----------------------------------


def test_after_a_compaction_stop_still_blocks_with_work_left(repo: Path) -> None:
    _plan("a", "b")
    _hook("claude-session-start", START)
    _hook("claude-pre-compact", json.dumps({"session_id": "s1", "trigger": "auto"}))
    _hook("claude-session-start", json.dumps({"session_id": "s1", "source": "compact"}))
    assert run("doc", "show", "--json").json()["trigger"] == "pre-compact"
    out, _ = _hook("claude-stop", STOP)
    assert out is not None and out["decision"] == "block" and "[a]" in out["reason"]


# -- 8. SessionEnd closes the session with its document ---------------------------------------


def test_session_end_writes_the_document_and_closes_the_session(repo: Path) -> None:
    _plan("a")
    _hook("claude-session-start", START)
    assert _hook("claude-session-end", json.dumps({"session_id": "s1", "reason": "prompt_input_exit"}))[0] is None
    doc = run("doc", "show", "1", "--json").json()
    assert doc["trigger"] == "session-end"
    assert run("session", "show", "1", "--json").json()["ended_at"]
    out, _ = _hook("claude-session-start", START)  # the next plain run: a new session taking the document
    assert out is not None and run("session", "show", "--json").json()["session"] == 2
    assert run("doc", "list", "--json").json()[0]["accepted_by"] == 2


def test_session_end_under_a_relay_leaves_the_ending_to_the_relay(repo: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _plan("a")
    run("session", "start")
    monkeypatch.setenv("HANDOFF_SESSION", "1")
    _hook("claude-session-start", START)
    _hook("claude-session-end", json.dumps({"session_id": "s1", "reason": "other"}))
    assert run("doc", "show", "1", "--json").json()["trigger"] == "session-end"
    assert not run("session", "show", "1", "--json").json()["ended_at"]
    assert run("session", "end").rc == 0  # what the relay then does


# -- under a relay: the end of a turn ends the session ------------------------------------


def _relay_session(monkeypatch: pytest.MonkeyPatch) -> int:
    assert run("session", "start").rc == 0
    number = int(run("session", "show", "--json").json()["session"])
    monkeypatch.setenv("HANDOFF_SESSION", str(number))
    return number


def test_under_a_relay_a_stop_that_is_let_through_writes_the_document(repo: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """An interactive CLI whose turn ends waits at its prompt for ever: the Stop hook that
    lets a relay's agent stop writes the session's document, which is what tells the relay
    to end the pane (before, nothing was written and the relay waited for an exit)."""
    _plan("a")
    number = _relay_session(monkeypatch)
    assert run("claim", "a").rc == 0
    blocked, _ = _hook("claude-stop", STOP)  # its own task in progress: held, no document
    assert blocked is not None and blocked.get("decision") == "block"
    assert run("doc", "show", str(number)).rc == 2
    assert run("done", "a").rc == 0
    assert _hook("claude-stop", STOP)[0] == ENDED  # nothing left: the relay's session ends here
    doc = run("doc", "show", str(number), "--json").json()
    assert doc["trigger"] == "stop" and [t["id"] for t in doc["status"]["completed"]] == ["a"]


def test_under_a_relay_the_opened_valve_writes_the_document_too(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _plan("a")
    number = _relay_session(monkeypatch)
    for _ in range(8):
        blocked, _ = _hook("claude-stop", STOP)
        assert blocked is not None and blocked.get("decision") == "block"
        assert run("doc", "show", str(number)).rc == 2
    released, _ = _hook("claude-stop", STOP)
    assert released is not None and "safety valve opened" in released.get("systemMessage", "")
    assert run("doc", "show", str(number), "--json").json()["trigger"] == "stop"


def test_without_a_relay_a_stop_let_through_writes_no_document(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A person's own session ends when the person quits: its SessionEnd writes the document."""
    _plan("a")
    monkeypatch.delenv("HANDOFF_SESSION", raising=False)
    assert run("session", "start").rc == 0
    assert run("claim", "a").rc == 0 and run("done", "a").rc == 0
    assert _hook("claude-stop", STOP)[0] is None
    assert run("doc", "list", "--json").json() == []
    # nor for a relay's other session (an agent that outlived its own)
    monkeypatch.setenv("HANDOFF_SESSION", "99")
    assert _hook("claude-stop", STOP)[0] is None
    assert run("doc", "list", "--json").json() == []


# -- Claude Code's own Stop-hook block cap (ops/stop_cap.py) ---------------------------------


def test_the_stop_hook_never_blocks_into_claude_codes_block_cap_and_the_document_says_so(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code ends a turn itself at a block beyond CLAUDE_CODE_STOP_HOOK_BLOCK_CAP in a
    row, completed tasks or not: the hook lets that turn end one stop earlier, with a
    warning, and the session's document names the cap (before, it blocked into the cap and
    the turn ended with no word of why)."""
    _plan("a", "b", "c")
    number = _relay_session(monkeypatch)
    monkeypatch.setenv("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "2")
    first, _ = _hook("claude-stop", STOP)  # a new turn's first stop: block 1
    assert first is not None and first.get("decision") == "block"
    assert run("claim", "a").rc == 0 and run("done", "a").rc == 0  # no tool call in a transcript: the count goes on
    second, _ = _hook("claude-stop", STOP_ACTIVE)  # block 2 of the same turn
    assert second is not None and second.get("decision") == "block"
    released, _ = _hook("claude-stop", STOP_ACTIVE)  # a third would be overridden by the CLI: let go
    assert released is not None and "decision" not in released
    assert "Stop-hook block cap (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=2)" in released.get("systemMessage", "")
    doc = run("doc", "show", str(number), "--json").json()
    assert doc["trigger"] == "stop" and any("block cap" in b for b in doc["blockers"]), doc
    assert any("block cap" in line for line in run("log", "--type", "WARN").out.splitlines())
    # a new turn (stop_hook_active false) starts the count over
    run("session", "end")
    number = _relay_session(monkeypatch)
    again, _ = _hook("claude-stop", STOP)
    assert again is not None and again.get("decision") == "block"


@pytest.mark.parametrize(("cap", "released_at"), [(None, 8), ("5", 5), ("0", None), ("30", None)])
def test_the_cap_is_read_as_claude_code_reads_it(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                 cap: str | None, released_at: int | None) -> None:
    """A turn that completes a task at every block (so the safety valve never opens) is let
    go after the cap's blocks: 8 when unset (2.1.332's default), none with 0 or less; a cap
    above the tasks' count is never reached."""
    _plan(*[f"t{n}" for n in range(1, 13)])
    _relay_session(monkeypatch)
    if cap is None:
        monkeypatch.delenv("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", raising=False)
    else:
        monkeypatch.setenv("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", cap)
    for n in range(11):
        out, _ = _hook("claude-stop", STOP if n == 0 else STOP_ACTIVE)
        assert out is not None
        if n == released_at:
            assert "decision" not in out and "block cap" in out.get("systemMessage", ""), (n, out)
            return
        assert out.get("decision") == "block", (n, out)
        assert run("claim", f"t{n + 1}").rc == 0 and run("done", f"t{n + 1}").rc == 0
    assert released_at is None


def _said(transcript: Path, *content: dict[str, object]) -> None:
    """An assistant message appended to a Claude Code transcript (JSON lines)."""
    with transcript.open("a") as f:
        f.write(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": list(content)}}) + "\n")


def test_a_tool_call_between_blocks_starts_the_count_over_as_claude_code_counts_it(
        repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Claude Code counts only blocks with no tool call between them (2.1.332: a tool call
    other than its goal tools resets stopHookBlockingCount): an agent that works after each
    block is never ended by the cap, so the hook keeps blocking it while work remains
    (before, it counted every block of the turn and let a working agent go at the cap,
    a session spent); one that only talks, or only touches its goal, is let go at the cap."""
    _plan("a", "b", "c", "d")
    _relay_session(monkeypatch)
    monkeypatch.setenv("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "1")
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": {"role": "user", "content": "go"}}) + "\n")

    def stop(active: bool) -> HookOutput | None:
        payload = {"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": active,
                   "transcript_path": str(transcript)}
        return _hook("claude-stop", json.dumps(payload))[0]

    for n, task in enumerate(("a", "b")):  # block, a tool call, block again: the count started over
        out = stop(active=n > 0)
        assert out is not None and out.get("decision") == "block", (n, out)
        _said(transcript, {"type": "text", "text": "on it"},
              {"type": "tool_use", "id": f"u{n}", "name": "Bash", "input": {"command": f"git handoff claim {task}"}})
        assert run("claim", task).rc == 0 and run("done", task).rc == 0
    out = stop(active=True)
    assert out is not None and out.get("decision") == "block", out
    _said(transcript, {"type": "text", "text": "done for now"},
          {"type": "tool_use", "id": "g1", "name": "GetGoal", "input": {}})  # a goal tool: the count goes on
    released = stop(active=True)
    assert released is not None and "decision" not in released, released
    assert "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=1" in released.get("systemMessage", ""), released
