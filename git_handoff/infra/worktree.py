"""git's view of the work tree: a picture of it at one moment, what changed, the
operation in progress, the submodules.

A *picture* of a worktree is what `git stash create --include-untracked` would
keep, as two trees: the index, and the work tree (tracked files as they are on
disk plus the untracked, non-ignored files). Nothing here changes the work tree or
the real index: keeping a picture and going back to it is git_handoff.infra.rollback.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from git_handoff.core.errors import GitFailure
from git_handoff.infra.gitrepo import Repo

MODE_GITLINK = "160000"


class TempIndex:
    """A throwaway index file in the worktree's private directory, removed on exit.

    `git(...)` runs a git command against it (at the work tree's root unless told
    otherwise); `tree()` writes it as a tree. `copy=True` starts from a copy of the
    real index, so git's stat cache stays valid and unchanged tracked files are not
    hashed again.
    """

    def __init__(self, repo: Repo, name: str = "tmp-index", *, copy: bool = False) -> None:
        self.repo = repo
        self.path: Path = repo.worktree_dir / f"{name}.{os.getpid()}.{id(self):x}"
        if copy:
            try:
                self.path.write_bytes((repo.git_dir / "index").read_bytes())
            except FileNotFoundError:
                pass

    def __enter__(self) -> TempIndex:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.path.unlink(missing_ok=True)

    def git(self, *args: str, env: Mapping[str, str] | None = None,
            **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        kwargs.setdefault("cwd", self.repo.root())
        return self.repo.git(*args, env={**(env or {}), "GIT_INDEX_FILE": str(self.path)}, **kwargs)

    def tree(self) -> str:
        return self.git("write-tree").stdout.decode().strip()

    def tree_or_none(self) -> str | None:
        """The tree of this index; None while it holds unmerged (conflicted) entries."""
        proc = self.git("write-tree", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None


@dataclass(frozen=True)
class Picture:
    head: str
    worktree: str  # tracked files as on disk + untracked non-ignored files
    index: str | None  # None: the index held conflicts


def picture(repo: Repo, head: str, status: list[StatusEntry] | None = None) -> Picture:
    """The worktree as it is now; the real index is not touched.

    The files that differ from HEAD (from one `git status`) are written into one pack
    by `git fast-import`: `git add` would write each new file as a loose object, about
    half a millisecond apiece (0.5 s for 1,000 untracked files). Trees git's `add`
    would build differently (filters, line-ending conversion, submodules, conflicts)
    take the `git add -A` way in a throwaway index.
    """
    entries = worktree_status(repo) if status is None else status
    fast = _fast_picture(repo, head, entries)
    if fast is not None:
        return fast
    with TempIndex(repo, copy=True) as ix:
        index = ix.tree_or_none()
        ix.git("add", "-A", "--", ".")
        tree = ix.tree_or_none()
    if tree is None:
        raise GitFailure("git write-tree failed on the work tree")
    return Picture(head=head, worktree=tree, index=index)


@dataclass(frozen=True)
class StatusEntry:
    kind: str  # "1" changed, "2" renamed, "u" unmerged, "?" untracked
    staged: bool  # the index differs from HEAD here
    submodule: bool
    paths: tuple[bytes, ...]  # the path (and a rename's original)


def worktree_status(repo: Repo) -> list[StatusEntry]:
    """Every path whose work tree or index differs from HEAD, and every untracked,
    non-ignored file (one `git status --porcelain=v2`)."""
    proc = repo.git("status", "--porcelain=v2", "-z", "--untracked-files=all", "--ignore-submodules=none",
                    "--no-renames", cwd=repo.root())
    out: list[StatusEntry] = []
    records = proc.stdout.split(b"\0")
    i = 0
    while i < len(records):
        rec = records[i]
        i += 1
        if not rec:
            continue
        kind = rec[:1].decode()
        if kind == "?":
            out.append(StatusEntry("?", False, False, (rec[2:],)))
            continue
        fields = rec.split(b" ", {"1": 8, "2": 9, "u": 10}.get(kind, 0))
        if kind not in ("1", "2", "u") or len(fields) < 9:
            continue
        paths: tuple[bytes, ...] = (fields[-1],)
        if kind == "2":
            paths = (fields[-1], records[i])
            i += 1
        out.append(StatusEntry(kind, fields[1][:1] != b".", fields[2].startswith(b"S"), paths))
    return out


def _plain_content(repo: Repo) -> bool:
    """No attributes or settings that make git store a file other than as its bytes."""
    root = repo.root()
    if (root / ".gitattributes").exists() or (repo.common_dir / "info" / "attributes").exists():
        return False
    autocrlf = (repo.config_get("core.autocrlf") or "false").lower()
    return autocrlf in ("false", "0", "no", "off") and repo.config_bool("core.fileMode", True)


def _fast_picture(repo: Repo, head: str, entries: list[StatusEntry]) -> Picture | None:
    if any(e.kind == "u" or e.submodule or any(p.endswith(b".gitattributes") for p in e.paths)
           for e in entries) or not _plain_content(repo):
        return None
    head_tree = repo.commit_tree(head)
    index: str | None = head_tree
    if any(e.staged for e in entries):
        with TempIndex(repo, copy=True) as ix:
            index = ix.tree_or_none()
        if index is None:
            return None
    if not entries:
        return Picture(head=head, worktree=head_tree, index=index)
    root = os.fsencode(repo.root())
    files: list[tuple[bytes, str, bytes | str | None]] = []
    for path in sorted({p for e in entries for p in e.paths}):
        full = os.path.join(root, path)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            files.append((path, "", None))
            continue
        if stat.S_ISLNK(st.st_mode):
            files.append((path, "120000", os.readlink(full)))
        elif stat.S_ISREG(st.st_mode):
            with open(full, "rb") as fh:
                files.append((path, "100755" if st.st_mode & stat.S_IXUSR else "100644", fh.read()))
        else:
            return None  # a directory where a file was, a fifo...: git's own way
    commit = repo.fast_import_commit([head], files, "picture")
    return Picture(head=head, worktree=repo.commit_tree(commit), index=index)


def worktree_tree(repo: Repo, head: str) -> str:
    """A tree of the work tree as it is: tracked files (modified or not) and untracked,
    non-ignored files. The real index is not touched."""
    return picture(repo, head).worktree


def current_tree(repo: Repo) -> str | None:
    """The tree of the work tree as it is now, or None without a commit or a work tree."""
    head = repo.head()
    if head is None or repo.workdir is None:
        return None
    return worktree_tree(repo, head)


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


def changed_paths(repo: Repo, old: str, new: str) -> list[tuple[str, str]]:
    """(status letter, path) of files differing between two trees or commits."""
    proc = repo.git("diff-tree", "-r", "-z", "--no-renames", "--name-status", old, new)
    fields = proc.stdout.decode(errors="surrogateescape").split("\0")
    return [(fields[i][0], fields[i + 1]) for i in range(0, len(fields) - 1, 2) if fields[i]]


changed = changed_paths


# -- operations in progress -------------------------------------------------------------

# (marker in the git dir, name, how to end it cleanly)
_OPERATIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("rebase-merge", "rebase", ("rebase", "--abort")),
    ("rebase-apply/applying", "am", ("am", "--abort")),
    ("rebase-apply", "rebase", ("rebase", "--abort")),
    ("MERGE_HEAD", "merge", ("merge", "--abort")),
    ("CHERRY_PICK_HEAD", "cherry-pick", ("cherry-pick", "--abort")),
    ("REVERT_HEAD", "revert", ("revert", "--abort")),
    ("BISECT_LOG", "bisect", ("bisect", "reset")),
)


def operation_in_progress(repo: Repo) -> str | None:
    """The git operation this worktree is in the middle of (rebase, am, merge, ...), or None."""
    for marker, name, _ in _OPERATIONS:
        if (repo.git_dir / marker).exists():
            return name
    return None


def end_operation(repo: Repo) -> str | None:
    """End the operation in progress the way its own --abort does; returns its name."""
    for marker, name, command in _OPERATIONS:
        if (repo.git_dir / marker).exists():
            repo.git(*command, cwd=repo.root())
            return name
    return None


# -- submodules ---------------------------------------------------------------------------


def submodule_changes(repo: Repo, base: str) -> list[str]:
    """Submodules whose state differs from `base` or from HEAD and the index: a new commit,
    modified or untracked files. A rollback of the superproject cannot return those."""
    root = repo.root()
    head = repo.head()
    has_modules = (root / ".gitmodules").exists() or any(
        repo.tree_lookup(repo.commit_tree(c), ".gitmodules") is not None for c in {base, head} if c)
    if not has_modules:
        return []
    out: list[str] = []
    proc = repo.git("status", "--porcelain=v2", "-z", "--untracked-files=no", "--ignore-submodules=none", cwd=root)
    for entry in proc.stdout.split(b"\0"):
        fields = entry.split(b" ")
        if fields[0] in (b"1", b"2") and len(fields) > 8 and fields[2].startswith(b"S"):
            flags = fields[2].decode()
            what = [w for flag, w in zip(flags[1:], ("a new commit", "modified files", "untracked files"), strict=True)
                    if flag != "."]
            path = b" ".join(fields[8:] if fields[0] == b"1" else fields[9:]).split(b"\t")[0]
            out.append(f"{path.decode(errors='replace')} ({', '.join(what) or 'a changed gitlink'})")
    if head and head != base:
        diff = repo.git("diff-tree", "-r", "-z", base, head)
        fields = diff.stdout.split(b"\0")
        for i in range(0, len(fields) - 1, 2):
            meta = fields[i].split(b" ")
            if len(meta) >= 2 and MODE_GITLINK.encode() in (meta[0].lstrip(b":"), meta[1]):
                name = fields[i + 1].decode(errors="replace")
                if not any(o.startswith(name + " ") for o in out):
                    out.append(f"{name} (a different commit than at the claim)")
    return out
