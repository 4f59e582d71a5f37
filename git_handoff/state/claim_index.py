"""A per-clone claim index: what `claim` needs to pick a task, without reading every task.

For one tasks tree (keyed by its oid, so it is never stale, only absent) the index
holds one small row per task: the fields selection looks at. A claim whose state
matches the index, has no expired lease and no pending dependency failure picks
from the rows and reads only the chosen task's blob; anything else takes the full
path (selection.prepare + eligible over every task), which rebuilds the index.

The work-cycle transactions (claim, renew, checkpoint, release, done, fail) carry
the index forward to the tree they commit (a change the head can follow alone writes
only the head), so a worker's claim -> done -> claim loop never falls back to reading
every task. Rows of another tree are brought along the tree diff when it cannot make
them unclean (`_delta`); otherwise the full selection decides and rebuilds them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from git_handoff.core import selection
from git_handoff.core.model import Task, now, parse_time
from git_handoff.core.selection import PRIORITY_RANK, lease_deadline
from git_handoff.infra.fileio import atomic_write, read_sealed, sealed, unsealed
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.snapshot import TASKS_DIR, Snapshot
from git_handoff.state.store import StateStore, Tx

INDEX_FILE = "claim-index.marshal"
# The head: the tree, whether it is clean, the first eligible task with its row and the
# earliest lease deadline, so `next` and the hooks answer without reading the rows.
HEAD_FILE = "claim-head.marshal"
HEAD_MAGIC = b"git-handoff-claim-head 2\n"
VERSION = 1
# The file: MAGIC, the sha256 of the rest, then the marshalled rows. An index whose digest
# does not match (damaged on disk) is not believed: it is absent, and rebuilt.
MAGIC = b"git-handoff-claim-index 1\n"

# Row fields, by position.
(STATUS, RANK, ORDER, CREATED, DEPS, ATTEMPTS, MAX_ATTEMPTS, DEP_ERROR, LEASE, FAILED_AT, WORKTREE,
 CLAIMED_BY) = range(12)


def row(task: Task) -> tuple[Any, ...]:
    return (
        task.status,
        PRIORITY_RANK.get(task.priority, 1),
        task.order,
        task.created_at,
        tuple(task.depends_on),
        task.attempts,
        task.max_attempts,
        any(e.startswith("[DEPENDENCY]") for e in task.error_log),
        lease_deadline(task, now()) if task.lease_expires_at is not None else None,  # bounded by its record
        str(task.get("failed_at") or task.updated_at or ""),
        task.claim.worktree,
        task.claimed_by,
    )


def rows_of(tasks: Iterable[Task]) -> dict[str, tuple[Any, ...]]:
    return {t.id: row(t) for t in tasks}


def tasks_tree(store: StateStore, root_tree: str | None) -> str | None:
    if root_tree is None:
        return None
    found = store.repo.tree_lookup(root_tree, TASKS_DIR)
    return found[0] if found is not None and found[1] else "empty"


def _path(repo: Repo) -> Any:
    return repo.handoff_dir / INDEX_FILE


def encode(data: dict[str, Any]) -> bytes:
    """The index file's bytes for `data`."""
    return sealed(MAGIC, data)


def decode(raw: bytes) -> Any:
    """What `encode` wrote; None for bytes it did not write (damaged, truncated, foreign)."""
    return unsealed(MAGIC, raw)


def load(store: StateStore, tree: str | None) -> dict[str, tuple[Any, ...]] | None:
    """The rows for this tasks tree when the index has them (and was clean), else None."""
    return load_rows(store.repo, tree)


def load_rows(repo: Repo, tree: str | None, *, save_delta: bool = False) -> dict[str, tuple[Any, ...]] | None:
    """`load`, for a repository. An index of another tree is brought to this one from
    the tree diff (only the changed tasks' blobs are read), when that diff cannot change
    what makes it clean; with `save_delta` the result is written for this tree."""
    if tree is None:
        return None
    data = read_sealed(_path(repo), MAGIC)
    if not isinstance(data, dict) or data.get("v") != VERSION or not data.get("clean"):
        return None
    rows = data.get("rows")
    if not isinstance(rows, dict):
        return None
    if data.get("tree") == tree:
        return rows
    rows = _delta(repo, data.get("tree"), tree, rows)
    if rows is not None and save_delta:
        save_rows(repo, tree, rows, True)
    return rows


