"""Each agent CLI's transcript read for its use, in the forms the pinned versions write
(agent_cli/usage.py; the lines below are shaped as Claude Code 2.1.332, Codex 0.171.0 and
Gemini CLI 0.61.0 wrote them against the loopback stubs; tests/e2e/test_budgets.py reads
the real ones)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from git_handoff.agent_cli import registry
from git_handoff.agent_cli.usage import Usage, result_cost


def _write(path: Path, records: list[Any]) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


def _claude(mid: str, inp: int, out: int, cache_read: int = 0) -> dict[str, Any]:
    return {"type": "assistant", "requestId": None, "message": {"id": mid, "role": "assistant", "usage": {
        "input_tokens": inp, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cache_read,
        "output_tokens": out, "service_tier": "standard"}}}


def test_claude_counts_each_message_once_whatever_its_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [
        {"type": "user", "message": {"role": "user", "content": "go"}},
        _claude("msg_1", 50, 10), _claude("msg_1", 50, 10),  # one message of two content blocks: two lines
        "{not json", _claude("msg_2", 41, 6, cache_read=100),
        {"type": "assistant", "message": {"id": "msg_3"}},  # no usage
    ])
    assert registry.get("claude").usage(path) == Usage(input_tokens=50 + 141, output_tokens=16, turns=2)


def test_codex_takes_the_last_running_total(tmp_path: Path) -> None:
    def count(inp: int, out: int) -> dict[str, Any]:
        total = {"input_tokens": inp, "cached_input_tokens": 0, "output_tokens": out, "reasoning_output_tokens": 0,
                 "total_tokens": inp + out}
        return {"type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": total, "last_token_usage": total}, "rate_limits": {}}}

    path = _write(tmp_path / "rollout.jsonl", [
        {"type": "session_meta", "payload": {"id": "x"}},
        {"type": "event_msg", "payload": {"type": "token_count", "info": None}},  # before the first answer
        count(100, 10), count(100, 10), count(200, 20), count(321, 33),
    ])
    assert registry.get("codex").usage(path) == Usage(input_tokens=321, output_tokens=33, turns=3)


def test_gemini_counts_the_last_line_of_each_message(tmp_path: Path) -> None:
    def message(mid: str, inp: int, out: int, thoughts: int = 0) -> dict[str, Any]:
        return {"id": mid, "type": "gemini", "content": "", "model": "gemini-2.5-flash",
                "tokens": {"input": inp, "output": out, "cached": 0, "thoughts": thoughts, "tool": 0,
                           "total": inp + out + thoughts}}

    path = _write(tmp_path / "session.jsonl", [
        {"sessionId": "s", "kind": "main"}, {"$set": {"lastUpdated": "x"}},
        {"id": "u1", "type": "user", "content": "go"},
        message("a", 100, 10), message("a", 100, 12),  # rewritten with its tool calls
        message("b", 120, 10, thoughts=5),
    ])
    assert registry.get("gemini").usage(path) == Usage(input_tokens=220, output_tokens=27, turns=2)


def test_qwen_counts_each_assistant_message_once(tmp_path: Path) -> None:
    """Qwen Code 0.24.4's chat file, as it wrote it against the chat-completions stub: the
    telemetry lines repeat the counts and are not counted again."""
    def message(uid: str, inp: int, out: int, thoughts: int = 0) -> dict[str, Any]:
        return {"uuid": uid, "sessionId": "s", "type": "assistant", "model": "stub-model",
                "message": {"role": "model", "parts": [{"text": "done"}]},
                "usageMetadata": {"promptTokenCount": inp, "candidatesTokenCount": out,
                                  "thoughtsTokenCount": thoughts, "totalTokenCount": inp + out,
                                  "cachedContentTokenCount": 0}}

    telemetry = {"uuid": "t", "type": "system", "subtype": "ui_telemetry",
                 "systemPayload": {"uiEvent": {"event.name": "qwen-code.api_response", "input_token_count": 100,
                                               "output_token_count": 10}}}
    path = _write(tmp_path / "chat.jsonl", [
        {"uuid": "u", "type": "user", "message": {"role": "user", "parts": [{"text": "go"}]}},
        telemetry, message("a", 100, 10), message("a", 100, 10),
        message("b", 107, 12, thoughts=4),  # thinking is a part of the completion's count
        {"uuid": "c", "type": "assistant", "message": {}},  # no usageMetadata: not a model answer's count
    ])
    assert registry.get("qwen").usage(path) == Usage(input_tokens=207, output_tokens=22, turns=2)


def test_copilot_counts_each_usage_record_once(tmp_path: Path) -> None:
    """Copilot CLI 1.0.102's events.jsonl: a `session.usage_record` per model call; the
    shutdown's totals and its premium-request `cost` are not read."""
    def record(eid: str, inp: int, out: int) -> dict[str, Any]:
        return {"type": "session.usage_record", "id": eid, "data": {"usage": {
            "model": "stub-model", "inputTokens": inp, "outputTokens": out, "cacheReadTokens": 0, "cost": 1.0}}}

    path = _write(tmp_path / "events.jsonl", [
        {"type": "session.start", "data": {"sessionId": "s"}},
        record("a", 100, 10), {"type": "assistant.message", "data": {"content": ""}},
        record("b", 107, 10), record("b", 107, 10),
        {"type": "session.shutdown", "data": {"modelMetrics": {"m": {"usage": {"inputTokens": 207}}}}},
    ])
    assert registry.get("copilot").usage(path) == Usage(input_tokens=207, output_tokens=20, turns=2)


