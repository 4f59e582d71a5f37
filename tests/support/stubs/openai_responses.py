"""A stub of the OpenAI Responses API (``POST /v1/responses``, streamed as SSE), the
wire Codex CLI speaks to a custom ``model_providers`` entry.

A ``Run`` turn becomes a ``function_call`` of whichever shell tool the request
offers (``exec_command`` with ``cmd``, or ``shell`` with an argv ``command``); a
``Call`` turn a ``function_call`` of the offered MCP tool of that name; a
``Say`` turn an assistant message. ``usage_tokens`` (a number, or a function of the
model turn's index) can be inflated so that Codex's own auto-compaction starts: that
is how the pre-compaction hook is reached.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

from tests.support.stubs import faults
from tests.support.stubs.loopback import (
    Call,
    Exchange,
    Recorded,
    Run,
    Say,
    StubBase,
    Turn,
    resolve_tool,
    sse,
)

MODEL = "stub-model"


def codex_config(port: int, *, compact_limit: int | None = None) -> str:
    """The ``$CODEX_HOME/config.toml`` that points Codex at this stub."""
    lines = [
        f'model = "{MODEL}"',
        'model_provider = "stub"',
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "",
        "[model_providers.stub]",
        'name = "stub"',
        f'base_url = "http://127.0.0.1:{port}/v1"',
        'wire_api = "responses"',
        'env_key = "STUB_API_KEY"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
    ]
    if compact_limit is not None:
        lines.insert(0, f"model_auto_compact_token_limit = {compact_limit}")
    return "\n".join(lines) + "\n"


def _content_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for part in content or []:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            out.append(part["text"])
    return out


def offered_tools(body: Any) -> dict[str, str | None]:
    """Every tool the request offers, flat name -> its namespace (None for a plain one).
    Codex offers an MCP server's tools as one ``namespace`` tool (``mcp__handoff``)
    holding a function per tool: flattened here to ``mcp__handoff__claim``."""
    offered: dict[str, str | None] = {}
    for t in (body.get("tools") if isinstance(body, dict) else None) or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            for inner in t.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    offered[f"{t.get('name')}__{inner['name']}"] = str(t.get("name"))
        elif t.get("name"):
            offered[str(t["name"])] = None
    return offered


def exchange_of(body: Any) -> Exchange:
    ex = Exchange(body=body, tools=list(offered_tools(body)))
    items = body.get("input") if isinstance(body, dict) else None
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") in ("user", "developer", "system"):
            ex.texts.extend(_content_texts(item.get("content")))
            ex.last_was_tool_output = False
        elif kind == "message":
            ex.last_was_tool_output = False
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            if isinstance(output, dict | list):
                output = json.dumps(output)
            ex.tool_outputs.append(str(output))
            ex.last_was_tool_output = True
    return ex


def is_compaction(body: Any) -> bool:
    """Codex's local compaction asks the model for a summary with no tools."""
    if not isinstance(body, dict):
        return False
    texts = exchange_of(body).texts
    return not body.get("tools") and bool(texts) and "summary" in texts[-1].lower()


class ResponsesStub(StubBase):
    def __init__(self, policy: Any, *, usage_tokens: int | Callable[[int], int] = 100,
                 lifetime: float = 300.0) -> None:
        super().__init__(policy, lifetime)
        self.usage_tokens = usage_tokens
        self._ids = itertools.count(1)
        self.compactions = 0

    fault_wire = staticmethod(faults.openai)

    def model_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST" and r.path.endswith("/responses")]

    def is_model_request(self, request: Recorded) -> bool:
        return request.method == "POST" and request.path.endswith("/responses")

    def respond(self, request: Recorded) -> tuple[int, str, Iterable[bytes]]:
        if request.method == "GET" and request.path.rstrip("/").endswith("/models"):
            return 200, "application/json", [json.dumps({"data": [], "models": []}).encode()]
        if request.method != "POST" or not request.path.endswith("/responses"):
            return 404, "application/json", [b'{"error": {"message": "not here"}}']
        body = request.body
        if is_compaction(body):
            self.compactions += 1
            return 200, "text/event-stream", self._stream([self._message("Summary: work in progress.")], 100)
        turn = self.next_turn(exchange_of(body))
        tokens = self.usage_tokens(self.model_turns - 1) if callable(self.usage_tokens) else self.usage_tokens
        return 200, "text/event-stream", self._stream([self._item(turn, body)], tokens)

    # -- wire format
    def _message(self, text: str) -> dict[str, Any]:
        return {"type": "message", "role": "assistant", "id": f"msg_{next(self._ids)}", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}

    def _item(self, turn: Turn, body: Any) -> dict[str, Any]:
        if isinstance(turn, Say):
            return self._message(turn.text)
        n = next(self._ids)
        tools = {t.get("name") for t in (body.get("tools") or []) if isinstance(t, dict)}
        if isinstance(turn, Call):
            return self._mcp_call(n, turn, body)
        assert isinstance(turn, Run)
        if "exec_command" in tools:
            # login=false: a login shell would reset PATH from /etc/profile (and lose the
            # virtualenv that has `git handoff`)
            name, args = "exec_command", {"cmd": turn.command, "login": False, "yield_time_ms": 30000}
        elif "shell_command" in tools:
            name, args = "shell_command", {"command": turn.command}
        else:
            name, args = "shell", {"command": ["bash", "-lc", turn.command]}
        return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": name,
                "arguments": json.dumps(args), "status": "completed"}

    @staticmethod
    def _mcp_call(n: int, turn: Call, body: Any) -> dict[str, Any]:
        """A call of a namespaced tool names the function and its namespace."""
        offered = offered_tools(body)
        flat = resolve_tool(offered, turn.tool)
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                                "arguments": json.dumps(turn.arguments), "status": "completed"}
        namespace = offered[flat]
        if namespace is None:
            item["name"] = flat
        else:
            item["name"], item["namespace"] = flat[len(namespace) + 2:], namespace
        return item

    def _stream(self, items: list[dict[str, Any]], tokens: int) -> list[bytes]:
        rid = f"resp_{next(self._ids)}"
        chunks = [sse("response.created", {"type": "response.created", "response": {"id": rid}})]
        for i, item in enumerate(items):
            chunks.append(sse("response.output_item.added",
                              {"type": "response.output_item.added", "output_index": i, "item": item}))
            chunks.append(sse("response.output_item.done",
                              {"type": "response.output_item.done", "output_index": i, "item": item}))
        self.served.append((tokens, 10))
        usage = {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": tokens + 10}
        chunks.append(sse("response.completed", {"type": "response.completed",
                                                 "response": {"id": rid, "usage": usage, "output": items}}))
        return chunks
