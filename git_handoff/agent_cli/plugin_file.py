"""A CLI's hooks as one plugin file of ours (OpenCode's `.opencode/plugins/git-handoff.js`):
the CLI loads it and it runs `git handoff hook …` itself, so there is no user file to merge
into. Install writes the template (hooks-templates/, the CLI's `PLUGIN`) whole; uninstall
removes the file when it is ours (its first line names git handoff), never a user's file
of the same name; status says whether the file is there as this version writes it.

The answers have the shape of `agent_config`'s merge (`added`/`removed`: the CLI's events,
`events`: event -> installed), so `hooks install|uninstall|status` read both alike."""

from __future__ import annotations

import contextlib
from pathlib import Path

from git_handoff.agent_cli.templates import template_text
from git_handoff.core.errors import UsageError
from git_handoff.infra.fileio import atomic_write

MARKER = "// git-handoff "  # how the first line of every plugin file of ours starts


def ours(path: Path) -> bool:
    """Is the file there one git handoff wrote (of this version or another)?"""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return f.readline().startswith(MARKER)
    except OSError:
        return False


def check(path: Path) -> None:
    """Refuse (UsageError, nothing changed) when a file of the user's stands where ours goes."""
    if (path.exists() or path.is_symlink()) and not ours(path):
        raise UsageError(f"{path} exists and is not git handoff's plugin; move it away first, nothing was changed")


def present(path: Path, template: str, events: list[str]) -> dict[str, bool]:
    """Per event: is the plugin there as this version writes it?"""
    try:
        current = path.read_text(encoding="utf-8") if not path.is_symlink() else None
    except (OSError, UnicodeDecodeError):
        current = None
    installed = current == template_text(template)
    return dict.fromkeys(events, installed)


def install(path: Path, template: str, events: list[str]) -> list[str]:
    """Write the plugin (a file of ours of another version is replaced); the events added."""
    check(path)
    if all(present(path, template, events).values()):
        return []
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, template_text(template))
    return list(events)


def uninstall(path: Path, events: list[str]) -> list[str]:
    """Remove the plugin when it is ours (and its folder, left empty); the events removed."""
    if not ours(path):
        return []
    path.unlink()
    with contextlib.suppress(OSError):
        path.parent.rmdir()
    return list(events)
