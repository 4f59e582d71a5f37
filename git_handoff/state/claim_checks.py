"""The questions every work-cycle command asks about a claim: is it held here, by
whom (in words), is it still the claim we acted on, how long is its lease. One
answer each, below the use cases (claim, work, attempts, recovery, sessions).
"""

from __future__ import annotations

from datetime import timedelta

from git_handoff.core.errors import Contention, UsageError
from git_handoff.core.model import Task, check_id, iso, now, now_iso
from git_handoff.core.selection import lease_deadline, lease_expired
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import identity
from git_handoff.state.store import StateStore, Tx
from git_handoff.state.this_clone import here, worker_from_env, worker_identity

DEFAULT_LEASE_SECONDS = 30 * 60


def short(oid: str | None) -> str:
    return (oid or "")[:7]


# -- held here? ---------------------------------------------------------------------------


def held_by(worktree: str | None, claimed_by: str | None, ctx_worktree: str, worker: str) -> bool:
    """The one rule: a claim recording a worktree is held where that worktree is; one
    without (older state) is held by the worker that claimed it."""
    if worktree:
        return bool(worktree == ctx_worktree)
    return claimed_by == worker


def held_here(task: Task, ctx_worktree: str, worker: str, repo: Repo) -> bool:
    """This worktree's own claim: sealed by this clone (git_handoff.state.identity; a path or a
    name in a fetched record proves nothing), and held here by `held_by`."""
    return identity.claim_is_mine(repo, task) and held_by(task.claim.worktree, task.claimed_by, ctx_worktree, worker)


def holder(task: Task) -> str:
    where = task.claim.worktree
    text = f"task {task.id} is in progress, claimed by {task.claimed_by or 'unknown'}"
    if where:
        text += f" in {where}"
    if task.lease_expires_at:
        text += f" (lease until {lease_deadline(task, now())})"  # as long as its record allows
    return text


def require_in_progress(task: Task, action: str) -> None:
    if task.status != "in_progress":
        raise UsageError(f"cannot {action} task {task.id}: it is {task.status}, not in progress (claim it first)")


def require_owner(task: Task, repo: Repo, action: str, force: bool) -> None:
    if force:
        return
    if identity.claim_is_mine(repo, task) and (
            task.claim.worktree == here(repo) or task.claimed_by == worker_identity(repo)):
        other = other_workers(task)
        if other is None:
            return
        raise UsageError(f"cannot {action} task {task.id}: {other} (--force acts anyway)")
    raise UsageError(
        f"cannot {action} task {task.id}: it is claimed by {task.claimed_by or 'unknown'}"
        + (f" in {where}" if (where := task.claim.worktree) else "")
        + " (--force acts anyway)"
    )


def other_workers(task: Task) -> str | None:
    """Why a claim held in this worktree is not this process's: a worker named by the
    environment (HANDOFF_WORKER) acts only on its own claims while their lease runs, so
    that several agents in one work tree keep their claims apart. None when it is ours
    (or no worker is declared: then the worktree's claims are everybody's here)."""
    found = worker_from_env()
    if found is None or task.claimed_by == found[1] or lease_expired(task, now_iso()):
        return None
    var, declared = found
    return (f"it is claimed by {_short_name(task.claimed_by or 'unknown')}, another worker in this worktree"
            + (f", until {task.lease_expires_at}" if task.lease_expires_at else "")
            + f"; you are {_short_name(declared)} ({var})")


def _short_name(name: str) -> str:
    return name if len(name) <= 80 else name[:77] + "..."


def require_branch(task: Task, repo: Repo, action: str, force: bool) -> None:
    claimed_on = task.claim.branch
    if force or not claimed_on:
        return
    on = repo.head_branch()
    if on != claimed_on:
        raise UsageError(
            f"cannot {action} task {task.id}: it was claimed on {claimed_on}, this worktree is on "
            f"{on or 'a detached HEAD'} (switch back, or --force)"
        )


# -- still the same claim? ----------------------------------------------------------------


def same_claim(now_task: Task, seen: Task) -> bool:
    return (
        now_task.status == "in_progress"
        and now_task.claimed_by == seen.claimed_by
        and now_task.started_at_commit == seen.started_at_commit
        and now_task.claim.claimed_at == seen.claim.claimed_at
    )


def current(tx: Tx, seen: Task, action: str) -> Task:
    """The task in the transaction, provided it is still the claim `seen` (else Contention)."""
    task = tx.require_task(seen.id)
    if not same_claim(task, seen):
        raise Contention(
            f"task {seen.id} changed while it was being {action} (now {task.status}, "
            f"claimed by {task.claimed_by or 'nobody'}); nothing was recorded"
        )
    return task


def claimed_task(store: StateStore, task_id: str, action: str, force: bool) -> Task:
    """The task `action` acts on: it exists, is in progress and (unless forced) held here."""
    check_id(task_id)
    task = store.snapshot().task(task_id)
    if task is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    require_in_progress(task, action)
    require_owner(task, store.repo, action, force)
    return task


# -- leases -------------------------------------------------------------------------------


def check_lease(lease: int) -> int:
    if isinstance(lease, bool) or not isinstance(lease, int) or lease <= 0:
        raise UsageError(f"a lease must be a positive number of seconds, not {lease!r}")
    return lease


def lease_of(task: Task, lease: int | None = None) -> int:
    """The lease to grant: `lease` when given, else the length the task was claimed with."""
    if lease is not None:
        return check_lease(lease)
    kept = task.claim.lease_seconds
    return kept if kept is not None and kept > 0 else DEFAULT_LEASE_SECONDS


def expires(seconds: int) -> str:
    return iso(now() + timedelta(seconds=seconds))
