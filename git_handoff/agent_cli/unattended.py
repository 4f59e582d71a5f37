"""What an unattended interactive Claude Code run needs that the project itself may say.

`claude` in a tmux pane (`relay --tmux`) stops on screens that wait for a person: the
first-run onboarding, the folder's trust, the approval of ANTHROPIC_API_KEY, the
approval of the project's MCP server (`.mcp.json`, which `hooks install` writes) and,
with --dangerously-skip-permissions, the Bypass Permissions warning. Claude Code 2.1.332
lets a project answer the last two, and only in its *local* settings
(`.claude/settings.local.json`, never committed: the CLI ignores the bypass key in the
shared `.claude/settings.json`, so a cloned repository cannot switch the warning off for
you). The others live in the user's `~/.claude.json` (docs/agent-clis.md);
`person_prompt_in` names each when the relay sees the screen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from git_handoff.agent_cli.agent_config import load_object
from git_handoff.core.errors import UsageError
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo

LOCAL_SETTINGS = ".claude/settings.local.json"
SKIP_BYPASS_PROMPT = "skipDangerousModePermissionPrompt"
# the approval of the project's `.mcp.json` server `handoff` ("New MCP server found in this
# project"), which the CLI asks before anything else; read from the local settings too
APPROVED_MCP = "enabledMcpjsonServers"
MCP_SERVER = "handoff"
# what only ~/.claude.json can hold (the CLI reads these nowhere else)
USER_ONLY = ("hasCompletedOnboarding", "projects.<repo>.hasTrustDialogAccepted",
             "customApiKeyResponses.approved", "bypassPermissionsModeAccepted")


def local_settings_path(repo: Repo) -> Path:
    if repo.workdir is None:
        raise UsageError("the Claude Code settings need a work tree (the repository is bare)")
    return repo.workdir / LOCAL_SETTINGS



def check(repo: Repo) -> None:
    """Refuse (UsageError, nothing changed) when the local settings cannot be merged into."""
    load_object(local_settings_path(repo))


def _exclude(repo: Repo) -> bool:
    """Keep the local settings out of `git add -A` in this clone (.git/info/exclude)."""
    exclude = repo.common_dir / "info" / "exclude"
    line = "/" + LOCAL_SETTINGS
    text = exclude.read_text() if exclude.exists() else ""
    if line in text.splitlines():
        return False
    exclude.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(exclude, text + ("" if not text or text.endswith("\n") else "\n") + line + "\n")
    return True


def _approved(data: dict[str, Any]) -> list[Any]:
    servers = data.get(APPROVED_MCP)
    return list(servers) if isinstance(servers, list) else []


def install(repo: Repo, mcp: bool = False) -> dict[str, Any]:
    """Set what the project may answer itself: the bypass warning, and with `mcp` the
    approval of the MCP server `handoff` (every other entry of the file is kept)."""
    path = local_settings_path(repo)
    data = load_object(path)
    added = []
    if data.get(SKIP_BYPASS_PROMPT) is not True:
        data[SKIP_BYPASS_PROMPT] = True
        added.append(SKIP_BYPASS_PROMPT)
    if mcp and MCP_SERVER not in _approved(data):
        data[APPROVED_MCP] = [*_approved(data), MCP_SERVER]
        added.append(APPROVED_MCP)
    if added:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    ignored = _exclude(repo)
    return {"local_settings": str(path), "set": added, "excluded_now": ignored, "user_only": list(USER_ONLY)}


def uninstall(repo: Repo, mcp: bool = False) -> dict[str, Any]:
    path = local_settings_path(repo)
    data = load_object(path)
    removed = [SKIP_BYPASS_PROMPT] if data.pop(SKIP_BYPASS_PROMPT, None) is not None else []
    if mcp and MCP_SERVER in _approved(data):
        rest = [name for name in _approved(data) if name != MCP_SERVER]
        if rest:
            data[APPROVED_MCP] = rest
        else:
            data.pop(APPROVED_MCP)
        removed.append(APPROVED_MCP)
    if removed and data:
        atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    elif removed:
        path.unlink()
    return {"local_settings": str(path), "removed": removed}


def installed(repo: Repo) -> bool:
    try:
        return load_object(local_settings_path(repo)).get(SKIP_BYPASS_PROMPT) is True
    except UsageError:
        return False
