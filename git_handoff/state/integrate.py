"""The merge engine: bring other states into this clone's state ref (a fast-forward, or
a 3-way merge against the common base written as one commit), union the notes, and tell
this clone when a claim it held was lost.

It works on commits and trees already in the repository and checked: ops/sync.py
fetches, has every head that is new here checked (git_handoff.remote.incoming) — the heads
`fresh_heads` names — then integrates them here, then publishes. Folding many heads at
once is in state/fold_heads.py.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypedDict

from git_handoff.core import ancestry, field_merge, merge
from git_handoff.core.errors import Contention
from git_handoff.infra.file_lock import StateLock
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import notices
from git_handoff.state.fold_heads import MAX_PARENTS, Ancestry, HeadsCache, fold
from git_handoff.state.fold_heads import readable as _readable
from git_handoff.state.fold_heads import task_record as _task_record
from git_handoff.state.notes import NOTES_LOCK
from git_handoff.state.snapshot import NOTES_REF, STATE_REF
from git_handoff.state.store import StateStore

CAS_TRIES = 20


def _pause(attempt: int) -> None:
    """Between lost swaps of a ref we hold our own lock for. Only a foreign writer or a
    ref lock left by a killed process makes the swap fail here; such a lock counts as
    stale (and is removed by cas_ref) only after STALE_REF_LOCK_SECONDS, so the tries
    must span more than that (~5 s in all), not use themselves up in milliseconds."""
    time.sleep(min(0.3, 0.01 * 2 ** attempt) * (0.5 + random.random()))


def _tasks_at(repo: Repo, tree: str | None, paths: list[str], claimed_only: bool = False) -> dict[str, Any]:
    out = {}
    for path in paths:
        if tree is None:
            continue
        found = repo.tree_lookup(tree, path)
        if found is None or found[1]:
            continue
        raw = repo.read_blob(found[0])
        if claimed_only and b'"in_progress"' not in raw:
            continue
        data = _task_record(raw)
        if data is not None:
            out[str(data["id"])] = data
    return out


def _lost_claims(repo: Repo, before: str, after: str) -> list[merge.LostClaim]:
    paths = [p for p in repo.tree_diff(before, after) if p.startswith(merge.TASK_PREFIX)]
    held = _tasks_at(repo, before, paths, claimed_only=True)
    return merge.lost_claims(held, _tasks_at(repo, after, list(held and paths)))


def merge_changes(repo: Repo, base: str | None, ours: str, theirs: str
                  ) -> tuple[dict[str, str | bytes | None], list[field_merge.Conflict]]:
    """What to change in `ours` (a tree) to merge `theirs` into it: {path: blob oid, new
    bytes, or None to delete}. Only paths changed on both sides are read and merged."""
    d_ours = _diff(repo, base, ours)
    d_theirs = _diff(repo, base, theirs)
    changes: dict[str, str | bytes | None] = {}
    conflicts: list[field_merge.Conflict] = []

    def read(oid: str | None) -> bytes | None:
        return None if oid is None else repo.read_blob(oid)

    for path in sorted(d_theirs):
        old, new = d_theirs[path]
        if path not in d_ours:
            changes[path] = new
            continue
        mine = d_ours[path][1]
        if mine == new:
            continue
        mine_data = read(mine)
        theirs_data = read(new)
        result = _readable(path, merge.merge_file(path, read(old), mine_data, theirs_data), mine_data, theirs_data)
        conflicts.extend(result.conflicts)
        if result.data != mine_data:
            changes[path] = result.data
    return changes, conflicts


_DIFFS: dict[tuple[int, str | None, str], dict[str, tuple[str | None, str | None]]] = {}


def _diff(repo: Repo, a: str | None, b: str) -> dict[str, tuple[str | None, str | None]]:
    """repo.tree_diff, remembered for the last few pairs (trees never change)."""
    key = (id(repo), a, b)
    if key not in _DIFFS:
        if len(_DIFFS) > 8:
            _DIFFS.clear()
        _DIFFS[key] = repo.tree_diff(a, b)
    return _DIFFS[key]


class MergeStep(TypedDict):
    """What integrating one remote state did: the action (no-remote-state, up-to-date,
    adopted, fast-forward, merged), commits it brought, conflicts and claims lost."""

    action: str
    incoming: int
    conflicts: list[field_merge.ConflictJson]
    claims_lost: list[merge.LostClaim]


# How far down this clone's first-parent line `_near` looks for heads it already holds.
NEAR_DEPTH = 8


def _near(repo: Repo, ours: str | None) -> set[str]:
    """Commits surely in `ours`: it, its first-parent line NEAR_DEPTH deep and each of
    their parents. A remote head found here needs no ancestry walk (libgit2's walk costs
    ~2 ms here in a fleet's graph, and a sync asks it of every clone's head)."""
    seen: set[str] = set()
    commit = ours
    for _ in range(NEAR_DEPTH):
        if commit is None:
            break
        seen.add(commit)
        parents = repo.commit_parents(commit)
        seen.update(parents)
        commit = parents[0] if parents else None
    return seen


def holds(repo: Repo, head: str) -> Callable[[str], bool]:
    """Whether our state `head` holds a commit: known without a walk when it is near the
    head or a remote head remembered as merged into it (a clone's claim ref points at the
    head it pushed with the claim, so in a fleet nearly every live claim is one), else
    asked of the history."""
    known = _surely_held(repo, head)
    return lambda commit: commit in known or repo.is_ancestor(commit, head)


def _surely_held(repo: Repo, head: str | None) -> set[str]:
    """Commits our state `head` holds, known without a walk: near it, or remote heads
    remembered as merged into it."""
    return _near(repo, head) | HeadsCache(repo, "state").known(head)


def fresh_heads(store: StateStore, heads: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The heads of `heads` ([(label, commit)]) this clone's state may not hold yet: those
    the caller must have checked before `integrate_all` reads them (a head found near our
    state, or remembered as merged, is already in it)."""
    near = _surely_held(store.repo, store.head())
    return [(label, theirs) for label, theirs in heads if theirs not in near]


