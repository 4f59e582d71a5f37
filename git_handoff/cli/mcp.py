"""`git handoff mcp`: the MCP server on stdio (its modules are imported only here)."""

from __future__ import annotations

import click

from git_handoff.cli import json_option


@click.command("mcp")
@json_option
def mcp_cmd(as_json: bool) -> None:
    """Serve the verbs as MCP tools on stdin/stdout (for an agent CLI to start).

    \b
    Tools: status, next, list, show, add, claim, renew, release, checkpoint,
    verify, done, fail, attempts, decide, blocker, doc_write, doc_show, prompt,
    ack, log. Each answers the JSON of `git handoff <verb> --json`; an error
    result (isError) carries the exit code and the `error: ...` line.

    Register it with `git handoff hooks install --agent claude` (.mcp.json; then
    `claude -p ... --allowedTools mcp__handoff`), or by hand: command
    `git-handoff`, args ["mcp"], started in the project. It runs until the
    client closes stdin, or until SIGINT/SIGTERM (after the running call).
    With --json, an error before the server starts is printed as
    {"error", "exit_code"}; stdout is otherwise the MCP stream.
    """
    from git_handoff.mcp import server

    server.serve()
