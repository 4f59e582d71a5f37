"""Merging commits where nobody works, and the other worktrees a merge may move.

- `merge` merges two commits without a work tree (`git merge-tree --write-tree`, git ≥
  2.38): a merged tree, or the files that conflict. Nothing on disk changes.
- `Scratch` is a worktree of this repository that only git handoff uses (under the
  common git directory's `handoff/scratch/`), checked out at one commit so that a task's
  check runs on exactly that tree: what the integration queue lands.
- `checked_out_at` and `fast_forward` are for a branch that some worktree has checked out:
  where it is, and bringing that worktree forward with `git merge --ff-only` (which
  refuses rather than overwrite anything of the person's).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from git_handoff.core.errors import GitFailure
from git_handoff.infra.gitrepo import Repo

BRANCH_PREFIX = "refs/heads/"


@dataclass(frozen=True)
class Merged:
    tree: str | None  # the merged tree; None when files conflict
    conflicts: tuple[str, ...]  # the paths that conflict (sorted)


def merge(repo: Repo, ours: str, theirs: str) -> Merged:
    """The 3-way merge of two commits, as a tree or the files that conflict."""
    proc = repo.git("merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs, check=False)
    if proc.returncode not in (0, 1):
        raise GitFailure(f"git merge-tree failed: {proc.stderr.decode(errors='replace').strip()[:300]}")
    parts = proc.stdout.split(b"\0")
    tree = parts[0].decode()
    if proc.returncode == 0:
        return Merged(tree, ())
    return Merged(None, tuple(sorted({p.decode(errors="replace") for p in parts[1:] if p})))


class Scratch:
    """A detached worktree of this repository kept for checks (`at(commit)` brings it to a
    commit exactly: tracked files as the commit has them, nothing else but ignored files
    a previous check built, which `clean` removes too)."""

    def __init__(self, repo: Repo, name: str = "integrate") -> None:
        self.repo = repo
        self.path = repo.common_dir / "handoff" / "scratch" / name

    def at(self, commit: str) -> Path:
        if not (self.path / ".git").exists():
            shutil.rmtree(self.path, ignore_errors=True)
            self.repo.git("worktree", "prune", check=False)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.repo.git("worktree", "add", "--detach", "--force", str(self.path), commit)
        else:
            self._git("checkout", "--detach", "--force", "--quiet", commit)
            self._git("clean", "-ffdxq")
        return self.path

    def _git(self, *args: str) -> None:
        proc = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True, check=False)
        if proc.returncode != 0:
            raise GitFailure(f"git {args[0]} in {self.path} failed: "
                             f"{proc.stderr.decode(errors='replace').strip()[:300]}")


def checked_out_at(repo: Repo, branch: str) -> Path | None:
    """The worktree of this repository that has `branch` checked out, if one does."""
    listed = repo.git("worktree", "list", "--porcelain", check=False).stdout.decode(errors="replace")
    path: str | None = None
    for line in listed.splitlines():
        if line.startswith("worktree "):
            path = line[len("worktree "):]
        elif line == f"branch {BRANCH_PREFIX}{branch}" and path is not None:
            return Path(path)
    return None


def clean(where: Path) -> bool:
    """No change to a tracked file in the worktree at `where` (untracked files may be)."""
    status = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, check=False)
    return status.returncode == 0 and not status.stdout.strip()


def fast_forward(where: Path, new: str) -> str | None:
    """`git merge --ff-only new` in the worktree at `where`: None, or git's last line of why not."""
    merged = subprocess.run(["git", "-C", str(where), "merge", "--ff-only", "--quiet", new],
                            capture_output=True, check=False)
    if merged.returncode == 0:
        return None
    said = merged.stderr.decode(errors="replace").strip().splitlines()
    return said[-1] if said else "git merge --ff-only failed"


def reset_keep(where: Path, new: str) -> str | None:
    """`git reset --keep new` in the worktree at `where` (its branch moves to `new`; local
    changes are kept or the reset refused): None, or git's last line of why not."""
    moved = subprocess.run(["git", "-C", str(where), "reset", "--keep", "--quiet", new],
                           capture_output=True, check=False)
    if moved.returncode == 0:
        return None
    said = moved.stderr.decode(errors="replace").strip().splitlines()
    return said[-1] if said else "git reset --keep failed"
