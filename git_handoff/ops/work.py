"""The work cycle (SPEC §3-§5): claim, renew, release, checkpoint, verify, done,
fail (a rollback that loses nothing), attempts, restore.

State changes are single transactions on refs/harness/state. Anything touching
the work tree (running the check, saving an attempt, `git reset --hard`) happens
outside the transaction; the transaction that records its outcome re-checks that
the claim it acted on is still the same, so a concurrent takeover is never
overwritten.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import re
import socket
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from git_handoff import identity, paths, schedule
from git_handoff.errors import Contention, GitFailure, HandoffError, Negative, UsageError
from git_handoff.gitrepo import Repo
from git_handoff.model import Task, check_category, check_id, iso, now, now_iso
from git_handoff.ops import handoff, notes, runner, sessions, trust, work_index
from git_handoff.store import ATTEMPTS_PREFIX, StateStore, Tx

DEFAULT_LEASE_SECONDS = 30 * 60
# Bookkeeping fields kept in Task.extra while a task is claimed.
CLAIM_EXTRAS = ("worktree", "branch", "claimed_at", "lease_seconds", "claim_session", "clone", "clone_seal")


# -- who and where ---------------------------------------------------------------------


def worker_identity(repo: Repo, worker: str | None = None) -> str:
    """Who claims: `worker`, else git config handoff.worker, else user@host:<worktree>."""
    if worker is not None:
        worker = worker.strip()
        if not worker or "\n" in worker:
            raise UsageError("--worker must be non-empty text on one line")
        return worker
    configured = repo.config_get("handoff.worker")
    if configured and configured.strip():
        return configured.strip()
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = os.environ.get("USER") or "user"
    where = repo.workdir or repo.git_dir
    return f"{user}@{socket.gethostname()}:{where}"


def short(oid: str | None) -> str:
    return (oid or "")[:7]


@dataclass(frozen=True)
class ClaimContext:
    """What a claim records about the claiming worktree."""

    worker: str
    worktree: str
    head: str
    branch: str | None
    lease_seconds: int
    clone: str = ""  # this clone's public identity (git_handoff.identity)


def claim_context(repo: Repo, *, worker: str | None = None, lease: int | None = None) -> ClaimContext:
    root = repo.root()
    head = repo.head()
    if head is None:
        raise UsageError("this worktree has no commit yet: make a first commit before claiming a task")
    if lease is not None and (isinstance(lease, bool) or not isinstance(lease, int) or lease <= 0):
        raise UsageError(f"a lease must be a positive number of seconds, not {lease!r}")
    return ClaimContext(
        worker=worker_identity(repo, worker),
        worktree=str(root),
        head=head,
        branch=repo.head_branch(),
        lease_seconds=lease or DEFAULT_LEASE_SECONDS,
        clone=identity.clone_id(repo),
    )


def _expires(seconds: int) -> str:
    return iso(now() + timedelta(seconds=seconds))


def _held_here(task: Task, ctx_worktree: str, worker: str, repo: Repo) -> bool:
    """This worktree's own claim: sealed by this clone (a path or a name in a fetched
    record proves nothing), in this worktree (or, without one recorded, by this worker)."""
    if not identity.claim_is_mine(repo, task):
        return False
    where = task.get("worktree")
    if where:
        return bool(where == ctx_worktree)
    return task.claimed_by == worker


def _holder(task: Task) -> str:
    where = task.get("worktree")
    text = f"task {task.id} is in progress, claimed by {task.claimed_by or 'unknown'}"
    if where:
        text += f" in {where}"
    if task.lease_expires_at:
        text += f" (lease until {task.lease_expires_at})"
    return text


# -- claim --------------------------------------------------------------------------------


def record_prepare(tx: Tx, changes: list[tuple[Task, str, str]]) -> None:
    """Write what dependency validation and lease expiry changed, with their ERROR lines."""
    for task, category, message in changes:
        tx.put_task(task)
        tx.log("ERROR", message, task=task.id, category=category)


def claim_in_tx(
    tx: Tx,
    task_id: str | None = None,
    *,
    ctx: ClaimContext,
    force: bool = False,
) -> Task | None:
    """The claim itself, inside a transaction: None when nothing is eligible.

    Expired leases and dependency failures found on the way are recorded either way.
    """
    sessions.check_claim_allowed(tx)
    stamp = now_iso()
    if task_id is None:
        quick = _quick_pick(tx, ctx, force, stamp)
        if quick is not None:
            task, rows = quick
            claimed = _take(tx, task, ctx, stamp)
            work_index.carry(tx, [claimed], rows=rows)
            return claimed
    prepared, changes = schedule.prepare(tx.tasks(), stamp)
    holders = [t for t in prepared.values() if t.status == "in_progress"]
    mine = [t for t in holders if _held_here(t, ctx.worktree, ctx.worker, tx.store.repo)]
    if mine and not force:
        held = mine[0]
        if task_id == held.id:
            raise UsageError(f"task {held.id} is already claimed by this worktree (use `git handoff renew {held.id}`)")
        raise UsageError(
            f"this worktree already holds task {held.id} (in progress): finish it with `git handoff done` or "
            f"`git handoff fail`, or `git handoff release` it, before claiming another (--force overrides)"
        )
    if tx.config().mode == "exclusive" and not force:
        others = [t for t in holders if not _held_here(t, ctx.worktree, ctx.worker, tx.store.repo)]
        if others:
            raise Contention(
                f"exclusive mode: {_holder(others[0])}; one claim at a time in this repository "
                "(`git handoff init --mode concurrent` allows one per worktree)"
            )
    if task_id is not None:
        named = prepared.get(task_id)
        if named is None:
            raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
        task = named
        if task.status == "completed":
            raise UsageError(f"task {task_id} is already completed; a completed task cannot be claimed")
        if task.status == "in_progress":
            raise Contention(f"{_holder(task)}; try another task or wait for the lease to expire")
        if task.failed_for_good:
            reason = task.error_log[-1] if task.error_log else "attempts exhausted"
            raise UsageError(
                f"task {task_id} failed for good ({task.attempts}/{task.max_attempts} attempts; {reason}); "
                f"raise its limit with `git handoff edit {task_id} --max-attempts N` to retry it"
            )
        waiting = [d for d in task.depends_on if d not in prepared or prepared[d].status != "completed"]
        if waiting:
            record_prepare(tx, changes)
            raise Negative(f"task {task_id} is not ready: it waits on {', '.join(waiting)}")
    else:
        found = schedule.eligible(prepared)
        if not found:
            record_prepare(tx, changes)
            work_index.rebuild(tx, prepared)
            return None
        task = found[0]
    record_prepare(tx, [c for c in changes if c[0].id != task.id])
    for changed, category, message in changes:
        if changed.id == task.id:  # recorded by the claim below, which builds on it
            tx.log("ERROR", message, task=task.id, category=category)
    claimed = _take(tx, task, ctx, stamp)
    final = dict(prepared)
    for changed, _, _ in changes:
        final[changed.id] = tx.task(changed.id) or changed
    final[claimed.id] = claimed
    work_index.rebuild(tx, final)
    return claimed


def _quick_pick(tx: Tx, ctx: ClaimContext, force: bool, stamp: str) -> tuple[Task, dict[str, Any]] | None:
    """The task the full selection would pick, read from the claim index; None when the
    index cannot decide (absent, an expired lease, a refusal to explain...)."""
    rows = work_index.load(tx.store, work_index.tasks_tree(tx.store, tx.base.tree if tx.base else None))
    if rows is None or work_index.any_expired(rows, stamp):
        return None
    here = others = False
    for r in rows.values():
        if r[work_index.STATUS] == "in_progress":
            where = r[work_index.WORKTREE]
            if (where == ctx.worktree) if where else (r[work_index.CLAIMED_BY] == ctx.worker):
                here = True
            else:
                others = True
    if not force and (here or (others and tx.config().mode == "exclusive")):
        return None
    chosen = work_index.first_eligible(rows)
    if chosen is None:
        return None
    task = tx.task(chosen)
    if task is None or work_index.row(task) != rows[chosen]:
        return None
    return task, rows


def _take(tx: Tx, task: Task, ctx: ClaimContext, stamp: str) -> Task:
    claimed = dataclasses.replace(
        task,
        status="in_progress",
        started_at_commit=ctx.head,
        claimed_by=ctx.worker,
        lease_expires_at=_expires(ctx.lease_seconds),
        completed_at=None,
    ).with_extra(
        worktree=ctx.worktree,
        branch=ctx.branch,
        claimed_at=stamp,
        lease_seconds=ctx.lease_seconds,
        claim_session=tx.session,
        clone=ctx.clone or None,
        clone_seal=identity.claim_seal(tx.store.repo, task.id, stamp, ctx.worktree, ctx.head, ctx.worker),
    )
    claimed = tx.put_task(claimed)
    tx.log("Starting", f"{claimed.title} (base={short(ctx.head)})", task=claimed.id)
    return claimed


def claim(
    store: StateStore,
    task_id: str | None = None,
    *,
    worker: str | None = None,
    lease: int | None = None,
    force: bool = False,
) -> Task:
    """Take the next eligible task (or `task_id`) for this worktree, atomically."""
    if task_id is not None:
        check_id(task_id)
    ctx = claim_context(store.repo, worker=worker, lease=lease)
    task = store.transact(lambda tx: claim_in_tx(tx, task_id, ctx=ctx, force=force))
    if task is None:
        raise Negative("nothing eligible: every task is completed, in progress, or waiting on failed dependencies")
    return task


# -- acting on a claimed task --------------------------------------------------------------


def _require_in_progress(task: Task, action: str) -> None:
    if task.status != "in_progress":
        raise UsageError(f"cannot {action} task {task.id}: it is {task.status}, not in progress (claim it first)")


def _require_owner(task: Task, repo: Repo, action: str, force: bool) -> None:
    if force:
        return
    here = str(repo.workdir or repo.git_dir)
    if identity.claim_is_mine(repo, task) and (
            task.get("worktree") == here or task.claimed_by == worker_identity(repo)):
        return
    raise UsageError(
        f"cannot {action} task {task.id}: it is claimed by {task.claimed_by or 'unknown'}"
        + (f" in {task.get('worktree')}" if task.get("worktree") else "")
        + " (--force acts anyway)"
    )


def _same_claim(now_task: Task, seen: Task) -> bool:
    return (
        now_task.status == "in_progress"
        and now_task.claimed_by == seen.claimed_by
        and now_task.started_at_commit == seen.started_at_commit
        and now_task.get("claimed_at") == seen.get("claimed_at")
    )


def _current(tx: Tx, seen: Task, action: str) -> Task:
    task = tx.require_task(seen.id)
    if not _same_claim(task, seen):
        raise Contention(
            f"task {seen.id} changed while it was being {action} (now {task.status}, "
            f"claimed by {task.claimed_by or 'nobody'}); nothing was recorded"
        )
    return task


def _claimed_task(store: StateStore, task_id: str, action: str, force: bool) -> Task:
    check_id(task_id)
    task = store.snapshot().task(task_id)
    if task is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    _require_in_progress(task, action)
    _require_owner(task, store.repo, action, force)
    return task


def _lease_of(task: Task, lease: int | None) -> int:
    if lease is not None:
        if isinstance(lease, bool) or not isinstance(lease, int) or lease <= 0:
            raise UsageError(f"a lease must be a positive number of seconds, not {lease!r}")
        return lease
    kept = task.get("lease_seconds")
    return kept if isinstance(kept, int) and kept > 0 else DEFAULT_LEASE_SECONDS


def renew(store: StateStore, task_id: str, *, lease: int | None = None, force: bool = False) -> Task:
    """Push the lease of a claimed task forward (default: by the length it was claimed with)."""
    seen = _claimed_task(store, task_id, "renew", force)
    seconds = _lease_of(seen, lease)

    def apply(tx: Tx) -> Task:
        task = _current(tx, seen, "renewed")
        new = tx.put_task(dataclasses.replace(task, lease_expires_at=_expires(seconds)).with_extra(lease_seconds=seconds))
        work_index.carry(tx, [new])
        tx.log("LOCK", f"lease renewed until {new.lease_expires_at} (claimed_by={task.claimed_by})", task=task.id)
        return new

    return store.transact(apply)


def release(store: StateStore, task_id: str, *, force: bool = False) -> Task:
    """Give a claimed task back: pending again, no attempt counted, the work tree untouched."""
    seen = _claimed_task(store, task_id, "release", force)

    def apply(tx: Tx) -> Task:
        task = _current(tx, seen, "released")
        new = dataclasses.replace(
            task, status="pending", claimed_by=None, lease_expires_at=None, started_at_commit=None
        ).with_extra(**{k: None for k in CLAIM_EXTRAS})
        new = tx.put_task(new)
        work_index.carry(tx, [new])
        tx.log("LOCK", f"released (claimed_by={task.claimed_by}); back to pending", task=task.id)
        return new

    return store.transact(apply)


def checkpoint(
    store: StateStore,
    task_id: str,
    message: str,
    step: int | None = None,
    total: int | None = None,
    *,
    force: bool = False,
) -> Task:
    """Record progress on a claimed task (and renew its lease)."""
    text = " ".join((message or "").split())
    if not text:
        raise UsageError("a checkpoint needs a non-empty message")
    for name, value in (("--step", step), ("--of", total)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{name} must be a whole number of at least 1, not {value!r}")
    if step is not None and total is not None and step > total:
        raise UsageError(f"--step {step} is beyond --of {total}")
    seen = _claimed_task(store, task_id, "checkpoint", force)
    head_now = store.repo.head()
    tree = _worktree_tree(store.repo, head_now) if head_now else None

    def apply(tx: Tx) -> Task:
        task = _current(tx, seen, "checkpointed")
        last_step = task.checkpoints[-1].get("step") if task.checkpoints else 0
        n = step if step is not None else (last_step + 1 if isinstance(last_step, int) else len(task.checkpoints) + 1)
        of = total
        if of is None and task.checkpoints:
            last_total = task.checkpoints[-1].get("total")
            of = last_total if isinstance(last_total, int) and last_total >= n else None
        entry = {"step": n, "total": of, "description": text, "timestamp": now_iso()}
        new = dataclasses.replace(
            task,
            checkpoints=(*task.checkpoints, entry),
            lease_expires_at=_expires(_lease_of(task, None)),
        )
        new = new.with_extra(checkpoint_tree=tree)  # lets session recovery verify the files
        new = tx.put_task(new)
        work_index.carry(tx, [new])
        shown = text.replace('"', "'")
        tx.log("CHECKPOINT", f'step={n}/{of if of is not None else "?"} "{shown}"', task=task.id)
        return new

    task = store.transact(apply)
    _note(store, task)
    return task


def _note(store: StateStore, task: Task, outcome: str | None = None, head: str | None = None) -> None:
    """Notes are a courtesy to `git log`: failing to write them never fails the command."""
    try:
        notes.note_task_commits(store, task, head=head, outcome=outcome)
    except HandoffError:
        pass


# -- verify / done ----------------------------------------------------------------------


def _missing_check(task: Task) -> UsageError:
    return UsageError(
        f"[CONFIG] Missing validation.command for task {task.id}: nothing is completed without an objective "
        f"check; add one with `git handoff edit {task.id} --check CMD`"
    )


def _run_check(store: StateStore, task: Task) -> runner.RunResult:
    if not task.check:
        raise _missing_check(task)
    repo = store.repo
    trust.require_trusted(repo, task.check, "validation command")
    env = {"HANDOFF_TASK": task.id}
    return runner.run_command(task.check, repo.root(), task.timeout_seconds, env=env)


def verify(store: StateStore, task_id: str) -> runner.RunResult:
    """Run the task's validation command under its timeout; changes nothing."""
    check_id(task_id)
    task = store.snapshot().task(task_id)
    if task is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    return _run_check(store, task)


