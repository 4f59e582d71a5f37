"""Going back to a moment of the work tree (`fail` in docs/git-handoff.md): keeping a
picture of it (git_handoff.infra.worktree) as commits, and a rollback or a restore to it.

A claim keeps a picture when the tree is not clean (a clean tree is HEAD, so nothing
more is recorded); a failed attempt is saved as a picture; a rollback brings the
claim's picture back:

    reset --hard <claim HEAD>; clean -fd            (today's rollback: the attempt is saved)
    read-tree -m -u <claim HEAD> <claim work tree>   (files of that moment back, git checks every path)
    read-tree <claim index>                          (the index of that moment; untracked stay untracked)

Every step is git's own machinery, which refuses `..`, absolute and `.git` paths.
A rollback is journalled in the worktree's private directory before the first
file changes, and redone from the start by the next command when a process was
killed half way (each step is idempotent), so a tree is never left half-restored.
The process that owns a rollback holds a lock beside its journal (`rollback.lock`, a
flock: the system lets it go when the owner dies) from before the journal is written
until it is cleared; the next command finishes a journal only when it can take that
lock, so never one whose owner is still at work.

Commit shapes (both are ordinary commits; `git show` and `git diff` read them):
- claim snapshot: tree = work tree, parents = [HEAD, index commit]; the index
  commit's tree is the index, its parent HEAD. Kept reachable by a local ref
  under refs/handoff/claims/ (outside refs/harness/, so it never travels).
- attempt: the same shape, under refs/harness/attempts/<id>/<n>.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from git_handoff.core.errors import Contention, UsageError
from git_handoff.infra import paths
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo
from git_handoff.infra.worktree import (
    Picture,
    TempIndex,
    changed_paths,
    end_operation,
    operation_in_progress,
    picture,
    submodule_changes,
    uncommitted,
    worktree_status,
    worktree_tree,
)

CLAIMS_PREFIX = "refs/handoff/claims/"
JOURNAL = "rollback.json"
ROLLBACK_LOCK = "rollback.lock"
OWNER_WAIT = 30.0  # seconds a new rollback waits for another one in this worktree


# -- keeping a moment ---------------------------------------------------------------------


def commit_picture(repo: Repo, pic: Picture, message: str, *, extra_parents: Iterable[str] = ()) -> str:
    """A commit of the work tree whose parents are HEAD and a commit of the index."""
    parents = [pic.head]
    if pic.index is not None:
        parents.append(repo.create_commit(pic.index, [pic.head], f"index: {message.splitlines()[0]}"))
    parents.extend(extra_parents)
    return repo.create_commit(pic.worktree, parents, message)


@dataclass(frozen=True)
class ClaimPicture:
    """A claim's picture read back from its commit."""

    commit: str
    head: str
    worktree: str
    index: str


def read_snapshot(repo: Repo, commit: str) -> ClaimPicture | None:
    """The snapshot commit `commit`, or None when it is missing or not of that shape."""
    if not isinstance(commit, str) or repo.resolve_commit(f"{commit}^{{commit}}") != commit:
        return None
    _, parents, _, _ = repo.commit_info(commit)
    if len(parents) != 2:
        return None
    return ClaimPicture(commit=commit, head=parents[0], worktree=repo.commit_tree(commit),
                    index=repo.commit_tree(parents[1]))


def take_snapshot(repo: Repo) -> str | None:
    """At claim time: None when the work tree is clean, else the snapshot commit (kept
    reachable under refs/handoff/claims/<oid> until the claim ends)."""
    head = repo.head()
    if head is None:
        return None
    entries = worktree_status(repo)
    if not entries:
        return None
    pic = picture(repo, head, entries)
    if pic.index is None:
        raise UsageError("the index has unresolved conflicts: resolve them (or abort what made them) before claiming")
    commit = commit_picture(repo, pic, "handoff: the work tree at a claim")
    repo.cas_ref(CLAIMS_PREFIX + commit, commit, None, "handoff: claim snapshot")
    return commit


