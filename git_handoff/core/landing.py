"""The integration queue's order (SPEC §10), pure: which completed tasks' work is still to
land on the target, dependencies first, then priority, then completion time.

A task waits (and says why) while a dependency of its own is not landed and not ahead of
it in this queue: its work was built on the dependency's, and landing it first would put
the dependency's work on the target unchecked by the dependency's own check.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from git_handoff.core.model import PRIORITIES, Task


@dataclass(frozen=True)
class Queue:
    order: tuple[Task, ...]  # to land, in this order
    waiting: tuple[tuple[str, str], ...]  # (task id, why it is not in the order)


def landed(task: Task) -> bool:
    return isinstance(task.get("integrated_commit"), str)


def to_land(task: Task) -> bool:
    """A completed task whose work is published and not on the target yet (a task completed
    by a version before the queue has no work ref: it is never queued)."""
    return (task.status == "completed" and not landed(task) and isinstance(task.get("completed_commit"), str)
            and isinstance(task.get("work_ref"), str))


def _rank(task: Task) -> tuple[int, str, str]:
    priority = PRIORITIES.index(task.priority) if task.priority in PRIORITIES else len(PRIORITIES)
    return priority, task.completed_at or "", task.id


def queue(tasks: Mapping[str, Task], carried: Mapping[str, frozenset[str]] | None = None) -> Queue:
    """The landing order of the tasks `to_land`, and the ones that wait (`Queue`).
    `carried`: {task: other finished tasks whose work its work holds} (done before it in one
    worktree): each lands first, like a dependency, so that its own check runs on the target."""
    todo = {t.id: t for t in tasks.values() if to_land(t)}
    before = {tid: [*t.depends_on, *sorted((carried or {}).get(tid, ()))] for tid, t in todo.items()}
    blocked = {tid: why for tid in todo if (why := _blocked_by(todo[tid], before[tid], tasks, todo))}
    order = _ordered(todo, {tid: {d for d in before[tid] if d in todo} for tid in todo if tid not in blocked})
    placed = {t.id for t in order}
    waiting: list[tuple[str, str]] = []
    for tid in sorted(todo):
        if tid in blocked:
            waiting.append((tid, blocked[tid]))
        elif tid not in placed:
            waiting.append((tid, "waits on a dependency that cannot land first"))
    return Queue(tuple(order), tuple(waiting))


def _blocked_by(task: Task, before: list[str], tasks: Mapping[str, Task], todo: Mapping[str, Task]) -> str | None:
    """Why `task` cannot land: the first of the tasks that land `before` it neither on the
    target nor to be landed; None when there is none."""
    for dep in before:
        needed = tasks.get(dep)
        if needed is None or landed(needed) or dep in todo:
            continue
        what = "dependency" if dep in task.depends_on else "work holds the work of"
        return f"its {what} {dep}, which is {needed.status} and not on the target" + (
            "" if dep in task.depends_on else " (its own check must run there first)")
    return None


def _ordered(todo: Mapping[str, Task], needs: dict[str, set[str]]) -> list[Task]:
    """Kahn's order over the tasks to land (`needs`: each one's tasks to land first), ready
    ones by rank; a task in a cycle, or after one, is left out."""
    after: dict[str, list[str]] = {}
    for tid, deps in needs.items():
        for dep in deps:
            after.setdefault(dep, []).append(tid)
    ready = [(_rank(todo[tid]), tid) for tid, deps in needs.items() if not deps]
    heapq.heapify(ready)
    order: list[Task] = []
    while ready:
        _, tid = heapq.heappop(ready)
        order.append(todo[tid])
        for other in after.get(tid, ()):
            deps = needs[other]
            deps.discard(tid)
            if not deps:
                heapq.heappush(ready, (_rank(todo[other]), other))
    return order
