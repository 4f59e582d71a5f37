"""The plan of a full claim, pure: which task (this clone's share of the eligible ones), or
which refusal, from the tasks `selection.prepare` returned (ops/claim.py carries it out).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from git_handoff.core import selection
from git_handoff.core.errors import Contention, Negative, UsageError
from git_handoff.core.model import Task
from git_handoff.ops import claim_base
from git_handoff.state.claim_checks import holder, other_workers


@dataclass(frozen=True)
class Refusal:
    """A claim refused: the error it raises, with its message. `record`: what the
    selection's preparation changed (expired leases, failed dependencies) is written first."""

    error: type[Contention] | type[UsageError] | type[Negative]
    message: str
    record: bool = False


@dataclass(frozen=True)
class Pick:
    """The tasks the claim takes one of, at random (`_draw`); empty when nothing is eligible."""

    pool: tuple[Task, ...]
    held: str | None = None  # eligible tasks passed over: their dependencies' work is not in the base


class WorkMissing(Negative):
    """A claim that found tasks eligible but none whose dependencies' work its base holds
    (exit 1): fetching the target may change that."""


def plan_claim(
    prepared: dict[str, Task],
    *,
    task_id: str | None,
    here: frozenset[str],
    mode: str | None,
    force: bool,
    taken: frozenset[str] = frozenset(),
    slot: tuple[int, int] = (0, 1),
    work: claim_base.WorkAt | None = None,
    target: str | None = None,
) -> Pick | Refusal:
    """What a full claim does with the tasks `selection.prepare` returned: a refusal, or
    the pick (the named task, or this clone's share of the eligible ones: `_slot_pool`).

    `here`: the in-progress tasks this worktree holds (`held_here`); `mode`: the
    repository's (None: not read, as a forced claim needs none). Pure but for the clock
    and HANDOFF_WORKER, which the wording of a refusal reads (`holder`, `other_workers`).
    """
    refusal = None if force else _holding_refusal(prepared, task_id=task_id, here=here, mode=mode)
    if refusal is not None:
        return refusal
    if task_id is not None:
        named = _named_plan(prepared, task_id, taken)
        if isinstance(named, Pick) and work is not None and (lacking := work.lacking(named.pool[0], prepared)):
            return Refusal(WorkMissing, claim_base.missing_message(named.pool[0], lacking, work.base, target),
                           record=True)
        return named
    found = selection.eligible(prepared, skip=taken)
    if work is not None and found:
        passed = [(t, lacking) for t in found if (lacking := work.lacking(t, prepared))]
        if passed:
            skipped = {p[0].id for p in passed}
            found = [t for t in found if t.id not in skipped]
            if not found:
                task, lacking = passed[0]
                return Pick((), held=claim_base.missing_message(task, lacking, work.base, target))
    return Pick(tuple(_slot_pool(found, slot)) if found else ())


def _holding_refusal(prepared: dict[str, Task], *, task_id: str | None, here: frozenset[str],
                     mode: str | None) -> Refusal | None:
    """The refusal of an unforced claim for what is held already: by this worktree (one
    claim per worktree), or by anyone in exclusive mode."""
    holders = [t for t in prepared.values() if t.status == "in_progress"]
    mine = [t for t in holders if t.id in here]
    if mine:
        held = mine[0]
        other = other_workers(held)
        if other is not None:
            return Refusal(Contention, f"this worktree already holds task {held.id}: {other}. One claim per worktree "
                           "(a rollback would undo the other's work): wait for it, or claim from a worktree of your "
                           "own (`git worktree add`)")
        if task_id == held.id:
            return Refusal(UsageError,
                           f"task {held.id} is already claimed by this worktree (use `git handoff renew {held.id}`)")
        return Refusal(
            UsageError,
            f"this worktree already holds task {held.id} (in progress): finish it with `git handoff done` or "
            f"`git handoff fail`, or `git handoff release` it, before claiming another (--force overrides)",
        )
    others = [t for t in holders if t.id not in here]
    if mode == "exclusive" and others:
        return Refusal(
            Contention,
            f"exclusive mode: {holder(others[0])}; one claim at a time in this repository "
            "(`git handoff init --mode concurrent` allows one per worktree)",
        )
    return None


def _named_plan(prepared: dict[str, Task], task_id: str, taken: frozenset[str]) -> Pick | Refusal:
    """The named task, or why it cannot be claimed."""
    task = prepared.get(task_id)
    if task is None:
        return Refusal(UsageError, f"no task {task_id!r} (see `git handoff list`)")
    if task.status == "completed":
        return Refusal(UsageError, f"task {task_id} is already completed; a completed task cannot be claimed")
    if task.status == "in_progress":
        return Refusal(Contention, f"{holder(task)}; try another task or wait for the lease to expire")
    if task_id in taken:
        return Refusal(Contention, f"task {task_id} is claimed on the remote by another machine; try another task "
                       "or wait for its lease to expire")
    if task.failed_for_good:
        reason = task.error_log[-1] if task.error_log else "attempts exhausted"
        return Refusal(
            UsageError,
            f"task {task_id} failed for good ({task.attempts}/{task.max_attempts} attempts; {reason}); "
            f"raise its limit with `git handoff edit {task_id} --max-attempts N` to retry it",
        )
    waiting = [d for d in task.depends_on if d not in prepared or prepared[d].status != "completed"]
    if waiting:
        return Refusal(Negative, f"task {task_id} is not ready: it waits on {', '.join(waiting)}", record=True)
    return Pick((task,))


def _slot_of(task_id: str, clones: int) -> int:
    """The slot of a task among `clones` (by a hash of its id: the same on every clone,
    and unchanged when other tasks come and go)."""
    return int.from_bytes(hashlib.sha1(task_id.encode()).digest()[:8], "big") % clones


def _slot_pick(found: list[Task], slot: tuple[int, int]) -> Task:
    """The first eligible task; or, for the clone of rank r among n > 1 clones, one at
    random among `_slot_pool`."""
    return _draw(_slot_pool(found, slot))


def _slot_pool(found: list[Task], slot: tuple[int, int]) -> list[Task]:
    """The tasks a clone picks from: the first eligible task alone; or, for the clone of
    rank r among n > 1 clones, the eligible tasks of the same priority and kind (fresh or
    retried) as the first whose slot (`_slot_of`) is r, else, when none is, all of those.

    Two clones want the same task only when one of them has run out of its own: a task's
    slot depends on its id alone, so views fetched a few claims apart still agree on it.
    At random within the slot (`_draw`), so that two worktrees of one clone rarely meet either."""
    first = found[0]
    rank, clones = slot
    if clones <= 1:
        return [first]
    same = [t for t in found if t.priority == first.priority and t.status == first.status]
    return [t for t in same if _slot_of(t.id, clones) == rank] or same


def _draw(pool: list[Task] | tuple[Task, ...]) -> Task:
    """One of `pool` at random (the only one without a draw)."""
    return pool[0] if len(pool) == 1 else pool[secrets.randbelow(len(pool))]


