"""What an agent CLI reports about its own use, read from the transcript it writes.

Each CLI's module (claude.py, codex.py, gemini.py, qwen.py, copilot.py, opencode.py) answers
`usage(transcript)` with one of the readers below; the event core records which transcript a
session's agent writes (its hook payloads' `transcript_path`: ops/usage.py) and reads it when
the session ends, and the relay reads it while the session runs to hold the budgets (ops/budgets.py).

The forms, as the pinned versions write them (docs/agent-clis.md, "Budgets and cost"):

- Claude Code 2.1.332: JSON lines; each assistant message is one or more lines of
  `type: "assistant"` carrying `message.id` and the message's `usage` (the same on every
  line of one message): counted once per message id.
- Codex CLI 0.171.0: its rollout file; each `event_msg` of `payload.type: "token_count"`
  carries the conversation's running `info.total_token_usage`: the last one is the total.
- Gemini CLI 0.61.0: its chat file (JSON lines); each model message is a `type: "gemini"`
  line with an `id` and `tokens` (a message rewritten later repeats its id): the last line
  of each id counts.
- Qwen Code 0.24.4: its chat file (JSON lines, `~/.qwen/projects/<project>/chats/<session>.jsonl`);
  each model response is a `type: "assistant"` line with a `uuid` and `usageMetadata`
  (`promptTokenCount`, `candidatesTokenCount`: the API's prompt and completion tokens).
- Copilot CLI 1.0.102: its session's events (`~/.copilot/session-state/<session>/events.jsonl`,
  its hooks' `transcriptPath`); each model call is a `session.usage_record` event with an `id`
  and `data.usage` (`inputTokens`, `outputTokens`; its `cost` counts premium requests, not dollars).
- OpenCode 1.18.33 keeps its sessions in a database: our plugin (hooks-templates/opencode-plugin.js)
  writes each assistant message's `tokens` and `cost` (its `message.updated` events) to a JSON-lines
  file of its own, `.git/handoff/opencode/<session>.jsonl`; the last line of each id counts. Its
  `tokens.input` leaves out the cached tokens (`cache.read`, `cache.write`: added back) and its
  `tokens.output` the thinking (`reasoning`: added back); `cost` is in dollars, from the model's
  prices in its configuration (0 for a model with none).

Input tokens are every input token the model was sent (cached ones included: Claude Code
counts cache reads and writes apart, and they are added back); output tokens include the
model's thinking where the CLI counts it apart. Only OpenCode's transcript holds a cost;
Claude Code's `-p --output-format json` result does (`total_cost_usd`), which `result_cost`
reads from the agent's output. Plain functions, imported only when a session's use is read
(never by a hook's decision on its own). The transcripts only grow
while their agent runs: a process that reads one again (the relay, every second) reads
only what was appended since (`_fold`), a file rewritten or put in its place afresh.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

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


def _key(record: dict[str, Any], field: str, seen: dict[str, Any]) -> str:
    """The id under which a reader keeps one record (`field`: a record written again under its
    id replaces the earlier one), or the line's own place when it has none."""
    key = record.get(field)
    return key if isinstance(key, str) and key else f"line-{len(seen)}"


@dataclass
class _Read:
    """How far one transcript was read, and what its reader made of it so far."""

    ident: tuple[int, int]  # the file's device and inode (a file put in its place is read afresh)
    offset: int  # bytes read: whole lines only
    mark: bytes  # the MARK bytes before `offset` (a file rewritten in place is read afresh)
    state: Any


MARK = 64
MAX_READS = 256  # transcripts whose reading is kept at most (then forgotten, read afresh)
_READS: dict[tuple[str, str], _Read] = {}