def _delta(repo: Repo, old: Any, new: str, rows: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]] | None:
    """`rows` (clean, of tasks tree `old`) brought to tasks tree `new`; None when the diff
    holds anything that could make the index unclean or that it does not expect (a task
    removed, a dependency changed, a task failed for good, an id not its file's name):
    the full selection decides then, and rebuilds."""
    if not isinstance(old, str) or "empty" in (old, new) or not repo.has_object(old):
        return None
    from git_handoff.core.errors import HandoffError
    from git_handoff.state.task_index import load_task

    rows = dict(rows)
    for path, (_, blob) in repo.tree_diff(old, new).items():
        name = path.rsplit("/", 1)[-1]
        if blob is None or not name.endswith(".json"):
            return None
        try:
            task = load_task(repo.read_blob(blob), name[:-5])
        except HandoffError:
            return None
        before = rows.get(task.id)
        if (task.id != name[:-5] or task.failed_for_good
                or (tuple(task.depends_on) != (before[DEPS] if before is not None else ()))):
            return None
        rows[task.id] = row(task)
    return rows


def save(store: StateStore, tree: str | None, rows: Mapping[str, tuple[Any, ...]], clean: bool) -> None:
    save_rows(store.repo, tree, rows, clean)


def save_rows(repo: Repo, tree: str | None, rows: Mapping[str, tuple[Any, ...]], clean: bool) -> None:
    """`save`, for a repository: the rows, then the head that summarizes them."""
    if tree is None:
        return
    try:
        atomic_write(_path(repo), encode({"v": VERSION, "tree": tree, "clean": clean, "rows": dict(rows)}))
    except (OSError, ValueError):
        return  # a missing index is only slower: the next claim rebuilds it
    first = first_eligible(rows) if clean else None
    _save_head(repo, {"v": VERSION, "tree": tree, "clean": clean, "first": first,
                      "row": rows[first] if first is not None else None, "lease": earliest_lease(rows),
                      "needed": frozenset(dep for r in rows.values() for dep in r[DEPS])})


def _save_head(repo: Repo, head: dict[str, Any]) -> None:
    try:
        atomic_write(repo.handoff_dir / HEAD_FILE, sealed(HEAD_MAGIC, head))
    except (OSError, ValueError):
        pass


def load_head(repo: Repo, tree: str) -> dict[str, Any] | None:
    """The head for this tasks tree when it is there, clean and undamaged, else None."""
    head = read_sealed(repo.handoff_dir / HEAD_FILE, HEAD_MAGIC)
    if (not isinstance(head, dict) or head.get("v") != VERSION or head.get("tree") != tree
        or head.get("clean") is not True
            or not isinstance(head.get("first"), str) or not isinstance(head.get("row"), tuple)
            or not isinstance(head.get("lease"), (str, type(None))) or not isinstance(head.get("needed"), frozenset)):
        return None
    return head


def committed_tree(tx: Tx) -> str | None:
    """The tasks tree `tx` committed, if the state ref is still at that commit.

    Checked from the ref rather than remembered, so a transaction committed by another
    route (a push to a remote, then a local compare-and-swap) is recognised too, and a
    merge or anyone else's commit in between is not mistaken for it."""
    store = tx.store
    commit = store.head()
    if commit is None:
        return None
    message, parents, _, _ = store.repo.commit_info(commit)
    base = tx.base.commit if tx.base else None
    if parents != ([base] if base else []) or message != "\n".join(tx.lines) + "\n":
        return None
    return tasks_tree(store, store.repo.commit_tree(commit))


# -- selection on rows ---------------------------------------------------------------------


def _ready(r: tuple[Any, ...], rows: Mapping[str, tuple[Any, ...]]) -> bool:
    for dep in r[DEPS]:
        d = rows.get(dep)
        if d is None or d[STATUS] != "completed":
            return False
    return True


def first_eligible(rows: Mapping[str, tuple[Any, ...]]) -> str | None:
    """What selection.eligible(...)[0] is, for a state with no dependency failure to record."""
    best: tuple[Any, ...] | None = None
    best_id = None
    for tid, r in rows.items():
        if r[STATUS] == "pending" and (best is None or (r[RANK], r[ORDER], r[CREATED], tid) < best) and _ready(r, rows):
            best, best_id = (r[RANK], r[ORDER], r[CREATED], tid), tid
    if best_id is not None:
        return best_id
    for tid, r in rows.items():
        if r[STATUS] != "failed" or r[ATTEMPTS] >= r[MAX_ATTEMPTS] or r[DEP_ERROR]:
            continue
        key = (r[RANK], r[FAILED_AT], r[ORDER], r[CREATED], tid)
        if (best is None or key < best) and _ready(r, rows):
            best, best_id = key, tid
    return best_id