def integrate_all(store: StateStore, heads: list[tuple[str, str]], fresh: list[tuple[str, str]]) -> MergeStep:
    """Bring every state of `heads` ([(label, commit)] in a fixed order) into the local
    state ref with one new commit at most: a fast-forward when one head holds everything
    else, otherwise one merge whose parents are ours and each head that is new here. The
    heads are merged in turn, each against its common base with what came before (the
    same trees as one merge per head), through commits that stay unreferenced; the history
    keeps only the last. `fresh` is `fresh_heads(store, heads)`, every one of them checked
    by the caller (git_handoff.remote.incoming): only those are read."""
    repo = store.repo
    report: MergeStep = {"action": "up-to-date", "incoming": 0, "conflicts": [], "claims_lost": []}
    cache = HeadsCache(repo, "state")
    if not fresh:
        return report
    label_of: dict[str, str] = {}  # each head once, in order, with its first label
    for label, theirs in fresh:
        label_of.setdefault(theirs, label)
    with store.lock():
        for attempt in range(CAS_TRIES):
            if attempt:
                _pause(attempt - 1)
            ours = store.head()
            graph = repo.graph_not_in(list(label_of), ours)  # the ancestry below, in one walk
            todo = [(label_of[h], h) for h in ancestry.new_heads(graph, label_of)]
            if not todo:
                cache.remember(ours, [h for _, h in heads])
                return report
            step = _fold(store, ours, todo, graph)
            if step is None:
                continue
            _remember_notices(repo, step["claims_lost"])
            cache.remember(store.head(), [h for _, h in heads])
            return step
    raise Contention(f"{STATE_REF} kept changing while merging {heads[0][0]}; nothing was lost, retry")


def _new_heads(repo: Repo, ours: str | None, heads: list[str], near: frozenset[str] | set[str] = frozenset()
               ) -> list[str]:
    """`heads` that `ours` does not hold yet, each once, in their order (`near`: commits
    known to be in ours, asked without a walk)."""
    return [h for h in dict.fromkeys(heads) if h not in near and (ours is None or not repo.is_ancestor(h, ours))]


def _start(repo: Repo, ours: str | None, new: list[str]) -> tuple[str, list[str]]:
    """Where a merge of the `new` heads (none of them in `ours`) starts, and what remains to
    merge onto it: ours, unless a head holds it (or there is no ours), which is then a
    fast-forward, to the head furthest along (a head that holds another head that holds
    ours: three clones in turn, the last one holds everything); the heads that start
    holds already drop out."""
    first = ours
    for h in new:  # the furthest head along one line of history from ours (one walk per head)
        if first is None or repo.is_ancestor(first, h):
            first = h
    assert first is not None  # `new` is never empty
    if first == ours:
        return first, new
    return first, [h for h in new if h != first and not repo.is_ancestor(h, first)]


