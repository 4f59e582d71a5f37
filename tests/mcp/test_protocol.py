"""The MCP wire of mcp/protocol.py on its own, where the SDK's client never goes: the
era a connection keeps, requests before the handshake, lines that are no messages,
cancellations of calls waiting their turn. (tests/mcp/test_server.py drives the same
server with the SDK's client.)"""

from __future__ import annotations

import json
import threading
from typing import Any

from git_handoff.mcp.protocol import Connection, Handlers

MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {}}
INFO = {"name": "handoff", "title": "git handoff", "version": "0"}


class Wire:
    """A connection whose tool `slow` waits until released, and whose answers are kept."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        self.ran: list[str] = []

        def call_tool(name: str, arguments: Any) -> dict[str, Any]:
            self.ran.append(name)
            if name == "slow":
                self.started.set()
                self.release.wait(10)
            if name == "broken":
                raise OSError(5, "Input/output error")
            return {"content": [{"type": "text", "text": json.dumps(arguments)}], "isError": False,
                    "_meta": {"exit_code": 0}}

        tools = [{"name": "slow", "inputSchema": {"type": "object"}}]
        self.conn = Connection(Handlers(INFO, "use the tools", tools, call_tool), self.sent.append)

    def send(self, message: dict[str, Any] | str) -> None:
        self.conn.receive(message if isinstance(message, str) else json.dumps(message))

    def request(self, rid: int, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params is not None else {})})

    def answer(self, rid: int) -> dict[str, Any]:
        return next(m for m in self.sent if m["id"] == rid)


def handshake(w: Wire, version: str = "2025-06-18") -> dict[str, Any]:
    w.request(1, "initialize",
              {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})
    w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return w.answer(1)


def test_the_handshake_era_and_what_it_refuses() -> None:
    w = Wire()
    w.request(0, "tools/list")
    assert w.answer(0)["error"]["code"] == -32602  # nothing but ping before the handshake
    assert handshake(w, "1999-01-01")["result"]["protocolVersion"] == "2025-11-25"  # the newest it knows
    for line in ("not json", "[1, 2]", json.dumps({"id": 9, "method": "ping"}), json.dumps({"jsonrpc": "2.0", "id": 8,
                                                                                        "result": {}})):
        w.send(line)
    w.request(2, "ping")
    w.request(3, "tools/list", {"_meta": MODERN})
    w.request(4, "nope/nope", {})
    w.request(5, "tools/call", {"name": "slow", "arguments": [1]})
    assert [m["id"] for m in w.sent] == [0, 1, 2, 3, 4, 5]  # the lines that were no requests: no answer
    assert w.answer(2)["result"] == {}
    assert w.answer(3)["error"]["code"] == -32600
    assert w.answer(4)["error"] == {"code": -32601, "message": "Method not found", "data": "nope/nope"}
    assert w.answer(5)["error"]["code"] == -32602 and w.ran == []


def test_the_modern_era_answers_discover_and_refuses_the_handshake() -> None:
    w = Wire()
    w.request(1, "server/discover", {"_meta": MODERN})
    found = w.answer(1)["result"]
    assert found["supportedVersions"] == ["2026-07-28"] and found["resultType"] == "complete"
    assert found["_meta"]["io.modelcontextprotocol/serverInfo"] == INFO
    w.request(2, "tools/list", {"_meta": MODERN})
    assert w.answer(2)["result"]["tools"][0]["name"] == "slow" and w.answer(2)["result"]["cacheScope"] == "private"
    w.request(3, "tools/list")
    assert w.answer(3)["error"]["code"] == -32602  # the envelope is required on every request
    w.request(4, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}})
    assert w.answer(4)["error"]["code"] == -32022
    w.request(5, "ping", {"_meta": MODERN})
    assert w.answer(5)["error"]["code"] == -32601  # ping is gone in this era
    w.request(6, "tools/list", {"_meta": {**MODERN, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}})
    assert w.answer(6)["error"]["data"]["supported"] == ["2026-07-28"]


def test_the_first_request_fixes_the_era_even_when_it_is_refused() -> None:
    """As the SDK's server: whatever the first request is, and however it is answered,
    the connection keeps its era; a line with params that is no object is no request
    and fixes nothing."""
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}
    unsupported = {"_meta": {**MODERN, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
    cases: list[tuple[tuple[str, Any], int | None, str | None]] = [
        (("ping", None), None, "handshake"),
        (("initialize", {"capabilities": {}}), -32602, "handshake"),  # refused: no protocolVersion
        (("initialize", {**init, "_meta": MODERN}), None, "handshake"),  # no handshake in the 2026 era
        (("tools/list", None), -32602, "handshake"),  # before initialize
        (("server/discover", {}), -32601, "handshake"),
        (("tools/list", unsupported), -32022, "modern"),
        (("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}), -32602, "modern"),
        (("tools/list", "not an object"), -32602, None),
    ]
    for (method, params), code, era in cases:
        w = Wire()
        w.send({"jsonrpc": "2.0", "id": 1, "method": method, **({"params": params} if params is not None else {})})
        assert w.answer(1).get("error", {}).get("code") == code, method
        assert w.conn.era == era, (method, params)
        w.request(2, "server/discover", {"_meta": MODERN})
        w.request(3, "initialize", init)
        if era == "handshake":
            assert w.answer(2)["error"]["code"] == -32600 and "result" in w.answer(3)
        elif era == "modern":
            assert w.answer(2)["result"]["supportedVersions"] == ["2026-07-28"]
            assert w.answer(3)["error"]["code"] == -32022
        else:
            assert "result" in w.answer(2) and w.conn.era == "modern"


def test_server_discover_without_the_envelope_is_an_unknown_method_of_the_handshake_era() -> None:
    w = Wire()
    w.request(0, "server/discover")  # the first request: a handshake connection
    assert "result" in handshake(w)
    w.request(2, "server/discover", {})
    w.request(3, "server/discover", {"_meta": {"progressToken": 1}})  # a _meta, but no envelope
    for rid in (0, 2, 3):
        assert w.answer(rid)["error"] == {"code": -32601, "message": "Method not found", "data": "server/discover"}


def test_calls_run_one_at_a_time_and_a_cancelled_one_is_neither_run_nor_answered() -> None:
    w = Wire()
    handshake(w)
    w.request(2, "tools/call", {"name": "slow", "arguments": {"n": 1}})
    assert w.started.wait(10)
    w.request(3, "tools/call", {"name": "fast", "arguments": {"n": 2}})
    w.request(4, "tools/call", {"name": "fast", "arguments": {"n": 3}})
    w.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
    w.request(5, "ping")  # answered while a call runs
    assert [m["id"] for m in w.sent] == [1, 5]
    w.release.set()
    w.conn.close()  # the input ended: the calls already sent finish first
    assert [m["id"] for m in w.sent] == [1, 5, 2, 4]
    assert w.ran == ["slow", "fast"]
    assert json.loads(w.answer(4)["result"]["content"][0]["text"]) == {"n": 3}


def test_hostile_lines_are_dropped_and_the_connection_keeps_serving() -> None:
    """A cancellation naming no request id a request may carry, JSON nested past what
    the parser follows: neither is answered, and neither stops the connection."""
    w = Wire()
    handshake(w)
    for params in ({"requestId": [1]}, {"requestId": {"a": 1}}, {"requestId": True}, {"requestId": None}):
        w.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
    w.send("[" * 100_000)
    w.send('{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": ' + "[" * 100_000)
    w.request(8, "ping")
    assert [m["id"] for m in w.sent] == [1, 8]


def test_a_call_that_fails_inside_is_an_error_answer_and_later_calls_still_run() -> None:
    w = Wire()
    handshake(w)
    w.request(2, "tools/call", {"name": "broken", "arguments": {}})
    w.request(3, "tools/call", {"name": "fast", "arguments": {"n": 3}})
    w.conn.close()
    assert w.answer(2)["error"] == {"code": -32603, "message": "internal error: OSError"}
    assert json.loads(w.answer(3)["result"]["content"][0]["text"]) == {"n": 3}

