"""This clone's index of the parsed tasks: every task of a tasks tree, in creation
order, parsed once per tree and brought along the tree's changes (`TaskIndex`)."""

from __future__ import annotations

import bisect
import operator
from collections.abc import Container
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, Literal

from git_handoff.core import serialization
from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.model import Task
from git_handoff.infra.fileio import atomic_write, read_sealed, sealed
from git_handoff.infra.gitrepo import Repo


class TaskIndex:
    """This clone's persistent index of the parsed tasks (`tasks-index.marshal` in the
    handoff dir), one per repository per process.

    It holds, for the tasks tree it was last built from: every leaf tree of the fan-out
    (content-addressed) with the field dicts of its tasks, and the creation order as a
    sorted list of (order, created_at, id). The same tree is answered without reading a
    single git object; another tree is brought up to date from the leaves that differ
    (only those are parsed; the order is patched, not sorted again). The file is checked
    by its digest: a damaged, foreign or unreadable index is rebuilt from the state,
    never believed, and the state ref is always what decides which tree is read.
    """

    FILE = "tasks-index.marshal"
    MAGIC = b"git-handoff-tasks-index 1\n"
    _open: dict[str, TaskIndex] = {}

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.path = repo.handoff_dir / self.FILE
        self.tree: str | None = None
        self.leaves: dict[str, list[dict[str, Any]]] = {}
        self.order: list[tuple[Any, ...]] = []
        self.loaded = False

    @classmethod
    def of(cls, repo: Repo) -> TaskIndex:
        key = str(repo.handoff_dir)
        index = cls._open.get(key)
        if index is None:
            index = cls._open[key] = TaskIndex(repo)
        index.repo = repo  # the newest handle: a repository reopened after a repack reads its new packs
        return index

    def _load(self) -> None:
        self.loaded = True
        data = read_sealed(self.path, self.MAGIC)  # None when damaged: rebuilt from the state
        try:
            if (not isinstance(data, dict) or data.get("fields") != _FIELD_NAMES
                or not isinstance(data.get("leaves"), dict)
                    or not isinstance(data.get("order"), list)):
                return
            self.tree, self.leaves = data["tree"], data["leaves"]
            self.order = [tuple(key) for key in data["order"]]
        except (ValueError, TypeError, KeyError):
            self.tree, self.leaves, self.order = None, {}, []

    def _save(self) -> None:
        data = {"fields": _FIELD_NAMES, "tree": self.tree, "leaves": self.leaves, "order": self.order}
        try:
            atomic_write(self.path, sealed(self.MAGIC, data))
        except (OSError, ValueError):
            pass  # a missing index is only slower

    def tasks(self, tree: str | None) -> dict[str, Task]:
        """Every task of the tasks tree `tree`, in creation order."""
        if not self.loaded:
            self._load()
        if tree is None:
            return {}
        if tree != self.tree:
            self._update(tree)
        by_id = {fields["id"]: fields for leaf in self.leaves.values() for fields in leaf}
        make = _task_from_fields
        return {key[2]: make(by_id[key[2]]) for key in self.order}

    def _update(self, tree: str) -> None:
        used, fresh = _leaves_of(self.repo, tree, self.leaves)
        plan = plan_order(used, self.leaves, len(fresh), len(self.order))
        if plan.how == "unique":  # one id in two leaves (a hand-made state): the plain sort decides
            used, order = _unique(used)
        elif plan.how == "sort":
            order = sorted(_key(f) for tasks in used.values() for f in tasks)
        else:
            order = [key for key in self.order if key[2] in plan.kept]
            for fields in fresh:
                bisect.insort(order, _key(fields))
        self.tree, self.leaves, self.order = tree, used, order
        self._save()


Leaves = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class OrderPlan:
    """How the creation order is brought to a new tree: "patch" (the order kept for the
    ids of leaves that did not change, the parsed tasks put in place), "sort" (every
    task sorted again: cheaper when many were parsed or few kept) or "unique" (an id in
    two leaves: the tasks sorted and the last of each id kept, as the plain path does)."""

    how: Literal["patch", "sort", "unique"]
    kept: frozenset[str]  # the ids of the leaves the index held already


def plan_order(used: Leaves, old: Container[str], fresh: int, known: int) -> OrderPlan:
    """`used`: the new tree's leaves and their tasks' fields; `old`: the leaves the
    index held; `fresh`: how many tasks were parsed; `known`: how many the order held."""
    kept = frozenset(fields["id"] for leaf, tasks in used.items() if leaf in old for fields in tasks)
    ids = [fields["id"] for tasks in used.values() for fields in tasks]
    if len(set(ids)) != len(ids):
        return OrderPlan("unique", kept)
    if fresh > 64 or len(kept) < known // 2:
        return OrderPlan("sort", kept)
    return OrderPlan("patch", kept)


def _leaves_of(repo: Repo, tree: str, old: Leaves) -> tuple[Leaves, list[dict[str, Any]]]:
    """Every leaf of the tree with its tasks' fields (a leaf the index holds is not
    read), and the fields of the tasks parsed."""
    used: Leaves = {}
    fresh: list[dict[str, Any]] = []
    for _, l1, t1 in repo.tree_entries(tree):
        if not t1:
            continue
        for _, leaf, t2 in repo.tree_entries(l1):
            if not t2:
                continue
            cached = old.get(leaf)
            if cached is None:
                cached = [dict(load_task(raw, name[:-5]).__dict__) for name, raw in repo.tree_files(leaf, ".json")]
                fresh.extend(cached)
            used[leaf] = cached
    return used, fresh


def _unique(used: Leaves) -> tuple[Leaves, list[tuple[Any, ...]]]:
    everything = sorted((_task_from_fields(f) for tasks in used.values() for f in tasks), key=_CREATION_ORDER)
    unique = {t.id: t.__dict__ for t in everything}
    return {"": list(unique.values())}, [_key(f) for f in unique.values()]


def _key(fields: dict[str, Any]) -> tuple[Any, ...]:
    return (fields["order"], fields["created_at"], fields["id"])


def _task_from_fields(fields: dict[str, Any]) -> Task:
    task = object.__new__(Task)
    object.__setattr__(task, "__dict__", dict(fields))
    return task


_CREATION_ORDER = operator.attrgetter("order", "created_at", "id")
_FIELD_NAMES = [f.name for f in dataclass_fields(Task)]


def load_task(raw: bytes, task_id: str) -> Task:
    try:
        return serialization.load_task(raw, source=f"state file for task {task_id}")
    except UsageError as exc:
        raise InvalidState(exc.message) from None
