"""A stub of the OpenAI Chat Completions API (``POST /v1/chat/completions``, streamed as
SSE when the request asks for a stream, else one JSON answer): the wire that Qwen Code,
OpenCode (its ``@ai-sdk/openai-compatible`` providers) and Aider (through litellm) speak to
an OpenAI-compatible base URL.

A ``Run`` turn becomes a ``tool_calls`` entry of whichever shell tool the request offers
(``run_shell_command`` with ``command`` for Qwen Code, ``bash`` with ``command`` and a
``description`` for OpenCode); a ``Call`` turn a call of the offered MCP tool of that name;
a ``Say`` turn an assistant message. ``usage_tokens`` (a number, or a function of the model
turn's index) is the prompt size each answer reports: inflated, it makes a CLI compact its
history, which is how the pre-compaction hook is reached. A request with no tools and a
summary asked for is answered with a summary (a CLI's own compaction or title request).
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
SHELL_TOOLS = ("run_shell_command", "bash", "shell", "Bash")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content or [] if isinstance(part, dict) and isinstance(part.get("text"), str)]


def offered_tools(body: Any) -> list[str]:
    tools = body.get("tools") if isinstance(body, dict) else None
    names = []
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def exchange_of(body: Any) -> Exchange:
    ex = Exchange(body=body, tools=offered_tools(body))
    for message in (body.get("messages") if isinstance(body, dict) else None) or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in ("user", "system", "developer"):
            ex.texts.extend(_texts(message.get("content")))
            ex.last_was_tool_output = False
        elif role == "tool":
            ex.tool_outputs.append(" ".join(_texts(message.get("content"))))
            ex.last_was_tool_output = True
        else:
            ex.last_was_tool_output = False
    return ex


def is_side_request(body: Any) -> bool:
    """A request offering no tools: a CLI's compaction summary, a title, a next-speaker
    check. Never a model turn of the policy's."""
    return isinstance(body, dict) and not body.get("tools")


class ChatStub(StubBase):
    """``usage_tokens``: the prompt tokens each policy turn reports."""

    def __init__(self, policy: Any, *, usage_tokens: int | Callable[[int], int] = 100,
                 lifetime: float = 300.0) -> None:
        super().__init__(policy, lifetime)
        self.usage_tokens = usage_tokens
        self._ids = itertools.count(1)
        self.side_requests = 0
        self.tokens_served = 0  # prompt + completion tokens of every answer reported
        self.side_served: list[tuple[int, int]] = []  # (input, output) of each side answer

    fault_wire = staticmethod(faults.openai)

    def is_model_request(self, request: Recorded) -> bool:
        return (request.method == "POST" and request.path.endswith("/chat/completions")
                and not is_side_request(request.body))

    def model_requests(self) -> list[Recorded]:
        return [r for r in self.requests if self.is_model_request(r)]

    def respond(self, request: Recorded) -> tuple[int, str, Iterable[bytes]]:
        if request.method == "GET" and request.path.rstrip("/").endswith("/models"):
            models = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "stub"}]}
            return 200, "application/json", [json.dumps(models).encode()]
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return 404, "application/json", [b'{"error": {"message": "not here"}}']
        body = request.body if isinstance(request.body, dict) else {}
        if is_side_request(body):
            self.side_requests += 1
            message: dict[str, Any] = {"role": "assistant", "content": "Summary: work in progress."}
            tokens = 100
            self.side_served.append((tokens, 10))
        else:
            turn = self.next_turn(exchange_of(body))
            message = self._message(turn, body)
            tokens = self.usage_tokens(self.model_turns - 1) if callable(self.usage_tokens) else self.usage_tokens
            self.served.append((tokens, 10))
        self.tokens_served += tokens + 10
        usage = {"prompt_tokens": tokens, "completion_tokens": 10, "total_tokens": tokens + 10}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        cid = f"chatcmpl-{next(self._ids)}"
        if not body.get("stream"):
            answer = {"id": cid, "object": "chat.completion", "created": 0, "model": MODEL,
                      "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}
            return 200, "application/json", [json.dumps(answer).encode()]
        return 200, "text/event-stream", self._stream(cid, message, finish, usage)

    def _message(self, turn: Turn, body: Any) -> dict[str, Any]:
        if isinstance(turn, Say):
            return {"role": "assistant", "content": turn.text}
        offered = offered_tools(body)
        if isinstance(turn, Call):
            name, args = resolve_tool(offered, turn.tool), turn.arguments
        else:
            assert isinstance(turn, Run)
            shell = next((t for t in SHELL_TOOLS if t in offered), None)
            assert shell is not None, f"no shell tool among the offered tools {sorted(offered)}"
            name, args = shell, {"command": turn.command, "description": "Run the task's command"}
        call = {"id": f"call_{next(self._ids)}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    @staticmethod
    def _stream(cid: str, message: dict[str, Any], finish: str, usage: dict[str, int]) -> list[bytes]:
        head = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": MODEL}
        delta: dict[str, Any] = {"role": "assistant"}
        if message.get("content"):
            delta["content"] = message["content"]
        if message.get("tool_calls"):
            delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
        chunks = [sse(None, dict(head, choices=[{"index": 0, "delta": delta, "finish_reason": None}]))]
        chunks.append(sse(None, dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": finish}])))
        chunks.append(sse(None, dict(head, choices=[], usage=usage)))
        chunks.append(b"data: [DONE]\n\n")
        return chunks
