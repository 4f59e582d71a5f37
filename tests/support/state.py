"""The state as a test reads it beside the indexes: a store with nothing kept in memory,
and every task read from its blob, in creation order (the reference an index must match)."""

from __future__ import annotations

from pathlib import Path

from git_handoff.core.model import Task
from git_handoff.core.serialization import load_task
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import status_index
from git_handoff.state.snapshot import TASKS_DIR
from git_handoff.state.store import StateStore
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