def _records(data: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of JSON lines, a line that is not one skipped (a line of another shape)."""
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            yield record


def _fold(name: str, transcript: str, fresh: Callable[[], Any], step: Callable[[Any, dict[str, Any]], None]) -> Any:
    """`step` applied to a fresh state and each JSON object of a JSON-lines transcript, in
    order; None when there is no such file. The transcripts only grow while their agent
    runs, and the relay reads them every second: each call reads only what was appended
    since the last (whole lines; a last line not ended yet counts now and is read again)."""
    try:
        with Path(transcript).open("rb") as f:
            st = os.fstat(f.fileno())
            read = _READS.get((name, transcript))
            if read is not None and (read.ident != (st.st_dev, st.st_ino) or st.st_size < read.offset
                                     or not _marked(f, read)):
                read = None
            if read is None:
                read = _Read((st.st_dev, st.st_ino), 0, b"", fresh())
            f.seek(read.offset)
            data = f.read(max(0, MAX_TRANSCRIPT - read.offset))
    except OSError:
        return None
    end = data.rfind(b"\n") + 1
    for record in _records(data[:end]):
        step(read.state, record)
    read.offset += end
    read.mark = (read.mark + data[:end])[-MARK:]
    if len(_READS) >= MAX_READS:
        _READS.clear()
    _READS[(name, transcript)] = read
    if not data[end:].strip():
        return read.state
    state = copy.copy(read.state)
    for record in _records(data[end:]):
        step(state, record)
    return state


def _marked(f: BinaryIO, read: _Read) -> bool:
    if not read.mark:
        return True
    f.seek(read.offset - len(read.mark))
    return f.read(len(read.mark)) == read.mark


def _claude_step(seen: dict[str, tuple[int, int]], record: dict[str, Any]) -> None:
    message = record.get("message")
    if record.get("type") != "assistant" or not isinstance(message, dict):
        return
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return
    key = _key(message, "id", seen)
    seen[key] = (_count(usage.get("input_tokens")) + _count(usage.get("cache_creation_input_tokens"))
                 + _count(usage.get("cache_read_input_tokens")), _count(usage.get("output_tokens")))


def _summed(seen: dict[str, tuple[int, int]] | None) -> Usage | None:
    if not seen:
        return None
    return Usage(sum(i for i, _ in seen.values()), sum(o for _, o in seen.values()), len(seen))


def claude_transcript(transcript: str) -> Usage | None:
    """Claude Code's session transcript: `usage` per assistant message, once per message id."""
    return _summed(_fold("claude", transcript, dict, _claude_step))


def _codex_step(last: list[Any], record: dict[str, Any]) -> None:
    """`last`: [the last running total, the turns]."""
    payload = record.get("payload")
    if record.get("type") != "event_msg" or not isinstance(payload, dict) or payload.get("type") != "token_count":
        return
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if isinstance(total, dict) and total != last[0]:
        last[0] = total
        last[1] += 1


def codex_rollout(transcript: str) -> Usage | None:
    """Codex's rollout file: the last `token_count` event's running total; a turn per new total."""
    found = _fold("codex", transcript, lambda: [None, 0], _codex_step)
    if found is None or found[0] is None:
        return None
    return Usage(_count(found[0].get("input_tokens")), _count(found[0].get("output_tokens")), found[1])


def _gemini_step(seen: dict[str, tuple[int, int]], record: dict[str, Any]) -> None:
    tokens = record.get("tokens")
    if record.get("type") != "gemini" or not isinstance(tokens, dict):
        return
    key = _key(record, "id", seen)
    seen[key] = (_count(tokens.get("input")), _count(tokens.get("output")) + _count(tokens.get("thoughts")))


def gemini_chat(transcript: str) -> Usage | None:
    """Gemini CLI's chat file: `tokens` of each model message, the last line of each id."""
    return _summed(_fold("gemini", transcript, dict, _gemini_step))


def _qwen_step(seen: dict[str, tuple[int, int]], record: dict[str, Any]) -> None:
    meta = record.get("usageMetadata")
    if record.get("type") != "assistant" or not isinstance(meta, dict):
        return
    key = _key(record, "uuid", seen)
    # candidatesTokenCount is the API's completion_tokens, thinking included (thoughtsTokenCount: a part of it)
    seen[key] = (_count(meta.get("promptTokenCount")), _count(meta.get("candidatesTokenCount")))


def qwen_chat(transcript: str) -> Usage | None:
    """Qwen Code's chat file: `usageMetadata` of each assistant message, once per `uuid`."""
    return _summed(_fold("qwen", transcript, dict, _qwen_step))


def _copilot_step(seen: dict[str, tuple[int, int]], record: dict[str, Any]) -> None:
    data = record.get("data")
    used = data.get("usage") if isinstance(data, dict) else None
    if record.get("type") != "session.usage_record" or not isinstance(used, dict):
        return
    key = _key(record, "id", seen)
    seen[key] = (_count(used.get("inputTokens")), _count(used.get("outputTokens")))


def copilot_events(transcript: str) -> Usage | None:
    """Copilot CLI's session events: `data.usage` of each `session.usage_record` (one per model
    call), once per event `id`."""
    return _summed(_fold("copilot", transcript, dict, _copilot_step))


def _opencode_step(seen: dict[str, tuple[int, int, float | None]], record: dict[str, Any]) -> None:
    tokens = record.get("tokens")
    if record.get("type") != "assistant" or not isinstance(tokens, dict):
        return
    key = _key(record, "id", seen)
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    cost = record.get("cost")
    seen[key] = (_count(tokens.get("input")) + _count(cache.get("read")) + _count(cache.get("write")),
                 _count(tokens.get("output")) + _count(tokens.get("reasoning")),
                 float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) and 0 <= cost < 1e9
                 else None)


def opencode_messages(transcript: str) -> Usage | None:
    """The transcript our OpenCode plugin writes: `tokens` (and `cost`) of each assistant
    message, the last line of each id."""
    seen = _fold("opencode", transcript, dict, _opencode_step)
    if not seen:
        return None
    costs = [c for _, _, c in seen.values() if c is not None]
    return Usage(sum(i for i, _, _ in seen.values()), sum(o for _, o, _ in seen.values()), len(seen),
                 sum(costs) if costs else None)


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
