"""`git handoff mcp`'s wire against the MCP SDK's own server, over recorded sessions.

git_handoff/mcp/protocol.py serves MCP on the standard library alone and says it
answers what the SDK's server answers. Here both servers are given the same things
to serve (the tools of `git handoff mcp`, its instructions and name, its tool calls
on one repository) and the same client sessions, recorded in tests/mcp/sessions/ one
line as the client wrote it: both protocol eras (the handshake at every version this
server knows and at versions it does not, the 2026-07-28 per-request envelope), the
tools, notifications, pings, and the error cases (lines that are no JSON-RPC message,
a batch, unknown methods before and after the handshake, invalid parameters, a request
from the other era, the era a first request fixes even when it is refused). The
answers are compared request by request, on what the protocol fixes:

- which requests are answered (an unanswered request is a client waiting forever,
  an answer to what was no request is a client misreading the wire);
- for an answer, result or error; an error's code (and the data the 2026-07-28
  revision fixes for an unsupported version); a result whole: both servers serve the
  same tools and the same tool results, so any difference is the server's own
  framing (capabilities, negotiated version, serverInfo, the 2026-07-28 stamps).

An error's message is text for a person and no part of the comparison. Where the two
servers legitimately differ, the difference is written in DIFFERENCES below with its
reason; where ours answers otherwise and should not, in DIVERGENCES; the test fails
as well when a recorded difference stops occurring. Which requests get an answer is
compared with the client's input kept open until the answers are in, as a client
keeps it (the SDK's server cancels the calls still running when its input ends; ours
finishes them).

The SDK's server runs in this process on its stdio transport (over an in-memory
pipe); ours runs its Connection over the same lines the way `serve` feeds it (a
line at a time, blank lines skipped). tests/mcp/test_server.py runs the real
`git handoff mcp` process over stdio.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread
import mcp_types as types
import pytest
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from git_handoff.mcp import protocol
from git_handoff.mcp.protocol import (
    HANDSHAKE_VERSIONS,
    MODERN_VERSIONS,
    Connection,
    Handlers,
    encode,
)
from git_handoff.mcp.server import handlers
from git_handoff.mcp.tools import Workspace
from tests.support.repo import run

SESSIONS = Path(__file__).parent / "sessions"
UNSUPPORTED_PROTOCOL_VERSION = -32022

Answers = dict[Any, dict[str, Any]]


# -- the two servers ---------------------------------------------------------------------------


def sdk_server(serving: Handlers) -> Server[Any]:
    """The MCP SDK's low-level server serving what `serving` serves: the same name,
    title, version, instructions, tool list, and tool calls."""

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult.model_validate({"tools": serving.tools})

    one_at_a_time = anyio.Lock()  # as ours runs them: the workspace is one repository handle

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        async with one_at_a_time:
            result = await anyio.to_thread.run_sync(serving.call_tool, params.name, params.arguments)
        return types.CallToolResult.model_validate(result)

    return Server(serving.info["name"], version=serving.info["version"], title=serving.info["title"],
                  instructions=serving.instructions, on_list_tools=list_tools, on_call_tool=call_tool)


END_OF_SESSION = json.dumps({"jsonrpc": "2.0", "id": "end-of-session", "method": "ping"})
QUIET_SECONDS = 2.0  # after the last request's answer, how long the SDK may still answer before its input ends


class _Wire:
    """The client's side of the SDK's stdio transport: the lines it reads (one at a time,
    as from a pipe, ending when `end` is called) and the lines it writes."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str](1000)
        self.written: list[dict[str, Any]] = []
        self.last_write = anyio.current_time()

    def feed(self, line: str) -> None:
        self._send.send_nowait(line + "\n")

    def end(self) -> None:
        self._send.close()

    def __aiter__(self) -> _Wire:
        return self

    async def __anext__(self) -> str:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def write(self, text: str) -> None:
        self.written += [json.loads(line) for line in text.splitlines()]
        self.last_write = anyio.current_time()

    async def flush(self) -> None:
        pass

    def answered(self) -> set[Any]:
        return {m.get("id") for m in self.written if "method" not in m}


