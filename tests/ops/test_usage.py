"""A session's use: the transcripts its hooks name are noted (one mechanism for every CLI),
read when the session ends, recorded in the session record and shared among its tasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from git_handoff.ops import usage
from tests.support.repo import run


def _claude_transcript(path: Path, answers: list[tuple[int, int]]) -> Path:
    path.write_text("".join(json.dumps({"type": "assistant", "message": {
        "id": f"msg_{n}", "usage": {"input_tokens": i, "output_tokens": o}}}) + "\n"
        for n, (i, o) in enumerate(answers)))
    return path


def _codex_rollout(path: Path, inp: int, out: int) -> Path:
    total = {"input_tokens": inp, "output_tokens": out}
    path.write_text(json.dumps({"type": "event_msg", "payload": {"type": "token_count", "info": {
        "total_token_usage": total}}}) + "\n")
    return path


def _hook(hook: str, repo: Path, transcript: Path, **extra: Any) -> None:
    payload = {"session_id": "abc", "cwd": str(repo), "transcript_path": str(transcript), **extra}
    assert run("hook", hook, stdin=json.dumps(payload)).rc == 0


def _plan(*ids: str) -> None:
    assert run("init").rc == 0
    for task_id in ids:
        assert run("add", f"Task {task_id}", "--id", task_id, "--check", "true").rc == 0


def test_the_hooks_note_the_transcript_and_session_end_records_its_use(repo: Path, tmp_path: Path) -> None:
    _plan("a", "b", "c")
    assert run("session", "start").rc == 0
    transcript = _claude_transcript(tmp_path / "t.jsonl", [(50, 10), (61, 7), (70, 10)])
    _hook("claude-stop", repo, transcript)
    _hook("claude-stop", repo, transcript)  # noted once
    assert usage.sources(_repo(repo), 1) == [("claude", str(transcript))]
    for task_id in ("a", "b"):
        assert run("claim", task_id).rc == 0
        assert run("done", task_id).rc == 0
    assert run("claim", "c").rc == 0
    record = run("session", "end", "--json").json()
    assert record["usage"]["input_tokens"] == 181 and record["usage"]["output_tokens"] == 27
    assert record["usage"]["tokens"] == 208 and record["usage"]["turns"] == 3 and record["usage"]["clis"] == ["claude"]
    assert record["usage"]["cost_usd"] is None and record["usage"]["seconds"] >= 0
    tokens = {t: run("show", t, "--json").json()["tokens"] for t in ("a", "b", "c")}
    assert tokens == {"a": 70, "b": 69, "c": 69}  # shared: a and b completed in it, c still claimed by it
    assert "tokens:        70" in run("show", "a").out
    shown = run("session", "show", "1").out
    assert "usage:      208 tokens (in 181, out 27), 3 turns" in shown
    status = run("status", "--json").json()["usage"]
    assert status == {"tokens": 208, "input_tokens": 181, "output_tokens": 27, "turns": 3, "cost_usd": None,
                      "sessions": 1}
    assert "tokens: 208 (in 181, out 27)" in run("status").out
    assert "usage tokens=208 input_tokens=181 output_tokens=27 turns=3 tasks=a,b,c" in run("log").out


def test_each_cli_reads_its_own_transcript_and_relaunches_add_up(repo: Path, tmp_path: Path) -> None:
    _plan("a")
    assert run("session", "start").rc == 0
    _hook("claude-session-start", repo, _claude_transcript(tmp_path / "c.jsonl", [(10, 1)]), source="startup")
    _hook("codex-stop", repo, _codex_rollout(tmp_path / "r.jsonl", 300, 30))
    record = run("session", "end", "--json").json()
    assert record["usage"]["tokens"] == 341 and record["usage"]["clis"] == ["claude", "codex"]
    assert run("show", "a", "--json").json()["tokens"] == 0  # no task worked on: the session keeps it


def test_a_transcript_noted_for_another_session_is_not_this_ones(repo: Path, tmp_path: Path) -> None:
    _plan("a")
    assert run("session", "start").rc == 0
    _hook("claude-stop", repo, _claude_transcript(tmp_path / "c.jsonl", [(10, 1)]))
    assert run("session", "end").rc == 0
    assert run("session", "start").rc == 0
    record = run("session", "end", "--json").json()
    assert "usage" not in record
    assert run("status", "--json").json()["usage"]["tokens"] == 11


def test_no_session_no_note(repo: Path, tmp_path: Path) -> None:
    _plan("a")
    _hook("claude-stop", repo, _claude_transcript(tmp_path / "c.jsonl", [(10, 1)]))
    assert not (repo / ".git" / "handoff" / usage.SOURCES_FILE).exists()


@pytest.mark.parametrize(("total", "count", "parts"), [(10, 3, [4, 3, 3]), (0, 2, [0, 0]), (5, 0, []), (7, 1, [7])])
def test_shares_add_up(total: int, count: int, parts: list[int]) -> None:
    assert usage.shares(total, count) == parts and sum(parts) == (total if count else 0)


def _repo(path: Path) -> Any:
    from git_handoff.infra.gitrepo import Repo

    return Repo.discover(str(path))


def test_a_printed_cost_adds_to_the_cost_the_transcripts_said() -> None:
    """A session that switched between OpenCode (its cost in its transcript) and Claude Code
    (its cost printed as it exits) costs both; nothing printed leaves the transcripts' own."""
    from git_handoff.agent_cli.usage import Usage

    live = Usage(100, 10, 2, 0.25)
    assert usage.with_cost(live, 0.5) == Usage(100, 10, 2, 0.75)
    assert usage.with_cost(Usage(100, 10, 2), 0.5) == Usage(100, 10, 2, 0.5)
    assert usage.with_cost(None, 0.5) == Usage(cost_usd=0.5)
    assert usage.with_cost(live, None) is live
