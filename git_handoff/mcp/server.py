"""`git handoff mcp`: the tools of mcp/tools.py served over stdio (mcp/protocol.py).

A tool's result carries what the CLI would print and exit with:
- content[0]: the JSON document `--json` prints (for an error, its payload or
  `{"error", "exit_code"}`, exactly as the CLI);
- isError: true for every exit code but 0, and then content[1] is the CLI's
  `error: ...` line with the exit code and its meaning;
- `_meta.exit_code`: the exit code, for a client that branches on it;
- any further content: `warning: ...` lines (the CLI's stderr warnings).

Calls run one at a time on a worker thread, so the server keeps answering the
protocol (pings, cancellations) while a validation command runs.

The MCP SDK is not imported to serve (its import cost seconds at every session's
start, see docs/performance.md); the tests drive this same server in-process with the
SDK's client through tests/support/mcp_inproc.py.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from git_handoff import __version__
from git_handoff.core import display
from git_handoff.core.errors import EXIT_MEANINGS
from git_handoff.mcp.protocol import INTERNAL_ERROR, Connection, Handlers, Message, RpcError, encode
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


def tool_list() -> list[Message]:
    return [
        {
            "name": t.name,
            "description": t.help,
            "inputSchema": t.input_schema(),
            "annotations": {"readOnlyHint": t.read_only, "destructiveHint": t.destructive, "openWorldHint": False},
        }
        for t in TOOLS.values()
    ]


def to_result(answer: Answer) -> Message:
    content: list[Message] = [{"type": "text", "text": answer.text()}]
    if answer.is_error:
        meaning = EXIT_MEANINGS.get(answer.exit_code, "failed")
        content.append({"type": "text",
                        "text": f"error: {display.line(answer.error or '')}\nexit {answer.exit_code}: {meaning}"})
    content += [{"type": "text", "text": f"warning: {display.line(w)}"} for w in answer.warnings]
    return {"content": content, "isError": answer.is_error, "_meta": {"exit_code": answer.exit_code}}


class Stopping:
    """SIGINT/SIGTERM (how agent CLIs stop their servers): exit at once when no call
    runs, else right after the running call has answered; a second signal exits at once.

    The main thread may be blocked reading stdin and a call may be mid-transaction:
    exiting from the handler is the only stop that neither waits for the client nor
    cuts a transaction short."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy = 0
        self.requested = False

    def handle(self, signum: int, _frame: object) -> None:
        with self.lock:
            if self.busy == 0 or self.requested:
                os._exit(0 if self.busy == 0 else 128 + signum)
            self.requested = True

    def begin(self) -> bool:
        """A call starts; False (and nothing counted) once a stop was asked for: a call
        the client queued behind the running one is not started, so the exit right after
        the running call's answer cuts nothing short."""
        with self.lock:
            if self.requested:
                return False
            self.busy += 1
            return True

    def end(self) -> bool:
        """Whether the server should now stop (a signal came during the call)."""
        with self.lock:
            self.busy -= 1
            return self.requested and self.busy == 0


def handlers(workspace: Workspace | None = None, stopping: Stopping | None = None) -> Handlers:
    """What `git handoff mcp` serves for the repository around `workspace` (default: the
    working directory)."""
    space = workspace or Workspace()
    lifecycle = stopping or Stopping()

    def call_tool(name: str, arguments: Any) -> Message:
        if not lifecycle.begin():
            raise RpcError(INTERNAL_ERROR, "git handoff mcp is stopping (a signal came): the call was not run")
        try:
            answer = call(space, name, arguments)
        finally:
            if lifecycle.end():  # stop once this answer is on its way
                threading.Timer(STOP_GRACE_SECONDS, os._exit, (0,)).start()
        return to_result(answer)

    info = {"name": "handoff", "title": "git handoff", "version": __version__}
    return Handlers(info, INSTRUCTIONS, tool_list(), call_tool)


def serve(workspace: Workspace | None = None) -> None:
    """Serve on stdin/stdout until the client closes stdin."""
    space = workspace or Workspace()
    stopping = Stopping()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stopping.handle)
    # The wire is this process's alone: it moves to private copies of fds 0 and 1, and
    # what else might use them (a stray print, a child process that inherits them) reads
    # /dev/null and writes to stderr instead.
    sys.stdout.flush()
    wire_in = os.fdopen(os.dup(0), "rb")
    out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: Message) -> None:
        try:
            out.write(encode(message))
            out.flush()
        except (OSError, ValueError):  # the client is gone; its input's end stops us
            pass

    connection = Connection(handlers(space, stopping), send)
    # While the client and its model take their first turn, open the repository.
    threading.Thread(target=space.warm, name="handoff-warm", daemon=True).start()
    try:
        for line in wire_in:
            if line.strip():
                connection.receive(line)
    except OSError:
        pass  # the client's end of the wire broke: as when its input ends, finish what was sent
    connection.close()