def sdk_answers(serving: Handlers, lines: list[str], expected: set[Any]) -> list[dict[str, Any]]:
    """Every message the SDK's server writes for the client's `lines`, over its stdio transport.

    The input stays open, as a client keeps it while it waits, until the SDK has answered
    every id in `expected` (what ours answered) and the closing ping, or has been quiet
    for QUIET_SECONDS after that ping's answer: the SDK's server cancels the requests
    still running when its input ends (ours finishes them, mcp/protocol.py), which no
    client that waits for its answers sees."""

    async def go() -> list[dict[str, Any]]:
        server = sdk_server(serving)
        wire = _Wire()
        for line in [*lines, END_OF_SESSION]:
            wire.feed(line)
        # the casts: stdio_server takes anyio.AsyncFile[str]; _Wire has the part it uses
        # (async iteration, write, flush) and nothing else
        async with anyio.create_task_group() as tg, stdio_server(cast(Any, wire), cast(Any, wire)) as (read, write):
            tg.start_soon(server.run, read, write, server.create_initialization_options())
            with anyio.fail_after(60):
                while not (expected | {"end-of-session"}) <= wire.answered():
                    if "end-of-session" in wire.answered() and anyio.current_time() - wire.last_write > QUIET_SECONDS:
                        break
                    await anyio.sleep(0.01)
            wire.end()
        return wire.written

    return anyio.run(go)


def our_answers(serving: Handlers, lines: list[str]) -> list[dict[str, Any]]:
    """Every message git handoff's Connection writes for `lines`, fed as `serve` feeds it,
    each encoded for the wire and read back."""
    written: list[bytes] = []
    connection = Connection(serving, lambda message: written.append(encode(message)))
    for line in [*lines, END_OF_SESSION]:
        if line.strip():
            connection.receive(line.encode())
    connection.close()
    return [json.loads(raw) for raw in written]


# -- the comparison ------------------------------------------------------------------------------


def by_id(answers: list[dict[str, Any]], side: str) -> tuple[Answers, list[str]]:
    """The answers keyed by request id, and what is wrong with the wire itself."""
    keyed: Answers = {}
    problems = []
    for message in answers:
        if message.get("jsonrpc") != "2.0" or "id" not in message or ("result" in message) == ("error" in message):
            problems.append(f"{side} wrote a message that is no JSON-RPC response: {message}")
        elif message["id"] in keyed:
            problems.append(f"{side} answered id {message['id']!r} twice")
        else:
            keyed[message["id"]] = message
    return keyed, problems


def compare(ours: list[dict[str, Any]], sdk: list[dict[str, Any]]) -> list[tuple[Any, str, Any, Any]]:
    """The differences between two servers' answers to one session, as (request id, what,
    ours, the SDK's); answers are matched by id (JSON-RPC lets a server answer requests
    in any order, and ours answers a tool call from its worker thread)."""
    ours_by_id, problems = by_id(ours, "ours")
    sdk_by_id, more = by_id(sdk, "the SDK")
    diffs: list[tuple[Any, str, Any, Any]] = [(None, p, None, None) for p in problems + more]
    for rid in sorted(set(ours_by_id) | set(sdk_by_id), key=repr):
        mine, theirs = ours_by_id.get(rid), sdk_by_id.get(rid)
        if mine is None or theirs is None:
            diffs.append((rid, "answered", mine is not None, theirs is not None))
            continue
        kinds = ["error" if "error" in answer else "result" for answer in (mine, theirs)]
        if kinds[0] != kinds[1]:
            diffs.append((rid, "kind", *kinds))
        elif kinds[0] == "error":
            mine_error, their_error = mine["error"], theirs["error"]
            if mine_error.get("code") != their_error.get("code"):
                diffs.append((rid, "error code", mine_error.get("code"), their_error.get("code")))
            for side, error in (("ours", mine_error), ("the SDK", their_error)):
                if not isinstance(error.get("message"), str) or not error["message"]:
                    diffs.append((rid, f"error message of {side}", mine_error.get("message"),
                                  their_error.get("message")))
            fixed_data = their_error.get("code") == UNSUPPORTED_PROTOCOL_VERSION
            if fixed_data and mine_error.get("data") != their_error.get("data"):
                diffs.append((rid, "error data", mine_error.get("data"), their_error.get("data")))
        else:
            diffs += [(rid, f"result{path}", a, b) for path, a, b in _deep_diff(mine["result"], theirs["result"])]
    return diffs