def drop_snapshot_ref(repo: Repo, commit: str | None) -> None:
    if isinstance(commit, str) and commit:
        repo.delete_ref(CLAIMS_PREFIX + commit)


def uncommitted_since_claim(repo: Repo, snapshot: str | None) -> bool:
    """Changes not committed, leaving out files as they were at the claim (with its
    snapshot): what was untracked before the claim is not the attempt's work."""
    snap = read_snapshot(repo, snapshot) if snapshot else None
    head = repo.head()
    if snap is None or head is None:
        return uncommitted(repo)
    now_tree = worktree_tree(repo, head)
    return any(repo.tree_lookup(snap.worktree, path) != repo.tree_lookup(now_tree, path)
               for _, path in changed_paths(repo, repo.commit_tree(head), now_tree))


def refuse_operation(repo: Repo, action: str, task_id: str, force: bool) -> str | None:
    """Refuse (exit 2) to roll back in the middle of a rebase, merge, ...; with `force`
    return the operation's name so the rollback ends it first."""
    name = operation_in_progress(repo)
    if name is None:
        return None
    if not force:
        raise UsageError(
            f"cannot {action} task {task_id}: a {name} is in progress in this worktree; finish it or "
            f"`git {name} {'reset' if name == 'bisect' else '--abort'}` it first "
            f"(--force ends it, after saving the attempt)"
        )
    return name


def refuse_submodules(repo: Repo, base: str, action: str, task_id: str) -> None:
    changed = submodule_changes(repo, base)
    if changed:
        raise UsageError(
            f"cannot {action} task {task_id}: submodule {'; '.join(changed)} would not be rolled back "
            "(git does not reset a submodule's own work); save and reset it inside the submodule "
            "(commit or stash there, then `git submodule update`), then run this again; nothing was changed"
        )


@dataclass(frozen=True)
class RollbackPlan:
    """What a rollback returns the worktree to, journalled before the first change."""

    task: str
    base: str
    snapshot: str | None
    attempt_ref: str | None
    operation: str | None

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "base": self.base, "snapshot": self.snapshot,
                "attempt_ref": self.attempt_ref, "operation": self.operation}


def _journal(repo: Repo) -> Path:
    return repo.git_dir / "handoff" / JOURNAL


def write_journal(repo: Repo, plan: RollbackPlan) -> None:
    path = _journal(repo)
    path.parent.mkdir(exist_ok=True)
    atomic_write(path, json.dumps(plan.to_json()), fsync=True)


def read_journal(repo: Repo) -> RollbackPlan | None:
    """The rollback a killed process left unfinished, if any (an unreadable journal is dropped)."""
    path = _journal(repo)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        path.unlink(missing_ok=True)
        return None
    ok = isinstance(raw, dict) and isinstance(raw.get("task"), str) and isinstance(raw.get("base"), str)
    if not ok:
        path.unlink(missing_ok=True)
        return None
    return RollbackPlan(task=raw["task"], base=raw["base"],
                snapshot=raw.get("snapshot") if isinstance(raw.get("snapshot"), str) else None,
                attempt_ref=raw.get("attempt_ref") if isinstance(raw.get("attempt_ref"), str) else None,
                operation=raw.get("operation") if isinstance(raw.get("operation"), str) else None)


def _owner_lock(repo: Repo, wait: float) -> Any:
    from filelock import FileLock  # noqa: PLC0415 - import cost: only a rollback needs it

    path = _journal(repo).with_name(ROLLBACK_LOCK)
    path.parent.mkdir(exist_ok=True)
    return FileLock(str(path), timeout=wait, thread_local=False)


