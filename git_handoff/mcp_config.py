"""Registering `git handoff mcp` in an agent's MCP configuration: for Claude Code the
project's `.mcp.json` (`{"mcpServers": {"handoff": {"command": ..., "args": ["mcp"]}}}`).

Every other server and key of the file is kept as it was; uninstall removes only our
entry (and the file only when install created it and nothing else was added since).
A user's own server named `handoff` is never overwritten: it is reported instead.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from git_handoff.errors import UsageError
from git_handoff.gitrepo import Repo

SERVER_NAME = "handoff"
MCP_JSON = ".mcp.json"
RECORD_FILE = "mcp-config.json"  # per clone: whether install created .mcp.json


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


def is_ours(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    command, args = str(entry.get("command", "")), entry.get("args")
    return ((Path(command).name == "git-handoff" and args == ["mcp"])
            or (Path(command).name == "git" and args == ["handoff", "mcp"]))


def mcp_json_path(repo: Repo) -> Path:
    if repo.workdir is None:
        raise UsageError("the MCP configuration needs a work tree (the repository is bare)")
    return repo.workdir / MCP_JSON


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text() or "{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a JSON object; nothing was changed")
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise UsageError(f"{path}: \"mcpServers\" must be an object; nothing was changed")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def _record_path(repo: Repo) -> Path:
    return repo.handoff_dir / RECORD_FILE


def check(repo: Repo) -> None:
    """Refuse (UsageError, nothing changed) when .mcp.json cannot be merged into."""
    _load(mcp_json_path(repo))


def install(repo: Repo) -> dict[str, Any]:
    """Add (or refresh) our server in .mcp.json; a user's own `handoff` entry is kept."""
    path = mcp_json_path(repo)
    data = _load(path)
    created = not path.exists()
    servers = data.setdefault("mcpServers", {})
    current = servers.get(SERVER_NAME)
    if current is not None and not is_ours(current):
        return {**status(repo), "added": False,
                "problem": f"{path} already has a server named {SERVER_NAME!r} that is not git handoff's; kept it"}
    wanted = server_entry()
    changed = current != wanted
    if changed:
        servers[SERVER_NAME] = {**(current or {}), **wanted}
        _write(path, data)
        if created:
            _record_path(repo).write_text(json.dumps({"created": True}) + "\n")
    return {**status(repo), "added": changed}


def uninstall(repo: Repo) -> dict[str, Any]:
    """Remove our server from .mcp.json, keeping every other entry."""
    path = mcp_json_path(repo)
    record = _record_path(repo)
    removed = False
    if path.exists():
        data = _load(path)
        servers = data.get("mcpServers") or {}
        if is_ours(servers.get(SERVER_NAME)):
            del servers[SERVER_NAME]
            removed = True
            if record.exists() and data == {"mcpServers": {}}:
                path.unlink()  # install created it and nothing else was put in since
            else:
                _write(path, data)
    record.unlink(missing_ok=True)
    return {**status(repo), "removed": removed}


def status(repo: Repo) -> dict[str, Any]:
    """Whether .mcp.json registers our server, and with which command."""
    if repo.workdir is None:
        return {"mcp_json": None, "registered": False, "server": None}
    path = mcp_json_path(repo)
    try:
        entry = (_load(path).get("mcpServers") or {}).get(SERVER_NAME)
    except UsageError as exc:
        return {"mcp_json": str(path), "registered": False, "server": None, "problem": exc.message}
    ours = is_ours(entry)
    return {"mcp_json": str(path), "registered": ours, "server": entry if ours else None,
            **({} if ours or entry is None else {"problem": f"{SERVER_NAME!r} in {path} is not git handoff's"})}
