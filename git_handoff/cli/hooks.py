"""Commands of the triggers: hooks install|uninstall|status, hook EVENT."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from git_handoff.cli import emit_json, json_option

if TYPE_CHECKING:
    from git_handoff.gitrepo import Repo

AGENT_OPTION = click.option("--agent", type=click.Choice(["claude"]), default=None,
                            help="Instead of the git hook: the agent's own hooks (Claude Code: .claude/settings.json).")


def _repo() -> Repo:
    from git_handoff.gitrepo import Repo

    return Repo.discover()


NO_MCP_OPTION = click.option("--no-mcp", is_flag=True,
                             help="With --agent claude: leave the MCP server entry in .mcp.json alone.")


def _echo_mcp(result: dict[str, object]) -> None:
    mcp = result.get("mcp")
    if not isinstance(mcp, dict):
        return
    if mcp.get("problem"):
        click.echo(f"warning: {mcp['problem']}", err=True)
    elif "removed" in mcp:
        click.echo(f"MCP server {'removed from' if mcp['removed'] else 'was not in'} {mcp['mcp_json']}")
    else:
        server = mcp.get("server") or {}
        command = " ".join([str(server.get("command"))] + [str(a) for a in server.get("args") or []])
        click.echo(f"MCP server 'handoff' in {mcp['mcp_json']}: {command}")


@click.group("hooks")
def hooks_cmd() -> None:
    """Install the deterministic triggers: git's post-commit hook, or an agent's hooks."""


@hooks_cmd.command("install")
@AGENT_OPTION
@NO_MCP_OPTION
@json_option
def hooks_install_cmd(agent: str | None, no_mcp: bool, as_json: bool) -> None:
    """Install the post-commit hook (chained beside an existing one), or with --agent claude
    merge the Claude Code hooks into .claude/settings.json and register `git handoff mcp`
    as the MCP server `handoff` in .mcp.json (unless --no-mcp)."""
    from git_handoff.ops import hooks

    result = hooks.install(_repo(), agent=agent, mcp=not no_mcp)
    if as_json:
        emit_json(result)
    elif agent == "claude":
        added = ", ".join(result["added"]) or "none (already installed)"
        click.echo(f"Claude Code hooks in {result['settings']}: added {added}")
        _echo_mcp(result)
    else:
        chained = " (your existing hook is kept and runs first)" if result["chained_user_hook"] else ""
        click.echo(f"Installed {result['post_commit']}{chained}")


@hooks_cmd.command("uninstall")
@AGENT_OPTION
@NO_MCP_OPTION
@json_option
def hooks_uninstall_cmd(agent: str | None, no_mcp: bool, as_json: bool) -> None:
    """Remove what `hooks install` added (a chained hook is put back as it was; of
    .mcp.json only our `handoff` server goes)."""
    from git_handoff.ops import hooks

    result = hooks.uninstall(_repo(), agent=agent, mcp=not no_mcp)
    if as_json:
        emit_json(result)
    elif agent == "claude":
        click.echo(f"Removed git handoff hooks from {result['settings']}: {', '.join(result['removed']) or 'none found'}")
        _echo_mcp(result)
    else:
        click.echo(f"Removed {result['post_commit']}" if result["removed"] else "No git handoff hook was installed")


@hooks_cmd.command("status")
@AGENT_OPTION
@json_option
def hooks_status_cmd(agent: str | None, as_json: bool) -> None:
    """Which hooks are installed, and the thresholds that trigger a handoff
    (with --agent claude: only the Claude Code hooks)."""
    from git_handoff.ops import hooks

    result = hooks.status(_repo())
    if agent == "claude":
        claude = {"agent": "claude", "settings": result["claude_settings"], "installed": result["claude"],
                  "mcp": result["claude_mcp"]}
        if as_json:
            emit_json(claude)
        else:
            state = "installed" if claude["installed"] else "not installed"
            click.echo(f"claude code hooks: {state} ({claude['settings']})")
            mcp = result["claude_mcp"]
            click.echo(f"mcp server 'handoff': {'registered' if mcp['registered'] else 'not registered'} "
                       f"({mcp['mcp_json']})" + (f"; {mcp['problem']}" if mcp.get("problem") else ""))
        return
    if as_json:
        emit_json(result)
        return
    state = "installed" if result["installed"] else "not installed"
    click.echo(f"post-commit: {state} ({result['post_commit']})")
    if result["chained_user_hook"]:
        click.echo("  chained: your own post-commit hook runs first")
    click.echo(f"notes.rewriteRef refs/notes/harness: {'yes' if result['notes_rewrite_ref'] else 'no'}")
    click.echo(f"handoff.commitsPerSession: {result['commits_per_session'] or 'unset'}")
    click.echo(f"handoff.tasksPerSession: {result['tasks_per_session'] or 'unset'}")
    click.echo(f"claude code hooks: {'installed' if result['claude'] else 'not installed'}")
    click.echo(f"mcp server 'handoff' (.mcp.json): {'registered' if result['claude_mcp']['registered'] else 'not registered'}")


@click.command("hook")
@click.argument("event")
@json_option
def hook_cmd(event: str, as_json: bool) -> None:
    """Entry point the installed hooks call: post-commit, and for Claude Code
    claude-session-start, claude-stop, claude-subagent-stop, claude-pre-compact,
    claude-session-end (JSON payload on stdin). Never fails the caller: exit 0."""
    from git_handoff.ops import hook_entry

    if event not in hook_entry.EVENTS:
        from git_handoff.errors import UsageError

        raise UsageError(f"unknown hook event {event!r}: use one of {', '.join(hook_entry.EVENTS)}")
    text = ""
    try:
        if event != "post-commit" and not sys.stdin.isatty():
            text = sys.stdin.read()
    except (OSError, ValueError, UnicodeDecodeError):
        text = ""
    try:
        out, warning = hook_entry.run(event, text)
    except Exception as exc:  # noqa: BLE001 - a hook must never break the agent or the commit
        click.echo(f"git handoff hook {event}: {exc}", err=True)
        if as_json:
            emit_json({"event": event, "output": None, "problem": str(exc)})
        return
    if warning:
        click.echo(warning, err=True)
    if as_json:
        emit_json({"event": event, "output": _parsed(out) if out else None})
    elif out:
        click.echo(out)


def _parsed(text: str) -> object:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text
