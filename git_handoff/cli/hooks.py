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
                                 "Gemini CLI: .gemini/settings.json; Qwen Code: .qwen/settings.json; Copilot CLI: "
                                 ".github/hooks/handoff.json; OpenCode: the plugin .opencode/plugins/git-handoff.js).")


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
                                  "Codex CLI: .codex/config.toml; Gemini CLI and Qwen Code: their settings.json; "
                                  "Copilot CLI: .github/mcp.json; OpenCode: opencode.json).")


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


NO_COMMAND_SERVER_OPTION = click.option(
    "--no-command-server", is_flag=True,
    help="With --agent: do not turn the command server on for this repository (by default the install sets "
         "handoff.commandServer true in .git/config, where the key is set nowhere yet, so the hooks that fire at "
         "every turn are served by a warm process: docs/command-server.md). A value you set is never changed; "
         "turn it off later with `git config handoff.commandServer false`.")


def command_server_line(found: dict[str, Any]) -> str:
    """`command_server` of `hooks install|uninstall|status` (ops/hook_server.py) in one line:
    on or off, who set it, and the command that turns it off (or on)."""
    changed = found.get("changed")
    value = found["value"]
    env = f"; {found['environment']} in this environment wins over it" if found.get("environment") else ""
    if found["on"]:
        how = ("turned on now: handoff.commandServer true in .git/config" if changed == "set"
               else "handoff.commandServer true, set by hooks install" if found["set_by_install"]
               else "handoff.commandServer true, as you set it")
        return f"command server: on for this repository ({how}){env}; turn it off: {found['turn_off']}"
    if changed == "unset":
        why = "handoff.commandServer unset: hooks install had turned it on"
    elif value is not None:
        why = f"handoff.commandServer {value}, as you set it"
    else:
        why = "handoff.commandServer unset" + (", as --no-command-server asked" if changed == "not set" else "")
    return f"command server: off ({why}){env}; turn it on: {found['turn_on']}"


@hooks_cmd.command("install")
@AGENT_OPTION
@NO_MCP_OPTION
@UNATTENDED_OPTION
@NO_COMMAND_SERVER_OPTION
@json_option
def hooks_install_cmd(agent: str | None, no_mcp: bool, unattended: bool, no_command_server: bool,
                      as_json: bool) -> None:
    """Install the post-commit hook (chained beside an existing one), or with --agent
    merge that agent's hooks into its own config, keeping every entry of yours:
    claude -> .claude/settings.json, codex -> .codex/hooks.json (and their trust in
    $CODEX_HOME/config.toml, which `codex exec` needs to run them), gemini ->
    .gemini/settings.json, qwen -> .qwen/settings.json, copilot ->
    .github/hooks/handoff.json, opencode -> a plugin of ours, .opencode/plugins/git-handoff.js;
    and, unless --no-mcp, `git handoff mcp` registered as the MCP server `handoff` (claude:
    .mcp.json; codex: [mcp_servers.handoff] in the project's .codex/config.toml, read in a
    trusted project; gemini, qwen: mcpServers.handoff in their settings.json; copilot:
    .github/mcp.json; opencode: mcp.handoff in opencode.json).

    With --agent it also turns the command server on for this repository
    (handoff.commandServer true in .git/config) unless --no-command-server or the key
    is already set anywhere: the hooks then run in a warm process, not a fresh Python
    each turn. Turn it off with `git config handoff.commandServer false`; `hooks
    uninstall` unsets it when install set it and no agent's hooks remain."""
    from git_handoff.ops import hook_install

    # the text below reads the answer of whichever hooks were installed: a plain mapping
    result: dict[str, Any] = dict(hook_install.install(_repo(), agent=agent, command=installed_with(), mcp=not no_mcp,
                           unattended_run=unattended, command_server=not no_command_server))
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
        click.echo(command_server_line(result["command_server"]))
    elif agent in hook_install.AGENT_SPECS:
        added = ", ".join(result["added"]) or "none (already installed)"
        click.echo(f"{hook_install.AGENT_SPECS[agent].label} hooks in {result['settings']}: added {added}")
        if "trusted" in result:  # a CLI whose hooks need their trust recorded (Codex)
            click.echo(f"  trusted in {result['codex_config']}: {'yes' if result['trusted'] else 'no'}")
        _echo_mcp(result)
        click.echo(_commit_hint(agent, result))
        for note in _agent_notes(result):
            click.echo(f"  note: {note}")
        click.echo(command_server_line(result["command_server"]))
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
    the agent's MCP configuration only our `handoff` server goes; handoff.commandServer
    is unset when the install set it and no agent's hooks remain, a value you set kept)."""
    from git_handoff.ops import hook_install

    result: dict[str, Any] = dict(hook_install.uninstall(_repo(), agent=agent, mcp=not no_mcp,
                                                         unattended_run=unattended))
    if as_json:
        emit_json(result)
    elif agent is not None:
        click.echo(f"Removed git handoff hooks from {result['settings']}: "
                   f"{', '.join(result['removed']) or 'none found'}")
        _echo_mcp(result)
        _echo_unattended(result)
        click.echo(command_server_line(result["command_server"]))
    else:
        click.echo(f"Removed {result['post_commit']}" if result["removed"] else "No git handoff hook was installed")


@hooks_cmd.command("status")
@AGENT_OPTION
@json_option
def hooks_status_cmd(agent: str | None, as_json: bool) -> None:
    """Which hooks are installed, the thresholds that trigger a handoff, and whether the
    command server is on and how to turn it off (with --agent NAME: only that agent's
    hooks)."""
    from git_handoff.ops import hook_install

    # the text below reads whichever of the three shapes `status_of` answered: a plain mapping
    found: dict[str, Any] = dict(hook_install.status_of(_repo(), agent))
    if as_json:
        emit_json(found)
        return
    lines = (_status_lines(found) if agent is None else _claude_status_lines(found) if agent == "claude"
             else _agent_status_lines(agent, found))
    for line in [*lines, command_server_line(found["command_server"])]:
        click.echo(line)