def _deep_diff(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append((f"{path}.{key}", a.get(key, "<absent>"), b.get(key, "<absent>")))
            else:
                out += _deep_diff(a[key], b[key], f"{path}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _deep_diff(x, y, f"{path}[{i}]")]
    return [] if a == b and type(a) is type(b) else [(path, a, b)]


# -- the differences, each with its reason -----------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One way ours answers one request of one session differently from the SDK's server:
    `what` differs, ours answers `ours` and the SDK `sdk` (as `compare` reports it)."""

    session: str
    request_id: Any
    what: str
    ours: Any
    sdk: Any
    reason: str

    def key(self) -> tuple[Any, str, Any, Any]:
        return (self.request_id, self.what, self.ours, self.sdk)


DIFFERENCES = [
    Difference("handshake-errors.jsonl", 11, "answered", True, False,
               "`params` that is a string is a JSON-RPC request with invalid parameters: ours answers it "
               "-32602 with its id, as JSON-RPC 2.0 asks; the SDK's stdio transport refuses the whole line "
               "in its message model and drops it, so its client would wait for an answer forever"),
    Difference("era-after-a-dropped-line.jsonl", 1, "answered", True, False,
               "the same string `params` as the first line: ours answers it -32602, the SDK drops it; for "
               "neither is it the first request, so the enveloped server/discover after it opens the era"),
]

# Where ours answers otherwise than the SDK and should not: none now. The last ones were the
# protocol era, which ours decided at the first request it accepted that said one, and the
# SDK (as mcp/protocol.py says it keeps it) at the client's first request whatever it is,
# and server/discover without the envelope, which the SDK answers Method not found; the
# era-* and modern-discover-first-without-envelope sessions hold both now.
DIVERGENCES: list[Difference] = []


def session_lines(name: str, version: str | None = None) -> list[str]:
    """The client's lines of a recorded session; `version`, when given, is the
    protocolVersion its first successful initialize asks for."""
    lines = (SESSIONS / name).read_text(encoding="utf-8").split("\n")[:-1]
    if version is not None:
        for i, line in enumerate(lines):
            message = json.loads(line) if line.startswith("{") else None
            if message and message.get("method") == "initialize" and "protocolVersion" in message["params"]:
                message["params"]["protocolVersion"] = version
                lines[i] = json.dumps(message)
                break
    return lines


@pytest.fixture
def serving(repo: Path) -> Handlers:
    """What `git handoff mcp` serves on a repository with two tasks, one claimed and failed."""
    for args in (("init",), ("add", "First", "--id", "t1", "--check", "true"),
                 ("add", "Second", "--id", "t2", "--after", "t1", "--check", "true"), ("session", "start"),
                 ("claim", "t1"), ("fail", "t1", "--reason", "broke it")):
        assert run(*args).rc == 0, args
    return handlers(Workspace(str(repo)))


def both_answer(serving: Handlers, name: str, version: str | None = None) -> tuple[list[Any], list[Any]]:
    """Ours and the SDK's answers to the session `name`, the closing ping included."""
    lines = session_lines(name, version)
    ours = our_answers(serving, lines)
    return ours, sdk_answers(serving, lines, {m.get("id") for m in ours})


def outcomes(answers: list[dict[str, Any]]) -> dict[Any, Any]:
    """Each answer's id and "ok" or its error code: what a session exercised."""
    return {m["id"]: m["error"]["code"] if "error" in m else "ok" for m in answers}


def assert_only_recorded(name: str, found: list[tuple[Any, str, Any, Any]]) -> None:
    recorded = {d.key(): d for d in DIFFERENCES + DIVERGENCES if d.session == name}
    unexplained = [d for d in found if d not in recorded]
    assert not unexplained, (f"{name}: ours and the SDK's server answer differently (request id, what, ours, "
                             f"the SDK's): {unexplained}; fix the server, or record the difference with its "
                             "reason in DIFFERENCES")
    gone = [d for key, d in recorded.items() if key not in found]
    assert not gone, f"{name}: a recorded difference no longer occurs, drop it from DIFFERENCES or DIVERGENCES: {gone}"


# -- the tests -------------------------------------------------------------------------------------


def test_both_servers_know_the_same_protocol_versions() -> None:
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    assert MODERN_VERSIONS == MODERN_PROTOCOL_VERSIONS


@pytest.mark.parametrize("version", [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS, "1999-01-01"])
def test_the_handshake_era_answers_as_the_sdk(serving: Handlers, version: str) -> None:
    """At every version of the handshake, at the 2026 one (which has no handshake) and at
    one nobody knows: the negotiated version, capabilities, server info, tools, tool
    results and tool errors, pings, notifications."""
    ours, sdk = both_answer(serving, "handshake.jsonl", version)
    assert_only_recorded("handshake.jsonl", compare(ours, sdk))
    # What the session exercised, so that it cannot pass by both servers answering nothing.
    everything = [0, 1, 2, 3, 4, 5, 6, "seven", 8, 9, 10, 11, 12, 13, "end-of-session"]
    assert outcomes(sdk) == dict.fromkeys(everything, "ok")
    answer = {m["id"]: m["result"] for m in ours}
    assert answer[1]["protocolVersion"] == (version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1])
    assert len(answer[3]["tools"]) == len(serving.tools) > 10
    assert [answer[rid]["_meta"]["exit_code"] for rid in (5, 6, "seven", 8, 9, 10, 11, 13)] == [0, 0, 0, 0, 2, 2, 2, 0]


# Each session's answers from the SDK's server (id: "ok" or the error code): what the session exercises.
EXERCISED: dict[str, dict[Any, Any]] = {
    "handshake-errors.jsonl": {0: -32602, 1: -32602, 2: -32602, 3: "ok", 12: -32602, 13: -32602, 14: -32602,
                               15: -32602, 16: -32601, 17: -32601, 18: -32601, 19: -32601, 20: -32601, 21: -32600,
                               22: -32601, 23: "ok", 24: "ok", "end-of-session": "ok"},
    "modern.jsonl": {1: "ok", 2: "ok", 3: "ok", "four": "ok", 5: "ok", 6: -32602, 7: -32601, 8: -32602, 9: -32602,
                     10: -32022, 11: -32022, 12: -32022, 13: -32601, 14: -32601, 15: "ok", "end-of-session": -32602},
    "modern-discover-first-without-envelope.jsonl": {1: -32601, 2: -32600, 3: "ok", "end-of-session": "ok"},
    "era-after-a-ping.jsonl": {1: "ok", 2: -32600, 3: -32600, "end-of-session": "ok"},
    "era-after-a-refused-first-request.jsonl": {1: -32602, 2: -32600, 3: "ok", "end-of-session": "ok"},
    "era-after-a-refused-modern-request.jsonl": {1: -32022, 2: -32022, 3: -32602, "end-of-session": -32602},
    "era-after-a-dropped-line.jsonl": {2: "ok", 3: "ok", "end-of-session": -32602},
    "handshake-unknown-methods-first.jsonl": {1: -32601, 2: -32601, 3: -32601, 4: -32602, 5: "ok", 6: -32601,
                                              7: "ok", "end-of-session": "ok"},
}


@pytest.mark.parametrize("name", sorted(EXERCISED))
def test_the_error_cases_and_the_modern_era_answer_as_the_sdk(serving: Handlers, name: str) -> None:
    """Lines that are no JSON-RPC message (not JSON, a batch, no or another `jsonrpc`, an id
    that is no id, a response), invalid parameters, unknown methods, the other era's
    requests; the 2026-07-28 era's discover, stamps, and envelope errors."""
    ours, sdk = both_answer(serving, name)
    assert_only_recorded(name, compare(ours, sdk))
    assert outcomes(sdk) == EXERCISED[name]


def test_every_session_is_compared_and_every_recorded_difference_has_its_reason() -> None:
    sessions = {p.name for p in SESSIONS.glob("*.jsonl")}
    assert sessions == {"handshake.jsonl", *EXERCISED}
    for d in DIFFERENCES + DIVERGENCES:
        assert d.session in sessions and len(d.reason) > 40, d


# -- the comparison can fail --------------------------------------------------------------------------


def _answer(rid: Any, **body: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, **body}


def test_the_comparer_reports_every_kind_of_mismatch() -> None:
    init = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "handoff", "version": "1"}}
    sdk = [_answer(1, result=init), _answer(2, error={"code": -32601, "message": "Method not found"}),
           _answer(3, result={}), _answer(4, error={"code": -32022, "message": "no", "data": {"supported": ["a"]}})]
    assert compare(sdk, sdk) == []
    assert compare(list(reversed(sdk)), sdk) == []  # the order of answers is free
    ours = [
        _answer(1, result={**init, "capabilities": {"tools": {"listChanged": False}, "resources": {}}}),
        _answer(2, error={"code": -32602, "message": "Method not found"}),
        _answer(4, error={"code": -32022, "message": "", "data": {"supported": ["b"]}}),
        _answer(5, result={}),
        {"jsonrpc": "2.0", "id": 6, "result": {}, "error": {"code": 1, "message": "both"}},
        _answer(5, result={}),
    ]
    assert compare(ours, sdk) == [
        (None, "ours wrote a message that is no JSON-RPC response: {'jsonrpc': '2.0', 'id': 6, 'result': {}, "
               "'error': {'code': 1, 'message': 'both'}}", None, None),
        (None, "ours answered id 5 twice", None, None),
        (1, "result.capabilities.resources", {}, "<absent>"),
        (2, "error code", -32602, -32601),
        (3, "answered", False, True),
        (4, "error message of ours", "", "no"),
        (4, "error data", {"supported": ["b"]}, {"supported": ["a"]}),
        (5, "answered", True, False),
    ]
    assert compare([_answer(1, result={**init, "protocolVersion": "2025-11-25"})], sdk[:1]) == [
        (1, "result.protocolVersion", "2025-11-25", "2025-06-18")]
    assert compare([_answer(1, result=[1])], [_answer(1, result=[1, 2])]) == [(1, "result", [1], [1, 2])]
    assert compare([_answer(1, result={"n": 1})], [_answer(1, result={"n": 1.0})]) == [(1, "result.n", 1, 1.0)]
    assert compare([_answer(1, result={})], [_answer(1, error={"code": -1, "message": "m"})]) == [
        (1, "kind", "result", "error")]


def test_a_server_answering_otherwise_fails_the_comparison(serving: Handlers,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole path, servers included: ours made to claim a capability and to answer an
    unknown method with another code; the comparison names both, and assert_only_recorded
    refuses them."""
    monkeypatch.setattr(Connection, "_capabilities", staticmethod(lambda: {"tools": {"listChanged": True}}))
    monkeypatch.setattr(protocol, "METHOD_NOT_FOUND", -32000)
    found = compare(*both_answer(serving, "handshake-errors.jsonl"))
    assert (3, "result.capabilities.tools.listChanged", True, False) in found
    assert [d for d in found if d[1] == "error code" and d[2] == -32000] == [
        (rid, "error code", -32000, -32601) for rid in (16, 17, 18, 19, 20, 22)]
    with pytest.raises(AssertionError, match="answer differently"):
        assert_only_recorded("handshake-errors.jsonl", found)