def earliest_lease(rows: Mapping[str, tuple[Any, ...]]) -> str | None:
    """The earliest lease deadline of the in-progress rows (any_expired's answer for any
    moment: expired ones exactly when this one is)."""
    leases = [r[LEASE] for r in rows.values() if r[STATUS] == "in_progress" and r[LEASE] is not None]
    return min(leases, key=parse_time) if leases else None


def any_expired(rows: Mapping[str, tuple[Any, ...]], now: str) -> bool:
    moment = parse_time(now)
    for r in rows.values():
        if r[STATUS] == "in_progress" and r[LEASE] is not None and parse_time(r[LEASE]) <= moment:
            return True
    return False


# -- `next` through the index --------------------------------------------------------------


def next_eligible(snap: Snapshot, now: str, skip: Collection[str] = ()) -> Task | None:
    """What selection.next_eligible(snap.tasks(), now) answers, through the index: from
    the rows and one task's blob when the index holds this tree, clean and with no lease
    expired; else from every task, and then the index is written for this tree (so the
    next `next`, `claim` or hook reads the rows). `skip` (tasks never to offer: an
    unapproved writer's, git_handoff.state.writers) takes the full selection."""
    if skip:
        return selection.next_eligible(snap.tasks(), now, skip=skip)
    tree = _tree_of(snap)
    head = load_head(snap.repo, tree)
    if head is not None and (head["lease"] is None or parse_time(head["lease"]) > parse_time(now)):
        task = snap.task(head["first"])
        if task is not None and row(task) == head["row"]:
            return task
    rows = load_rows(snap.repo, tree, save_delta=True)
    if rows is not None and not any_expired(rows, now):
        chosen = first_eligible(rows)
        if chosen is not None:
            task = snap.task(chosen)
            if task is not None and row(task) == rows[chosen]:
                return task
    tasks = snap.tasks()
    found = selection.next_eligible(tasks, now)
    if rows is None and not selection.prepare_leases(tasks, now) and not selection.dependency_failures(tasks):
        save_rows(snap.repo, tree, rows_of(tasks.values()), True)
    return found


def _tree_of(snap: Snapshot) -> str:
    return snap.tasks_tree() or "empty"


# -- keeping the index with the state ------------------------------------------------------


def carry(
    tx: Tx,
    changed: Iterable[Task],
    *,
    clean: bool = True,
    rows: dict[str, tuple[Any, ...]] | None = None,
) -> None:
    """After `tx` commits, move the index from its base tree to the committed tree
    (`rows`: the base tree's rows, when the caller has them already). Without them, a
    change the head can follow alone (`_head_after`) writes only the head: the rows
    stay at their tree, and the next reader brings them along the tree diff."""
    store = tx.store
    base_tree = tasks_tree(store, tx.base.tree if tx.base else None)
    changed = list(changed)
    known = rows

    def hook() -> None:
        repo = store.repo
        new_tree = committed_tree(tx)
        if known is None and clean and base_tree is not None and new_tree is not None:
            head = _head_after(tx, load_head(repo, base_tree), changed)
            if head is not None:
                _save_head(repo, {**head, "tree": new_tree})
                return
        rows = known if known is not None else load_rows(repo, base_tree)
        if rows is None:
            return
        for task in changed:
            rows[task.id] = row(task)
        save(store, new_tree, rows, clean)

    tx.after_commit("claim index", hook)


def _head_after(tx: Tx, head: dict[str, Any] | None, changed: list[Task]) -> dict[str, Any] | None:
    """The head once `changed` are committed, when it follows from the base tree's head
    alone: no changed task is the first eligible one or becomes a candidate (pending, or
    failed with attempts left), none is another task's dependency, none changed its
    dependencies or failed for good. The earliest lease only moves earlier (a lease
    given up is kept: an earlier deadline only sends a reader to the rows sooner)."""
    if head is None:
        return None
    lease = head["lease"]
    for task in changed:
        r = row(task)
        before = tx.base.task(task.id) if tx.base else None
        if (task.id == head["first"] or task.id in head["needed"] or task.failed_for_good
                or before is None or tuple(before.depends_on) != r[DEPS]
                or r[STATUS] == "pending" or (r[STATUS] == "failed" and not r[DEP_ERROR])):
            return None
        if r[STATUS] == "in_progress" and r[LEASE] is not None and (lease is None
                                                                    or parse_time(r[LEASE]) < parse_time(lease)):
            lease = r[LEASE]
    return {**head, "lease": lease}


def rebuild(tx: Tx, tasks: Mapping[str, Task]) -> None:
    """After `tx` commits, index the committed tree from the whole task set it leaves."""
    store = tx.store
    rows = rows_of(tasks.values())
    tx.after_commit("claim index", lambda: save(store, committed_tree(tx), rows, True))
