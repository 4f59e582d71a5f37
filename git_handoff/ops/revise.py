"""Revising the plan after the fact: rm, rename, reopen.

Each is one state transaction with an `INIT` log line (a plan change), so it
is in `git handoff log` and travels with `sync` like any other change: the merge takes
a change made on one side only (a deletion included), so a removal, a rename (one
record deleted, one added) or a reopening reaches every clone.

Nothing is lost: a removed task's saved attempts stay under refs/harness/attempts/,
a rename moves them (and the notes naming the task) to the new id, and a reopened
task keeps its attempts, error log and checkpoints.
"""

from __future__ import annotations

import dataclasses

from git_handoff.core.errors import UsageError
from git_handoff.core.model import CLAIM_FIELDS, Task, check_id, now_iso
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops.payloads import Removed, Renamed, ReopenResult, task_json
from git_handoff.state import notes as work_notes
from git_handoff.state import trust
from git_handoff.state.snapshot import ATTEMPTS_PREFIX, LOCAL_ATTEMPTS_PREFIX, NOTES_REF, task_path
from git_handoff.state.store import StateStore, Tx

REOPENABLE = ("completed", "failed")
# The claim and completion fields a reopened task sheds (it is pending, unclaimed again).
SHED_ON_REOPEN = (*CLAIM_FIELDS, "completed_commit", "completed_session", "uncommitted_at_completion", "failed_at",
                  "work_ref", "work_withheld", "integrated_commit")


def _dependents(tasks: dict[str, Task], task_id: str) -> list[str]:
    return [t.id for t in tasks.values() if task_id in t.depends_on]


def _claimed(task: Task, verb: str) -> UsageError:
    return UsageError(f"task {task.id!r} is in progress (claimed by {task.claimed_by or 'someone'}): "
                      f"release it first (`git handoff release {task.id}`), then {verb}")


# -- rm --------------------------------------------------------------------------------


def remove(store: StateStore, task_id: str, *, force: bool = False) -> Removed:
    """Delete a task. Refused while other tasks depend on it or it is claimed, unless
    `force`, which also drops it from its dependents' `depends_on`."""
    check_id(task_id)

    def apply(tx: Tx) -> Removed:
        task = tx.require_task(task_id)
        tasks = tx.tasks()
        dependents = _dependents(tasks, task_id)
        if not force:
            if task.status == "in_progress":
                raise _claimed(task, "remove it (or use --force)")
            if dependents:
                shown = ", ".join(dependents[:5]) + (f" and {len(dependents) - 5} more" if len(dependents) > 5 else "")
                raise UsageError(f"task {task_id!r} is needed by {shown}: remove those first, or use --force "
                                 "to remove it and drop it from their dependencies")
        tx.put(task_path(task_id), None)
        for dep_id in dependents:
            dependent = tasks[dep_id]
            tx.put_task(dataclasses.replace(dependent,
                                            depends_on=tuple(d for d in dependent.depends_on if d != task_id)))
            tx.log("INIT", f"Dropped dependency on removed {task_id}", task=dep_id)
        tx.log("INIT", f"Removed {task.title} (was {task.status}, attempts {task.attempts}/{task.max_attempts})",
               task=task_id)
        return {"removed": task_json(task), "detached": dependents}

    result = store.transact(apply)
    result["attempts_kept"] = sorted([*store.repo.refs_under(f"{ATTEMPTS_PREFIX}{task_id}/"),
                                      *store.repo.refs_under(f"{LOCAL_ATTEMPTS_PREFIX}{task_id}/")])
    return result


# -- rename ------------------------------------------------------------------------------


def rename(store: StateStore, old: str, new: str) -> Renamed:
    """Give a task a new id: its dependents, saved attempts and notes follow."""
    check_id(old)
    check_id(new)
    if old == new:
        raise UsageError(f"{old!r} is already the task's id")
    repo = store.repo
    for namespace in (ATTEMPTS_PREFIX, LOCAL_ATTEMPTS_PREFIX):
        if repo.refs_under(f"{namespace}{new}/"):
            raise UsageError(f"attempts of a task {new!r} are still saved under {namespace}{new}/: "
                             "choose another id")

    def apply(tx: Tx) -> Renamed:
        task = tx.require_task(old)
        if tx.task(new) is not None:
            raise UsageError(f"task {new!r} already exists")
        if task.status == "in_progress":
            raise _claimed(task, "rename it")
        tasks = tx.tasks()
        dependents = _dependents(tasks, old)
        tx.put(task_path(old), None)
        renamed = tx.put_task(dataclasses.replace(task, id=new))
        for dep_id in dependents:
            dependent = tasks[dep_id]
            tx.put_task(dataclasses.replace(dependent,
                                            depends_on=tuple(new if d == old else d for d in dependent.depends_on)))
        tx.log("INIT", f"Renamed {old} to {new}", task=new)
        return {"task": task_json(renamed), "old": old, "dependents": dependents}

    result = store.transact(apply)
    result["attempts"] = _move_attempts(repo, old, new)
    result["notes"] = _rename_in_notes(repo, old, new)
    trust.move_places(repo, old, new)  # approvals follow the task they were given for
    return result


