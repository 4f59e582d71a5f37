"""Who wrote each record of the state (a task, a handoff document, a session record, the
config), judged through the state's history for handoff.allowedSigners
(git_handoff.state.writers says what a verdict does; docs/allowed-signers.md has the rules).

The writer of a record is the writer of the commit that introduced its content, not of
whichever commit last carried it. Walking the history from its roots (or from the
baseline), each commit's verdict ({record path: the unapproved writer of its content})
is derived from its parents':

- a record a parent holds unchanged keeps that parent's verdict (approved when any
  parent holding it is approved: the same bytes an approved writer published);
- a one-parent commit by an unapproved writer makes every record it changed that
  writer's;
- a one-parent commit by an approved writer makes a task it changed its own only when it
  changed what the task asks (`DEFINITION`): a claim, a release, a renewal, a
  checkpoint, a failure, a reopening (and the selection failing a dependent) move only
  the run's fields, and a rename or a `rm --force` rewrites a dependent's `depends_on`
  only to follow the task renamed or removed in the same commit; those keep the task's
  writer. A renamed task keeps the writer of the record it was renamed from. A
  document, session record or config an unapproved writer changed stays that writer's
  whoever changes it afterwards, until it is deleted (this clone changes those as a side
  effect of other commands);
- a record a merge wrote new (a 3-way merge of both sides, a sync's fold) is approved
  when the merge's writer is and every side it merged was approved; otherwise it keeps
  the first unapproved side's writer;
- a commit at a shallow cut (or one whose parents are not here) hides where its records
  came from: each record it holds that no held, approved parent holds unchanged is
  judged unapproved (`UNKNOWN`, or the commit's own unapproved writer), never approved.
  A sync fetches the history first (git_handoff.remote.fetch), so a shallow join and a
  full one give the same verdicts.

Verdicts are cached per commit (.git/handoff/writers-cache.pickle), keyed by the
allowed-signers file's bytes, the approved keys, the baseline and the shallow cut.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

from git_handoff.infra import signing
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.snapshot import CONFIG_PATH, TASKS_DIR
from git_handoff.state.snapshot import task_id_of as task_id

CACHE_FILE = "writers-cache.pickle"
CACHE_VERSION = 3  # 1 judged tasks only; 2 made the carrier of any change the writer
CACHE_MAX_COMMITS = 200_000  # past it the cache starts again (only slower)
UNKNOWN = "unknown (history below a shallow cut not fetched)"

Verdict = dict[str, str]  # record path -> who wrote its content (an unapproved writer)
Diff = dict[str, tuple[str | None, str | None]]  # record path -> (old blob, new blob)
EMPTY: Verdict = {}
TASKS = TASKS_DIR + "/"
_STICKY = ("docs/", "sessions/")  # and CONFIG_PATH: see the module's docstring
# What a task asks, as its file names it: the fields whose change is a writer's edit of
# the task. Everything else is the run's (status, attempts, the claim, checkpoints, the
# error log, completion, reopening, the merge's clocks) or a field this version does not
# know: an approved writer changing only those leaves the task its writer's.
DEFINITION = ("id", "title", "priority", "depends_on", "max_attempts", "validation", "on_failure", "spec_ref",
              "order", "created_at")


def judged(path: str) -> bool:
    """The records whose writer counts: tasks, handoff documents, session records, config."""
    return path == CONFIG_PATH or (path.endswith(".json") and path.startswith((TASKS, *_STICKY)))


def _sticky(path: str) -> bool:
    return path == CONFIG_PATH or path.startswith(_STICKY)


def shallow_cut(repo: Repo) -> frozenset[str]:
    """The commits at this repository's shallow cut (`<git dir>/shallow`): they show no parents."""
    try:
        text = (repo.common_dir / "shallow").read_text()
    except OSError:
        return frozenset()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