def _require_branch(task: Task, repo: Repo, action: str, force: bool) -> None:
    claimed_on = task.get("branch")
    if force or not claimed_on:
        return
    here = repo.head_branch()
    if here != claimed_on:
        raise UsageError(
            f"cannot {action} task {task.id}: it was claimed on {claimed_on}, this worktree is on "
            f"{here or 'a detached HEAD'} (switch back, or --force)"
        )


def done(store: StateStore, task_id: str, *, force: bool = False) -> Task:
    """Complete a claimed task if its check passes; otherwise fail it exactly as `fail` and
    raise Negative (exit 1) carrying the failure."""
    seen = _claimed_task(store, task_id, "complete", force)
    if not seen.check:
        raise _missing_check(seen)
    _require_branch(seen, store.repo, "complete", force)
    if seen.cleanup:
        trust.require_trusted(store.repo, seen.cleanup, "cleanup command")
    result = _run_check(store, seen)
    if not result.ok:
        category = result.category or "TEST_FAIL"
        reason = f"Validation failed: {result.summary()}"
        outcome = fail(store, task_id, reason=reason, category=category, force=True, _seen=seen, _run=result)
        raise Negative(
            f"[{category}] validation of {task_id} failed ({result.summary()}); attempt "
            f"{outcome['attempt']} saved as {outcome['attempt_ref']}"
            + (f", rolled back to {short(outcome['base'])}" if outcome["rolled_back"] else ""),
            payload=outcome,
        )
    head = store.repo.head()
    # The check ran on the work tree; what is not committed is not in `completed_commit`.
    uncommitted = _dirty(store.repo)

    def apply(tx: Tx) -> Task:
        task = _current(tx, seen, "completed")
        new = dataclasses.replace(
            task, status="completed", completed_at=now_iso(), lease_expires_at=None
        ).with_extra(
            completed_commit=head,
            completed_session=tx.session,
            uncommitted_at_completion=uncommitted[:50] or None,
            **{k: None for k in ("worktree", "claimed_at", "lease_seconds", "clone", "clone_seal")},
        )
        new = tx.put_task(new)
        work_index.carry(tx, [new])
        sessions.record_completion(tx, task.id)
        if uncommitted:
            tx.log("WARN", f"completed with {len(uncommitted)} uncommitted file(s), not in commit {short(head)}: "
                   + ", ".join(uncommitted[:5]), task=task.id)
        tx.log("Completed", f"(commit {short(head)})", task=task.id)
        return new

    task = store.transact(apply)
    _note(store, seen, outcome="completed", head=head)
    handoff.after_done(store)
    return task


