"""This clone's status index (`status-index.marshal` in the handoff dir): what `status`
answers, for one tasks tree, without reading or building every task.

It holds one small row per task (the fields `status` lists, where its work is, and what
dependency validation looks at), the ids in creation order, the counts by status and the tasks
dependency validation fails (cycles and what hangs off a task failed for good). It is
keyed by the oid of the tasks tree it describes and brought to another tree from the
tree diff: the fan-out's trees whose oid did not change are not opened, and only the
blobs that changed are parsed. The dependency failures are computed again only when a
changed task could change them. The file is written again only once that update
parses more than REWRITE_AFTER tasks.

Never believed over the ref: the state ref decides the tree, the file is checked by its
digest, and a damaged, foreign or inconsistent index (one id in two leaves: a hand-made
state) is rebuilt from the tasks, or the caller takes the plain path.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from git_handoff.core import selection
from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.model import Status, Task
from git_handoff.core.serialization import load_task
from git_handoff.infra.fileio import atomic_write, file_identity, sealed, unsealed
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.snapshot import Snapshot

FILE = "status-index.marshal"
COST = "cost_micro_usd"  # a task's share of its sessions' cost (ops/usage.py COST)
# Version 4 added WORK, version 5 USE: an index an older version wrote is not decoded, so
# the first reader builds it again from the tasks (and writes it), as for a damaged one.
MAGIC = b"git-handoff-status-index 5\n"
VERSION = 5

# Row fields, by position (CHECK and SPEC: what the prompt asks of every remaining task;
# WORK: where its work is, core/selection.work_state, None for most tasks; USE: its tokens,
# cost_micro_usd and held_seconds, None for a task with none of them).
(ID, TITLE, STATUS, ATTEMPTS, MAX_ATTEMPTS, PRIORITY, CLAIMED_BY, ORDER, CREATED, DEPS, FOR_GOOD, CHECK, SPEC, WORK,
 USE) = range(15)

Row = tuple[Any, ...]

# The file is written again once bringing it to the current tree parses more tasks than
# this: rewriting it (1.1 MB at 10,000 tasks, 12-18 ms) costs more than a reader's update
# that parses a few tasks (each about 0.2 ms with its leaf listed twice, from a cold
# pack), and the first command or hook after each claim or done would otherwise pay
# that rewrite every time.
REWRITE_AFTER = 16


def row(task: Task) -> Row:
    # the fields most tasks share a value of (status, priority, claimer, check, spec) as
    # one string each: marshal writes a string seen before as a reference to it, so the
    # index is smaller and decodes faster
    return (task.id, task.title, _shared(task.status), task.attempts, task.max_attempts, _shared(task.priority),
            _shared(task.claimed_by), task.order, task.created_at, tuple(task.depends_on), task.failed_for_good,
            _shared(task.check), _shared(task.spec_ref), _work(task), _use(task))


def _use(task: Task) -> tuple[int, int, int] | None:
    """(tokens, cost_micro_usd, held_seconds) charged to the task so far; None when all are 0."""
    found = (_whole(task.tokens), _whole(task.get(COST)), _whole(task.get(selection.HELD)))
    return found if any(found) else None


def _whole(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _work(task: Task) -> tuple[str, str | None] | None:
    found = selection.work_state(task)
    return None if found is None else (sys.intern(found[0]), found[1])


def _shared(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


def creation_key(r: Row) -> tuple[Any, ...]:
    """Where a row stands in creation order (Summary.order is sorted by it)."""
    return (r[ORDER], r[CREATED], r[ID])


class _Node:
    """A row as dependency validation reads a task (status, depends_on, failed_for_good)."""

    __slots__ = ("depends_on", "failed_for_good", "status")

    def __init__(self, r: Row) -> None:
        self.status: Status = r[STATUS]
        self.depends_on: tuple[str, ...] = r[DEPS]
        self.failed_for_good: bool = r[FOR_GOOD]


def failing_of(rows: Mapping[str, Row], order: Iterable[str]) -> list[str]:
    """The ids dependency validation fails (selection.dependency_failures), from rows."""
    return [tid for tid, _ in selection.dependency_failures({tid: _Node(rows[tid]) for tid in order})]


class Summary:
    """The status index for one tasks tree."""

    def __init__(self, tree: str, top: dict[str, list[str]], leaves: dict[str, list[str]], rows: dict[str, Row],
                 order: list[str], counts: dict[str, int], failing: list[str]) -> None:
        self.tree, self.top, self.leaves, self.rows = tree, top, leaves, rows
        self.order, self.counts, self.failing = order, counts, failing
        self.reread = 0  # tasks parsed to bring the index written last to this tree

    def ids(self) -> list[str]:
        """Every task id, in creation order (the index's own list: not to be changed)."""
        return self.order

    def blocked(self) -> set[str]:
        """selection.blocked_ids: the pending tasks dependency validation fails."""
        rows = self.rows
        return {tid for tid in self.failing if rows[tid][STATUS] == "pending"}

    def status_counts(self, blocked: set[str]) -> dict[str, int]:
        """selection.counts: by status, the blocked pending tasks apart."""
        out = selection.status_counts(len(blocked))
        for status, n in self.counts.items():
            out[status] = out.get(status, 0) + n
        out["pending"] -= len(blocked)
        return out

    def encode(self) -> bytes:
        return sealed(MAGIC, {"v": VERSION, "tree": self.tree, "top": self.top, "leaves": self.leaves,
                              "rows": self.rows, "order": self.order, "counts": self.counts,
                              "failing": self.failing})

    @classmethod
    def decode(cls, raw: bytes) -> Summary | None:
        """What `encode` wrote; None for anything else (damaged, truncated, foreign)."""
        data = unsealed(MAGIC, raw)
        if not isinstance(data, dict) or data.get("v") != VERSION:
            return None
        try:
            return cls(data["tree"], data["top"], data["leaves"], data["rows"], data["order"], data["counts"],
                       data["failing"])
        except KeyError:
            return None


def _path(repo: Repo) -> Any:
    return repo.handoff_dir / FILE


# The summary this process last read or wrote, by index file, with the file's identity
# then: a file still the same (inode, size, mtime) is not read and decoded again (a hook
# asks before and after it commits a change that leaves the tasks alone).
_seen: dict[str, tuple[tuple[int, int, int], Summary]] = {}


def _load(repo: Repo) -> Summary | None:
    path = _path(repo)
    stamp = file_identity(path)
    seen = _seen.get(str(path))
    if stamp is not None and seen is not None and seen[0] == stamp:
        return seen[1]
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    found = Summary.decode(raw)
    if found is not None and stamp is not None:
        _seen[str(path)] = (stamp, found)
    return found


def _save(repo: Repo, summary: Summary) -> None:
    path = _path(repo)
    try:
        atomic_write(path, summary.encode())
    except (OSError, ValueError):
        return  # a missing index is only slower: the next `status` rebuilds it
    stamp = file_identity(path)
    if stamp is not None:
        _seen[str(path)] = (stamp, summary)


def _parse(raw: bytes, task_id: str) -> Task:
    try:
        return load_task(raw, source=f"state file for task {task_id}")
    except UsageError as exc:
        raise InvalidState(exc.message) from None


def _structure(repo: Repo, tree: str, old_top: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """First-level tree oid -> its leaf tree oids; an unchanged first-level tree is not opened."""
    top: dict[str, list[str]] = {}
    for _, l1, is_tree in repo.tree_entries(tree):
        if not is_tree:
            continue
        known = old_top.get(l1)
        top[l1] = known if known is not None else [leaf for _, leaf, t2 in repo.tree_entries(l1) if t2]
    return top


def _neutral(before: Row | None, after: Row | None, failing: set[str]) -> bool:
    """A change that cannot change which tasks dependency validation fails: same
    dependencies, same standing (open or not, failed for good or not); or a task that
    leaves the open set without being one it fails; or one that joins it with no
    dependency and not failed for good (it can close no cycle, and nothing failed
    reaches it)."""
    def standing(r: Row) -> tuple[bool, bool]:
        return (r[STATUS] in ("pending", "failed") and not r[FOR_GOOD], r[FOR_GOOD])

    if before is not None and after is not None and before[DEPS] == after[DEPS] and standing(before) == standing(after):
        return True
    if before is not None and (after is None or not standing(after)[0]) and not standing(before)[1]:
        if before[ID] not in failing and (after is None or not after[FOR_GOOD]):
            return True
    return after is not None and not after[DEPS] and not after[FOR_GOOD] and (before is None or not before[FOR_GOOD])


def _build(snap: Snapshot, tree: str) -> Summary:
    """The index from the whole task set (through the task index: no blob is parsed twice)."""
    top = _structure(snap.repo, tree, {})
    leaves = {leaf: [name[:-5] for name, _, is_tree in snap.repo.tree_entries(leaf) if not is_tree
                     and name.endswith(".json")]
              for leaves in top.values() for leaf in leaves}
    tasks = snap.tasks()
    rows = {t.id: row(t) for t in tasks.values()}
    counts: dict[str, int] = {}
    for r in rows.values():
        counts[r[STATUS]] = counts.get(r[STATUS], 0) + 1
    return Summary(tree, top, leaves, rows, list(rows), counts, failing_of(rows, rows))


def _changed_leaves(repo: Repo, old_tree: str, tree: str) -> tuple[dict[str, str], dict[str, str]]:
    """The fan-out leaves that differ between two tasks trees, by path ("3/a"): those of
    `old_tree` and those of `tree` (a path in one only: a leaf that went or came)."""
    def level(oid: str | None) -> dict[str, str]:
        return {name: sub for name, sub, is_tree in repo.tree_entries(oid) if is_tree} if oid else {}

    old_top, new_top = level(old_tree), level(tree)
    went: dict[str, str] = {}
    came: dict[str, str] = {}
    for name in sorted(set(old_top) | set(new_top)):
        if old_top.get(name) == new_top.get(name):
            continue
        before, after = level(old_top.get(name)), level(new_top.get(name))
        for leaf in set(before) | set(after):
            if before.get(leaf) != after.get(leaf):
                if leaf in before:
                    went[f"{name}/{leaf}"] = before[leaf]
                if leaf in after:
                    came[f"{name}/{leaf}"] = after[leaf]
    return went, came


def _json_blobs(repo: Repo, leaf: str) -> list[tuple[str, str]]:
    return [(name, oid) for name, oid, is_tree in repo.tree_entries(leaf) if not is_tree and name.endswith(".json")]


@dataclass(frozen=True, slots=True)
class BlobPlan:
    """What bringing the index along the tree diff reads, decided from blob oids alone:
    the tasks whose blob changed or went (their rows are dropped) and, for each leaf
    that changed, the id each of its task blobs already has in the index when the blob
    is the same, in tree order (None: the blob is parsed)."""

    gone: tuple[str, ...]
    known: dict[str, list[str | None]]  # changed leaf's path -> by blob, its id or None
    to_parse: int


def plan_blobs(prior: Mapping[str, tuple[str, str]], listed: Mapping[str, list[tuple[str, str]]]) -> BlobPlan:
    """`prior`: path of each blob in a leaf that changed, in the tree the index
    describes -> (blob, task id); `listed`: each changed leaf's path in the new tree ->
    its (file name, blob)s."""
    now = {f"{path}/{name}": blob for path, blobs in listed.items() for name, blob in blobs}
    gone = tuple(tid for where, (blob, tid) in prior.items() if now.get(where) != blob)
    known = {path: [was[1] if (was := prior.get(f"{path}/{name}")) is not None and was[0] == blob else None
                    for name, blob in blobs]
             for path, blobs in listed.items()}
    return BlobPlan(gone, known, sum(ids.count(None) for ids in known.values()))


@dataclass(frozen=True, slots=True)
class FollowPlan:
    """What the changed rows make of the creation order and the dependency failures."""

    moved: tuple[str, ...]  # ids whose place in creation order changed (came, went, or moved)
    resort: bool  # so many moved that sorting every row again is cheaper than patching
    recheck: bool  # a change could change which tasks dependency validation fails


RESORT_AFTER = 64  # more moved rows than this: the order is sorted again, not patched


def plan_follow(before: Mapping[str, Row | None], after: Mapping[str, Row], failing: Iterable[str]) -> FollowPlan:
    """`before`: every changed id -> its row in the index (None: a task that came);
    `after`: the ids still there -> their new row; `failing`: the index's failures."""
    moved = tuple(tid for tid, was in before.items()
                  if was is None or tid not in after or creation_key(was) != creation_key(after[tid]))
    failed = set(failing)
    recheck = not all(_neutral(was, after.get(tid), failed) for tid, was in before.items())
    return FollowPlan(moved, len(moved) > RESORT_AFTER, recheck)


def _prior_blobs(repo: Repo, went: Mapping[str, str],
                 leaves: dict[str, list[str]]) -> dict[str, tuple[str, str]] | None:
    """The blobs of the leaves that went, by path, with the ids the index holds for
    them (those leaves are taken out of `leaves`); None: a leaf the index does not know,
    or one it lists otherwise."""
    prior: dict[str, tuple[str, str]] = {}
    for path, leaf in went.items():
        ids = leaves.pop(leaf, None)
        blobs = _json_blobs(repo, leaf)
        if ids is None or len(ids) != len(blobs):
            return None
        for (name, blob), tid in zip(blobs, ids, strict=True):
            prior[f"{path}/{name}"] = (blob, tid)
    return prior


def _drop_rows(rows: dict[str, Row], counts: dict[str, int], gone: Iterable[str]) -> dict[str, Row | None] | None:
    """The rows of the tasks whose blob changed taken out (and out of the counts), by
    id; None: an id the index has no row of."""
    before: dict[str, Row | None] = {}
    for tid in gone:
        was = rows.pop(tid, None)
        if was is None:
            return None
        before[tid] = was
        counts[was[STATUS]] = counts.get(was[STATUS], 0) - 1
    return before


def _read_changed(repo: Repo, listed: Mapping[str, list[tuple[str, str]]], plan: BlobPlan,
                  came: Mapping[str, str], rows: Mapping[str, Row],
                  leaves: dict[str, list[str]]) -> dict[str, Row] | None:
    """The rows of the blobs the plan parses, by id, and each changed leaf's ids put in
    `leaves`; None: an id that is already in another row (one id in two blobs)."""
    after: dict[str, Row] = {}
    for path, blobs in listed.items():
        ids: list[str] = []
        for (name, blob), tid in zip(blobs, plan.known[path], strict=True):
            if tid is None:
                task = _parse(repo.read_blob(blob), name[:-5])
                if task.id in rows or task.id in after:
                    return None
                after[task.id] = row(task)
                tid = task.id
            ids.append(tid)
        leaves[came[path]] = ids
    return after


def _add_rows(rows: dict[str, Row], counts: dict[str, int], before: dict[str, Row | None],
              after: Mapping[str, Row]) -> None:
    for tid, r in after.items():
        rows[tid] = r
        counts[r[STATUS]] = counts.get(r[STATUS], 0) + 1
        before.setdefault(tid, None)


def _reorder(order: list[str], rows: Mapping[str, Row], after: Mapping[str, Row], plan: FollowPlan) -> list[str]:
    """The creation order with the moved ids taken out and put back in place (a new
    list: `order` is the old index's own)."""
    if not plan.moved:
        return order
    if plan.resort:
        return [r[ID] for r in sorted(rows.values(), key=creation_key)]
    drop = set(plan.moved)
    order = [tid for tid in order if tid not in drop]
    for tid in plan.moved:
        if tid in after:
            bisect.insort(order, tid, key=lambda t: creation_key(rows[t]))
    return order


def _update(repo: Repo, old: Summary, tree: str) -> Summary | None:
    """`old` brought to `tree` from the tree diff: in the leaves that changed, only the
    blobs that changed are parsed. None when the diff does not fit the index (an id in
    two leaves, a leaf the index does not know): the caller then rebuilds from the tasks."""
    top = _structure(repo, tree, old.top)
    went, came = _changed_leaves(repo, old.tree, tree)
    rows, counts, leaves = dict(old.rows), dict(old.counts), dict(old.leaves)
    prior = _prior_blobs(repo, went, leaves)
    if prior is None:
        return None
    listed = {path: _json_blobs(repo, leaf) for path, leaf in came.items()}
    blobs = plan_blobs(prior, listed)
    before = _drop_rows(rows, counts, blobs.gone)
    after = _read_changed(repo, listed, blobs, came, rows, leaves) if before is not None else None
    if before is None or after is None:
        return None
    _add_rows(rows, counts, before, after)
    follow = plan_follow(before, after, old.failing)
    order = _reorder(old.order, rows, after, follow)
    failing = failing_of(rows, order) if follow.recheck else [tid for tid in old.failing if tid in rows]
    fresh = Summary(tree, top, leaves, rows, order, {status: n for status, n in counts.items() if n}, failing)
    fresh.reread = blobs.to_parse
    return fresh


def summary(snap: Snapshot) -> Summary | None:
    """The status index of this snapshot's tasks tree (None: the state has no tasks
    directory). Updated from the tree diff when the index describes another tree, built
    from the tasks when there is none; written back when built, or when the update
    parsed more than REWRITE_AFTER tasks."""
    if "status" in snap.derived:
        cached: Summary | None = snap.derived["status"]
        return cached
    found = snap.derived["status"] = _summary(snap)
    return found


def _summary(snap: Snapshot) -> Summary | None:
    tree = snap.tasks_tree()
    if tree is None:
        return None
    repo = snap.repo
    old = _load(repo)
    if old is not None and old.tree == tree:
        return old
    fresh = _update(repo, old, tree) if old is not None else None
    if fresh is None:
        fresh = _build(snap, tree)
    elif fresh.reread <= REWRITE_AFTER:
        return fresh  # the next reader brings the file's tree up as cheaply: not written
    _save(repo, fresh)
    return fresh


def read_task(snap: Snapshot, task_id: str) -> Task:
    """The task of a row of this snapshot's index, read from its blob."""
    task = snap.task(task_id)
    if task is None:
        raise InvalidState(f"task {task_id} is in the status index but not in the state")
    return task