def test_opencode_counts_the_last_line_of_each_message_cached_and_thinking_tokens_added(tmp_path: Path) -> None:
    """The transcript our OpenCode plugin writes (its assistant messages' `tokens` and `cost`,
    as OpenCode 1.18.33 updates them): the last line of each id; the cost in dollars summed."""
    def message(mid: str, inp: int, out: int, cost: float, reasoning: int = 0, read: int = 0,
                write: int = 0) -> dict[str, Any]:
        tokens = {"input": inp, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": write}}
        return {"type": "assistant", "id": mid, "session": "ses_1", "cost": cost, "tokens": tokens}

    path = _write(tmp_path / "ses_1.jsonl", [
        message("a", 100, 10, 0.00045), message("a", 100, 10, 0.00045),
        message("b", 7, 10, 0.001, reasoning=5, read=100, write=3),
    ])
    used = registry.get("opencode").usage(path)
    assert used is not None and (used.input_tokens, used.output_tokens, used.turns) == (210, 25, 2)
    assert used.cost_usd == pytest.approx(0.00145)


@pytest.mark.parametrize("name", sorted(registry.CLIS))
def test_a_missing_or_empty_transcript_tells_nothing(tmp_path: Path, name: str) -> None:
    assert registry.get(name).usage(str(tmp_path / "none.jsonl")) is None
    assert registry.get(name).usage(_write(tmp_path / "empty.jsonl", ["", "[1, 2]", '"text"'])) is None


@pytest.mark.parametrize("bad", [-5, True, "7", None, 1.5])
def test_a_count_that_is_no_count_is_zero(tmp_path: Path, bad: Any) -> None:
    record = _claude("m", 0, 0)
    record["message"]["usage"]["input_tokens"] = bad
    record["message"]["usage"]["output_tokens"] = 3
    assert registry.get("claude").usage(_write(tmp_path / "s.jsonl", [record])) == Usage(0, 3, 1)


def test_usages_add_and_the_cost_stays_unknown_until_one_is_known() -> None:
    assert Usage(1, 2, 1) + Usage(3, 4, 2) == Usage(4, 6, 3, None)
    assert (Usage(1, 2, 1) + Usage(0, 0, 0, 0.5)).cost_usd == 0.5
    assert Usage(10, 5).tokens == 15


def test_the_cost_claude_codes_json_result_prints() -> None:
    result = {"type": "result", "subtype": "success", "total_cost_usd": 0.0012, "num_turns": 3}
    assert result_cost("some output\n" + json.dumps(result) + "\n") == 0.0012
    assert result_cost(json.dumps(result) + "\nlimit\n" + json.dumps({**result, "total_cost_usd": 0.5})) == 0.5012
    assert result_cost(json.dumps({**result, "type": "assistant"})) is None
    assert result_cost(json.dumps({**result, "total_cost_usd": -1})) is None
    assert result_cost('{"total_cost_usd": broken') is None
    assert result_cost("") is None


def _fresh(name: str, path: str) -> Usage | None:
    """What a first reading of the file gives (nothing remembered of an earlier one)."""
    from git_handoff.agent_cli import usage as reader

    reader._READS.clear()
    return registry.get(name).usage(path)


def test_a_growing_transcript_is_read_from_where_the_last_reading_stopped(tmp_path: Path) -> None:
    """The relay reads a running session's transcripts every second: each reading takes only
    what was appended, and says what a reading of the whole file says, a line being written
    (no newline yet) included now and read again once ended."""
    path = tmp_path / "s.jsonl"
    lines = [json.dumps(r) + "\n" for r in
             [_claude("msg_1", 50, 10), _claude("msg_1", 50, 10), _claude("msg_2", 41, 6), _claude("msg_3", 7, 1)]]
    text = "".join(lines)
    claude = registry.get("claude")
    path.write_text("")
    assert claude.usage(str(path)) is None
    for cut in [len(lines[0]) - 9, len(lines[0]), len(lines[0]) + len(lines[1]) + 3, len(text) - 1, len(text)]:
        with path.open("a") as f:
            f.write(text[path.stat().st_size:cut])
        assert claude.usage(str(path)) == _fresh("claude", str(path)), cut
        claude.usage(str(path))  # remembered again
    assert claude.usage(str(path)) == Usage(input_tokens=98, output_tokens=17, turns=3)


def test_a_transcript_rewritten_or_replaced_is_read_afresh(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    claude = registry.get("claude")
    _write(path, [_claude("a", 10, 1), _claude("b", 10, 1)])
    assert claude.usage(str(path)) == Usage(20, 2, 2)
    _write(path, [_claude("c", 30, 3), _claude("d", 30, 3), _claude("e", 30, 3)])  # in place, longer
    assert claude.usage(str(path)) == Usage(90, 9, 3)
    other = tmp_path / "other.jsonl"
    _write(other, [_claude("c", 30, 3), _claude("d", 30, 3), _claude("e", 30, 3), _claude("f", 1, 1)])
    other.replace(path)  # a new file in its place
    assert claude.usage(str(path)) == Usage(91, 10, 4)
    _write(path, [_claude("g", 5, 5)])  # shorter
    assert claude.usage(str(path)) == Usage(5, 5, 1)
