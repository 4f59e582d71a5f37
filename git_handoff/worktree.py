"""Git's view of the work tree, one named function per question (each with its own
parser): is anything uncommitted, which paths, which files differ between two trees,
what the work tree holds as a tree. A temporary index is an object; callers never
set GIT_INDEX_FILE by hand and the real index is never touched.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from git_handoff.gitrepo import Repo


class TempIndex:
    """A temporary index file in this worktree's private directory, removed on exit.

    `git(...)` runs a git command against it; `tree()` writes it as a tree.
    """

    def __init__(self, repo: Repo, name: str = "tmp-index") -> None:
        self.repo = repo
        self.path: Path = repo.worktree_dir / f"{name}.{os.getpid()}"

    def __enter__(self) -> TempIndex:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.path.unlink(missing_ok=True)

    def git(self, *args: str, env: Mapping[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        return self.repo.git(*args, env={**(env or {}), "GIT_INDEX_FILE": str(self.path)}, **kwargs)

    def tree(self) -> str:
        return self.git("write-tree").stdout.decode().strip()


def worktree_tree(repo: Repo, head: str) -> str:
    """A tree of the work tree as it is: tracked files (modified or not) and untracked,
    non-ignored files. Built in a temporary index; the real index is not touched."""
    with TempIndex(repo, "attempt-index") as index:
        index.git("read-tree", head)
        index.git("add", "-A", "--", ".", cwd=repo.root())
        return index.tree()


def current_tree(repo: Repo) -> str | None:
    """The tree of the work tree as it is now, or None without a commit or a work tree."""
    head = repo.head()
    if head is None or repo.workdir is None:
        return None
    return worktree_tree(repo, head)


def changed(repo: Repo, old: str, new: str) -> list[tuple[str, str]]:
    """(status letter, path) of files differing between two trees or commits."""
    proc = repo.git("diff-tree", "-r", "-z", "--no-renames", "--name-status", old, new)
    fields = proc.stdout.decode(errors="surrogateescape").split("\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        if fields[i]:
            out.append((fields[i][0], fields[i + 1]))
    return out


def dirty(repo: Repo) -> list[str]:
    """Paths with uncommitted changes (staged, unstaged or untracked, not ignored)."""
    proc = repo.git("status", "--porcelain", "-z", "--untracked-files=all", cwd=repo.root())
    return [p[3:] for p in proc.stdout.decode(errors="surrogateescape").split("\0") if len(p) > 3]


def uncommitted(repo: Repo) -> bool:
    """Is anything uncommitted (a failing `git status` counts as nothing)?"""
    proc = repo.git("status", "--porcelain", "--untracked-files=all", check=False)
    return bool(proc.stdout.strip())


def _z_paths(raw: bytes) -> list[str]:
    return [p.decode(errors="surrogateescape") for p in raw.split(b"\0") if p]


def files_changed(repo: Repo, base: str | None) -> list[str]:
    """Paths changed since `base` in commits, plus staged, unstaged and untracked changes."""
    if repo.workdir is None:
        return []
    paths: set[str] = set()
    head = repo.head()
    if base and head and base != head and repo.has_object(base):
        proc = repo.git("diff", "--name-only", "-z", "--no-renames", base, head, check=False)
        if proc.returncode == 0:
            paths.update(_z_paths(proc.stdout))
    proc = repo.git("status", "--porcelain", "-z", "--untracked-files=all", "--no-renames", check=False)
    if proc.returncode == 0:
        for item in _z_paths(proc.stdout):
            if len(item) > 3 and item[2] == " ":
                paths.add(item[3:])
    return sorted(paths)
