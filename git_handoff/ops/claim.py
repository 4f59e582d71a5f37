"""`claim`: take the next eligible task (or a named one) for this worktree in one
compare-and-swap; with a remote, in one push the remote accepted.

The fast path reads the per-clone claim index instead of every task; anything the
index cannot decide takes the full selection (selection.prepare + eligible), which
rebuilds the index. Expired leases and dependency failures found on the way are
recorded in the same transaction.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from git_handoff.core import selection
from git_handoff.core.errors import Contention, Negative, UsageError
from git_handoff.core.model import Task, check_id, now_iso
from git_handoff.infra import rollback, worktree
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import claim_base
from git_handoff.ops.claim_plan import Refusal, WorkMissing, _draw, plan_claim
from git_handoff.state import claim_index, claim_journal, identity, session_records, writers
from git_handoff.state.claim_checks import (
    DEFAULT_LEASE_SECONDS,
    check_lease,
    expires,
    held_by,
    held_here,
    short,
)
from git_handoff.state.store import StateStore, Tx
from git_handoff.state.this_clone import worker_identity


@dataclass(frozen=True)
class ClaimContext:
    """What a claim records about the claiming worktree."""

    worker: str
    worktree: str
    head: str
    branch: str | None
    lease_seconds: int
    snapshot: str | None = None  # the work tree at the claim, when not clean
    clone: str = ""  # this clone's public identity (git_handoff.state.identity)
    forward: claim_base.Forward | None = None  # where this clean worktree moves to (ops/claim_base.py)
    target: str | None = None  # the target as a person names it (origin/main), for messages

    @property
    def base(self) -> str:
        """The commit the claim starts from."""
        return self.forward.tip if self.forward else self.head


def claim_context(repo: Repo, *, worker: str | None = None, lease: int | None = None) -> ClaimContext:
    root = repo.root()
    head = repo.head()
    if head is None:
        raise UsageError("this worktree has no commit yet: make a first commit before claiming a task")
    return ClaimContext(
        worker=worker_identity(repo, worker),
        worktree=str(root),
        head=head,
        branch=repo.head_branch(),
        lease_seconds=check_lease(lease) if lease is not None else DEFAULT_LEASE_SECONDS,
        clone=identity.clone_id(repo),
    )


def with_snapshot(repo: Repo, ctx: ClaimContext) -> ClaimContext:
    """The claim context with the work tree's snapshot (None on a clean tree: one `git status`)."""
    operation = worktree.operation_in_progress(repo)
    if operation is not None:
        raise UsageError(f"a {operation} is in progress in this worktree: finish or abort it before claiming a task")
    return dataclasses.replace(ctx, snapshot=rollback.take_snapshot(repo))


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
    taken: frozenset[str] = frozenset(),
    slot: tuple[int, int] = (0, 1),
) -> Task | None:
    """The claim itself, inside a transaction: None when nothing is eligible.

    `taken`: tasks another machine holds by a claim the state does not show yet (a
    remote claim ref). `slot` (rank, clones): this clone's place among the clones that
    publish on the remote; with more than one, the pick comes from this clone's share of
    the eligible tasks of the best priority (`_slot_pick`), so that machines claiming at
    once want different tasks (a P1 is still never taken while a P0 is free).
    Expired leases and dependency failures found on the way are recorded either way.
    """
    session_records.check_claim_allowed(tx)
    stamp = now_iso()
    hidden = writers.unapproved(tx.store.repo, tx.base.commit if tx.base else None)
    if task_id is not None and task_id in hidden:
        raise writers.refuse(task_id, hidden[task_id])
    if hidden:  # an unapproved writer's tasks are never taken: as if another machine held them
        taken = taken | frozenset(hidden)
    if task_id is None and not taken and slot[1] <= 1:
        quick = _quick_pick(tx, ctx, force, stamp)
        if quick is not None and claim_base.WorkAt(tx.store.repo, ctx.base).lacking(
                quick[0], {d: t for d in quick[0].depends_on if (t := tx.task(d)) is not None}):
            quick = None  # the full selection passes it over, saying why
        if quick is not None:
            task, rows = quick
            claimed = _take(tx, task, ctx, stamp)
            claim_index.carry(tx, [claimed], rows=rows)
            return claimed
    return _claim_full(tx, task_id, ctx=ctx, force=force, taken=taken, slot=slot, stamp=stamp)


