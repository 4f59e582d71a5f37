"""Registering `git handoff mcp` in an agent's MCP configuration, one mechanism with a
location per agent (each CLI's `MCP_*`, agent_cli/registry.py):

- Claude Code: the project's `.mcp.json`, `{"mcpServers": {"handoff": {...}}}`;
- Codex CLI: the project's `.codex/config.toml`, an `[mcp_servers.handoff]` table
  (codex-cli 0.171.0 reads a project's `.codex/config.toml`, mcp_servers included, once
  the project is trusted; `codex mcp list` then lists it; edited with tomlkit so the
  user's comments and layout survive);
- Gemini CLI: the project's `.gemini/settings.json`, `mcpServers.handoff`;
- Qwen Code: the project's `.qwen/settings.json`, `mcpServers.handoff`;
- Copilot CLI: the project's `.github/mcp.json`, `mcpServers.handoff`;
- OpenCode: the project's `opencode.json`, `mcp.handoff` in its own shape (`"type": "local"`,
  the whole command as one list, `"enabled": true`).

Every other server and key of the file is kept as it was; uninstall removes only our
entry (and the file only when install created it and nothing else was added since).
A user's own server named `handoff` is never overwritten: it is reported instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from git_handoff.agent_cli import registry
from git_handoff.core.errors import UsageError
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo

SERVER_NAME = "handoff"
RECORD_FILE = "mcp-config.json"  # per clone: whether install created .mcp.json


@dataclass(frozen=True)
class Location:
    agent: str
    relpath: str  # in the work tree
    key: str  # the table of servers
    toml: bool = False
    extra: tuple[tuple[str, Any], ...] = ()  # keys of our entry besides command and args
    command_list: bool = False  # "command" is the whole list, no "args" (OpenCode)

    @property
    def record_file(self) -> str:
        return RECORD_FILE if self.agent == "claude" else f"mcp-config-{self.agent}.json"

    @property
    def path_key(self) -> str:
        """The JSON key naming the file in status (Claude's kept as it always was)."""
        return "mcp_json" if self.agent == "claude" else "config"


LOCATIONS = {name: Location(name, cli.MCP_CONFIG, cli.MCP_KEY, toml=cli.MCP_TOML, extra=cli.MCP_EXTRA,
                            command_list=cli.MCP_COMMAND_LIST)
             for name, cli in registry.CLIS.items()}


def executable() -> str | None:
    """The absolute path of the installed `git-handoff` console script, if one is found:
    beside this interpreter first (the same installation), else on PATH."""
    beside = Path(sys.executable).parent / "git-handoff"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("git-handoff")
    return str(Path(found).resolve()) if found else None


def server_entry() -> dict[str, Any]:
    """Our server's entry: the absolute executable with args ["mcp"], else `git handoff mcp`."""
    exe = executable()
    if exe is not None:
        return {"command": exe, "args": ["mcp"]}
    return {"command": "git", "args": ["handoff", "mcp"]}


def _entry(where: Location) -> dict[str, Any]:
    """Our entry as the agent's file spells it: `server_entry` and the CLI's own keys."""
    entry = server_entry()
    if where.command_list:
        entry = {"command": [entry["command"], *entry["args"]]}
    return {**entry, **dict(where.extra)}


def _plain(value: Any) -> Any:
    """A tomlkit item as plain Python (dict/list/str...); anything else unchanged."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def is_ours(entry: Any) -> bool:
    entry = _plain(entry)
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command", ""), entry.get("args")
    if isinstance(command, list) and command and args is None:  # the whole command as one list (OpenCode)
        command, args = command[0], command[1:]
    command = str(command)
    return ((Path(command).name == "git-handoff" and args == ["mcp"])
            or (Path(command).name == "git" and args == ["handoff", "mcp"]))


def _location(agent: str) -> Location:
    try:
        return LOCATIONS[agent]
    except KeyError:
        raise UsageError(f"no MCP configuration is known for agent {agent!r}: use {', '.join(LOCATIONS)}") from None


def config_path(repo: Repo, agent: str = "claude") -> Path:
    if repo.workdir is None:
        raise UsageError("the MCP configuration needs a work tree (the repository is bare)")
    return repo.workdir / _location(agent).relpath


def _load(path: Path, where: Location) -> Any:
    """The file's document ({} / an empty TOML document when absent); refused unchanged
    (UsageError) when it cannot be merged into."""
    if where.toml:
        import tomlkit

        if not path.exists():
            return tomlkit.document()
        try:
            data: Any = tomlkit.parse(path.read_text())
        except (OSError, UnicodeDecodeError, tomlkit.exceptions.ParseError) as exc:
            raise UsageError(f"{path} is not valid TOML ({exc}); fix it first, nothing was changed") from None
        kind = "a table"
    else:
        if not path.exists():
            return {}
        try:
            data = json.loads(path.read_text() or "{}")
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed") from None
        if not isinstance(data, dict):
            raise UsageError(f"{path} must hold a JSON object; nothing was changed")
        kind = "an object"
    servers = data.get(where.key)
    if servers is not None and not isinstance(servers, dict):
        raise UsageError(f"{path}: \"{where.key}\" must be {kind}; nothing was changed")
    if isinstance(servers, dict) and where.toml and SERVER_NAME in servers \
            and not isinstance(servers[SERVER_NAME], dict):
        raise UsageError(f"{path}: {where.key}.{SERVER_NAME} must be a table; nothing was changed")
    return data


def _write(path: Path, data: Any, where: Location) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if where.toml:
        import tomlkit

        text = tomlkit.dumps(data).rstrip()
        atomic_write(path, text + "\n" if text else "")
    else:
        atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _record_path(repo: Repo, where: Location) -> Path:
    return repo.handoff_dir / where.record_file


def check(repo: Repo, agent: str = "claude") -> None:
    """Refuse (UsageError, nothing changed) when the agent's file cannot be merged into."""
    where = _location(agent)
    _load(config_path(repo, agent), where)


def _servers_table(data: Any, where: Location) -> Any:
    servers = data.get(where.key)
    if servers is None:
        if where.toml:
            import tomlkit

            servers = tomlkit.table(is_super_table=True)
        else:
            servers = {}
        data[where.key] = servers
        servers = data[where.key]
    return servers


def install(repo: Repo, agent: str = "claude") -> dict[str, Any]:
    """Add (or refresh) our server in the agent's file; a user's own `handoff` entry is kept."""
    where = _location(agent)
    path = config_path(repo, agent)
    data = _load(path, where)
    created = not path.exists()
    created_key = data.get(where.key) is None
    current = (data.get(where.key) or {}).get(SERVER_NAME)
    if current is not None and not is_ours(current):
        return {**status(repo, agent), "added": False,
                "problem": f"{path} already has a server named {SERVER_NAME!r} that is not git handoff's; kept it"}
    wanted = _entry(where)
    plain = _plain(current) or {}
    changed = any(plain.get(k) != v for k, v in wanted.items())
    if changed:
        servers = _servers_table(data, where)
        if where.toml:
            import tomlkit

            if current is None:
                servers[SERVER_NAME] = tomlkit.table()
            for key, value in wanted.items():  # in place: the user's other keys and comments stay
                servers[SERVER_NAME][key] = value
        else:
            servers[SERVER_NAME] = {**(current or {}), **wanted}
        _write(path, data, where)
        if created or created_key:
            _record_path(repo, where).write_text(json.dumps({"created": created, "key": created_key}) + "\n")
    return {**status(repo, agent), "added": changed}


def _made(record: Path) -> dict[str, bool]:
    """What install created: the file ("created") and/or the servers table ("key")."""
    try:
        data = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    created = data.get("created") is True
    return {"created": created, "key": data.get("key", created) is True}


def uninstall(repo: Repo, agent: str = "claude") -> dict[str, Any]:
    """Remove our server from the agent's file, keeping every other entry."""
    where = _location(agent)
    path = config_path(repo, agent)
    record = _record_path(repo, where)
    made = _made(record)
    removed = False
    if path.exists():
        data = _load(path, where)
        servers = data.get(where.key) or {}
        if is_ours(servers.get(SERVER_NAME)):
            del servers[SERVER_NAME]
            removed = True
            if not servers and made.get("key"):
                del data[where.key]  # install added the table: it goes too
            if made.get("created") and not _plain(data):
                path.unlink()  # install created it and nothing else was put in since
                if "/" in where.relpath:  # its own folder (.codex/), never the work tree
                    with contextlib.suppress(OSError):
                        path.parent.rmdir()
            else:
                _write(path, data, where)
    record.unlink(missing_ok=True)
    return {**status(repo, agent), "removed": removed}


def status(repo: Repo, agent: str = "claude") -> dict[str, Any]:
    """Whether the agent's file registers our server, and with which command."""
    where = _location(agent)
    if repo.workdir is None:
        return {where.path_key: None, "registered": False, "server": None}
    path = config_path(repo, agent)
    try:
        entry = _plain((_load(path, where).get(where.key) or {}).get(SERVER_NAME))
    except UsageError as exc:
        return {where.path_key: str(path), "registered": False, "server": None, "problem": exc.message}
    ours = is_ours(entry)
    return {where.path_key: str(path), "registered": ours, "server": entry if ours else None,
            **({} if ours or entry is None else {"problem": f"{SERVER_NAME!r} in {path} is not git handoff's"})}