def _fold(store: StateStore, ours: str | None, todo: list[tuple[str, str]], graph: ancestry.Graph
          ) -> MergeStep | None:
    """Merge the heads of `todo` (none of them in `ours`; `graph`: the commits they hold
    that ours lacks) and publish the result; None when the state ref moved meanwhile
    (nothing published)."""
    repo = store.repo
    step: MergeStep = {"action": "merged", "incoming": 0, "conflicts": [], "claims_lost": []}
    first, remaining = ancestry.start(graph, ours, [h for _, h in todo])
    rest = set(remaining)
    if first != ours:
        label = next(label for label, h in todo if h == first)
        if ours is None:
            step["action"], step["incoming"] = "adopted", repo.count_commits(first)
            reason = f"handoff: adopted the state of {label}"
        else:
            step["claims_lost"] = _lost_claims(repo, repo.commit_tree(ours), repo.commit_tree(first))
            step["action"], step["incoming"] = "fast-forward", repo.count_commits(first, ours)
            reason = f"handoff: fast-forward to {label}"
        todo = [(label, h) for label, h in todo if h in rest]
    if not todo:
        return step if store.publish(first, ours, reason) else None
    commit, got = fold(store, first, todo, lambda a, b: _diff(repo, a, b), Ancestry(repo, graph, ours, first))
    step["action"] = "merged"
    step["incoming"] += got["incoming"]
    step["conflicts"] = got["conflicts"]
    step["claims_lost"] = got["claims_lost"]
    return step if store.publish(commit, ours, "handoff: merge") else None


def merge_notes(repo: Repo, store: StateStore, heads: list[str]) -> str:
    """Union of our notes and every one of `heads` (the remote's notes commits; the same
    object noted on several: all their texts), as one commit: none, up-to-date, adopted,
    fast-forward or merged."""
    if not heads:
        return "none"
    cache = HeadsCache(repo, "notes")
    with StateLock(repo.handoff_dir / NOTES_LOCK, 30):
        for attempt in range(CAS_TRIES):
            if attempt:
                _pause(attempt - 1)
            ours = repo.ref_target(NOTES_REF)
            new = _new_heads(repo, ours, heads, _near(repo, ours) | cache.known(ours))
            if not new:
                cache.remember(ours, heads)
                return "up-to-date"
            first, todo = _start(repo, ours, new)
            action = "adopted" if ours is None else "fast-forward" if first != ours else "merged"
            commit = first
            if todo:
                action = "merged"
                tree = repo.commit_tree(first)
                # a chain of merges of at most MAX_PARENTS parents each, as for the state
                for at in range(0, len(todo), MAX_PARENTS - 1):
                    chunk = todo[at:at + MAX_PARENTS - 1]
                    for theirs in chunk:
                        tree = _notes_union(repo, tree, repo.commit_tree(theirs))
                    commit = repo.create_commit(tree, [commit, *chunk], "Notes merged by git handoff sync\n")
            if repo.cas_ref(NOTES_REF, commit, ours, f"handoff: notes {action} by sync"):
                cache.remember(commit, heads)
                return action
    raise Contention(f"{NOTES_REF} kept changing while merging; retry")


def _notes_union(repo: Repo, ot: str, tt: str) -> str:
    """Tree `ot` with every note of tree `tt` added (the same object in both: the union
    of the two texts). Only the paths where the trees differ are read (listing every
    note of both trees made each merge cost the project's whole history of notes); notes
    trees may fan out differently, so a note `tt` has that `ot` lacks at its path is
    looked for at the other fan-outs before it is added."""
    changes: dict[str, str | None] = {}
    for p, (old, new) in repo.tree_diff(ot, tt).items():
        if new is None:
            continue  # ours alone (or ours at another fan-out): kept
        at = (p, old) if old is not None else _note_at(repo, ot, p.replace("/", ""))
        if at is None:
            changes[p] = new
        elif at[1] != new:
            changes[at[0]] = repo.write_blob(_union_text(repo.read_blob(at[1]), repo.read_blob(new)))
    return repo.update_tree(ot, changes) if changes else ot


def _note_at(repo: Repo, tree: str, note: str) -> tuple[str, str] | None:
    """(path, blob) of the note of object `note` in notes tree `tree`, at any fan-out."""
    for depth in range(len(note) // 2):
        path = "/".join([note[2 * k:2 * k + 2] for k in range(depth)] + [note[2 * depth:]])
        found = repo.tree_lookup(tree, path)
        if found is not None:
            return (path, found[0]) if not found[1] else None
        if depth and repo.tree_lookup(tree, path.rsplit("/", 1)[0]) is None:
            return None  # no directory that deep: no deeper fan-out either
    return None


def _union_text(a: bytes, b: bytes) -> bytes:
    lo, hi = sorted((a, b))
    lines = lo.decode(errors="replace").splitlines()
    have = set(lines)  # once: a set per line made two 32,000-line notes a two-minute sync
    extra = [x for x in hi.decode(errors="replace").splitlines() if x not in have]
    if not extra:
        return lo if lo.endswith(b"\n") else lo + b"\n"
    return ("\n".join(lines + extra) + "\n").encode()




def _remember_notices(repo: Repo, lost: list[merge.LostClaim]) -> None:
    messages = []
    for item in lost:
        who = f" to {item['claimed_by']}" if item.get("claimed_by") else ""
        messages.append(f"your claim of {item['task']} (as {item['worker']}) was lost{who} in a sync: "
                        f"the task is now {item['now']}; stop working on it")
    notices.remember(repo, messages)
