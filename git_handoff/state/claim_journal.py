"""This worktree's own journal of the claims it holds: the one authority for what a
rollback, a recovery or a resume does to this work tree, its branch and its index.

The shared state says which claims exist; a seal (git_handoff.state.identity) proves that
this clone once wrote a claim, not that it still holds it: a claim this clone
published, completed, and then received back from a remote as current would look
sealed and live. So every claim this worktree takes is also written here, in a file
that never travels (`<worktree git dir>/handoff/claims/<task>.json`), and removed when
the claim ends here (done, fail, release). Local actions act on this record: the base
commit to reset to, the claim's snapshot to bring back, the tree of the last checkpoint.
The shared state is read only to refuse (the task there is no longer this very claim:
taken over, ended, replaced), never to choose what to write, reset or commit.

A claim made by an older version has no entry: nothing local proves it is current, so
the work tree is left alone (`fail` records the failure and saves the attempt without a
rollback; recovery skips it and says how to finish it by hand).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from git_handoff.core.errors import UsageError
from git_handoff.core.model import Task, check_id
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo

DIRECTORY = "claims"


@dataclass(frozen=True)
class Entry:
    """One claim this worktree holds, as this clone wrote it when claiming."""

    task: str
    claimed_at: str
    base: str
    worker: str
    snapshot: str | None = None
    branch: str | None = None
    checkpoint_tree: str | None = None

    def matches(self, task: Task) -> bool:
        """Whether `task` (as the shared state shows it) is still this very claim."""
        return (task.id == self.task and task.status == "in_progress"
                and task.started_at_commit == self.base and task.claim.claimed_at == self.claimed_at)


def _dir(repo: Repo) -> Path:
    return repo.worktree_dir / DIRECTORY


def _path(repo: Repo, task_id: str) -> Path | None:
    try:
        check_id(task_id)
    except UsageError:
        return None
    return _dir(repo) / f"{task_id}.json"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value and "\n" not in value else None


def _parse(raw: Any) -> Entry | None:
    if not isinstance(raw, dict):
        return None
    task, claimed_at, base, worker = (_str(raw.get(k)) for k in ("task", "claimed_at", "base", "worker"))
    if task is None or claimed_at is None or base is None or worker is None:
        return None
    return Entry(task=task, claimed_at=claimed_at, base=base, worker=worker, snapshot=_str(raw.get("snapshot")),
                 branch=_str(raw.get("branch")), checkpoint_tree=_str(raw.get("checkpoint_tree")))


def write(repo: Repo, entry: Entry) -> None:
    path = _path(repo, entry.task)
    if path is None:
        return
    path.parent.mkdir(exist_ok=True)
    # no fsync (it cost ~9 ms a claim here): an entry a crash loses leaves a claim with no
    # entry, which is never rolled back or recovered -- the safe side
    atomic_write(path, json.dumps(asdict(entry)))


def record_claim(repo: Repo, task: Task) -> None:
    """Journal the claim this clone has just taken (the task as its own claim wrote it)."""
    claim, base, worker = task.claim, task.started_at_commit, task.claimed_by
    if not (claim.claimed_at is not None and base and worker):
        return
    write(repo, Entry(task=task.id, claimed_at=claim.claimed_at, base=base, worker=worker,
                      snapshot=claim.snapshot, branch=claim.branch))


def read(repo: Repo, task_id: str) -> Entry | None:
    path = _path(repo, task_id)
    if path is None:
        return None
    try:
        entry = _parse(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None
    return entry if entry is not None and entry.task == task_id else None


def of_claim(repo: Repo, task: Task) -> Entry | None:
    """This worktree's entry for the claim `task` shows, when it is that very claim."""
    entry = read(repo, task.id)
    return entry if entry is not None and entry.matches(task) else None


def entries(repo: Repo) -> list[Entry]:
    """Every claim this worktree journalled, by task id."""
    try:
        names = sorted(p.name for p in _dir(repo).iterdir() if p.name.endswith(".json"))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        entry = read(repo, name[:-5])
        if entry is not None:
            out.append(entry)
    return out


def update(repo: Repo, task_id: str, **changes: Any) -> None:
    entry = read(repo, task_id)
    if entry is not None:
        write(repo, replace(entry, **changes))


def drop(repo: Repo, task_id: str) -> None:
    path = _path(repo, task_id)
    if path is not None:
        path.unlink(missing_ok=True)
