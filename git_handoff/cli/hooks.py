"""Commands of the triggers: hooks install|uninstall|status, hook EVENT."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import click

from git_handoff.agent_cli import NAMES
from git_handoff.cli import emit_json, json_option

if TYPE_CHECKING:
    from git_handoff.infra.gitrepo import Repo


class HookAnswer(TypedDict):
    """`hook EVENT`: what the hook printed for its agent CLI (its JSON parsed, else the
    text), or None, and why it did nothing when it could not."""

    event: str
    output: object
    problem: NotRequired[str]


# The CLIs by name only: the `hook` command must not import the adapters before it detaches.
AGENT_OPTION = click.option("--agent", type=click.Choice(NAMES), default=None,
                            help="Instead of the git hook: the agent's own hooks (Claude Code: .claude/settings.json; "
                                 "Codex CLI: .codex/hooks.json plus their trust in $CODEX_HOME/config.toml; "
                                 "Gemini CLI: .gemini/settings.json).")


def _agent_notes(result: dict[str, object]) -> list[str]:
    """What still stands between the installed hooks and their running, said plainly (each
    CLI's `setup_notes`)."""
    from git_handoff.agent_cli import registry

    agent = result.get("agent")
    return list(registry.get(agent).setup_notes(result)) if isinstance(agent, str) else []


def _repo() -> Repo:
    from git_handoff.infra.gitrepo import Repo

    return Repo.discover()


NO_MCP_OPTION = click.option("--no-mcp", is_flag=True,
                             help="With --agent: leave the MCP server entry alone (Claude Code: .mcp.json; "
                                  "Codex CLI: .codex/config.toml; Gemini CLI: .gemini/settings.json).")


def _commit_hint(agent: str, result: dict[str, object]) -> str:
    """Which files of the project an agent's install wrote, to be committed so every clone has
    them: its hooks file (`CONFIG`), and its MCP configuration when our server is in it."""
    from git_handoff.agent_cli import registry

    cli = registry.get(agent)
    files = [cli.CONFIG]
    mcp = result.get("mcp")
    registered = isinstance(mcp, dict) and bool(mcp.get("registered"))
    if registered and cli.MCP_CONFIG not in files:
        files.append(cli.MCP_CONFIG)
    label = cli.LABEL
    what = "these hooks and the MCP server" if registered else "these hooks"
    return (f"Commit {' and '.join(files)} (git add {' '.join(files)}; git commit) so every clone "
            f"and every later {label} session gets {what}.")


def _echo_mcp(result: dict[str, object]) -> None:
    mcp = result.get("mcp")
    if not isinstance(mcp, dict):
        return
    where = mcp.get("mcp_json") or mcp.get("config")
    if mcp.get("problem"):
        click.echo(f"warning: {mcp['problem']}", err=True)
    elif "removed" in mcp:
        click.echo(f"MCP server {'removed from' if mcp['removed'] else 'was not in'} {where}")
    else:
        server = mcp.get("server") or {}
        command = " ".join([str(server.get("command"))] + [str(a) for a in server.get("args") or []])
        click.echo(f"MCP server 'handoff' in {where}: {command}")


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


UNATTENDED_OPTION = click.option(
    "--unattended", is_flag=True,
    help="With --agent claude: also record what an unattended interactive run (relay --tmux) needs where the "
         "project may say it, in .claude/settings.local.json (this clone only, kept out of git by "
         ".git/info/exclude): \"skipDangerousModePermissionPrompt\": true, so --dangerously-skip-permissions "
         "does not stop on its warning (Claude Code ignores it in the shared .claude/settings.json), and unless "
         "--no-mcp \"enabledMcpjsonServers\": [\"handoff\"], so the CLI does not ask whether to use the project's "
         "MCP server. It cannot set what Claude Code reads only from ~/.claude.json: hasCompletedOnboarding, "
         "projects[\"<repo>\"].hasTrustDialogAccepted, customApiKeyResponses.approved (the key's last 20 "
         "characters) - see docs/agent-clis.md. With uninstall: remove those settings.")


def _echo_unattended(result: dict[str, object]) -> None:
    done = result.get("unattended")
    if not isinstance(done, dict):
        return
    if "removed" in done:
        removed = done["removed"]
        click.echo(f"Unattended settings removed from {done['local_settings']}: {', '.join(removed)}" if removed
                   else f"Unattended settings were not in {done['local_settings']}")
        return
    added = done["set"]
    click.echo(f"Unattended: {', '.join(added) if added else 'already set'} in {done['local_settings']} "
               "(this clone only)")
    click.echo("  still needed in ~/.claude.json (Claude Code reads them nowhere else): "
               "hasCompletedOnboarding, projects[\"<repo>\"].hasTrustDialogAccepted, "
               "customApiKeyResponses.approved - see docs/agent-clis.md")


@hooks_cmd.command("install")
@AGENT_OPTION
@NO_MCP_OPTION
@UNATTENDED_OPTION
@json_option
def hooks_install_cmd(agent: str | None, no_mcp: bool, unattended: bool, as_json: bool) -> None:
    """Install the post-commit hook (chained beside an existing one), or with --agent
    merge that agent's hooks into its own config, keeping every entry of yours:
    claude -> .claude/settings.json, codex -> .codex/hooks.json (and their trust in
    $CODEX_HOME/config.toml, which `codex exec` needs to run them), gemini ->
    .gemini/settings.json; and, unless --no-mcp, `git handoff mcp` registered as the
    MCP server `handoff` (claude: .mcp.json; codex: [mcp_servers.handoff] in the
    project's .codex/config.toml, read in a trusted project; gemini:
    mcpServers.handoff in .gemini/settings.json)."""
    from git_handoff.ops import hook_install

    # the text below reads the answer of whichever hooks were installed: a plain mapping
    result: dict[str, Any] = dict(hook_install.install(_repo(), agent=agent, command=installed_with(), mcp=not no_mcp,
                           unattended_run=unattended))
    if as_json:
        emit_json(result)
    elif agent == "claude":
        added = ", ".join(result["added"]) or "none (already installed)"
        click.echo(f"Claude Code hooks in {result['settings']}: added {added}")
        shared = ".claude/settings.json" + (" .mcp.json" if isinstance(result.get("mcp"), dict) else "")
        click.echo(f"Commit {shared.replace(' ', ' and ')} (git add {shared}; git commit) so every clone "
                   "and every later session gets these hooks" + (" and the MCP server." if " " in shared else "."))
        _echo_mcp(result)
        _echo_unattended(result)
    elif agent in hook_install.AGENT_SPECS:
        added = ", ".join(result["added"]) or "none (already installed)"
        click.echo(f"{hook_install.AGENT_SPECS[agent].label} hooks in {result['settings']}: added {added}")
        if "trusted" in result:  # a CLI whose hooks need their trust recorded (Codex)
            click.echo(f"  trusted in {result['codex_config']}: {'yes' if result['trusted'] else 'no'}")
        _echo_mcp(result)
        click.echo(_commit_hint(agent, result))
        for note in _agent_notes(result):
            click.echo(f"  note: {note}")
    else:
        chained = " (your existing hook is kept and runs first)" if result["chained_user_hook"] else ""
        click.echo(f"Installed {result['post_commit']}{chained}")


@hooks_cmd.command("uninstall")
@AGENT_OPTION
@NO_MCP_OPTION
@UNATTENDED_OPTION
@json_option
def hooks_uninstall_cmd(agent: str | None, no_mcp: bool, unattended: bool, as_json: bool) -> None:
    """Remove what `hooks install` added (a chained hook is put back as it was; of
    the agent's MCP configuration only our `handoff` server goes)."""
    from git_handoff.ops import hook_install

    result: dict[str, Any] = dict(hook_install.uninstall(_repo(), agent=agent, mcp=not no_mcp, unattended_run=unattended))
    if as_json:
        emit_json(result)
    elif agent is not None:
        click.echo(f"Removed git handoff hooks from {result['settings']}: {', '.join(result['removed']) or 'none found'}")
        _echo_mcp(result)
        _echo_unattended(result)
    else:
        click.echo(f"Removed {result['post_commit']}" if result["removed"] else "No git handoff hook was installed")


@hooks_cmd.command("status")
@AGENT_OPTION
@json_option
def hooks_status_cmd(agent: str | None, as_json: bool) -> None:
    """Which hooks are installed, and the thresholds that trigger a handoff
    (with --agent NAME: only that agent's hooks)."""
    from git_handoff.agent_cli import registry
    from git_handoff.ops import hook_install

    if agent in hook_install.AGENT_SPECS:
        one: dict[str, Any] = dict(hook_install.agent_status(_repo(), hook_install.AGENT_SPECS[agent], with_mcp=True))
        if as_json:
            emit_json(one)
            return
        click.echo(f"{agent} hooks: {'installed' if one['installed'] else 'not installed'} ({one['settings']})")
        for event, there in one["events"].items():
            click.echo(f"  {event}: {'yes' if there else 'no'}")
        if "trusted" in one:  # a CLI whose hooks need their trust recorded (Codex)
            click.echo(f"  trusted in {one['codex_config']}: {'yes' if one['trusted'] else 'no'}"
                       + ("" if one["trusted"] or not one["installed"] else " (run `git handoff hooks install --agent codex` again)"))
        if one.get("problem"):
            click.echo(f"  problem: {one['problem']}")
        mcp = one["mcp"]
        click.echo(f"  mcp server 'handoff': {'registered' if mcp['registered'] else 'not registered'} "
                   f"({mcp['config']})" + (f"; {mcp['problem']}" if mcp.get("problem") else ""))
        for note in _agent_notes(one):
            click.echo(f"  note: {note}")
        return
    result: dict[str, Any] = dict(hook_install.status(_repo()))
    if agent == "claude":
        claude = {"agent": "claude", "settings": result["claude_settings"], "installed": result["claude"],
                  "mcp": result["claude_mcp"], "unattended": result["claude_unattended"]}
        if as_json:
            emit_json(claude)
        else:
            state = "installed" if claude["installed"] else "not installed"
            click.echo(f"claude code hooks: {state} ({claude['settings']})")
            mcp = result["claude_mcp"]
            click.echo(f"mcp server 'handoff': {'registered' if mcp['registered'] else 'not registered'} "
                       f"({mcp['mcp_json']})" + (f"; {mcp['problem']}" if mcp.get("problem") else ""))
            click.echo(f"unattended (skipDangerousModePermissionPrompt in .claude/settings.local.json): "
                       f"{'yes' if claude['unattended'] else 'no'}")
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
    for name in hook_install.AGENT_SPECS:
        click.echo(f"{name} hooks: {'installed' if result[name] else 'not installed'}")
    click.echo(f"mcp server 'handoff' (.mcp.json): {'registered' if result['claude_mcp']['registered'] else 'not registered'}")
    for name in hook_install.AGENT_SPECS:
        click.echo(f"mcp server 'handoff' ({registry.get(name).MCP_CONFIG}): "
                   f"{'registered' if result[f'{name}_mcp']['registered'] else 'not registered'}")


@click.command("hook")
@click.argument("event")
@json_option
def hook_cmd(event: str, as_json: bool) -> None:
    """Entry point the installed hooks call: post-commit; for Claude Code
    claude-session-start, claude-stop, claude-subagent-stop, claude-pre-compact,
    claude-session-end; for Codex CLI codex-session-start, codex-stop,
    codex-subagent-stop, codex-pre-compact, codex-session-end; for Gemini CLI
    gemini-session-start, gemini-after-agent, gemini-pre-compress, gemini-session-end
    (JSON payload on stdin). Never fails the caller: exit 0, also for an event it does
    not know (a warning on stderr; to Claude Code, exit 2 would mean "block")."""
    if event in DETACHED and not os.environ.get(DETACHED_ENV) and not as_json:
        _detach(event)
        return
    from git_handoff.ops import hook_entry

    if event not in hook_entry.EVENTS:
        # a warning, not exit 2: to Claude Code a hook's exit 2 means "block", so a typo or
        # a settings file from a newer version would turn every Stop into a block
        problem = f"unknown hook event {event!r} (ignored): git handoff knows {', '.join(hook_entry.EVENTS)}"
        click.echo(f"git handoff hook: {problem}", err=True)
        if as_json:
            refused: HookAnswer = {"event": event, "output": None, "problem": problem}
            emit_json(refused)
        return
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
            failed: HookAnswer = {"event": event, "output": None, "problem": str(exc)}
            emit_json(failed)
        return
    if warning:
        click.echo(warning, err=True)
    if as_json:
        answer: HookAnswer = {"event": event, "output": _parsed(out) if out else None}
        emit_json(answer)
    elif out:
        click.echo(out)


# Hooks whose caller allows less time than the work needs: Codex 0.171.0 gives a
# SessionEnd handler 1 s at most (then kills it), and closing a session with its
# document takes longer on a busy machine. Such a hook hands its payload to a detached
# `git handoff hook EVENT` in a session of its own and returns at once; nothing is
# printed either way (SessionEnd output is ignored).
DETACHED = ("codex-session-end",)
DETACHED_ENV = "HANDOFF_HOOK_DETACHED"


def _detach(event: str) -> None:
    import subprocess

    try:
        text = "" if sys.stdin.isatty() else sys.stdin.read()
    except (OSError, ValueError, UnicodeDecodeError):
        text = ""
    try:
        child = subprocess.Popen([sys.executable, "-m", "git_handoff", "hook", event], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                 env={**os.environ, DETACHED_ENV: "1"})
        assert child.stdin is not None
        child.stdin.write(text.encode(errors="replace"))
        child.stdin.close()
    except OSError as exc:  # a hook must never break the agent
        click.echo(f"git handoff hook {event}: {exc}", err=True)


def _parsed(text: str) -> object:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text
