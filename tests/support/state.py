"""The state as a test reads it beside the indexes: a store with nothing kept in memory,
every task read from its blob, in creation order (the reference an index must match),
and a random change of the tasks to walk the indexes through."""

from __future__ import annotations

import random
import time
from pathlib import Path

from git_handoff.core.model import Task
from git_handoff.core.serialization import load_task
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import status_index
from git_handoff.state.snapshot import TASKS_DIR, task_path
from git_handoff.state.store import StateStore, Tx
from git_handoff.state.task_index import TaskIndex


def fresh_store(repo: Path) -> StateStore:
    """A store as a new process sees it: nothing of any index kept in memory."""
    TaskIndex._open.clear()
    status_index._seen.clear()
    return StateStore(Repo.discover(repo), session=0)


def tasks_from_blobs(store: StateStore) -> list[Task]:
    """Every task read from its blob and sorted into creation order, without any index."""
    snap = store.snapshot()
    found = store.repo.tree_lookup(snap.tree, TASKS_DIR)
    tasks: list[Task] = []
    if found is not None:
        for _, l1, _ in store.repo.tree_entries(found[0]):
            for _, leaf, _ in store.repo.tree_entries(l1):
                tasks += [load_task(raw) for _, raw in store.repo.tree_files(leaf, ".json")]
    tasks.sort(key=lambda t: (t.order, t.created_at, t.id))
    return tasks


def random_change(rng: random.Random, tx: Tx, serial: list[int]) -> None:
    """One random change of the tasks in `tx`, logged: new tasks (sometimes ordered before
    existing ones), a claim, completion, failure (for good or not) or release, new
    dependencies (sometimes closing a cycle), a new order and title, a removal, or many
    tasks at once (an import). `serial` counts the tasks made, for their ids and their
    creation times: a time from the clock would make the walk depend on how many steps
    fell in one second (tasks sort by order, then creation time), so the same seed could
    walk elsewhere; three tasks share each second, so ties are still met."""
    tasks = tx.tasks()
    ids = list(tasks)
    what = rng.random()
    if what < 0.3 or not ids:
        for _ in range(rng.randint(1, 3)):
            serial[0] += 1
            order = rng.choice([serial[0], rng.randint(0, serial[0])])  # sometimes before existing ones
            deps = tuple(rng.sample(ids, min(len(ids), rng.choice([0, 0, 1, 2]))))
            tx.put_task(Task(id=f"n{serial[0]}", title=f"new {serial[0]}", created_at=_made_at(serial[0]), order=order,
                             priority=rng.choice(["P0", "P1", "P2"]), depends_on=deps))
    elif what < 0.55:
        depended = [d for t in tasks.values() for d in t.depends_on if d in tasks]
        t = tasks[rng.choice(depended or ids)]
        status = rng.choice(["in_progress", "completed", "failed", "pending"])
        attempts = rng.choice([t.attempts, t.max_attempts]) if status == "failed" else t.attempts
        tx.put_task(t.evolve(status=status, attempts=attempts,
                             claimed_by="w" if status == "in_progress" else None))
    elif what < 0.7:
        t = tasks[rng.choice(ids)]
        tx.put_task(t.evolve(depends_on=tuple(rng.sample(ids, min(len(ids), rng.randint(0, 2))))))
    elif what < 0.8:
        t = tasks[rng.choice(ids)]
        tx.put_task(t.evolve(order=rng.randint(0, serial[0] + 5), title=t.title + "!"))
    elif what < 0.9:
        tx.put(task_path(rng.choice(ids)), None)
    else:
        for tid in rng.sample(ids, min(len(ids), 70)):
            tx.put_task(tasks[tid].evolve(status=rng.choice(["pending", "completed"])))
    tx.log("INIT", "test step")


def _made_at(serial: int) -> str:
    """The creation time of the `serial`th task a walk makes: fixed by `serial` alone."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_790_000_000 + serial // 3))
