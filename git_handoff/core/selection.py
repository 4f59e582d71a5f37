"""Pure selection logic (what `claim` takes, docs/git-handoff.md): dependency validation, blocked propagation, order.

Every function takes tasks in creation order (a dict id -> Task) and returns plain data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Protocol

from git_handoff.core import hlc
from git_handoff.core.errors import UsageError
from git_handoff.core.model import (
    MAX_COUNT,
    PRIORITIES,
    SHOWN_STATUSES,
    WORK_PREFIX,
    ShownStatus,
    Status,
    Task,
    iso,
    parse_time,
)

PRIORITY_RANK = {p: n for n, p in enumerate(PRIORITIES)}


def cycle_through(deps: Mapping[str, Iterable[str]], start: str, within: set[str] | None = None) -> list[str] | None:
    """A dependency path from `start` back to itself (`[a, b, a]`), or None. Iterative DFS."""
    parent: dict[str, str] = {}
    stack = [start]
    seen = {start}
    while stack:
        node = stack.pop()
        for nxt in deps.get(node, ()):
            if within is not None and nxt not in within:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start] if node != start else [start, start]
            if nxt not in seen:
                seen.add(nxt)
                parent[nxt] = node
                stack.append(nxt)
    return None


MAX_CYCLE_SHOWN = 10  # ids of a cycle named in one report; longer ones are shortened


def cycle_text(ring: list[str], start: int) -> str:
    """The cycle `ring` (distinct ids, each depending on the next, the last on the first)
    from position `start` back to it, at most MAX_CYCLE_SHOWN ids: `a -> b -> a`, or
    `a -> b -> ... (4,990 more) -> a`."""
    n = len(ring)
    first = ring[start]
    if n <= MAX_CYCLE_SHOWN:
        return " -> ".join([*(ring[(start + j) % n] for j in range(n)), first])
    shown = [ring[(start + j) % n] for j in range(MAX_CYCLE_SHOWN - 1)]
    return " -> ".join(shown) + f" -> ... ({n - len(shown):,} more) -> {first}"


def _cyclic_nodes(deps: Mapping[str, Iterable[str]]) -> set[str]:
    """Nodes on some cycle: members of a strongly connected component of size > 1, or
    with a self-reference (Tarjan's algorithm, iterative: O(nodes + edges))."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: set[str] = set()
    counter = 0
    for root in deps:
        if root in index:
            continue
        work = [(root, iter(deps.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in deps:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(deps.get(child, ()))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in deps.get(node, ()):
                    out.update(component)
    return out


def _not_peelable(deps: Mapping[str, Iterable[str]]) -> dict[str, Iterable[str]]:
    """The part of the graph that topological peeling (Kahn) cannot remove: the
    cycles and what hangs off them. Usually empty, and far cheaper than Tarjan."""
    indegree = dict.fromkeys(deps, 0)
    users: dict[str, list[str]] = {}
    for tid, ds in deps.items():
        for dep in ds:
            if dep in indegree:
                indegree[tid] += 1
                users.setdefault(dep, []).append(tid)
    ready = [tid for tid, n in indegree.items() if n == 0]
    while ready:
        node = ready.pop()
        for user in users.get(node, ()):
            indegree[user] -= 1
            if indegree[user] == 0:
                ready.append(user)
    return {tid: deps[tid] for tid, n in indegree.items() if n > 0}


class DepNode(Protocol):
    """What dependency validation reads of a task (a Task, or a row of an index)."""

    @property
    def status(self) -> str: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def failed_for_good(self) -> bool: ...


def dependency_failures(tasks: Mapping[str, DepNode]) -> list[tuple[str, str]]:
    """(task id, error message) for every task that dependency validation fails.

    1. A task on a dependency cycle (self-reference included):
       `[DEPENDENCY] Circular dependency detected: a -> b -> a`.
    2. Then, transitively, a task depending on a task failed for good:
       `[DEPENDENCY] Blocked by failed <id>`.
    Only pending and failed (not yet for good) tasks are touched; the result is in
    creation order. O(tasks + dependencies).
    """
    open_ids = {tid for tid, t in tasks.items() if t.status in ("pending", "failed") and not t.failed_for_good}
    deps = {tid: tasks[tid].depends_on for tid in open_ids}
    messages = _cycle_messages(deps, _cyclic_nodes(_not_peelable(deps)))
    failed = set(messages) | {tid for tid, t in tasks.items() if t.failed_for_good}
    blocked = _blocked_by(deps, failed)
    gone = failed | blocked
    for tid in blocked:
        first = next(d for d in tasks[tid].depends_on if d in gone)
        messages[tid] = f"[DEPENDENCY] Blocked by failed {first}"
    return [(tid, messages[tid]) for tid in tasks if tid in messages]


def _cycle_messages(deps: Mapping[str, Iterable[str]], cyclic: set[str]) -> dict[str, str]:
    """{task id: its circular dependency message} for every task of `cyclic` that a
    cycle within `cyclic` runs through."""
    messages: dict[str, str] = {}
    for tid in cyclic:
        if tid in messages:
            continue
        cycle = cycle_through(deps, tid, within=cyclic)
        if cycle is None:
            continue
        # every task on the cycle found gets its own rotation of it, so one search
        # serves the whole ring, and each report is bounded (linear cost in all)
        ring = cycle[:-1]
        for i, member in enumerate(ring):
            if member not in messages:
                messages[member] = "[DEPENDENCY] Circular dependency detected: " + cycle_text(ring, i)
    return messages


def _blocked_by(deps: Mapping[str, Iterable[str]], failed: set[str]) -> set[str]:
    """The tasks of `deps` not in `failed` that depend, transitively, on one that is."""
    dependents: dict[str, list[str]] = {}
    for tid, ds in deps.items():
        for dep in ds:
            dependents.setdefault(dep, []).append(tid)
    gone = set(failed)
    queue = list(gone)
    blocked: set[str] = set()
    while queue:
        dep = queue.pop()
        for tid in dependents.get(dep, ()):
            if tid not in gone:
                gone.add(tid)
                blocked.add(tid)
                queue.append(tid)
    return blocked


def blocked_ids(tasks: Mapping[str, Task]) -> set[str]:
    """Pending tasks whose dependencies (transitively) failed for good or form a cycle: computed, never stored."""
    return {tid for tid, _ in dependency_failures(tasks) if tasks[tid].status == "pending"}


def shown_status(task_id: str, status: Status, blocked: Container[str] | None) -> ShownStatus:
    """The status a task is shown with: "blocked" when `blocked` (blocked_ids, or the
    status index's copy of it) names it, else the one it records."""
    return "blocked" if blocked is not None and task_id in blocked else status


# Where a task's work is (`status`, the dashboard): on the target; published and waiting
# for the integration queue; not published (a secret in its commits, SPEC §11); sent back
# by the queue (a new attempt).
LANDED, WAITING, WITHHELD, SENT_BACK = "landed", "waiting", "withheld", "sent_back"
WORK_STATES = (LANDED, WAITING, WITHHELD, SENT_BACK)


def work_state(task: Task) -> tuple[str, str | None] | None:
    """Where the work of `task` is, as (state, detail): (LANDED, the target's commit it
    landed in), (WAITING, its work ref), (WITHHELD, None), (SENT_BACK, None): pending or
    failed again because the queue refused its work, nothing since (its last error names its
    work ref: ops/integration.py). None: nothing to say (not finished, or finished by a
    version before work refs). Landed wins: work on the target is there, whatever else."""
    if task.status == "completed":
        landed, ref = task.get("integrated_commit"), task.get("work_ref")
        if isinstance(landed, str):
            return LANDED, landed
        if isinstance(task.get("work_withheld"), str):
            return WITHHELD, None
        return (WAITING, ref) if isinstance(ref, str) else None
    if task.status in ("pending", "failed") and task.error_log and f"({WORK_PREFIX}{task.id}/" in task.error_log[-1]:
        return SENT_BACK, None
    return None


def status_counts(blocked: int) -> dict[str, int]:
    """Every shown status counted 0, but `blocked` (the counts start from it)."""
    out: dict[str, int] = dict.fromkeys(SHOWN_STATUSES, 0)
    out["blocked"] = blocked
    return out


def _deps_completed(task: Task, tasks: Mapping[str, Task]) -> bool:
    return all(dep in tasks and tasks[dep].status == "completed" for dep in task.depends_on)


def _failure_time(task: Task) -> str:
    return str(task.get("failed_at") or task.updated_at or "")


def eligible(tasks: Mapping[str, Task], skip: Iterable[str] = ()) -> list[Task]:
    """Tasks `claim` may take, best first. Call after dependency validation."""
    skipped = set(skip)
    fresh = [
        t for t in tasks.values()
        if t.status == "pending" and t.id not in skipped and _deps_completed(t, tasks)
    ]
    retry = [
        t for t in tasks.values()
        if t.status == "failed" and not t.failed_for_good and t.id not in skipped and _deps_completed(t, tasks)
    ]
    # `tasks` is in creation order, and sort is stable: priority first, then creation order.
    fresh.sort(key=lambda t: PRIORITY_RANK.get(t.priority, 1))
    retry.sort(key=lambda t: (PRIORITY_RANK.get(t.priority, 1), _failure_time(t)))
    return fresh + retry


def counts(tasks: Mapping[str, Task], blocked: set[str] | None = None) -> dict[str, int]:
    """Counts by status; `blocked` pending tasks are counted apart from `pending`."""
    if blocked is None:
        blocked = blocked_ids(tasks)
    out = status_counts(len(blocked))
    for tid, task in tasks.items():
        if tid in blocked:
            continue
        out[task.status] = out.get(task.status, 0) + 1
    return out


def would_cycle(tasks: Mapping[str, Task], task_id: str, depends_on: Iterable[str]) -> list[str] | None:
    """The cycle that giving `task_id` these dependencies would close, or None."""
    deps: dict[str, Iterable[str]] = {tid: t.depends_on for tid, t in tasks.items()}
    deps[task_id] = list(depends_on)
    return cycle_through(deps, task_id)


# A claim record that declares no lease length (lease_seconds) holds for the default one.
UNDECLARED_LEASE_SECONDS = 30 * 60


def _written_at(task: Task) -> datetime | None:
    """When the record was last written, by its own stamp: its clock stamp, else (a record
    of a version before clocks) its updated_at."""
    stamp = task.get(hlc.FIELD)
    if hlc.is_stamp(stamp):
        return datetime.fromtimestamp(hlc.key(str(stamp))[0] / 1000, UTC)
    try:
        return parse_time(task.updated_at) if task.updated_at else None
    except (UsageError, ValueError, OverflowError):
        return None


def lease_deadline(task: Task, now: datetime) -> str | None:
    """When the lease of a claim ends, as far as this clone counts it: `lease_expires_at`,
    but never later than the record's own write time plus the lease it declares
    (`lease_seconds`), and over at once for a record whose write time is further ahead of
    `now` than the clock skew allowed (hlc.MAX_SKEW_MS) or that has none: a fetched
    lease "until 8999" holds no longer than the lease its record declares."""
    if task.lease_expires_at is None:
        return None
    try:
        declared = parse_time(task.lease_expires_at)
    except UsageError:
        return iso(now)
    written = _written_at(task)
    if written is None or written > now + timedelta(milliseconds=hlc.MAX_SKEW_MS):
        return iso(min(declared, now))
    seconds = task.claim.lease_seconds
    if not (seconds is not None and seconds > 0):
        seconds = UNDECLARED_LEASE_SECONDS
    try:
        bound = written + timedelta(seconds=seconds)
    except OverflowError:
        bound = declared
    if declared <= bound:
        return task.lease_expires_at  # an honest lease: as it was written
    return iso(bound)


def lease_expired(task: Task, now: str) -> bool:
    if task.status != "in_progress" or task.lease_expires_at is None:
        return False
    moment = parse_time(now)
    deadline = lease_deadline(task, moment)
    return deadline is not None and parse_time(deadline) <= moment


HELD = "held_seconds"  # a task's claims' wall time, added as each claim ends (the task-time budget, ops/budgets.py)


def held_through(task: Task, until: str) -> int:
    """A task's held time (HELD: its ended claims') with its current claim counted from its
    `claimed_at` up to `until`, or up to its lease's end when that came first (a claim that
    lapsed was held no longer). Limit waits in a claim count: the task was held meanwhile."""
    held = task.get(HELD)
    held = held if isinstance(held, int) and not isinstance(held, bool) and held > 0 else 0
    start = task.claim.claimed_at
    if task.status != "in_progress" or not start:
        return held
    try:
        end = parse_time(until)
        if task.lease_expires_at:
            end = min(end, parse_time(task.lease_expires_at))
        # capped at the state's integer range (a count fetched at the cap stays readable everywhere)
        return min(MAX_COUNT, held + max(0, int((end - parse_time(start)).total_seconds())))
    except UsageError:
        return held  # a time written by hand that is none: the claim adds nothing


def prepare(tasks: Mapping[str, Task], now: str) -> tuple[dict[str, Task], list[tuple[Task, str, str]]]:
    """What a mutating selection records before it picks (expired leases, failed dependencies).

    An expired lease counts as a failed attempt (`[SESSION_TIMEOUT] Lease expired`);
    then dependency validation fails cycles and the tasks they block. Returns the
    updated tasks (creation order kept) and (changed task, category, message) triples.
    """
    out = dict(tasks)
    changes = prepare_leases(tasks, now)
    for new, _, _ in changes:
        out[new.id] = new
    for tid, message in dependency_failures(out):
        task = out[tid]
        # one copy per failed task (a cycle of 50,000 fails them all in one claim)
        new = task.evolve(status="failed", error_log=(*task.error_log, message),
                          extra={**task.extra, "failed_at": now})
        out[tid] = new
        changes.append((new, "DEPENDENCY", message[len("[DEPENDENCY] "):]))
    return out, changes


def _expire_leases(tasks: Mapping[str, Task], now: str) -> dict[str, Task]:
    """`tasks` with every expired lease counted as a failed attempt (as `prepare` does)."""
    out = dict(tasks)
    for new, _, _ in prepare_leases(tasks, now):
        out[new.id] = new
    return out


def prepare_leases(tasks: Mapping[str, Task], now: str) -> list[tuple[Task, str, str]]:
    """The lease-expiry part of `prepare`: (failed task, category, message) per expired lease."""
    changes = []
    for task in tasks.values():
        if lease_expired(task, now):
            text = f"Lease expired (claimed_by={task.claimed_by or 'unknown'})"
            new = dataclasses.replace(
                task,
                status="failed",
                attempts=task.attempts + 1,
                error_log=(*task.error_log, f"[SESSION_TIMEOUT] {text}"),
                claimed_by=None,
                lease_expires_at=None,
            ).with_extra(failed_at=now, worktree=None, **{HELD: held_through(task, now) or None})
            changes.append((new, "SESSION_TIMEOUT", text))
    return changes


def next_eligible(tasks: Mapping[str, Task], now: str, skip: Iterable[str] = ()) -> Task | None:
    """The task a claim at `now` would take: selection after lease expiry and
    dependency validation (what `prepare` changes is not recorded here).

    Same answer as `eligible(prepare(tasks, now)[0])`, without building the tasks that
    dependency validation fails: those become failed for good (a `[DEPENDENCY]`
    entry), so selection would skip them, and no task's status turns completed.
    `skip`: tasks never to offer (git_handoff.state.writers: an unapproved writer's).
    """
    expired = _expire_leases(tasks, now)
    failing = [tid for tid, _ in dependency_failures(expired)]
    found = eligible(expired, skip=[*failing, *skip])
    return found[0] if found else None


def stats_line_fields(tasks: dict[str, Task]) -> dict[str, int]:
    """The fields of a STATS log line."""
    c = counts(tasks)
    return {
        "tasks_total": len(tasks),
        "completed": c["completed"],
        "failed": c["failed"],
        "pending": c["pending"],
        "blocked": c["blocked"],
        "attempts_total": sum(t.attempts for t in tasks.values()),
        "checkpoints": sum(len(t.checkpoints) for t in tasks.values()),
    }


def stats_text(tasks: dict[str, Task]) -> str:
    return " ".join(f"{k}={v}" for k, v in stats_line_fields(tasks).items())