def _claim_full(
    tx: Tx,
    task_id: str | None,
    *,
    ctx: ClaimContext,
    force: bool,
    taken: frozenset[str],
    slot: tuple[int, int],
    stamp: str,
) -> Task | None:
    """The full selection (what the claim index cannot decide): prepare, plan, then carry
    the plan out in `tx` and rebuild the claim index."""
    prepared, changes = selection.prepare(tx.tasks(), stamp)
    here = frozenset(t.id for t in prepared.values()
                     if t.status == "in_progress" and held_here(t, ctx.worktree, ctx.worker, tx.store.repo))
    # a forced claim never reads the mode, as it never needed it
    mode = None if force else tx.config().mode
    plan = plan_claim(prepared, task_id=task_id, here=here, mode=mode, force=force, taken=taken, slot=slot,
                      work=claim_base.WorkAt(tx.store.repo, ctx.base), target=ctx.target)
    if isinstance(plan, Refusal):
        if plan.record:
            record_prepare(tx, changes)
        raise plan.error(plan.message)
    if not plan.pool:
        record_prepare(tx, changes)
        claim_index.rebuild(tx, prepared)
        if plan.held:
            raise WorkMissing(f"nothing eligible here: {plan.held}")
        return None
    return _take_prepared(tx, _draw(plan.pool), ctx=ctx, stamp=stamp, prepared=prepared, changes=changes)


def _take_prepared(tx: Tx, task: Task, *, ctx: ClaimContext, stamp: str, prepared: dict[str, Task],
                   changes: list[tuple[Task, str, str]]) -> Task:
    """Take the planned `task` with what the preparation changed, and rebuild the claim index."""
    record_prepare(tx, [c for c in changes if c[0].id != task.id])
    for changed, category, message in changes:
        if changed.id == task.id:  # recorded by the claim below, which builds on it
            tx.log("ERROR", message, task=task.id, category=category)
    claimed = _take(tx, task, ctx, stamp)
    final = dict(prepared)
    for changed, _, _ in changes:
        final[changed.id] = tx.task(changed.id) or changed
    final[claimed.id] = claimed
    claim_index.rebuild(tx, final)
    return claimed


def _quick_pick(tx: Tx, ctx: ClaimContext, force: bool, stamp: str) -> tuple[Task, dict[str, Any]] | None:
    """The task the full selection would pick, read from the claim index; None when the
    index cannot decide (absent, an expired lease, a refusal to explain...)."""
    rows = claim_index.load(tx.store, claim_index.tasks_tree(tx.store, tx.base.tree if tx.base else None))
    if rows is None or claim_index.any_expired(rows, stamp):
        return None
    here = others = False
    for r in rows.values():
        if r[claim_index.STATUS] == "in_progress":
            where = r[claim_index.WORKTREE]
            if held_by(where, r[claim_index.CLAIMED_BY], ctx.worktree, ctx.worker):
                here = True
            else:
                others = True
    if not force and (here or (others and tx.config().mode == "exclusive")):
        return None
    chosen = claim_index.first_eligible(rows)
    if chosen is None:
        return None
    task = tx.task(chosen)
    if task is None or claim_index.row(task) != rows[chosen]:
        return None
    return task, rows


def _take(tx: Tx, task: Task, ctx: ClaimContext, stamp: str) -> Task:
    claimed = dataclasses.replace(
        task,
        status="in_progress",
        started_at_commit=ctx.base,
        claimed_by=ctx.worker,
        lease_expires_at=expires(ctx.lease_seconds),
        completed_at=None,
    ).with_extra(
        worktree=ctx.worktree,
        branch=ctx.branch,
        claimed_at=stamp,
        lease_seconds=ctx.lease_seconds,
        claim_session=tx.session,
        claim_snapshot=ctx.snapshot,
        clone=ctx.clone or None,
        clone_seal=identity.claim_seal(tx.store.repo, task.id, stamp, ctx.worktree, ctx.base, ctx.worker),
        **{selection.HELD: selection.held_through(task, stamp) or None},  # a claim taken over: its time counted
    )
    claimed = tx.put_task(claimed)
    moved = "" if ctx.forward is None else (
        f", brought forward from {short(ctx.head)} to the target {ctx.target}" if ctx.forward.leaving is None else
        f", moved from {short(ctx.head)} to the target {ctx.target}: it held refused work {ctx.forward.leaving}")
    tx.log("Starting", f"{claimed.title} (base={short(ctx.base)}{moved})", task=claimed.id)
    return claimed


