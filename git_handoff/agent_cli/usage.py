"""What an agent CLI reports about its own use, read from the transcript it writes.

Each CLI's module (claude.py, codex.py, gemini.py) answers `usage(transcript)` with one of
the readers below; the event core records which transcript a session's agent writes (its
hook payloads' `transcript_path`: ops/usage.py) and reads it when the session ends, and
the relay reads it while the session runs to hold the budgets (ops/budgets.py).

The forms, as the pinned versions write them (docs/agent-clis.md, "Budgets and cost"):

- Claude Code 2.1.332: JSON lines; each assistant message is one or more lines of
  `type: "assistant"` carrying `message.id` and the message's `usage` (the same on every
  line of one message): counted once per message id.
- Codex CLI 0.171.0: its rollout file; each `event_msg` of `payload.type: "token_count"`
  carries the conversation's running `info.total_token_usage`: the last one is the total.
- Gemini CLI 0.61.0: its chat file (JSON lines); each model message is a `type: "gemini"`
  line with an `id` and `tokens` (a message rewritten later repeats its id): the last line
  of each id counts.

Input tokens are every input token the model was sent (cached ones included: Claude Code
counts cache reads and writes apart, and they are added back); output tokens include the
model's thinking where the CLI counts it apart. None of the three writes a cost into its
transcript; Claude Code's `-p --output-format json` result does (`total_cost_usd`), which
`result_cost` reads from the agent's output. Plain functions, imported only when a
session's use is read (never by a hook's decision on its own).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_TRANSCRIPT = 256 << 20  # bytes of a transcript read at most (a longer one is read to here)


@dataclass(frozen=True)
class Usage:
    """Tokens in and out, model turns (one per model response), cost in US dollars where the
    CLI printed one."""

    input_tokens: int = 0
    output_tokens: int = 0
    turns: int = 0
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None and other.cost_usd is None else \
            (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.turns + other.turns, cost)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _lines(transcript: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, a line that is not one skipped (a line being
    written while we read, a line of another shape)."""
    try:
        with Path(transcript).open("rb") as f:
            data = f.read(MAX_TRANSCRIPT)
    except OSError:
        return
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            yield record


def claude_transcript(transcript: str) -> Usage | None:
    """Claude Code's session transcript: `usage` per assistant message, once per message id."""
    seen: dict[str, tuple[int, int]] = {}
    for record in _lines(transcript):
        message = record.get("message")
        if record.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        key = message.get("id")
        key = key if isinstance(key, str) and key else f"line-{len(seen)}"
        seen[key] = (_count(usage.get("input_tokens")) + _count(usage.get("cache_creation_input_tokens"))
                     + _count(usage.get("cache_read_input_tokens")), _count(usage.get("output_tokens")))
    if not seen:
        return None
    return Usage(sum(i for i, _ in seen.values()), sum(o for _, o in seen.values()), len(seen))


def codex_rollout(transcript: str) -> Usage | None:
    """Codex's rollout file: the last `token_count` event's running total; a turn per new total."""
    last: dict[str, Any] | None = None
    turns = 0
    for record in _lines(transcript):
        payload = record.get("payload")
        if record.get("type") != "event_msg" or not isinstance(payload, dict) or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict) and total != last:
            last = total
            turns += 1
    if last is None:
        return None
    return Usage(_count(last.get("input_tokens")), _count(last.get("output_tokens")), turns)


def gemini_chat(transcript: str) -> Usage | None:
    """Gemini CLI's chat file: `tokens` of each model message, the last line of each id."""
    seen: dict[str, tuple[int, int]] = {}
    for record in _lines(transcript):
        tokens = record.get("tokens")
        if record.get("type") != "gemini" or not isinstance(tokens, dict):
            continue
        key = record.get("id")
        key = key if isinstance(key, str) and key else f"line-{len(seen)}"
        seen[key] = (_count(tokens.get("input")), _count(tokens.get("output")) + _count(tokens.get("thoughts")))
    if not seen:
        return None
    return Usage(sum(i for i, _ in seen.values()), sum(o for _, o in seen.values()), len(seen))


def result_cost(output: str) -> float | None:
    """The sum of the `total_cost_usd` of the `{"type": "result", ...}` lines in an agent's
    output (Claude Code's `-p --output-format json` or `stream-json`: one per launch), else None."""
    total: float | None = None
    for line in output.splitlines():
        line = line.strip()
        if not (line.startswith("{") and '"total_cost_usd"' in line):
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        cost = record.get("total_cost_usd") if isinstance(record, dict) and record.get("type") == "result" else None
        if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e9:
            total = (total or 0.0) + float(cost)
    return total
