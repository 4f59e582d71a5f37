"""What an unattended interactive Claude Code run needs that the project itself may say.

`claude` in a tmux pane (`relay --tmux`) stops on screens that wait for a person: the
first-run onboarding, the folder's trust, the approval of ANTHROPIC_API_KEY and, with
--dangerously-skip-permissions, the Bypass Permissions warning. Claude Code 2.1.332 lets
a project answer only the last one, and only in its *local* settings
(`.claude/settings.local.json`, never committed: the CLI ignores the key in the shared
`.claude/settings.json`, so a cloned repository cannot switch the warning off for you).
The others live in the user's `~/.claude.json` (docs/agent-clis.md); `person_prompt_in`
names each when the relay sees the screen.
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


def install(repo: Repo) -> dict[str, Any]:
    path = local_settings_path(repo)
    data = load_object(path)
    added = data.get(SKIP_BYPASS_PROMPT) is not True
    if added:
        data[SKIP_BYPASS_PROMPT] = True
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    ignored = _exclude(repo)
    return {"local_settings": str(path), "set": [SKIP_BYPASS_PROMPT] if added else [], "excluded_now": ignored,
            "user_only": list(USER_ONLY)}


def uninstall(repo: Repo) -> dict[str, Any]:
    path = local_settings_path(repo)
    data = load_object(path)
    removed = data.pop(SKIP_BYPASS_PROMPT, None) is not None
    if removed and data:
        atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    elif removed:
        path.unlink()
    return {"local_settings": str(path), "removed": [SKIP_BYPASS_PROMPT] if removed else []}


def installed(repo: Repo) -> bool:
    try:
        return load_object(local_settings_path(repo)).get(SKIP_BYPASS_PROMPT) is True
    except UsageError:
        return False