# -- fail ------------------------------------------------------------------------------


def _worktree_tree(repo: Repo, head: str) -> str:
    """A tree of the work tree as it is: tracked files (modified or not) and untracked,
    non-ignored files. Built in a temporary index; the real index is not touched."""
    index = repo.worktree_dir / f"attempt-index.{os.getpid()}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        repo.git("read-tree", head, env=env)
        repo.git("add", "-A", "--", ".", env=env, cwd=repo.root())
        return repo.git("write-tree", env=env).stdout.decode().strip()
    finally:
        index.unlink(missing_ok=True)


def _changed(repo: Repo, old: str, new: str) -> list[tuple[str, str]]:
    """(status letter, path) of files differing between two trees or commits."""
    proc = repo.git("diff-tree", "-r", "-z", "--no-renames", "--name-status", old, new)
    fields = proc.stdout.decode(errors="surrogateescape").split("\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        if fields[i]:
            out.append((fields[i][0], fields[i + 1]))
    return out


def attempt_ref(task_id: str, n: int) -> str:
    return f"{ATTEMPTS_PREFIX}{task_id}/{n}"


def _attempt_numbers(repo: Repo, task_id: str) -> dict[int, str]:
    prefix = f"{ATTEMPTS_PREFIX}{task_id}/"
    out = {}
    for name, target in repo.refs_under(prefix).items():
        rest = name[len(prefix):]
        if rest.isdigit():
            out[int(rest)] = target
    return out


def save_attempt(store: StateStore, task: Task, *, reason: str, category: str) -> dict[str, Any]:
    """Save the whole work of the current attempt as a commit under refs/harness/attempts/.

    The commit's tree is the work tree (untracked non-ignored files included), its
    parent the current HEAD (so commits made since the claim stay reachable), its
    message a summary line and a JSON record of the attempt.
    """
    repo = store.repo
    head = repo.head()
    if head is None:
        raise UsageError("this worktree has no commit: nothing to save")
    base = task.started_at_commit or head
    tree = _worktree_tree(repo, head)
    files = [{"status": s, "path": p} for s, p in _changed(repo, base, tree)]
    existing = _attempt_numbers(repo, task.id)
    n = max(task.attempts + 1, max(existing, default=0) + 1)
    for _ in range(50):
        record = {
            "task": task.id,
            "attempt": n,
            "time": now_iso(),
            "category": category,
            "reason": reason,
            "base": base,
            "head": head,
            "branch": repo.head_branch(),
            "worker": task.claimed_by,
            "session": store.session,
            "files": files,
        }
        message = f"handoff attempt {task.id} #{n}: [{category}] {reason}\n\n{json.dumps(record, indent=2)}\n"
        commit = repo.create_commit(tree, [head], message)
        ref = attempt_ref(task.id, n)
        if repo.cas_ref(ref, commit, None, f"handoff: attempt {n} of {task.id}"):
            return {"attempt": n, "ref": ref, "commit": commit, "files": files, "base": base, "head": head}
        n += 1
    raise Contention(f"could not name a new attempt ref for {task.id}; retry")


def fail(
    store: StateStore,
    task_id: str,
    *,
    reason: str,
    category: str = "TASK_EXEC",
    keep_worktree: bool = False,
    force: bool = False,
    _seen: Task | None = None,
    _run: runner.RunResult | None = None,
) -> dict[str, Any]:
    """Fail a claimed attempt: save it, count it, roll the work tree back, clean up."""
    check_category(category)
    text = " ".join((reason or "").split())
    if not text:
        raise UsageError("fail needs a --reason")
    repo = store.repo
    seen = _seen or _claimed_task(store, task_id, "fail", force)
    _require_branch(seen, repo, "fail", force)
    if seen.cleanup:
        trust.require_trusted(repo, seen.cleanup, "cleanup command")
    base = seen.started_at_commit
    base_ok = bool(base) and repo.resolve_commit(f"{base}^{{commit}}") is not None
    saved: dict[str, Any] | None = None
    if base_ok:
        _note(store, seen, outcome=f"failed [{category}]")
        saved = save_attempt(store, seen, reason=text, category=category)
    rollback = base_ok and not keep_worktree

    def apply(tx: Tx) -> Task:
        task = _current(tx, seen, "failed")
        attempts = task.attempts + 1 if base_ok else max(task.max_attempts, task.attempts + 1)
        entry = f"[{category}] {text}"
        new = dataclasses.replace(
            task,
            status="failed",
            attempts=attempts,
            error_log=(*task.error_log, entry),
            claimed_by=None,
            lease_expires_at=None,
        ).with_extra(failed_at=now_iso(), **{k: None for k in CLAIM_EXTRAS})
        if saved is not None:
            new = new.with_extra(last_attempt_ref=saved["ref"])
        new = tx.put_task(new)
        work_index.carry(tx, [new], clean=not new.failed_for_good)
        tx.log("ERROR", text, task=task.id, category=category)
        if not base_ok:
            tx.log(
                "ERROR",
                f"started_at_commit {base or '(none)'} is missing from the repository: no rollback, attempts set to max",
                task=task.id,
                category=category,
            )
        elif rollback:
            tx.log("ROLLBACK", f"git reset --hard {short(base)}", task=task.id)
        return new

    task = store.transact(apply)
    outcome: dict[str, Any] = {
        "task": task.to_json(),
        "category": category,
        "reason": text,
        "attempt": saved["attempt"] if saved else None,
        "attempt_ref": saved["ref"] if saved else None,
        "attempt_commit": saved["commit"] if saved else None,
        "files": saved["files"] if saved else [],
        "base": base,
        "rolled_back": rollback,
        "cleanup": None,
        "validation": _run.to_json() if _run is not None else None,
    }
    if rollback:
        assert base is not None
        try:
            repo.git("reset", "--hard", "--quiet", base, cwd=repo.root())
            repo.git("clean", "-fd", "--quiet", cwd=repo.root())
        except GitFailure as exc:
            raise GitFailure(
                f"{exc.message}; the attempt is saved as {saved['ref'] if saved else '?'}: "
                f"finish the rollback with `git reset --hard {base}` and `git clean -fd`"
            ) from None
    if task.cleanup:
        result = runner.run_command(task.cleanup, repo.root(), task.timeout_seconds, env={"HANDOFF_TASK": task.id})
        outcome["cleanup"] = result.to_json()
        if not result.ok:
            _log_warning(store, task.id, f"on_failure.cleanup failed ({result.category}): {result.summary()}")
    return outcome


def _log_warning(store: StateStore, task_id: str, text: str) -> None:
    def apply(tx: Tx) -> None:
        tx.log("WARN", text, task=task_id)

    try:
        store.transact(apply)
    except HandoffError:
        pass


# -- attempts / restore -----------------------------------------------------------------------


def _attempt_record(repo: Repo, n: int, commit: str) -> dict[str, Any]:
    message, parents, when, author = repo.commit_info(commit)
    _, _, body = message.partition("\n\n")
    try:
        record = json.loads(body)
    except ValueError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    first = message.splitlines()[0] if message else ""
    return {
        "attempt": n,
        "ref": None,
        "commit": commit,
        "time": record.get("time"),
        "category": record.get("category"),
        "reason": record.get("reason", first),
        "base": record.get("base"),
        "head": record.get("head", parents[0] if parents else None),
        "session": record.get("session"),
        "worker": record.get("worker"),
        "files": record.get("files", []),
    }


def attempts(store: StateStore, task_id: str) -> list[dict[str, Any]]:
    """The saved attempts of a task, oldest first: number, time, reason, files."""
    check_id(task_id)
    repo = store.repo
    found = _attempt_numbers(repo, task_id)
    if not found and store.snapshot().task(task_id) is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    out = []
    for n in sorted(found):
        record = _attempt_record(repo, n, found[n])
        record["ref"] = attempt_ref(task_id, n)
        out.append(record)
    return out


def _dirty(repo: Repo) -> list[str]:
    proc = repo.git("status", "--porcelain", "-z", "--untracked-files=all", cwd=repo.root())
    return [p[3:] for p in proc.stdout.decode(errors="surrogateescape").split("\0") if len(p) > 3]


def restore(store: StateStore, task_id: str, n: int, force: bool = False) -> dict[str, Any]:
    """Bring the files of attempt `n` back into this work tree (HEAD and index untouched)."""
    check_id(task_id)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"attempts are numbered from 1, not {n!r}")
    repo = store.repo
    root = repo.root()
    commit = repo.ref_target(attempt_ref(task_id, n))
    if commit is None:
        raise UsageError(f"task {task_id} has no saved attempt {n} (see `git handoff attempts {task_id}`)")
    record = _attempt_record(repo, n, commit)
    dirty = _dirty(repo)
    if dirty and not force:
        raise UsageError(
            f"uncommitted changes would be overwritten ({', '.join(dirty[:3])}{'...' if len(dirty) > 3 else ''}): "
            "commit or stash them, or --force"
        )
    base = record.get("base")
    # the message's base counts only as an ancestor of the attempt (what save_attempt writes)
    if not (isinstance(base, str) and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", base)
            and repo.resolve_commit(base) and repo.is_ancestor(base, commit)):
        base = repo.head() or commit
    changes = _changed(repo, base, commit)
    written = [p for s, p in changes if s != "D"]
    deleted = [p for s, p in changes if s == "D"]
    # every path comes from a commit that may have been fetched: checked before anything
    # is touched, and only files git tracks here (so recoverable) are ever deleted
    paths.confine_all(root, written + deleted)
    tracked = set(repo.git("ls-files", "-z", "--", *deleted, cwd=root, env={"GIT_LITERAL_PATHSPECS": "1"})
                  .stdout.decode(errors="surrogateescape").split("\0")) if deleted else set()
    deleted = [p for p in deleted if p in tracked]
    if written:
        repo.git(
            "restore", f"--source={commit}", "--worktree", "--pathspec-from-file=-", "--pathspec-file-nul",
            input="\0".join(written).encode(errors="surrogateescape") + b"\0",
            env={"GIT_LITERAL_PATHSPECS": "1"}, cwd=root,
        )
    for path in deleted:
        target = Path(root, path)
        if target.is_file() or target.is_symlink():
            target.unlink()

    def apply(tx: Tx) -> None:
        tx.log(
            "RECOVERY",
            f'action="restore attempt {n}" reason="{len(written)} file(s) written, {len(deleted)} removed '
            f'from {attempt_ref(task_id, n)}"',
            task=task_id,
        )

    if store.is_initialized():
        store.transact(apply)
    return {"task": task_id, "attempt": n, "commit": commit, "restored": written, "deleted": deleted}