class Judge:
    """Verdicts of state commits, from a cache and the history. `approvals`: the baseline
    and the keys approved here (git_handoff.state.writers.approvals)."""

    def __init__(self, repo: Repo, allowed: Path, approvals: dict[str, Any]) -> None:
        self.repo = repo
        self.allowed = allowed
        self.baseline: str | None = approvals.get("baseline")
        self.keys = {k for k in approvals["keys"] if isinstance(k, str)}
        self.cut = shallow_cut(repo)
        try:
            content = allowed.read_bytes()
        except OSError:
            content = b"(absent)"
        self.key = hashlib.sha256(repr((content, sorted(self.keys), self.baseline, sorted(self.cut))).encode()
                                  ).hexdigest()
        self.sigs: dict[str, tuple[str, str]] = {}
        self.verdicts: dict[str, Verdict] = {}
        self.dirty = False
        self._own: set[str] | None = None
        self._baseline_time: int | None = None
        self._load()

    # -- the cache ---------------------------------------------------------------------

    def _load(self) -> None:
        try:
            with open(self.repo.handoff_dir / CACHE_FILE, "rb") as fh:
                data = pickle.load(fh)
        except Exception:  # noqa: BLE001 - a missing or damaged cache is only slower
            return
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION and data.get("key") == self.key:
            self.sigs = data["sigs"]
            self.verdicts = data["verdicts"]

    def save(self) -> None:
        if not self.dirty:
            return
        if len(self.verdicts) > CACHE_MAX_COMMITS:
            self.verdicts, self.sigs = {}, {}
        blob = pickle.dumps({"version": CACHE_VERSION, "key": self.key, "sigs": self.sigs,
                             "verdicts": self.verdicts}, protocol=4)
        try:
            atomic_write(self.repo.handoff_dir / CACHE_FILE, blob)
        except OSError:
            pass  # a cache: the next command verifies again

    # -- the history ---------------------------------------------------------------------

    @property
    def own(self) -> set[str]:
        if self._own is None:
            self._own = signing.own_commits(self.repo)
        return self._own

    def _in_baseline(self, commit: str) -> bool:
        """`commit` is the baseline or one of its ancestors. Only commits no newer than the
        baseline are asked (a commit's time is its writer's word: a wrong one costs a walk,
        or judges a baseline commit by its signature, never approves anything more)."""
        if self.baseline is None:
            return False
        if commit == self.baseline:
            return True
        repo = self.repo
        if not repo.has_object(self.baseline):
            return False
        if self._baseline_time is None:
            self._baseline_time = repo.commit_info(self.baseline)[2]
        if repo.commit_info(commit)[2] > self._baseline_time:
            return False
        return repo.is_ancestor(commit, self.baseline)

    def of(self, head: str) -> Verdict:
        if head in self.verdicts:
            return self.verdicts[head]
        order = self._unjudged(head)
        need = [c for c in order if c not in self.own and c not in self.sigs]
        if need:
            self.sigs.update(signing.verify(self.repo, need, self.allowed))
        for commit in order:
            self.verdicts[commit] = self._judge(commit)
        self.dirty = True
        return self.verdicts[head]

    def _unjudged(self, head: str) -> list[str]:
        """The commits behind `head` with no verdict yet, parents before children
        (iterative: a history is as deep as it is)."""
        order: list[str] = []
        expanded: set[str] = set()
        done: set[str] = set()
        stack = [head]
        while stack:
            commit = stack[-1]
            if commit in self.verdicts or commit in done:
                stack.pop()
                continue
            if commit not in expanded:
                expanded.add(commit)
                if self._in_baseline(commit):
                    self.verdicts[commit] = EMPTY
                    stack.pop()
                    continue
                stack.extend(p for p in self._parents(commit)[0] if p not in self.verdicts and p not in done)
                continue
            stack.pop()
            done.add(commit)
            order.append(commit)
        return order

    def _parents(self, commit: str) -> tuple[list[str], bool]:
        """The parents of `commit` this clone holds, and whether some are hidden (a commit at
        the shallow cut, or a parent that is not here)."""
        repo = self.repo
        found = repo.object_kind(commit)
        if found is None or found[0] != "commit":
            return [], True
        held, hidden = [], commit in self.cut
        for parent in repo.commit_parents(commit):
            kind = repo.object_kind(parent)
            if kind is not None and kind[0] == "commit":
                held.append(parent)
            else:
                hidden = True
        return held, hidden

    def _writer(self, commit: str) -> str | None:
        """None when the commit's writer is approved, else who it is."""
        if commit in self.own:
            return None
        status, key = self.sigs.get(commit, ("E", ""))
        if status == signing.GOOD or (status == signing.UNKNOWN and key in self.keys):
            return None
        if status == signing.UNSIGNED:
            return "unsigned"
        if status == signing.UNKNOWN:
            return f"key {key}"
        if status == signing.BAD:
            return f"bad signature (key {key})" if key else "bad signature"
        return f"unverifiable signature ({status}{' key ' + key if key else ''})"

    def _diff(self, a: str | None, b: str) -> Diff:
        """The judged records that differ between the trees of commits `a` (None: none) and `b`."""
        repo = self.repo
        return {p: v for p, v in repo.tree_diff(repo.commit_tree(a) if a else None, repo.commit_tree(b)).items()
                if judged(p)}

    # -- one commit ----------------------------------------------------------------------

    def _judge(self, commit: str) -> Verdict:
        writer = self._writer(commit)
        held, hidden = self._parents(commit)
        parents = [p for p in held if p in self.verdicts]
        if hidden or len(parents) < len(held):
            return self._judge_cut(commit, writer, parents)
        if not parents:
            return dict.fromkeys(self._diff(None, commit), writer) if writer is not None else EMPTY
        if len(parents) == 1:
            return self._judge_change(commit, writer, parents[0])
        return self._judge_merge(commit, writer, parents)

    def _judge_cut(self, commit: str, writer: str | None, parents: list[str]) -> Verdict:
        """A commit whose parents are not all here: what it holds that no approved parent
        here holds unchanged came from history this clone has not seen."""
        who = writer or UNKNOWN
        out: Verdict = {}
        diffs = [(self._diff(parent, commit), self.verdicts[parent]) for parent in parents]
        for path in self._diff(None, commit):
            holders = [before.get(path) for diff, before in diffs if path not in diff]
            if any(h is None for h in holders):
                continue  # the same bytes an approved parent holds
            out[path] = next((h for h in holders if h is not None), who)
        return out or EMPTY

    def _judge_change(self, commit: str, writer: str | None, parent: str) -> Verdict:
        """A one-parent commit (see the module's docstring)."""
        before, diff = self.verdicts[parent], self._diff(parent, commit)
        if not diff or (writer is None and not any(p in before for p in diff)):
            return before
        if writer is None:
            return self._approved_change(before, diff)
        after = dict(before)
        for path, (_old, new) in diff.items():
            if new is None:
                after.pop(path, None)
            else:
                after[path] = writer
        return after or EMPTY

    def _approved_change(self, before: Verdict, diff: Diff) -> Verdict:
        """An approved writer's one-parent commit: which marked records it made its own."""
        after = dict(before)
        gone = {task_id(p) for p, (old, new) in diff.items() if p.startswith(TASKS) and new is None}
        born = {task_id(p) for p, (old, new) in diff.items() if p.startswith(TASKS) and old is None}
        renamed = self._renamed(diff, before) if gone and born else {}
        for path, (old, new) in diff.items():
            if new is None:
                after.pop(path, None)
            elif path in renamed:
                after[path] = renamed[path]
            elif _sticky(path) or path not in before:
                continue
            elif old is None or not self._runs_only(old, new, gone, born):
                after.pop(path)  # an approved writer's edit of what the task asks: its own
        return after or EMPTY

    def _runs_only(self, old: str, new: str, gone: set[str], born: set[str]) -> bool:
        """Whether task blob `new` differs from `old` only in the run's fields, and in
        `depends_on` only by following tasks removed (`gone`) or added (`born`, a rename's
        new id) in the same commit."""
        a, b = self._record(old), self._record(new)
        if a is None or b is None:
            return False
        if any(a.get(k) != b.get(k) for k in DEFINITION if k != "depends_on"):
            return False
        da, db = a.get("depends_on"), b.get("depends_on")
        if not isinstance(da, list) or not isinstance(db, list):
            return da == db
        try:
            return set(da) - set(db) <= gone and set(db) - set(da) <= born
        except TypeError:  # an unhashable entry: not a list of ids
            return False

    def _renamed(self, diff: Diff, before: Verdict) -> Verdict:
        """{new task path: writer} for each task this commit added whose definition, but for
        its id, is that of a task it removed which an unapproved writer wrote: a rename."""
        removed: list[tuple[dict[str, Any], str]] = []
        for path, (old, new) in diff.items():
            if path.startswith(TASKS) and new is None and old is not None and path in before:
                found = self._record(old)
                if found is not None:
                    removed.append(({k: found.get(k) for k in DEFINITION if k != "id"}, before[path]))
        out: Verdict = {}
        for path, (old, new) in diff.items():
            if not (path.startswith(TASKS) and old is None and new is not None):
                continue
            made = self._record(new)
            if made is None:
                continue
            shape = {k: made.get(k) for k in DEFINITION if k != "id"}
            who = next((w for definition, w in removed if definition == shape), None)
            if who is not None:
                out[path] = who
        return out

    def _record(self, blob: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.repo.read_blob(blob))
        except (ValueError, RecursionError, KeyError):
            return None
        return data if isinstance(data, dict) else None

    def _judge_merge(self, commit: str, writer: str | None, parents: list[str]) -> Verdict:
        """A merge: each record as its sides had it (see the module's docstring)."""
        diffs = [(self._diff(parent, commit), self.verdicts[parent]) for parent in parents]
        candidates: set[str] = set()
        for diff, before in diffs:
            candidates.update(before)
            candidates.update(diff)
        out: Verdict = {}
        for path in candidates:
            who = self._merged(path, writer, diffs)
            if who is not None:
                out[path] = who
        return out or EMPTY

    @staticmethod
    def _merged(path: str, writer: str | None, diffs: list[tuple[Diff, Verdict]]) -> str | None:
        """The unapproved writer of the record at `path` after a merge (None: approved, or absent)."""
        sides = []  # (the parent's blob at path, or "=" when the merge holds it unchanged; its verdict)
        mine: str | None = None
        for diff, before in diffs:
            if path in diff:
                old, mine = diff[path]
                sides.append((old, before.get(path)))
            else:
                sides.append(("=", before.get(path)))
        if mine is None and all(old == "=" for old, _ in sides):
            mine = "="  # unchanged against every parent
        if mine is None:
            return None  # not in this commit
        holders = [who for old, who in sides if old in ("=", mine)]
        if holders:
            return None if any(who is None for who in holders) else holders[0]
        contributed = [who for old, who in sides if old is not None and who is not None]
        return writer if writer is not None else (contributed[0] if contributed else None)
