"""Installing the triggers: the git post-commit hook (chained beside a user's own hook,
under core.hooksPath when set), and each agent CLI's hooks in its project file (its
`CONFIG`, agent_cli/registry.py: .claude/settings.json, .codex/hooks.json,
.gemini/settings.json) with our MCP server in its MCP configuration.

Claude Code's answers keep the shape they had before the other CLIs came (`ClaudeHooks`,
the `claude*` keys of `status`), and only its hooks start through the command server's
fast client; every other CLI goes through the one shared path (`install_agent`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from git_handoff import cmdclient, cmdproto
from git_handoff.agent_cli import agent_config, claude, mcp_config, plugin_file, registry, unattended
from git_handoff.agent_cli.templates import template_text
from git_handoff.core.errors import UsageError
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import hook_server
from git_handoff.ops.hook_payloads import AgentHooks, ClaudeHooks, ClaudeHooksStatus, HooksStatus
from git_handoff.state import this_clone

if TYPE_CHECKING:
    from git_handoff.agent_cli.protocol import AgentCli

MARKER = "git-handoff post-commit hook"
USER_SUFFIX = ".handoff-user"
NOTES_REF = "refs/notes/harness"
AGENTS = tuple(registry.CLIS)
RECORD_FILE = "hooks.json"  # in the per-clone handoff dir: what install changed, for uninstall

CLAUDE_COMMAND_PREFIX = claude.COMMAND_PREFIX
CLAUDE_HOOKS = claude.settings_entries()


def spec_of(cli: AgentCli) -> agent_config.Spec:
    """The CLI's hooks as `agent_config` merges them into its file (every CLI's file has
    Claude Code's shape: one merge serves all)."""
    return agent_config.Spec(cli.NAME, cli.LABEL, cli.CONFIG, cli.COMMAND_PREFIX, cli.config_entries(),
                             named=cli.NAMED_HANDLERS, timeouts=cli.TIMEOUTS, plugin=cli.PLUGIN)


CLAUDE_SPEC = spec_of(claude)
# the CLIs installed through the shared path
AGENT_SPECS = {name: spec_of(cli) for name, cli in registry.CLIS.items() if name != claude.NAME}


def _trusted_hooks(spec: agent_config.Spec) -> bool:
    """Does the CLI run our handlers only once their trust is recorded (Codex's
    $CODEX_HOME/config.toml, agent_config.codex_*)?"""
    return registry.get(spec.agent).TRUSTED_HOOKS


def template(command: Sequence[str] = ()) -> bytes:
    """The post-commit hook script shipped in hooks-templates/; `command` (the executable
    and its leading arguments, e.g. a python and `-m git_handoff`) is written into it as
    the way to start git handoff, instead of looking `git handoff` up on PATH."""
    text = template_text("post-commit")
    if command:
        text = text.replace("\nexe=''\n", f"\nexe={shlex.quote(command[0])}\n", 1)
        text = text.replace("\npre=''\n", f"\npre={shlex.quote(' '.join(command[1:]))}\n", 1)
    return text.encode()


_RECORDED = re.compile(rb"^(exe|pre)=.*$", re.MULTILINE)


def _without_command(script: bytes) -> bytes:
    return _RECORDED.sub(rb"\1=''", script)


def recorded_command(path: Path) -> list[str]:
    """The command an installed hook starts git handoff with ([] when it uses PATH)."""
    try:
        script = path.read_bytes().decode(errors="replace")
    except OSError:
        return []
    try:
        values = {k: shlex.split(v) for k, v in re.findall(r"^(exe|pre)=(.*)$", script, re.MULTILINE)}
    except ValueError:  # hand-edited beyond shell quoting
        return []
    exe = (values.get("exe") or [""])[0]
    pre = (values.get("pre") or [""])[0]
    return [exe, *pre.split()] if exe else []


def hooks_dir(repo: Repo) -> Path:
    """The effective hooks directory (core.hooksPath honoured, as git resolves it)."""
    where = repo.workdir or repo.git_dir
    proc = repo.git("rev-parse", "--git-path", "hooks", cwd=where)
    path = Path(proc.stdout.decode().strip())
    return (where / path).resolve() if not path.is_absolute() else path


def _ours(path: Path) -> bool:
    try:
        return MARKER.encode() in path.read_bytes()
    except OSError:
        return False