@hooks_cmd.command("versions")
@click.option("--check", is_flag=True, help="Exit 1 when an installed CLI is not the version the suite proves.")
@json_option
def hooks_versions_cmd(check: bool, as_json: bool) -> None:
    """For each supported agent CLI: the version the test suite proves (pinned), the one
    installed here (`PROGRAM --version`), and whether they differ. A CLI not installed is
    shown as such and is no difference. To run the suite's CLI tests against the newest
    release of each, see docs/agent-clis.md ("Keeping up with the CLIs")."""
    from git_handoff.agent_cli import versions

    found = versions.report()
    if as_json:
        emit_json(found)
    else:
        for one in found:
            state = ("DIFFERS" if one["differs"] else "same") if one["installed"] else "not installed"
            click.echo(f"{one['agent']:<8} {one['label']:<12} pinned {one['pinned']:<9} installed "
                       f"{one['installed'] or '-':<9} {state}" + (f" ({one['program']})" if one["program"] else ""))
    if check and any(one["differs"] for one in found):
        names = ", ".join(f"{one['agent']} {one['installed']} (pinned {one['pinned']})" for one in found
                          if one["differs"])
        if not as_json:
            click.echo(f"error: installed CLIs differ from the versions the suite proves: {names}", err=True)
        sys.exit(1)


def _yes(value: object) -> str:
    return "yes" if value else "no"


def _installed(value: object) -> str:
    return "installed" if value else "not installed"


def _registered(value: object) -> str:
    return "registered" if value else "not registered"


def _agent_status_lines(agent: str, one: dict[str, Any]) -> list[str]:
    """`hooks status --agent NAME` for a CLI other than Claude Code."""
    lines = [f"{agent} hooks: {_installed(one['installed'])} ({one['settings']})"]
    lines += [f"  {event}: {_yes(there)}" for event, there in one["events"].items()]
    if "trusted" in one:  # a CLI whose hooks need their trust recorded (Codex)
        again = ("" if one["trusted"] or not one["installed"]
                 else " (run `git handoff hooks install --agent codex` again)")
        lines.append(f"  trusted in {one['codex_config']}: {_yes(one['trusted'])}{again}")
    if one.get("problem"):
        lines.append(f"  problem: {one['problem']}")
    mcp = one["mcp"]
    lines.append(f"  mcp server 'handoff': {_registered(mcp['registered'])} ({mcp['config']})"
                 + (f"; {mcp['problem']}" if mcp.get("problem") else ""))
    return lines + [f"  note: {note}" for note in _agent_notes(one)]


def _claude_status_lines(claude: dict[str, Any]) -> list[str]:
    """`hooks status --agent claude`."""
    mcp = claude["mcp"]
    return [f"claude code hooks: {_installed(claude['installed'])} ({claude['settings']})",
            f"mcp server 'handoff': {_registered(mcp['registered'])} ({mcp['mcp_json']})"
            + (f"; {mcp['problem']}" if mcp.get("problem") else ""),
            "unattended (skipDangerousModePermissionPrompt in .claude/settings.local.json): "
            f"{_yes(claude['unattended'])}"]


def _status_lines(result: dict[str, Any]) -> list[str]:
    """`hooks status`: the post-commit hook, the thresholds, each agent CLI's hooks and MCP entry."""
    from git_handoff.agent_cli import registry
    from git_handoff.ops.hook_install import AGENT_SPECS

    others = list(AGENT_SPECS)  # the CLIs besides Claude Code, each with its two keys
    lines = [f"post-commit: {_installed(result['installed'])} ({result['post_commit']})"]
    if result["chained_user_hook"]:
        lines.append("  chained: your own post-commit hook runs first")
    lines += [f"notes.rewriteRef refs/notes/harness: {_yes(result['notes_rewrite_ref'])}",
              f"handoff.commitsPerSession: {result['commits_per_session'] or 'unset'}",
              f"handoff.tasksPerSession: {result['tasks_per_session'] or 'unset'}",
              f"claude code hooks: {_installed(result['claude'])}"]
    lines += [f"{name} hooks: {_installed(result[name])}" for name in others]
    lines.append(f"mcp server 'handoff' (.mcp.json): {_registered(result['claude_mcp']['registered'])}")
    return lines + [f"mcp server 'handoff' ({registry.get(name).MCP_CONFIG}): "
                    f"{_registered(result[f'{name}_mcp']['registered'])}" for name in others]


@click.command("hook")
@click.argument("event")
@json_option
def hook_cmd(event: str, as_json: bool) -> None:
    """Entry point the installed hooks call: post-commit; for Claude Code
    claude-session-start, claude-stop, claude-subagent-stop, claude-pre-compact,
    claude-session-end; for Codex CLI codex-session-start, codex-stop,
    codex-subagent-stop, codex-pre-compact, codex-session-end; for Gemini CLI
    gemini-session-start, gemini-after-agent, gemini-pre-compress, gemini-session-end;
    for Qwen Code qwen-session-start, qwen-stop, qwen-subagent-stop, qwen-pre-compact,
    qwen-session-end; for Copilot CLI copilot-session-start, copilot-agent-stop,
    copilot-subagent-stop, copilot-pre-compact, copilot-session-end; for OpenCode (its plugin)
    opencode-session-start, opencode-stop, opencode-compacting (JSON payload on stdin).
    Never fails the caller: exit 0, also for an event it does not know (a warning on stderr;
    to Claude Code, exit 2 would mean "block")."""
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
