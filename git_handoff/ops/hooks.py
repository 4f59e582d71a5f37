"""Installing the triggers: the git post-commit hook (chained beside a user's own hook,
under core.hooksPath when set) and the Claude Code hooks in .claude/settings.json."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from git_handoff import local
from git_handoff.errors import UsageError
from git_handoff.gitrepo import Repo
from git_handoff.templates import template_text

MARKER = "git-handoff post-commit hook"
USER_SUFFIX = ".handoff-user"
NOTES_REF = "refs/notes/harness"
AGENTS = ("claude",)
RECORD_FILE = "hooks.json"  # in the per-clone handoff dir: what install changed, for uninstall

CLAUDE_COMMAND_PREFIX = "git handoff hook claude-"
CLAUDE_HOOKS: dict[str, tuple[str | None, str]] = {
    "SessionStart": ("startup|resume|compact|clear", "git handoff hook claude-session-start"),
    "Stop": (None, "git handoff hook claude-stop"),
    "SubagentStop": (None, "git handoff hook claude-subagent-stop"),
    "PreCompact": (None, "git handoff hook claude-pre-compact"),
}


def template() -> bytes:
    """The post-commit hook script shipped in hooks-templates/."""
    return template_text("post-commit").encode()


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
    try:
        data = json.loads((repo.handoff_dir / RECORD_FILE).read_text())
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


def install(repo: Repo, agent: str | None = None) -> dict[str, Any]:
    _check_agent(agent)
    if agent == "claude":
        return install_claude(repo)
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
    fresh = target.with_name(f".post-commit.handoff-tmp{os.getpid()}")
    fresh.write_bytes(template())
    fresh.chmod(0o755)
    os.replace(fresh, target)
    record = _record(repo)
    if NOTES_REF not in _rewrite_refs(repo):
        repo.git("config", "--add", "notes.rewriteRef", NOTES_REF)
        record["added_rewrite_ref"] = True
    _save_record(repo, record)
    opened = local.open_session(repo)
    if opened is not None:
        local.write_hook_state(repo, opened.get("base"))
    return {**status(repo), "chained_now": chained}


def uninstall(repo: Repo, agent: str | None = None) -> dict[str, Any]:
    _check_agent(agent)
    if agent == "claude":
        return uninstall_claude(repo)
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


def status(repo: Repo) -> dict[str, Any]:
    directory = hooks_dir(repo)
    target = directory / "post-commit"
    installed = _ours(target)
    settings = claude_settings_path(repo)
    opened = local.open_session(repo)
    return {
        "hooks_dir": str(directory),
        "post_commit": str(target),
        "installed": installed,
        "up_to_date": installed and target.read_bytes() == template(),
        "chained_user_hook": installed and (directory / ("post-commit" + USER_SUFFIX)).exists(),
        "notes_rewrite_ref": NOTES_REF in _rewrite_refs(repo),
        "commits_per_session": local.commits_per_session(repo),
        "tasks_per_session": local.tasks_per_session(repo),
        "session": opened.get("session") if opened else None,
        "claude": claude_installed(repo),
        "claude_settings": str(settings) if settings else None,
    }


# -- Claude Code ---------------------------------------------------------------------


def claude_settings_path(repo: Repo) -> Path | None:
    return repo.workdir / ".claude" / "settings.json" if repo.workdir else None


def _load_settings(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text() or "{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a JSON object; nothing was changed")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise UsageError(f"{path}: \"hooks\" must be an object; nothing was changed")
    for event in CLAUDE_HOOKS:
        if hooks and event in hooks and not isinstance(hooks[event], list):
            raise UsageError(f"{path}: hooks.{event} must be a list; nothing was changed")
    return data


def _is_ours(entry: Any) -> bool:
    return isinstance(entry, dict) and str(entry.get("command", "")).startswith(CLAUDE_COMMAND_PREFIX)


def _write_settings(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def claude_installed(repo: Repo) -> bool:
    path = claude_settings_path(repo)
    if path is None or not path.exists():
        return False
    try:
        data = _load_settings(path)
    except UsageError:
        return False
    hooks = data.get("hooks") or {}
    return all(
        any(_is_ours(h) for group in hooks.get(event, []) if isinstance(group, dict) for h in group.get("hooks", []) or [])
        for event in CLAUDE_HOOKS
    )


def install_claude(repo: Repo) -> dict[str, Any]:
    path = claude_settings_path(repo)
    if path is None:
        raise UsageError("the Claude Code hooks need a work tree (the repository is bare)")
    data = _load_settings(path)
    hooks = data.setdefault("hooks", {})
    added = []
    for event, (matcher, command) in CLAUDE_HOOKS.items():
        groups = hooks.setdefault(event, [])
        present = any(
            isinstance(g, dict) and any(_is_ours(h) and h.get("command") == command for h in g.get("hooks", []) or [])
            for g in groups
        )
        if present:
            continue
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": command}]}
        if matcher:
            group = {"matcher": matcher, **group}
        groups.append(group)
        added.append(event)
    if added or not path.exists():
        _write_settings(path, data)
    return {"settings": str(path), "added": added, "installed": True}


def uninstall_claude(repo: Repo) -> dict[str, Any]:
    path = claude_settings_path(repo)
    if path is None or not path.exists():
        return {"settings": str(path) if path else None, "removed": [], "installed": False}
    data = _load_settings(path)
    hooks = data.get("hooks")
    removed = []
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list):
                continue
            kept_groups = []
            for group in groups:
                if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                    kept = [h for h in group["hooks"] if not _is_ours(h)]
                    if len(kept) != len(group["hooks"]):
                        removed.append(event)
                        if not kept:
                            continue
                        group = {**group, "hooks": kept}
                kept_groups.append(group)
            if kept_groups:
                hooks[event] = kept_groups
            elif event in removed:
                del hooks[event]
        if not hooks and removed:
            del data["hooks"]
    if removed:
        _write_settings(path, data)
    return {"settings": str(path), "removed": sorted(set(removed)), "installed": False}
