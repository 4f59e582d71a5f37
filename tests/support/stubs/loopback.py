"""What every model-API stub shares: an HTTP server on 127.0.0.1 with a bounded
lifetime that records every request, and the scripted policy vocabulary.

A policy is a plain function from the request the agent CLI sent to the model's
next turn: ``Say(text)`` (a final answer, which ends the agent's turn) or
``Run(command)`` (a call of the CLI's own shell tool). Each stub translates a turn
into its API's wire format, so one policy can drive Codex and Gemini CLI alike.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from tests.support.stubs import faults as faults_mod

LIFETIME = 300.0  # seconds; a stub nobody stopped shuts itself down after this


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Run:
    command: str


@dataclass(frozen=True)
class Call:
    """A call of one of the handoff MCP server's tools, by the tool's own name ("claim").
    Each agent CLI names MCP tools its own way; the stub picks the offered tool that is
    this one (``resolve_tool``)."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


Turn = Say | Run | Call


def resolve_tool(offered: Iterable[str], tool: str, server: str = "handoff") -> str:
    """The name under which an agent CLI offers `server`'s MCP tool `tool` to the model
    (``mcp__handoff__claim``, ``mcp_handoff_claim``, ``handoff__claim``, or plain
    ``claim``); an AssertionError naming what was offered when it offers none."""
    names = list(offered)
    for name in names:
        if server in name and (name.endswith(f"__{tool}") or name.endswith(f"_{tool}")):
            return name
    if tool in names:
        return tool
    raise AssertionError(f"no MCP tool {tool!r} of server {server!r} among the offered tools {sorted(names)}")


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Exchange:
    """One model request as a policy sees it: every text in it, in order, and the
    outputs of the tool calls it carries back."""

    body: Any
    texts: list[str] = field(default_factory=list)
    tool_outputs: list[str] = field(default_factory=list)
    index: int = 0  # 0 for the first model request the stub answered
    last_was_tool_output: bool = False
    tools: list[str] = field(default_factory=list)  # the tools offered, namespaced ones as ns__name

    def offers(self, tool: str, server: str = "handoff") -> bool:
        """Whether the MCP server's tool is offered (an agent CLI may send its first
        requests before its MCP servers have connected)."""
        try:
            resolve_tool(self.tools, tool, server)
        except AssertionError:
            return False
        return True

    def all_text(self) -> str:
        return "\n".join(self.texts)

    def last_text(self) -> str:
        return self.texts[-1] if self.texts else ""

    def latest(self) -> str:
        """What came in since the model last spoke: the last text, or the last tool output."""
        return self.tool_outputs[-1] if self.last_was_tool_output else self.last_text()


Policy = Callable[[Exchange], Turn]

NEXT_TASK = re.compile(r"Next task: \[([A-Za-z0-9._-]+)\]")
IN_PROGRESS = re.compile(r"task \[([A-Za-z0-9._-]+)\] .* is in progress")
NEXT_ELIGIBLE = re.compile(r"Next eligible task: \[([A-Za-z0-9._-]+)\]")


def do_task(task_id: str) -> str:
    """The shell command a dutiful agent runs for one task: claim it, write the file its
    check reads, commit, and complete it."""
    return (f"git handoff claim {task_id} >/dev/null && echo done-{task_id} > {task_id}.txt && "
            f"git add {task_id}.txt && git commit -q -m 'task {task_id}' && git handoff done {task_id}")


def lazy_agent(first_task_from_prompt: bool = True) -> Policy:
    """An agent that does exactly one task per turn and then declares itself finished.

    Only the stop hook keeps it going: it reads the task named in the hook's reason
    (or, on its first turn, in the injected session prompt), does it, and stops again.
    """

    def policy(ex: Exchange) -> Turn:
        if ex.last_was_tool_output:
            return Say("Task finished. I am done for now.")
        latest = ex.last_text()
        found = NEXT_TASK.search(latest) or IN_PROGRESS.search(latest)
        if found is None and first_task_from_prompt:
            found = NEXT_ELIGIBLE.search(ex.all_text())
            if found is not None and any(NEXT_TASK.search(t) for t in ex.texts):
                found = None  # the prompt's task was done already; wait for the hook
        if found is None:
            return Say("Nothing to do.")
        return Run(do_task(found.group(1)))

    return policy


def say(text: str) -> Policy:
    return lambda ex: Say(text)


class _Handler(BaseHTTPRequestHandler):
    server: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding") == "zstd":
            return {"_undecodable": "zstd"}
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _serve(self, method: str) -> None:
        body = self._read_body() if method == "POST" else None
        record = Recorded(method, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        with self.server.lock:
            self.server.requests.append(record)
        fault = self.server.stub.fault_answer(record)
        if fault is not None:
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/json")
            for name, value in fault.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(fault.body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(fault.body)
            self.close_connection = True
            return
        status, content_type, chunks = self.server.stub.respond(record)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self._serve("POST")

    def do_GET(self) -> None:  # noqa: N802
        self._serve("GET")


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, stub: StubBase) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stub = stub
        self.lock = threading.Lock()
        self.requests: list[Recorded] = []


class StubBase:
    """Subclasses implement ``respond``; use as a context manager (or start/stop).

    ``faults`` (a ``faults.Faults`` script) turns the model requests it picks into the
    API's error answers; subclasses say which requests are model requests
    (``is_model_request``) and how their API answers a fault (``fault_wire``)."""

    fault_wire: Callable[[faults_mod.Fault, float], faults_mod.Answer] | None = None

    def __init__(self, policy: Policy, lifetime: float = LIFETIME) -> None:
        self.policy = policy
        self.lifetime = lifetime
        self._server: LoopbackServer | None = None
        self._timer: threading.Timer | None = None
        self.model_turns = 0
        self.served: list[tuple[int, int]] = []  # (input, output) tokens each model answer reported
        self.faults = faults_mod.Faults()

    # -- lifecycle
    def start(self) -> Self:
        self._server = LoopbackServer(self)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._timer = threading.Timer(self.lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "stub not started"
        return int(self._server.server_address[1])

    @property
    def requests(self) -> list[Recorded]:
        assert self._server is not None
        with self._server.lock:
            return list(self._server.requests)

    def model_requests(self) -> list[Recorded]:
        raise NotImplementedError

    def respond(self, request: Recorded) -> tuple[int, str, Iterable[bytes]]:
        raise NotImplementedError

    def is_model_request(self, request: Recorded) -> bool:
        return False

    def fault_answer(self, request: Recorded) -> faults_mod.Answer | None:
        """The scripted fault's answer to this request, when it is a model request and
        the script has one for it."""
        wire = type(self).fault_wire
        if wire is None or not self.is_model_request(request):
            return None
        taken = self.faults.take()
        return None if taken is None else wire(*taken)

    def next_turn(self, exchange: Exchange) -> Turn:
        exchange.index = self.model_turns
        self.model_turns += 1
        return self.policy(exchange)


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data) + "\n\n").encode()
