"""The one rule for a path that came from the state or from a fetched commit (an
attempt's files, a restore's writes and deletes): it stays inside the work tree.

`confine(root, path)` is the check before any write or delete of such a path; `restore`
runs it on every path it would write, delete or stage before it touches anything. The
rule is the strictest of the file systems git runs on, since a repository is checked out
on all of them (what git's core.protectNTFS and core.protectHFS guard against, on every
platform):

- a relative, `/`-separated path: no leading `/`, no backslash (a separator on
  Windows), no NUL;
- no empty, `.` or `..` component, nor one of only dots and spaces (`...`, `. `: Windows
  drops trailing dots and spaces, so those name the directory itself or its parent);
- no `.git` component in any letter case, nor one Windows or macOS would open as `.git`:
  with trailing dots or spaces (`.git.`, `.git `), an NTFS stream (`.git::$INDEX_ALLOCATION`),
  its 8.3 short name (`git~1`), or the code points HFS+ ignores in names (zero-width
  joiners, direction marks: `.g\\u200cit`);
- no step through a symlink (which could lead out of the tree);
- for a path another clone wrote (`foreign`), no control character (a newline in a file
  name feeds a line to every script that reads `git ls-files`) and no bidi formatting
  character (a name that reads as another). A path this clone's own attempt saved may
  hold them: git does, and the user's own files are brought back as they were.

Pure path logic plus `lstat`: no git.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from git_handoff.core.display import line
from git_handoff.core.errors import UsageError
from git_handoff.core.patterns import lazy

# what HFS+ ignores when it compares names (git's utf8.c next_hfs_char)
_HFS_IGNORED = lazy("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
# `.git`, and its NTFS 8.3 short names (`git~1`; git refuses the first, this rule any)
_DOT_GIT = lazy(r"\.git|git~[0-9]+")
# in another clone's names: C0 and C1 controls, DEL, line separators, bidi formatting
_FOREIGN = lazy("[\x01-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def _is_dot_git(part: str) -> bool:
    """Whether some file system git runs on opens `part` as `.git`."""
    name = _HFS_IGNORED.sub("", part).split(":", 1)[0].rstrip(". ").lower()
    return _DOT_GIT.fullmatch(name) is not None


def path_problem(path: str, *, foreign: bool = True) -> str | None:
    """Why `path` (relative, `/`-separated) may not be written or deleted under a work
    tree, or None. `foreign`: another clone wrote it (the name rules apply too)."""
    if not path or path.startswith("/") or "\0" in path:
        return "is not a relative path"
    if "\\" in path:
        return "holds a backslash (a directory separator on Windows)"
    if foreign and _FOREIGN.search(path):
        return "holds a control or bidi formatting character"
    for part in path.split("/"):
        if not part.rstrip(". "):
            return "steps outside the work tree"
        if _is_dot_git(part):
            return "is inside a .git directory"
    return None


def confine(root: Path, path: str, *, foreign: bool = True) -> Path:
    """The file `path` names under `root`, checked (UsageError, exit 2, otherwise)."""
    why = path_problem(path, foreign=foreign)
    if why:
        raise UsageError(f"refusing path '{line(path)}': it {why}")
    target = root
    parts = path.split("/")
    for i, part in enumerate(parts):
        target = target / part
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            break
        except OSError as exc:
            raise UsageError(f"refusing path '{line(path)}': {exc.strerror}") from None
        if stat.S_ISLNK(mode) and i < len(parts) - 1:
            raise UsageError(f"refusing path '{line(path)}': {line('/'.join(parts[:i + 1]))} is a symlink")
    return root / path


def confine_all(root: Path, paths: Iterable[str], *, foreign: bool = True) -> list[Path]:
    """`confine` for each path, before any of them is touched: all or nothing."""
    return [confine(root, p, foreign=foreign) for p in paths]
