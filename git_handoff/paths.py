"""Paths that come from the state or from a fetched commit stay inside the work tree.

`confine(root, path)` is the one check before any write or delete of such a path: no
absolute names, no `..`, nothing under `.git` (in any letter case, or its 8.3 short
name), no control characters, and no step through a symlink (which could lead out of
the tree). Pure path logic plus `lstat`: no git.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from git_handoff.errors import UsageError

_GIT_NAMES = (".git", "git~1")


def path_problem(path: str) -> str | None:
    """Why `path` (relative, `/`-separated) may not be written under a work tree, or None."""
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        return "is not a relative path"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "holds a control character"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return "steps outside the work tree"
        if part.lower().rstrip(". ") in _GIT_NAMES:
            return "is inside a .git directory"
    return None


def confine(root: Path, path: str) -> Path:
    """The file `path` names under `root`, checked (UsageError, exit 2, otherwise)."""
    why = path_problem(path)
    if why:
        raise UsageError(f"refusing path {path!r}: it {why}")
    target = root
    parts = path.split("/")
    for i, part in enumerate(parts):
        target = target / part
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            break
        except OSError as exc:
            raise UsageError(f"refusing path {path!r}: {exc.strerror}") from None
        if stat.S_ISLNK(mode) and i < len(parts) - 1:
            raise UsageError(f"refusing path {path!r}: {'/'.join(parts[:i + 1])} is a symlink")
    return root / path


def confine_all(root: Path, paths: Iterable[str]) -> list[Path]:
    """`confine` for each path, before any of them is touched: all or nothing."""
    return [confine(root, p) for p in paths]