@contextlib.contextmanager
def rollback_owner(repo: Repo, wait: float = OWNER_WAIT) -> Iterator[None]:
    """Own the rollback of this worktree while inside: held from before its journal is
    written until it is cleared. Contention (exit 3, nothing changed) when another
    process still holds it after `wait` seconds."""
    from filelock import Timeout  # noqa: PLC0415

    lock = _owner_lock(repo, wait)
    try:
        lock.acquire()
    except Timeout:
        raise Contention("another git handoff command is rolling this worktree back: retry when it is done") \
            from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def orphaned_journal(repo: Repo) -> Iterator[bool]:
    """Whether the journal here has no owner at work (its owner died, or finished): True
    while inside means this process owns it now and may finish or drop it; False means
    its owner still holds the lock (leave the journal alone)."""
    from filelock import Timeout  # noqa: PLC0415

    try:
        lock = _owner_lock(repo, 0)
        lock.acquire()
    except (Timeout, OSError):  # OSError: a read-only repository, where no rollback can be finished either
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def clear_journal(repo: Repo) -> None:
    _journal(repo).unlink(missing_ok=True)


def has_journal(repo: Repo) -> bool:
    return _journal(repo).exists()


def roll_back(repo: Repo, plan: RollbackPlan) -> None:
    """Return the worktree to the claim's moment (the attempt must be saved first).

    Idempotent: a run killed at any point is finished by running it again.
    """
    root = repo.root()
    if plan.operation and operation_in_progress(repo):
        end_operation(repo)
    repo.git("reset", "--hard", "--quiet", plan.base, cwd=root)
    repo.git("clean", "-fd", "--quiet", cwd=root)
    snap = read_snapshot(repo, plan.snapshot) if plan.snapshot else None
    if snap is not None:
        repo.git("read-tree", "-m", "-u", repo.commit_tree(plan.base), snap.worktree, cwd=root)
        repo.git("read-tree", snap.index, cwd=root)
        repo.git("update-index", "-q", "--refresh", cwd=root, check=False)
        drop_snapshot_ref(repo, snap.commit)


# -- restore --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilesRestored:
    """What restore_picture did: the files written and removed, and whether it staged."""

    written: list[str]
    deleted: list[str]
    index: bool


def restore_picture(
    repo: Repo, *, source: str, since: str, index: str | None, since_index: str | None = None, force: bool,
    foreign: bool = True,
) -> FilesRestored:
    """Write the files of tree `source` that differ from tree `since`, remove those it
    dropped, and (when `index` is given) stage, for every path the attempt touched
    (its files, or its index against `since_index`), the entry `index` holds;
    other index entries stay as they are.

    Refuses (nothing changed) when a file it would write or remove has uncommitted
    changes of its own here (other than what `since` holds), unless `force`. Removes only
    files whose content git holds (as in `since` or as committed at HEAD, `force` or
    not) and never an ignored file.

    Every path it would write, remove or stage passes the one path rule (paths.confine;
    `foreign`: the attempt is another clone's) before anything is touched: UsageError
    (exit 2, nothing changed) otherwise.
    """
    root = repo.root()
    head = repo.head()
    if head is None:
        raise UsageError("this worktree has no commit yet")
    changes = changed_paths(repo, since, source)
    current = picture(repo, head).worktree
    here = _Here(head_tree=repo.commit_tree(head), current=current)
    refusal = _overwrite_refusal(_overwritten(changes, _uncommitted_here(repo, here, since)), force=force)
    if refusal:
        raise UsageError(refusal)
    plan = _restore_plan(changes, None if index is None else changed_paths(repo, since_index or since, index))
    targets = dict(zip(plan.dropped, paths.confine_all(root, plan.dropped, foreign=foreign), strict=True))
    paths.confine_all(root, plan.written + plan.staged, foreign=foreign)
    _write_files(repo, source, index, plan.written)
    deleted = [path for path in plan.dropped
               if _git_holds(repo, here, since, path) and _unlink_file(targets[path])]
    if index is not None:
        _stage_from(repo, index, plan.staged)
    return FilesRestored(written=plan.written, deleted=deleted, index=index is not None)


@dataclass(frozen=True)
class _Here:
    """The work tree a restore writes into: HEAD's tree, and a picture of the work tree."""

    head_tree: str
    current: str


