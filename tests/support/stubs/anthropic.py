"""A loopback stand-in for the Anthropic Messages API that plays a scripted agent.

Only the model is a stub: the real agent CLI (Claude Code) runs against it, executes
the tool calls it answers with and runs its hooks for real. The server binds
127.0.0.1 on a free port, serves `POST /v1/messages` (streamed as SSE when the request
says `"stream": true`, plain JSON otherwise), records every request for assertions and
shuts itself down after `lifetime` seconds whatever happens to the test.

A policy decides each answer. It gets a `Request` (the parsed body, with helpers to
read the conversation) and returns a `Reply`: text, and/or `tool_use` blocks with any
tool name (`Bash` for shell commands, an MCP tool's name, `Task` for a subagent).

    def policy(req: Request) -> Reply:
        if req.hook_feedback():          # "Stop hook feedback: ..." in the last user turn
            return bash("git handoff next")
        return say("All done.")

Ready-made policies below: `RunEach` (each turn, the next shell command of a list),
`Lazy` (stops at once; obeys a Stop hook's "Next task: [ID]" by claiming, doing and
completing that task) and `Idle` (only ever stops).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.stubs import faults as faults_mod

MODEL = "claude-stub-1"
NEXT_TASK = re.compile(r"Next task: \[([A-Za-z0-9._-]+)\]")
_ids = itertools.count(1)


# -- what a policy reads -------------------------------------------------------------------


@dataclass
class Request:
    path: str
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        value = self.body.get("messages")
        return value if isinstance(value, list) else []

    def system_text(self) -> str:
        system = self.body.get("system")
        if isinstance(system, str):
            return system
        if isinstance(system, list):
            return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
        return ""

    @staticmethod
    def _text_of(content: Any) -> str:
        if isinstance(content, str):
            return content
        parts: list[str] = []
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "tool_result":
                    parts.append(Request._text_of(block.get("content")))
        return "\n".join(parts)

    def all_text(self) -> str:
        """Every word of the request: system prompt and every message."""
        return self.system_text() + "\n" + "\n".join(self._text_of(m.get("content")) for m in self.messages)

    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return self._text_of(message.get("content"))
        return ""

    def hook_feedback(self) -> str | None:
        """The Stop hook's reason when the last user turn carries one."""
        text = self.last_user_text()
        return text if "Stop hook feedback" in text else None

    def last_is_tool_result(self) -> bool:
        if not self.messages or self.messages[-1].get("role") != "user":
            return False
        content = self.messages[-1].get("content")
        return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                 for b in content)

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools")
        return [str(t.get("name")) for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    def is_summary(self) -> bool:
        """A compaction's summarising call (the CLI asks for text only, no tools)."""
        text = self.last_user_text()
        return "Respond with TEXT ONLY" in text or "detailed summary of the conversation" in text

    def first_user_text(self) -> str:
        for message in self.messages:
            if message.get("role") == "user":
                return self._text_of(message.get("content"))
        return ""


# -- what a policy answers -----------------------------------------------------------------


@dataclass
class Reply:
    blocks: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 50  # report near the context window to make the CLI compact
    output_tokens: int = 10  # the `usage` the answer reports (the stub's `served` counts both)

    def __add__(self, other: Reply) -> Reply:
        return Reply(self.blocks + other.blocks, max(self.input_tokens, other.input_tokens),
                     max(self.output_tokens, other.output_tokens))

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(b["type"] == "tool_use" for b in self.blocks) else "end_turn"


def say(text: str) -> Reply:
    return Reply([{"type": "text", "text": text}])


def summary(text: str) -> Reply:
    """A compaction summary: the CLI wants it inside <summary> tags."""
    return say(f"<analysis>Scripted.</analysis>\n<summary>{text}</summary>")


def tool(name: str, arguments: dict[str, Any]) -> Reply:
    return Reply([{"type": "tool_use", "id": f"toolu_stub{next(_ids):06d}", "name": name, "input": arguments}])


def bash(command: str) -> Reply:
    return tool("Bash", {"command": command, "description": "scripted step"})


Policy = Callable[[Request], Reply]


class RunEach:
    """Each main turn runs the next shell command of `commands`; then it says `final`."""

    def __init__(self, commands: list[str], final: str = "Done.") -> None:
        self.commands = list(commands)
        self.final = final
        self.lock = threading.Lock()

    def __call__(self, req: Request) -> Reply:
        if req.is_summary():
            return summary("Shell commands were run.")
        with self.lock:
            if self.commands:
                return bash(self.commands.pop(0))
        return say(self.final)


class Lazy:
    """Stops as soon as it can. Told by a Stop hook that a task is next, it claims it,
    runs `work` (with `{id}` replaced), completes it, then tries to stop again."""

    def __init__(self, work: str = "echo work on {id} >> work.log") -> None:
        self.work = work
        self.followed: list[str] = []

    def __call__(self, req: Request) -> Reply:
        if req.is_summary():
            return summary("The agent works through the git handoff tasks.")
        feedback = req.hook_feedback()
        if feedback:
            found = NEXT_TASK.search(feedback)
            if found:
                task = found.group(1)
                self.followed.append(task)
                step = self.work.replace("{id}", task)
                return bash(f"git handoff claim {task} && {step} && git handoff done {task}")
        return say("I am done for now.")


class Idle:
    """Never works: every turn just stops (optionally after one shell command)."""

    def __init__(self, command: str | None = None) -> None:
        self.command = command

    def __call__(self, req: Request) -> Reply:
        if req.is_summary():
            return summary("Nothing was done.")
        if self.command and not req.last_is_tool_result():
            return bash(self.command)
        return say("Nothing more from me.")


# -- the server ----------------------------------------------------------------------------


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _stream(reply: Reply) -> bytes:
    mid = f"msg_stub{next(_ids):06d}"
    out = [_sse("message_start", {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1}}})]
    for index, block in enumerate(reply.blocks):
        start: dict[str, Any]  # a content block: its keys depend on its type
        delta: dict[str, str]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(_sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(_sse("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                                      "usage": {"output_tokens": reply.output_tokens}}))
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def _whole(reply: Reply) -> bytes:
    return json.dumps({
        "id": f"msg_stub{next(_ids):06d}", "type": "message", "role": "assistant", "model": MODEL,
        "content": reply.blocks, "stop_reason": reply.stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    }).encode()


class StubServer:
    """`with StubServer(policy) as stub:` ... `stub.url`, `stub.requests`, `stub.policy = ...`,
    `stub.faults.fail(Fault("rate_limit", reset_in=75), times=3)` (tests/support/stubs/faults.py)."""

    def __init__(self, policy: Policy, *, lifetime: float = 300.0) -> None:
        self.policy = policy
        self.lifetime = lifetime
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self.served: list[tuple[int, int]] = []  # (input, output) tokens each model answer reported
        self.faults = faults_mod.Faults()  # scripted 429/529/5xx answers: see faults.py
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._send(404, b'{"type":"error","error":{"type":"not_found_error","message":"stub"}}',
                           "application/json")

            def do_HEAD(self) -> None:  # noqa: N802
                self._send(200, b"", "text/plain")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?", 1)[0]
                if not path.endswith("/v1/messages"):
                    # count_tokens and anything else: a harmless answer
                    self._send(200, b'{"input_tokens": 50}', "application/json")
                    return
                req = Request(self.path, body if isinstance(body, dict) else {})
                with stub._lock:
                    stub.requests.append(req)
                taken = stub.faults.take()
                if taken is not None:
                    answer = faults_mod.anthropic(*taken)
                    self._send(answer.status, answer.body, "application/json", answer.headers)
                    return
                try:
                    reply = stub.policy(req)
                except Exception as exc:  # noqa: BLE001 - a policy bug must show in the test, not hang the CLI
                    stub.errors.append(f"{type(exc).__name__}: {exc}")
                    reply = say(f"stub policy error: {exc}")
                with stub._lock:
                    stub.served.append((reply.input_tokens, reply.output_tokens))
                if req.body.get("stream"):
                    self._send(200, _stream(reply), "text/event-stream")
                else:
                    self._send(200, _whole(reply), "application/json")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True
        self._stopped = False

    def start(self) -> StubServer:
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def main_requests(self) -> list[Request]:
        """The agent loop's requests (tools offered), not side calls such as summaries."""
        return [r for r in self.requests if r.tool_names]