def _record(repo: Repo) -> dict[str, Any]:
    try:  # read without making the directory (`handoff_dir` would): a refused install changes nothing
        data = json.loads((repo.common_dir / "handoff" / RECORD_FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_record(repo: Repo, data: dict[str, Any]) -> None:
    (repo.handoff_dir / RECORD_FILE).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _rewrite_refs(repo: Repo) -> list[str]:
    proc = repo.git("config", "--get-all", "notes.rewriteRef", check=False)
    return proc.stdout.decode().split() if proc.returncode == 0 else []


def _check_agent(agent: str | None) -> None:
    if agent is not None and agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}: use {', '.join(AGENTS)}")


def _check_unattended(agent: str | None, wanted: bool) -> None:
    if wanted and (agent is None or not registry.get(agent).UNATTENDED):
        raise UsageError("--unattended is for --agent claude: Codex and Gemini CLI keep their folder trust in the "
                         "user's config only (codex: trust the project once, `codex exec --trust`; gemini: "
                         "GEMINI_CLI_TRUST_WORKSPACE=true)")


def install(repo: Repo, agent: str | None = None, command: Sequence[str] = (), *,
            mcp: bool = True, unattended_run: bool = False,
            command_server: bool = True) -> HooksStatus | ClaudeHooks | AgentHooks:
    """Install the post-commit hook (or an agent's hooks). `command`: how the hook starts
    git handoff (absolute; see `template`); empty: through `git handoff` on PATH.
    `unattended_run` (claude only): also what an unattended interactive run needs
    that the project may set (agent_cli/unattended.py). An agent's hooks also turn the
    command server on for the repository unless `command_server` is false or the key is
    set already (ops/hook_server.py): first, so Claude Code's hooks take its fast form."""
    _check_agent(agent)
    _check_unattended(agent, unattended_run)
    if agent is None and not command_server:
        raise UsageError("--no-command-server is for --agent: the post-commit hook does not turn the command "
                         "server on")
    if agent is not None:
        if repo.workdir is None:
            raise UsageError(f"the {registry.get(agent).LABEL} hooks need a work tree (the repository is bare)")
        record = _record(repo)
        server = hook_server.turn_on(repo, record, command_server)
        try:
            result = _install_agent(repo, agent, mcp=mcp, unattended_run=unattended_run)
        except BaseException:
            hook_server.undo(repo, server.get("changed", ""))
            raise
        _save_record(repo, record)
        result["command_server"] = server
        return result
    directory = hooks_dir(repo)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "post-commit"
    saved = directory / ("post-commit" + USER_SUFFIX)
    chained = False
    if target.exists() or target.is_symlink():
        if not _ours(target):
            if saved.exists() or saved.is_symlink():
                raise UsageError(f"{saved} already exists: move it away before `git handoff hooks install`")
            os.rename(target, saved)
            chained = True
    atomic_write(target, template(command), mode=0o755)
    record = _record(repo)
    if NOTES_REF not in _rewrite_refs(repo):
        repo.git("config", "--add", "notes.rewriteRef", NOTES_REF)
        record["added_rewrite_ref"] = True
    _save_record(repo, record)
    opened = this_clone.open_session(repo)
    if opened is not None:
        this_clone.write_hook_state(repo, opened.get("base"))
    return {**status(repo), "chained_now": chained}


def _install_agent(repo: Repo, agent: str, *, mcp: bool, unattended_run: bool) -> ClaudeHooks | AgentHooks:
    if agent == claude.NAME:
        if mcp:
            mcp_config.check(repo)  # an unreadable .mcp.json refuses before anything changes
        if unattended_run:
            unattended.check(repo)  # checked before the hooks' settings are written
        result = install_claude(repo)
        if unattended_run:
            result["unattended"] = unattended.install(repo, mcp=mcp)
        return {**result, "mcp": mcp_config.install(repo)} if mcp else result
    spec = AGENT_SPECS[agent]
    if not mcp:
        return install_agent(repo, spec)
    _check_agent_files(repo, spec)  # every file refuses before any is written
    mcp_config.check(repo, agent)
    registered = mcp_config.install(repo, agent)  # first: a file it creates is its to remove
    return {**install_agent(repo, spec), "mcp": registered}


def uninstall(repo: Repo, agent: str | None = None, *, mcp: bool = True,
              unattended_run: bool = False) -> HooksStatus | ClaudeHooks | AgentHooks:
    """Remove what `install` added; an agent's: and the command server's setting, when
    install set it and no agent's hooks remain (ops/hook_server.py)."""
    _check_agent(agent)
    _check_unattended(agent, unattended_run)
    if agent is not None:
        result = _uninstall_agent(repo, agent, mcp=mcp, unattended_run=unattended_run)
        record = _record(repo)
        server = hook_server.turn_off(repo, record, agents_left=any_agent_installed(repo))
        _save_record(repo, record)
        result["command_server"] = server
        return result
    directory = hooks_dir(repo)
    target = directory / "post-commit"
    saved = directory / ("post-commit" + USER_SUFFIX)
    removed = False
    if _ours(target):
        target.unlink()
        removed = True
        if saved.exists() or saved.is_symlink():
            os.rename(saved, target)
    record = _record(repo)
    if record.pop("added_rewrite_ref", False) and NOTES_REF in _rewrite_refs(repo):
        repo.git("config", "--fixed-value", "--unset", "notes.rewriteRef", NOTES_REF, check=False)
    _save_record(repo, record)
    return {**status(repo), "removed": removed}


def _uninstall_agent(repo: Repo, agent: str, *, mcp: bool, unattended_run: bool) -> ClaudeHooks | AgentHooks:
    if agent == claude.NAME:
        if mcp:
            mcp_config.check(repo)
        if unattended_run:
            unattended.check(repo)
        result = uninstall_claude(repo)
        if unattended_run:
            result["unattended"] = unattended.uninstall(repo, mcp=mcp)
        return {**result, "mcp": mcp_config.uninstall(repo)} if mcp else result
    spec = AGENT_SPECS[agent]
    if not mcp:
        return uninstall_agent(repo, spec)
    _check_agent_files(repo, spec)
    mcp_config.check(repo, agent)
    unregistered = mcp_config.uninstall(repo, agent)
    return {**uninstall_agent(repo, spec), "mcp": unregistered}


def any_agent_installed(repo: Repo) -> bool:
    """Does any agent CLI's file still hold one of our hooks?"""
    return claude_installed(repo) or any(any(agent_status(repo, spec)["events"].values())
                                         for spec in AGENT_SPECS.values())


def status(repo: Repo) -> HooksStatus:
    directory = hooks_dir(repo)
    target = directory / "post-commit"
    installed = _ours(target)
    settings = claude_settings_path(repo)
    opened = this_clone.open_session(repo)
    return {
        "hooks_dir": str(directory),
        "post_commit": str(target),
        "installed": installed,
        "up_to_date": installed and _without_command(target.read_bytes()) == template(),
        "starts": recorded_command(target) if installed else [],
        "chained_user_hook": installed and (directory / ("post-commit" + USER_SUFFIX)).exists(),
        "notes_rewrite_ref": NOTES_REF in _rewrite_refs(repo),
        "commits_per_session": this_clone.commits_per_session(repo),
        "tasks_per_session": this_clone.tasks_per_session(repo),
        "session": opened.get("session") if opened else None,
        "claude": claude_installed(repo),
        "claude_settings": str(settings) if settings else None,
        "claude_unattended": unattended.installed(repo),
        **{name: agent_status(repo, spec)["installed"]  # type: ignore[typeddict-item]  # a key per registered CLI,
           for name, spec in AGENT_SPECS.items()},  # each one of HooksStatus (a new CLI adds its two there)
        "claude_mcp": mcp_config.status(repo),
        **{f"{name}_mcp": mcp_config.status(repo, name) for name in AGENT_SPECS},
        "command_server": hook_server.setting(repo, _record(repo)),
    }


def status_of(repo: Repo, agent: str | None = None) -> HooksStatus | ClaudeHooksStatus | AgentHooks:
    """`hooks status [--agent NAME]`: every trigger (`status`), or one agent CLI's hooks with
    our MCP server's entry; Claude Code's keeps the shape it had before the other CLIs came
    (its keys of `status`, named as `hooks install --agent claude` names them)."""
    if agent in AGENT_SPECS:
        return {**agent_status(repo, AGENT_SPECS[agent], with_mcp=True),
                "command_server": hook_server.setting(repo, _record(repo))}
    every = status(repo)
    if agent != claude.NAME:
        return every
    return {"agent": claude.NAME, "settings": every["claude_settings"], "installed": every["claude"],
            "mcp": every["claude_mcp"], "unattended": every["claude_unattended"],
            "command_server": every["command_server"]}


# -- Claude Code ---------------------------------------------------------------------


def claude_settings_path(repo: Repo) -> Path | None:
    return repo.workdir / ".claude" / "settings.json" if repo.workdir else None


def claude_installed(repo: Repo) -> bool:
    path = claude_settings_path(repo)
    if path is None or not path.exists():
        return False
    try:
        data = agent_config.load(path, CLAUDE_SPEC)
    except UsageError:
        return False
    return agent_config.has_ours(data, CLAUDE_SPEC)


def claude_spec(repo: Repo) -> agent_config.Spec:
    """The Claude Code hooks as this repository installs them: where its git config turns
    the command server on (`handoff.commandServer`), each hook starts through the server's
    fast client, an interpreter without `site` that hands the hook to the server (the
    plain command when the client is not there); else the plain `git handoff hook ...`."""
    if not cmdproto.configured(str(repo.common_dir)):
        return CLAUDE_SPEC
    client = cmdclient.fast_command([])
    entries = claude.fast_entries(client, os.path.join(cmdclient.PACKAGE_DIR, "cmdclient.py"))
    return dataclasses.replace(CLAUDE_SPEC, entries=entries)


def install_claude(repo: Repo) -> ClaudeHooks:
    path = claude_settings_path(repo)
    if path is None:
        raise UsageError("the Claude Code hooks need a work tree (the repository is bare)")
    spec = claude_spec(repo)
    data = agent_config.load(path, spec)
    replaced = agent_config.remove_others(data, spec)
    added = agent_config.merge(data, spec)
    if added or replaced or not path.exists():
        agent_config.write(path, data)
    return {"settings": str(path), "added": added, "installed": True}


def uninstall_claude(repo: Repo) -> ClaudeHooks:
    path = claude_settings_path(repo)
    if path is None or not path.exists():
        return {"settings": str(path) if path else None, "removed": [], "installed": False}
    data = agent_config.load(path, CLAUDE_SPEC)
    removed = agent_config.remove(data, CLAUDE_SPEC)
    if removed:
        agent_config.write(path, data)
    return {"settings": str(path), "removed": removed, "installed": False}


# -- the other CLIs: a JSON file merged into, or a plugin file of ours (OpenCode) --------------


def _agent_path(repo: Repo, spec: agent_config.Spec) -> Path:
    if repo.workdir is None:
        raise UsageError(f"the {spec.label} hooks need a work tree (the repository is bare)")
    return repo.workdir / spec.relpath


def _check_agent_files(repo: Repo, spec: agent_config.Spec) -> None:
    """Refuse (UsageError, nothing changed) when the agent's hooks file, or for Codex
    $CODEX_HOME/config.toml, cannot be merged into (a plugin file: a user's file stands there)."""
    if spec.plugin:
        plugin_file.check(_agent_path(repo, spec))
    else:
        agent_config.load(_agent_path(repo, spec), spec)
    if _trusted_hooks(spec):
        agent_config.check_codex_config(agent_config.codex_home() / "config.toml")


def install_agent(repo: Repo, spec: agent_config.Spec) -> AgentHooks:
    """Merge our handlers into the agent's config (user entries kept); for Codex also
    record their trust in $CODEX_HOME/config.toml. Both files are checked before either
    is written."""
    path = _agent_path(repo, spec)
    if spec.plugin:
        added = plugin_file.install(path, spec.plugin, list(spec.entries))
        return {**agent_status(repo, spec), "added": added}
    data = agent_config.load(path, spec)
    codex_doc = None
    config = agent_config.codex_home() / "config.toml"
    if _trusted_hooks(spec):
        codex_doc = agent_config.check_codex_config(config)
    added = agent_config.merge(data, spec)
    if added or not path.exists():
        agent_config.write(path, data)
    if codex_doc is not None:
        agent_config.codex_trust(config, codex_doc, path.resolve(), data, spec)
    return {**agent_status(repo, spec), "added": added}


def uninstall_agent(repo: Repo, spec: agent_config.Spec) -> AgentHooks:
    path = _agent_path(repo, spec)
    removed: list[str] = []
    if spec.plugin:
        removed = plugin_file.uninstall(path, list(spec.entries))
    elif path.exists():
        data = agent_config.load(path, spec)
        removed = agent_config.remove(data, spec)
        if removed and not data:
            path.unlink()  # nothing of the user's was in it: leave no empty file behind
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        elif removed:
            agent_config.write(path, data)
    if _trusted_hooks(spec):
        agent_config.codex_untrust(agent_config.codex_home() / "config.toml", path.resolve(), spec)
    return {**agent_status(repo, spec), "removed": removed}


def agent_status(repo: Repo, spec: agent_config.Spec, *, with_mcp: bool = False) -> AgentHooks:
    """The agent's hooks as installed (with_mcp: and our MCP server's entry in its config)."""
    if repo.workdir is None:
        return {"agent": spec.agent, "settings": None, "installed": False, "events": {}}
    path = repo.workdir / spec.relpath
    data: dict[str, Any] = {}
    problem = None
    try:
        if spec.plugin:
            plugin_file.check(path)
        else:
            data = agent_config.load(path, spec)
    except UsageError as exc:
        problem = exc.message
    events = (plugin_file.present(path, spec.plugin, list(spec.entries)) if spec.plugin
              else agent_config.present(data, spec))
    out: AgentHooks = {"agent": spec.agent, "settings": str(path), "installed": all(events.values()),
                           "events": events}
    if problem:
        out["problem"] = problem
    if _trusted_hooks(spec):
        config = agent_config.codex_home() / "config.toml"
        out["codex_config"] = str(config)
        trust = agent_config.codex_status(config, path.resolve(), data, spec, repo.workdir)
        out["trusted"] = trust["trusted"]
        out["project_trusted"] = trust["project_trusted"]
        out["hooks_feature"] = trust["hooks_feature"]
    if with_mcp:
        out["mcp"] = mcp_config.status(repo, spec.agent)
    return out