def claim(
    store: StateStore,
    task_id: str | None = None,
    *,
    worker: str | None = None,
    lease: int | None = None,
    force: bool = False,
    remote: str | None = None,
) -> Task:
    """Take the next eligible task (or `task_id`) for this worktree, atomically.

    With `remote` (or handoff.syncClaims), the claim holds across machines: fetch ->
    merge -> claim -> push, and only a claim the remote accepted counts; a lost race
    claims the next task (or, for a named task, is Contention once the winner's claim
    arrives).
    """
    if task_id is not None:
        check_id(task_id)
    ctx = with_snapshot(store.repo, claim_context(store.repo, worker=worker, lease=lease))
    goal = claim_base.target_of(store.repo)
    ctx = dataclasses.replace(ctx, forward=claim_base.forward(store, ctx.head, ctx.snapshot, goal),
                              target=goal.name if goal else None)
    try:
        task = _claim_once(store, task_id, ctx=ctx, force=force, remote=remote)
    except WorkMissing:
        if goal is None or goal.remote is None:
            raise
        # the dependency's work may have landed since this clone last looked: look once
        from git_handoff.remote import landing  # noqa: PLC0415  (a fetch: only here)

        landing.bring(store.repo, goal)
        again = dataclasses.replace(ctx, forward=claim_base.forward(store, ctx.head, ctx.snapshot, goal))
        if again.base == ctx.base:
            raise
        task = _claim_once(store, task_id, ctx=again, force=force, remote=remote)
        ctx = again
    why = claim_base.bring_forward(store.repo, ctx.head, ctx.forward)
    if why is not None:
        claim_base.undo(store, task)
        raise Contention(f"claimed {task.id} but could not bring this worktree to its base {short(ctx.base)} on "
                         f"{ctx.target}: {why}; the claim was released")
    return task


def _claim_once(store: StateStore, task_id: str | None, *, ctx: ClaimContext, force: bool,
                remote: str | None) -> Task:
    """One claim's transaction (local, or through the remote) from the context `ctx`."""
    target = claims_sync_remote(store, remote)

    def apply(tx: Tx) -> Task | None:
        return claim_in_tx(tx, task_id, ctx=ctx, force=force)

    try:
        if target is None:
            task = store.transact(apply)
        else:
            # Lazy on purpose (import cost): sync brings the whole 3-way merge, which a
            # local claim, the hot path of every worker loop, must not pay for.
            from git_handoff.ops import sync  # noqa: PLC0415

            def apply_remote(tx: Tx, fleet: sync.Fleet) -> Task | None:
                return claim_in_tx(tx, task_id, ctx=ctx, force=force, taken=fleet.taken, slot=fleet.slot)

            task = sync.transact_remote(store, apply_remote, lambda t: t.id if t else None, target)
    except BaseException:
        rollback.drop_snapshot_ref(store.repo, ctx.snapshot)
        raise
    if task is None:
        rollback.drop_snapshot_ref(store.repo, ctx.snapshot)
        raise Negative("nothing eligible: every task is completed, in progress, or waiting on failed dependencies")
    claim_journal.record_claim(store.repo, task)  # what this worktree's own local actions will act on
    return task


def claims_sync_remote(store: StateStore, remote: str | None) -> str | None:
    """The remote a claim must reach: --remote, else the default one when handoff.syncClaims is on."""
    if remote is not None:
        return remote
    if store.repo.config_bool("handoff.syncClaims"):
        return store.repo.config_get("handoff.remote") or "origin"
    return None
