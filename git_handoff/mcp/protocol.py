"""The MCP wire of `git handoff mcp`, on the standard library alone: JSON-RPC 2.0
messages, one per line, answered as the MCP specification asks of a server that
offers tools and nothing else.

Two eras of the protocol, fixed by the client's first request, whatever it is and
whether it is answered with a result or refused, and kept for the connection, as the
MCP SDK's own server keeps them: a first request that carries the 2026-07-28 envelope
(`params._meta` naming a protocol version) and is not `initialize` opens the
per-request era; any other (`initialize`, `ping`, a request without the envelope, such
as `server/discover` without it) opens the handshake era. Notifications, and lines
that are no MCP request (not JSON-RPC; `params` that is no object, which is answered
-32602 where the SDK's transport drops the line) decide nothing.
- the handshake era (2024-11-05 .. 2025-11-25): `initialize` (the version the client
  asks for when it is one of these, else the newest), `notifications/initialized`,
  `ping`, `tools/list`, `tools/call`; nothing but `ping` before `initialize` is
  accepted (-32602), a method this era does not have is -32601 before and after it
  (`server/discover` among them), and a request other than `initialize` carrying
  the envelope is refused (-32600);
- the per-request era (2026-07-28): every request carries the version and the client's
  capabilities in `params._meta` (else -32602, or -32022 for a version not served);
  `server/discover` answers what `initialize` would, and results say `resultType`,
  `cacheScope`, and the server's name in `_meta`; there is no `ping` (-32601), and
  `initialize` is refused (-32022).

A client's `notifications/cancelled` drops a call still waiting its turn; a running
call (a git transaction, a validation command) finishes, unanswered. Lines that are
not JSON-RPC messages are skipped without an answer, as the SDK's server does (an
answer with a null id would be taken by a line-reading client for the answer it waits
for). Tool calls run one at a time on a worker thread, so `ping` and cancellations are
answered while a validation command runs.

The SDK's server answered the same documents; it is not imported here because its
import alone (pydantic models for every protocol version, anyio, starlette) took
seconds, paid at every agent session's start. tests/mcp checks this server with the
SDK's own client.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from typing import Any

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022

Message = dict[str, Any]


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None, *, with_data: bool = False) -> None:
        super().__init__(message)
        self.error: Message = {"code": code, "message": message}
        if data is not None or with_data:
            self.error["data"] = data


def bad_params() -> RpcError:
    return RpcError(INVALID_PARAMS, "Invalid request parameters", "")


class Handlers:
    """What the server offers: its name, instructions, tools, and how a tool is called.
    `call_tool` answers a tools/call result (content, isError, _meta) and never raises."""

    def __init__(self, info: Message, instructions: str, tools: list[Message],
                 call_tool: Callable[[str, Any], Message]) -> None:
        self.info, self.instructions, self.tools, self.call_tool = info, instructions, tools, call_tool


class Connection:
    """One client: `receive` each line it sends; answers go to `send` (from the reading
    thread or the tool worker, never both at once); `close` when its input ends."""

    def __init__(self, handlers: Handlers, send: Callable[[Message], None]) -> None:
        self.handlers = handlers
        self._send = send
        self._sending = threading.Lock()
        self.era: str | None = None  # "handshake" or "modern", fixed by the client's first request
        self._initialized = False  # a handshake connection's initialize accepted
        self._calls: queue.Queue[tuple[Any, str, Any] | None] = queue.Queue()
        self._cancelled: set[Any] = set()
        self._state = threading.Lock()
        self._worker: threading.Thread | None = None

    # -- input ------------------------------------------------------------------------

    def receive(self, line: bytes | str) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past what the parser follows
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return
        method = message.get("method")
        if not isinstance(method, str):
            return  # a response to a request this server never sends
        if "id" not in message:
            self._notification(method, message.get("params"))
            return
        rid = message["id"]
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            return
        try:
            self._request(rid, method, message.get("params"))
        except RpcError as exc:
            self.send({"jsonrpc": "2.0", "id": rid, "error": exc.error})

    def _notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled" and isinstance(params, dict):
            rid = params.get("requestId")
            if isinstance(rid, (str, int)) and not isinstance(rid, bool):  # the ids a request may carry
                with self._state:
                    self._cancelled.add(rid)

    def _request(self, rid: Any, method: str, params: Any) -> None:
        if params is not None and not isinstance(params, dict):
            # No MCP request: the SDK's transport drops the line, so it decides no era either.
            raise bad_params()
        params = params or {}
        meta = params.get("_meta")
        enveloped = isinstance(meta, dict) and META_VERSION in meta
        if self.era is None:  # the client's first request decides, whether it is then accepted or refused
            self.era = "modern" if enveloped and method != "initialize" else "handshake"
        if self.era == "handshake":
            self._handshake_request(rid, method, params, enveloped)
        else:
            self._modern_request(rid, method, params, meta)

    def _handshake_request(self, rid: Any, method: str, params: Message, enveloped: bool) -> None:
        if method == "initialize":
            self._initialize(rid, params)
            return
        if enveloped:
            raise RpcError(INVALID_REQUEST, "this connection serves the handshake protocol era; requests carrying "
                           f"the {MODERN_VERSIONS[-1]} envelope are not accepted on it")
        if method not in ("ping", "tools/list", "tools/call"):  # server/discover included: not of this era
            raise RpcError(METHOD_NOT_FOUND, "Method not found", method)
        if not self._initialized and method != "ping":
            raise bad_params()  # nothing but a ping before the handshake, as the SDK's server
        if method == "ping":
            self.answer(rid, {})
        else:
            self._serve(rid, method, params)

    def _modern_request(self, rid: Any, method: str, params: Message, meta: Any) -> None:
        if method == "initialize":
            raise RpcError(UNSUPPORTED_PROTOCOL_VERSION, f"connection is serving the {MODERN_VERSIONS[-1]} protocol; "
                           "the initialize handshake is not accepted",
                           {"supported": list(MODERN_VERSIONS), "requested": params.get("protocolVersion")})
        if not isinstance(meta, dict):
            raise RpcError(INVALID_PARAMS, f"params._meta must be an object carrying the required "
                                           f"{META_VERSION!r} and {META_CAPABILITIES!r} envelope keys")
        missing = [k for k in (META_VERSION, META_CAPABILITIES) if k not in meta]
        if missing:
            raise RpcError(INVALID_PARAMS,
                           f"params._meta is missing the required envelope key(s): {', '.join(missing)}")
        if meta[META_VERSION] not in MODERN_VERSIONS:
            raise RpcError(UNSUPPORTED_PROTOCOL_VERSION, f"unsupported protocol version {meta[META_VERSION]!r}",
                           {"supported": list(MODERN_VERSIONS), "requested": meta[META_VERSION]})
        if method == "server/discover":
            self.answer(rid, {"capabilities": self._capabilities(), "instructions": self.handlers.instructions,
                              "supportedVersions": list(MODERN_VERSIONS)}, cached=True)
        elif method in ("tools/list", "tools/call"):  # no ping in this era
            self._serve(rid, method, params)
        else:
            raise RpcError(METHOD_NOT_FOUND, "Method not found", method)

    def _serve(self, rid: Any, method: str, params: Message) -> None:
        """tools/list and tools/call, the same in both eras."""
        if method == "tools/list":
            self.answer(rid, {"tools": self.handlers.tools}, cached=True)
            return
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            raise bad_params()
        self._queue_call(rid, name, arguments)

    def _initialize(self, rid: Any, params: Message) -> None:
        asked = params.get("protocolVersion")
        if not isinstance(asked, str) or not isinstance(params.get("clientInfo", {}), dict):
            raise bad_params()
        self._initialized = True
        version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        self.answer(rid, {"capabilities": self._capabilities(), "instructions": self.handlers.instructions,
                          "protocolVersion": version, "serverInfo": self.handlers.info})

    @staticmethod
    def _capabilities() -> Message:
        return {"tools": {"listChanged": False}}

    # -- tool calls, one at a time ----------------------------------------------------------

    def _queue_call(self, rid: Any, name: str, arguments: Any) -> None:
        with self._state:
            self._cancelled.discard(rid)  # an id used again is a new request
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="handoff-mcp-calls", daemon=True)
                self._worker.start()
        self._calls.put((rid, name, arguments))

    def _work(self) -> None:
        while (item := self._calls.get()) is not None:
            rid, name, arguments = item
            with self._state:
                if rid in self._cancelled:
                    continue
            try:
                result = self.handlers.call_tool(name, arguments)
            except RpcError as exc:
                self.send({"jsonrpc": "2.0", "id": rid, "error": exc.error})
                continue
            except Exception as exc:  # noqa: BLE001 - one call's failure must not silence the calls after it
                self.send({"jsonrpc": "2.0", "id": rid,
                           "error": {"code": INTERNAL_ERROR, "message": f"internal error: {type(exc).__name__}"}})
                continue
            with self._state:
                if rid in self._cancelled:
                    continue
            self.answer(rid, result)

    def close(self) -> None:
        """The client's input ended: finish the calls already sent, then return."""
        with self._state:
            worker = self._worker
        if worker is not None:
            self._calls.put(None)
            worker.join()

    # -- output ---------------------------------------------------------------------------

    def answer(self, rid: Any, result: Message, cached: bool = False) -> None:
        if self.era == "modern":
            result = dict(result)
            result["_meta"] = {**result.get("_meta", {}), META_SERVER_INFO: self.handlers.info}
            result["resultType"] = "complete"
            if cached:
                result["cacheScope"], result["ttlMs"] = "private", 0
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def send(self, message: Message) -> None:
        with self._sending:
            self._send(message)


def encode(message: Message) -> bytes:
    """One line of the wire: UTF-8 as the SDK writes it, \\u escapes where the text holds
    what UTF-8 cannot carry (a lone surrogate from the client's own JSON)."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"
