"""`git handoff mcp`: the tools of mcp/tools.py served over stdio with the MCP SDK.

A tool's result carries what the CLI would print and exit with:
- content[0]: the JSON document `--json` prints (for an error, its payload or
  `{"error", "exit_code"}`, exactly as the CLI);
- isError: true for every exit code but 0, and then content[1] is the CLI's
  `error: ...` line with the exit code and its meaning;
- `_meta.exit_code`: the exit code, for a client that branches on it;
- any further content: `warning: ...` lines (the CLI's stderr warnings).

Calls run one at a time on a worker thread, so the server keeps answering the
protocol (pings, cancellations) while a validation command runs.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from git_handoff import __version__
from git_handoff.core import display
from git_handoff.core.errors import EXIT_MEANINGS
from git_handoff.mcp.tools import TOOLS, Answer, Workspace, call

STOP_GRACE_SECONDS = 0.5  # after a signal, time for the last answer to be written out

INSTRUCTIONS = """\
git handoff keeps this project's long-running work inside git (refs/harness/state).
A session: `ack` first; then `claim` a task, do the work, commit it, `checkpoint` after
each significant step, and `done` (its check must pass; a failing check rolls the work
back and fails the attempt) or `fail` with a reason. `status` and `next` say what is left.
Every result is the JSON of `git handoff <verb> --json`; an error result carries the
exit code: 1 a normal negative answer, 2 bad input (nothing changed), 3 contention
(nothing changed, retry)."""


def tool_list() -> list[types.Tool]:
    return [
        types.Tool(
            name=t.name,
            description=t.help,
            input_schema=t.input_schema(),
            annotations=types.ToolAnnotations(read_only_hint=t.read_only, destructive_hint=t.destructive,
                                              open_world_hint=False),
        )
        for t in TOOLS.values()
    ]


def to_result(answer: Answer) -> types.CallToolResult:
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=answer.text())]
    if answer.is_error:
        meaning = EXIT_MEANINGS.get(answer.exit_code, "failed")
        content.append(types.TextContent(type="text", text=f"error: {display.line(answer.error or '')}\nexit {answer.exit_code}: {meaning}"))
    content += [types.TextContent(type="text", text=f"warning: {display.line(w)}") for w in answer.warnings]
    return types.CallToolResult(content=content, is_error=answer.is_error, _meta={"exit_code": answer.exit_code})


class Stopping:
    """SIGINT/SIGTERM (how agent CLIs stop their servers): exit at once when no call
    runs, else right after the running call has answered; a second signal exits at once.

    The SDK's stdin reader blocks in a thread that a cancellation would wait for until
    stdin closed, so the server would not stop on a signal at all without this."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy = 0
        self.requested = False

    def handle(self, signum: int, _frame: object) -> None:
        with self.lock:
            if self.busy == 0 or self.requested:
                os._exit(0 if self.busy == 0 else 128 + signum)
            self.requested = True

    def begin(self) -> None:
        with self.lock:
            self.busy += 1

    def end(self) -> bool:
        """Whether the server should now stop (a signal came during the call)."""
        with self.lock:
            self.busy -= 1
            return self.requested and self.busy == 0


def build_server(workspace: Workspace | None = None, stopping: Stopping | None = None) -> Server[Any]:
    """The MCP server of the repository around `workspace` (default: the working directory)."""
    space = workspace or Workspace()
    one_at_a_time = anyio.CapacityLimiter(1)
    tools = tool_list()
    lifecycle = stopping or Stopping()

    async def list_tools(_ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(_ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        lifecycle.begin()
        try:
            answer = await anyio.to_thread.run_sync(call, space, params.name, params.arguments,
                                                    limiter=one_at_a_time)
        finally:
            if lifecycle.end():  # stop once this answer is on its way
                threading.Timer(STOP_GRACE_SECONDS, os._exit, (0,)).start()
        return to_result(answer)

    return Server("handoff", version=__version__, title="git handoff", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve(workspace: Workspace | None = None) -> None:
    """Serve on stdin/stdout until the client closes stdin."""
    space = workspace or Workspace()
    stopping = Stopping()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stopping.handle)
    server = build_server(space, stopping)
    # While the client and its model take their first turn, open the repository.
    threading.Thread(target=space.warm, name="handoff-warm", daemon=True).start()

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
