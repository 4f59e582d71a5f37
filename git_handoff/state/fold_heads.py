"""Merging many remote state heads into ours at a cost that grows with what they
changed, not with how many there are (part of `git handoff sync`).

A fleet's remote holds one state head per clone. Merging them one after another into an
accumulated commit made every step cost more than the last: the merge base of the
accumulated commit (whose parents were every head merged so far), its diff against the
base, and the commit counts all walked what the earlier heads brought, so 1,000 heads took
33 s and wrote a merge commit with 1,001 parents. Here:

- each head's merge base is computed against ours and only those heads merged before it
  that share commits with it (`git merge-base` of the head with their hypothetical
  merge: the same common ancestors as against the accumulated commit, without walking
  the unrelated heads);
- what ours holds at each path the head changed is looked up (the merged tree plus the
  changes so far), not diffed over the whole accumulated tree;
- the result is written as a chain of merge commits with at most MAX_PARENTS parents
  each (the first: the previous link, or ours), each holding the merged tree so far and
  the SYNC lines of its heads: every head stays an ancestor (so the next sync finds it
  merged), and no commit has thousands of parents. Up to MAX_PARENTS - 1 new heads (any
  fleet but the largest) it is one commit, as before.
- which heads our state already contains is remembered (HeadsCache), so a sync that
  finds nothing new does not ask the ancestry of every clone's head again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypedDict

from git_handoff.core import ancestry, field_merge, merge, state_tree
from git_handoff.core.errors import InvalidState
from git_handoff.infra import signing
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.store import StateStore, format_log_line

MAX_PARENTS = 16
MAX_CONFLICT_LINES = 200  # SYNC lines per head merged; the --json summary lists every one


def task_record(raw: bytes | None) -> dict[str, object] | None:
    """A task blob as a JSON object with an id, or None (absent or unreadable)."""
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "id" in data else None


def readable(path: str, result: merge.MergedFile, ours: bytes | None, theirs: bytes | None) -> merge.MergedFile:
    """`result`, whose record the edge (git_handoff.core.state_tree) accepts when both sides' did:
    the merge keeps every limit it knows of (git_handoff.core.merge); should a merged record
    still break a rule of its parser that neither side broke alone, the record of one side,
    whole (merge.pick_record: written last wins, the same on every clone). Otherwise this
    clone would publish a state every other clone refuses, and itself fail to read it."""
    if result.data is None or ours is None or theirs is None or result.data in (ours, theirs):
        return result
    kind = state_tree.kind_of(path)
    if kind is None:
        return result
    try:
        state_tree.check_record(path, result.data, kind)
        return result
    except InvalidState:
        pass
    try:
        state_tree.check_record(path, ours, kind)
        state_tree.check_record(path, theirs, kind)
    except InvalidState:
        return result  # a side the edge refuses already: nothing the merge made
    return merge.pick_record(path, ours, theirs)


def short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


class View:
    """A state tree with changes not written yet: {path: blob oid, new bytes, or None}."""

    def __init__(self, repo: Repo, tree: str) -> None:
        self.repo = repo
        self.tree = tree
        self.changes: dict[str, str | bytes | None] = {}

    def get(self, path: str) -> str | bytes | None:
        if path in self.changes:
            return self.changes[path]
        found = self.repo.tree_lookup(self.tree, path)
        return found[0] if found is not None and not found[1] else None

    def data(self, value: str | bytes | None) -> bytes | None:
        return self.repo.read_blob(value) if isinstance(value, str) else value

    def write(self) -> str:
        """The tree with every change so far (new records written as one pack)."""
        if not self.changes:
            return self.tree
        fresh = [path for path, value in self.changes.items() if isinstance(value, bytes)]
        oids = self.repo.write_blobs([self.changes[path] for path in fresh])  # type: ignore[misc]  # fresh: the paths whose value is bytes
        blobs: dict[str, str | None] = {p: v for p, v in self.changes.items() if not isinstance(v, bytes)}
        blobs.update(zip(fresh, oids, strict=True))
        self.tree = self.repo.update_tree(self.tree, blobs)
        self.changes = {}
        return self.tree


def merge_onto(view: View, diff: dict[str, tuple[str | None, str | None]]
               ) -> tuple[dict[str, str | bytes | None], list[field_merge.Conflict]]:
    """What to change in `view` to merge a head that changed `diff` ({path: (base blob,
    its blob)}) since the merge base: only the paths it changed are read and merged."""
    changes: dict[str, str | bytes | None] = {}
    conflicts: list[field_merge.Conflict] = []
    for path in sorted(diff):
        old, new = diff[path]
        mine = view.get(path)
        if mine == old:
            changes[path] = new
            continue
        if mine == new:
            continue
        mine_data = view.data(mine)
        theirs_data = view.data(new)
        result = readable(path, merge.merge_file(path, view.data(old), mine_data, theirs_data), mine_data,
                          theirs_data)
        conflicts.extend(result.conflicts)
        if result.data != mine_data:
            changes[path] = result.data
    return changes, conflicts


def lost_claims(view: View, changes: dict[str, str | bytes | None]) -> list[merge.LostClaim]:
    """Claims `view` holds (before `changes`) that `changes` give away."""
    held: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for path, value in changes.items():
        if not path.startswith(merge.TASK_PREFIX):
            continue
        raw = view.data(view.get(path))
        if raw is None or b'"in_progress"' not in raw:
            continue
        before = task_record(raw)
        if before is None:
            continue
        held[str(before["id"])] = before
        now = task_record(view.data(value))
        if now is not None:
            after[str(now["id"])] = now
    return merge.lost_claims(held, after) if held else []


class FoldReport(TypedDict):
    """What fold brought in: commits, the field conflicts, the claims lost to them."""

    incoming: int
    conflicts: list[field_merge.ConflictJson]
    claims_lost: list[merge.LostClaim]


class Ancestry:
    """What fold asks of each head's history, answered from `graph` (the commits the heads
    hold that `ours` lacks, git_handoff.core.ancestry) with one walk per distinct place
    where heads meet ours, not several walks per head. `first`: where the fold starts (ours,
    or a head that holds it)."""

    def __init__(self, repo: Repo, graph: ancestry.Graph, ours: str | None, first: str) -> None:
        self.repo, self.graph, self.ours, self.first = repo, graph, ours, first
        self.in_first = ancestry.closure(graph, first)

    def brought(self, theirs: str) -> set[str]:
        """The commits `theirs` has that first has not (`git rev-list theirs ^first`)."""
        return ancestry.closure(self.graph, theirs) - self.in_first

    def base(self, theirs: str, brought: set[str]) -> str | None:
        """The merge base of first and `theirs` (which shares no new commit with another head)."""
        meets = ancestry.boundary(self.graph, brought)
        if self.first == self.ours and len(meets) == 1:
            return next(iter(meets))  # one commit of ours under all it brings: the best common ancestor
        return self.repo.merge_base(self.first, theirs)


def fold(store: StateStore, first: str, todo: list[tuple[str, str]],
         diff: Callable[[str | None, str], dict[str, tuple[str | None, str | None]]],
         history: Ancestry) -> tuple[str, FoldReport]:
    """Merge the heads of `todo` ([(label, commit)], none in `first`) onto `first`: the last
    commit of the chain, and {incoming, conflicts, claims_lost}. `diff(a, b)` is the tree
    diff to use (remembered by the caller); `history` answers the ancestry."""
    repo = store.repo
    view = View(repo, repo.commit_tree(first))
    brought: dict[str, int] = {}  # commit -> the index of the head that brought it first
    merged: list[str] = []
    out: FoldReport = {"incoming": 0, "conflicts": [], "claims_lost": []}
    links: list[tuple[list[str], dict[str, str | bytes | None], str]] = []
    parents: list[str] = []
    lines: list[str] = []
    since: dict[str, str | bytes | None] = {}  # what changed since the last link
    for k, (label, theirs) in enumerate(todo):
        new = history.brought(theirs)
        related = sorted({brought[oid] for oid in new if oid in brought})
        if related:
            base = repo.merge_base_many([theirs, first, *(merged[i] for i in related)])
        else:
            base = history.base(theirs, new)
        incoming = sum(1 for oid in new if oid not in brought)
        for oid in new:
            brought.setdefault(oid, k)
        merged.append(theirs)
        changes, conflicts = merge_onto(view, diff(repo.commit_tree(base) if base else None, repo.commit_tree(theirs)))
        lost = lost_claims(view, changes)
        view.changes.update(changes)
        since.update(changes)
        lines.append(format_log_line(store.session, "SYNC",
                                     f"merged {label}: in={incoming} conflicts={len(conflicts)}"))
        for c in conflicts[:MAX_CONFLICT_LINES]:
            lines.append(format_log_line(store.session, "SYNC", f"conflict {c.field}: kept {short(c.kept)} "
                                         f"over {short(c.dropped)}", task=c.record))
        if len(conflicts) > MAX_CONFLICT_LINES:
            lines.append(format_log_line(store.session, "SYNC",
                                         f"... and {len(conflicts) - MAX_CONFLICT_LINES} more conflict(s)"))
        for item in lost:
            lines.append(format_log_line(store.session, "SYNC", f"claim of {item['worker']} lost (now {item['now']}"
                                         + (f" by {item['claimed_by']})" if item.get("claimed_by") else ")"),
                                         task=item["task"]))
        out["incoming"] += incoming
        out["conflicts"].extend(c.to_json() for c in conflicts)
        out["claims_lost"].extend(lost)
        parents.append(theirs)
        if len(parents) == MAX_PARENTS - 1 or k == len(todo) - 1:
            links.append((parents, since, "\n".join(lines) + "\n"))
            parents, lines, since = [], [], {}
    return _write_chain(store, view, first, links), out


def _write_chain(store: StateStore, view: View, first: str,
                 links: list[tuple[list[str], dict[str, str | bytes | None], str]]) -> str:
    """Write the links of a fold ((other parents, changes since the link before, message),
    the first on `first`) and seal each as this clone's: the last commit. A chain of
    several links is written by one `git fast-import` (a tree and a commit per link in
    one pack, not thousands of loose objects); one link, or links a signature will
    rewrite (each signed commit is the parent of the next), one at a time in-process."""
    repo = store.repo
    if len(links) > 1 and signing.signing_key(repo) is None:
        return [store.seal(c) for c in repo.commit_chain(first, links)][-1]
    link = first
    view.tree, view.changes = repo.commit_tree(first), {}
    for merges, changes, message in links:
        view.changes = changes
        link = store.seal(repo.create_commit(view.write(), [link, *merges], message))
    return link


class HeadsCache:
    """The remote heads a state commit of ours is known to contain (private, per clone):
    valid while our state is that commit or a descendant of it (it only moves forward)."""

    def __init__(self, repo: Repo, name: str) -> None:
        self.repo = repo
        self.path = repo.handoff_dir / f"merged-heads-{name}.json"

    def known(self, ours: str | None) -> set[str]:
        if ours is None:
            return set()
        try:
            data = json.loads(self.path.read_text())
            tip, heads = data["tip"], data["heads"]
        except (OSError, ValueError, KeyError, TypeError):
            return set()
        if not isinstance(tip, str) or not isinstance(heads, list):
            return set()
        if tip != ours and not (self.repo.has_object(tip) and self.repo.is_ancestor(tip, ours)):
            return set()
        return {h for h in heads if isinstance(h, str)}

    def remember(self, tip: str | None, heads: list[str]) -> None:
        if tip is None:
            return
        try:
            atomic_write(self.path, json.dumps({"tip": tip, "heads": sorted(set(heads))}) + "\n")
        except OSError:
            pass  # a cache: the next sync asks again