@dataclass(frozen=True)
class _RestorePlan:
    """What a restore writes, removes and stages, decided before anything is touched."""

    written: list[str]
    dropped: list[str]
    staged: list[str]


def _restore_plan(changes: list[tuple[str, str]], index_changes: list[tuple[str, str]] | None) -> _RestorePlan:
    """The plan of a restore from the attempt's `changes` (status, path) and, when it
    restores an index, the attempt's `index_changes` (None: the index is left alone)."""
    staged = sorted({p for _, p in changes} | {p for _, p in index_changes}) if index_changes is not None else []
    return _RestorePlan(written=[p for s, p in changes if s != "D"], dropped=[p for s, p in changes if s == "D"],
                        staged=staged)


def _uncommitted_here(repo: Repo, here: _Here, since: str) -> set[str]:
    """The paths uncommitted here and not simply as the rollback left them (files
    untracked at the claim, which `since` holds)."""
    return {p for _, p in changed_paths(repo, here.head_tree, here.current)
            if repo.tree_lookup(since, p) != repo.tree_lookup(here.current, p)}


def _overwritten(changes: list[tuple[str, str]], mine: set[str]) -> list[str]:
    """The paths of `changes` that have uncommitted changes here (`mine`), in order."""
    return [p for _, p in changes if p in mine]


def _overwrite_refusal(touched: list[str], *, force: bool) -> str | None:
    """Why a restore that would overwrite `touched` refuses, or None when it goes ahead."""
    if not touched or force:
        return None
    return (f"uncommitted changes would be overwritten ({', '.join(touched[:3])}{'...' if len(touched) > 3 else ''}): "
            "commit or stash them, or --force")


def _write_files(repo: Repo, source: str, index: str | None, written: list[str]) -> None:
    """Check out `written` from tree `source`. Both trees are read into throwaway
    indexes first: git refuses a tree with a bad path before anything in the work tree
    has changed."""
    with TempIndex(repo) as ix:
        ix.git("read-tree", source)
        if index is not None:
            with TempIndex(repo) as check:
                check.git("read-tree", index)
        if written:
            ix.git("checkout-index", "-f", "-z", "--stdin",
                   input=b"\0".join(p.encode(errors="surrogateescape") for p in written) + b"\0")


def _git_holds(repo: Repo, here: _Here, since: str, path: str) -> bool:
    """Whether `path` is a file here whose content git holds: as in `since`, or as
    committed at HEAD (never content that exists nowhere else, --force or not)."""
    entry = repo.tree_lookup(here.current, path)
    if not _a_file(entry):
        return False
    return entry in (repo.tree_lookup(since, path), repo.tree_lookup(here.head_tree, path))


def _a_file(entry: tuple[str, bool] | None) -> bool:
    """Whether a picture's entry (oid, is a tree) at a path is a file: not absent (or
    ignored, which a picture leaves out), not a directory."""
    return entry is not None and not entry[1]


def _unlink_file(target: Path) -> bool:
    """Remove `target` if it is a file or a symlink (True), never a directory."""
    if target.is_file() or target.is_symlink():
        target.unlink()
        return True
    return False


def _stage_from(repo: Repo, tree: str, paths: list[str]) -> None:
    """Make the index entries of `paths` those of `tree` (absent there: unstaged)."""
    if not paths:
        return
    lines = []
    for path in paths:
        entry = repo.tree_lookup(tree, path)
        raw = path.encode(errors="surrogateescape")
        if entry is None or entry[1]:
            lines.append(b"0 " + b"0" * 40 + b"\t" + raw)
        else:
            mode = repo.tree_mode(tree, path)
            lines.append(f"{mode:o} {entry[0]}\t".encode() + raw)
    repo.git("update-index", "-z", "--index-info", input=b"\0".join(lines) + b"\0", cwd=repo.root())
    repo.git("update-index", "-q", "--refresh", cwd=repo.root(), check=False)