def _move_attempts(repo: Repo, old: str, new: str) -> list[str]:
    """refs/harness/attempts/OLD/n -> .../NEW/n (created first, then the old one dropped);
    the local-only ones (refs/harness/local/attempts/) alike, staying local."""
    moved = []
    for namespace in (ATTEMPTS_PREFIX, LOCAL_ATTEMPTS_PREFIX):
        prefix = f"{namespace}{old}/"
        for name, oid in sorted(repo.refs_under(prefix).items()):
            target = f"{namespace}{new}/{name[len(prefix):]}"
            if repo.cas_ref(target, oid, None, f"handoff: rename {old} to {new}"):
                repo.delete_ref(name)
                moved.append(target)
    return moved


def _rename_in_notes(repo: Repo, old: str, new: str) -> int:
    """Rewrite the harness notes that name task OLD so they name NEW."""
    tip = repo.ref_target(NOTES_REF)
    if tip is None:
        return 0
    wanted = f"task: {old}"
    changed: dict[str, str] = {}
    pending = [("", repo.commit_tree(tip))]
    while pending:
        prefix, tree = pending.pop()
        for name, oid, is_tree in repo.tree_entries(tree):
            if is_tree:
                pending.append((prefix + name, oid))
                continue
            text = repo.read_blob(oid).decode(errors="replace")
            lines = text.splitlines()
            if wanted in lines:
                changed[prefix + name] = "\n".join(f"task: {new}" if line == wanted else line for line in lines) + "\n"
    return work_notes.write_notes(repo, changed, f"Notes: task {old} renamed to {new}")


# -- reopen -------------------------------------------------------------------------------


def reopen(store: StateStore, task_id: str, *, reason: str) -> ReopenResult:
    """A completed or failed task back to pending (a mistaken `done` or `fail`), its
    attempts, error log and checkpoints kept; the reason is logged and recorded."""
    check_id(task_id)
    reason = (reason or "").strip()
    if not reason:
        raise UsageError("--reason must say why the task is reopened")
    if "\n" in reason or "\r" in reason:
        raise UsageError("--reason must be one line")
    stamp = now_iso()

    def apply(tx: Tx) -> ReopenResult:
        task = tx.require_task(task_id)
        if task.status not in REOPENABLE:
            raise UsageError(f"task {task_id!r} is {task.status}: only a completed or failed task can be reopened")
        history = list(task.get("reopened") or [])
        history.append({"at": stamp, "from": task.status, "reason": reason})
        fresh = dataclasses.replace(task, status="pending", completed_at=None, claimed_by=None,
                                    lease_expires_at=None, started_at_commit=None)
        fresh = fresh.with_extra(**dict.fromkeys(SHED_ON_REOPEN), reopened=history)
        fresh = tx.put_task(fresh)
        tx.log("INIT", f"Reopened (was {task.status}, attempts {task.attempts}/{task.max_attempts}): {reason}",
               task=task_id)
        also = _reopen_blocked_by(tx, task_id, stamp)
        return {"task": task_json(fresh), "was": task.status, "also_reopened": also}

    return store.transact(apply)


def _reopen_blocked_by(tx: Tx, task_id: str, stamp: str) -> list[str]:
    """Tasks the selection failed only because `task_id` (or one of these) had failed for
    good come back to pending with it: their failure was never theirs."""
    tasks = tx.tasks()
    reopened: list[str] = []
    queue = [task_id]
    while queue:
        cause = queue.pop(0)
        for dep_id in _dependents(tasks, cause):
            t = tasks[dep_id]
            last = t.error_log[-1] if t.error_log else ""
            if t.status != "failed" or not last.startswith("[DEPENDENCY] Blocked by failed") or dep_id in reopened:
                continue
            history = [*(t.get("reopened") or []), {"at": stamp, "from": "failed", "reason": f"{task_id} reopened"}]
            fresh = dataclasses.replace(t, status="pending", claimed_by=None, lease_expires_at=None,
                                        started_at_commit=None).with_extra(**dict.fromkeys(SHED_ON_REOPEN),
                                                                           reopened=history)
            tx.put_task(fresh)
            tx.log("INIT", f"Reopened (was failed by a dependency): {task_id} reopened", task=dep_id)
            reopened.append(dep_id)
            queue.append(dep_id)
    return reopened
