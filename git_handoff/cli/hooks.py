"""Commands of the triggers: hooks install|uninstall|status, hook EVENT."""

from __future__ import annotations

import os
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


@click.group("hooks")
def hooks_cmd() -> None:
    """Install the deterministic triggers: git's post-commit hook, or an agent's hooks."""


def installed_with() -> list[str]:
    """The git handoff running now, as an absolute command the post-commit hook can start
    without PATH: this `git-handoff` script, or this python with `-m git_handoff`; []
    (PATH, as before) when it is neither, e.g. called in-process."""
    import shutil  # here: `hook EVENT`, which every agent hook runs, never needs it

    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "git-handoff":
        found = argv0 if os.sep in argv0 else shutil.which(argv0)
        if found and os.access(found, os.X_OK):
            return [os.path.abspath(found)]
    if os.path.basename(argv0) == "__main__.py" and os.path.basename(os.path.dirname(argv0)) == "git_handoff":
        return [os.path.abspath(sys.executable), "-m", "git_handoff"]
    return []


@hooks_cmd.command("install")
@AGENT_OPTION
@json_option
def hooks_install_cmd(agent: str | None, as_json: bool) -> None:
    """Install the post-commit hook (chained beside an existing one), or with --agent claude
    merge the Claude Code hooks into .claude/settings.json."""
    from git_handoff.ops import hooks

    result = hooks.install(_repo(), agent=agent, command=installed_with())
    if as_json:
        emit_json(result)
    elif agent == "claude":
        added = ", ".join(result["added"]) or "none (already installed)"
        click.echo(f"Claude Code hooks in {result['settings']}: added {added}")
    else:
        chained = " (your existing hook is kept and runs first)" if result["chained_user_hook"] else ""
        click.echo(f"Installed {result['post_commit']}{chained}")


@hooks_cmd.command("uninstall")
@AGENT_OPTION
@json_option
def hooks_uninstall_cmd(agent: str | None, as_json: bool) -> None:
    """Remove what `hooks install` added (a chained hook is put back as it was)."""
    from git_handoff.ops import hooks

    result = hooks.uninstall(_repo(), agent=agent)
    if as_json:
        emit_json(result)
    elif agent == "claude":
        click.echo(f"Removed git handoff hooks from {result['settings']}: {', '.join(result['removed']) or 'none found'}")
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
        claude = {"agent": "claude", "settings": result["claude_settings"], "installed": result["claude"]}
        if as_json:
            emit_json(claude)
        else:
            state = "installed" if claude["installed"] else "not installed"
            click.echo(f"claude code hooks: {state} ({claude['settings']})")
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


@click.command("hook")
@click.argument("event")
@json_option
def hook_cmd(event: str, as_json: bool) -> None:
    """Entry point the installed hooks call (post-commit, claude-session-start, claude-stop,
    claude-subagent-stop, claude-pre-compact). Never fails the caller: exit 0."""
    from git_handoff.ops import claude

    if event not in claude.EVENTS:
        from git_handoff.errors import UsageError

        raise UsageError(f"unknown hook event {event!r}: use one of {', '.join(claude.EVENTS)}")
    text = ""
    try:
        if event != "post-commit" and not sys.stdin.isatty():
            text = sys.stdin.read()
    except (OSError, ValueError, UnicodeDecodeError):
        text = ""
    try:
        out = claude.run(event, text)
    except Exception as exc:  # noqa: BLE001 - a hook must never break the agent or the commit
        click.echo(f"git handoff hook {event}: {exc}", err=True)
        if as_json:
            emit_json({"event": event, "output": None, "problem": str(exc)})
        return
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
