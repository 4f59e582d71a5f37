"""Property tests of a fleet: K replicas (up to 5) of one state apply random operations
(add, claim, done, fail, edit a title, start a session, dispatch a run) with clocks
skewed by up to an hour, and sync in random pairs the way `sync` does (a 3-way merge
against the best common ancestor of a commit graph, or a fast-forward).

- whatever pairs synced in whatever order, merging every replica's head in any order
  gives one state;
- two replicas never mint the same session or the same run; the sessions started
  fleet-wide are all kept and counted (max_sessions);
- a write made after seeing another one of the same field wins, however the writers'
  clocks are skewed (the hybrid logical clock, git_handoff.core.hlc).

Pure functions only (merge, hlc, the session and run numbering), so it is fast.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core.merge import merge_states, stamp_write
from git_handoff.ops.dispatch import next_seq, run_key
from git_handoff.state.session_records import count_session_start, sessions_started
from tests.support.speed import examples

T0_MS = 1_782_900_000_000  # 2026-07-01
HOUR_MS = 3_600_000
# sync: merge the other's head and push it there (a fast-forward); pull: merge the other's
# head only (each clone publishing its own ref and merging everyone's), which makes
# criss-cross histories with several best common ancestors
OPS = ("add", "claim", "done", "fail", "title", "session", "run", "sync", "pull", "pull")


def tpath(task_id: str) -> str:
    h = hashlib.sha1(task_id.encode()).hexdigest()
    return f"tasks/{h[0]}/{h[1]}/{task_id}.json"


def dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def iso(ms: int) -> str:
    seconds = ms // 1000
    return f"2026-07-01T{(seconds // 3600) % 24:02d}:{(seconds // 60) % 60:02d}:{seconds % 60:02d}Z"


@dataclass
class Commit:
    state: dict[str, bytes]
    parents: tuple[int, ...]
    # the title writes (ids) this state has seen, for the causal order
    seen: frozenset[str]
    ancestors: frozenset[int] = frozenset()


@dataclass
class Fleet:
    k: int
    skews: list[int]
    commits: list[Commit] = field(default_factory=list)
    heads: list[int] = field(default_factory=list)
    ticks: int = 0
    newest_base: bool = True
    sessions: list[tuple[int, str]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    title_writes: dict[str, tuple[str, str, frozenset[str]]] = field(default_factory=dict)  # id -> task, value, past

    def __post_init__(self) -> None:
        base = {"format": b"git-handoff-state 1\n",
                "meta.json": dump({"session_count": 0, "last_session": None})}
        for tid in ("a", "b"):
            base[tpath(tid)] = dump(new_task(tid, T0_MS))
        self.commits.append(Commit(base, (), frozenset(), frozenset({0})))
        self.heads = [0] * self.k

    def clone(self, r: int) -> str:
        return f"{r + 1:016x}"

    def now(self, r: int) -> int:
        self.ticks += 1
        return T0_MS + self.ticks * 1000 + self.skews[r]

    def commit(self, r: int, state: dict[str, bytes], seen: frozenset[str], *extra_parents: int) -> None:
        parents = (self.heads[r], *extra_parents)
        ancestors = frozenset({len(self.commits)}).union(*(self.commits[p].ancestors for p in parents))
        self.commits.append(Commit(state, parents, seen, ancestors))
        self.heads[r] = len(self.commits) - 1

    # -- local writes, stamped as Tx.put_task / Tx.put_json stamp them --------------------

    def write(self, r: int, state: dict[str, bytes], path: str, record: dict[str, Any]) -> dict[str, Any]:
        now = self.now(r)
        old = json.loads(state[path]) if path in state else None
        record = stamp_write(old, dict(record, updated_at=iso(now)), now, self.clone(r), task=path.startswith("tasks/"),
                             fields=path != "meta.json")
        state[path] = dump(record)
        return record

    def apply(self, r: int, op: str, pick: int) -> None:
        head = self.commits[self.heads[r]]
        state = dict(head.state)
        seen = head.seen
        tasks = sorted(p for p in state if p.startswith("tasks/"))
        target = tasks[pick % len(tasks)]
        task = json.loads(state[target])
        if op == "add":
            tid = f"t{len(self.commits)}-{r}"
            self.write(r, state, tpath(tid), new_task(tid, self.now(r)))
        elif op == "claim" and task["status"] in ("pending", "failed"):
            self.write(r, state, target, dict(task, status="in_progress", claimed_by=f"w{r}"))
        elif op == "done" and task["status"] == "in_progress":
            self.write(r, state, target, dict(task, status="completed", claimed_by=None,
                                              completed_at=iso(self.now(r))))
        elif op == "fail" and task["status"] == "in_progress":
            self.write(r, state, target, dict(task, status="failed", claimed_by=None, attempts=task["attempts"] + 1,
                                              error_log=[*task["error_log"], f"[{iso(self.now(r))}] failed by {r}"]))
        elif op == "title":
            write_id = f"w{len(self.title_writes)}"
            self.title_writes[write_id] = (target, f"title {write_id}", seen)
            self.write(r, state, target, dict(task, title=f"title {write_id}"))
            seen = seen | {write_id}
        elif op == "session":
            meta = json.loads(state["meta.json"])
            number = count_session_start(meta, self.clone(r))
            path = f"sessions/{number}@{self.clone(r)}.json"
            assert path not in state, f"session {number} of clone {self.clone(r)} minted twice"
            self.write(r, state, path, {"session": number, "clone": self.clone(r), "worker": f"w{r}"})
            self.write(r, state, "meta.json", meta)
            self.sessions.append((number, self.clone(r)))
        elif op == "run":
            names = sorted(p.split("/", 1)[1] for p in state if p.startswith("dispatch/"))
            seq = next_seq(names)
            key = run_key(seq, "fix", self.clone(r))
            assert f"dispatch/{key}.json" not in state
            self.write(r, state, f"dispatch/{key}.json", {"run_id": f"{seq:03d}-fix", "key": key, "seq": seq})
            self.runs.append(key)
        else:
            return
        self.commit(r, state, seen)

    # -- sync: fetch the other's head, merge against the best common ancestor -------------

    def best_bases(self, x: int, y: int) -> list[int]:
        common = self.commits[x].ancestors & self.commits[y].ancestors
        return sorted(c for c in common if not any(c != d and c in self.commits[d].ancestors for d in common))

    def merge_base(self, x: int, y: int) -> int:
        # of several (a criss-cross), one, as `git merge-base` gives one
        return self.best_bases(x, y)[-1 if self.newest_base else 0]

    def pull(self, r: int, theirs: int) -> None:
        ours = self.heads[r]
        base = self.merge_base(ours, theirs)
        if base == theirs:
            return
        if base == ours:
            self.heads[r] = theirs
            return
        merged, _ = merge_states(self.commits[base].state, self.commits[ours].state, self.commits[theirs].state)
        self.commit(r, merged, self.commits[ours].seen | self.commits[theirs].seen, theirs)

    def sync(self, r: int, other: int) -> None:
        self.pull(r, self.heads[other])
        self.heads[other] = self.heads[r]  # the push: a fast-forward of the other side

    def combine(self, order: list[int]) -> dict[str, bytes]:
        """Merge every replica's head, in `order`, into a scratch replica."""
        scratch = len(self.heads)
        self.heads.append(self.heads[order[0]])
        self.skews.append(0)
        try:
            for r in order[1:]:
                self.pull(scratch, self.heads[r])
            return self.commits[self.heads[scratch]].state
        finally:
            self.heads.pop()
            self.skews.pop()


def parsed(state: dict[str, bytes]) -> dict[str, Any]:
    """A state as values (this simulation writes keys in another order than the merge)."""
    return {p: (json.loads(v) if p.endswith(".json") else v) for p, v in state.items()}


def new_task(tid: str, ms: int) -> dict[str, Any]:
    return {"id": tid, "title": f"task {tid}", "status": "pending", "priority": "P1", "depends_on": [],
            "attempts": 0, "max_attempts": 3, "error_log": [], "checkpoints": [], "claimed_by": None,
            "created_at": iso(ms), "updated_at": iso(ms), "order": ms}


steps = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 4), st.integers(0, 7)), min_size=1, max_size=40)
skews = st.lists(st.sampled_from([-HOUR_MS, 0, HOUR_MS]), min_size=5, max_size=5)


def run_fleet(k: int, skew: list[int], plan: list[tuple[str, int, int]]) -> Fleet:
    fleet = Fleet(k, list(skew[:k]))
    for op, who, pick in plan:
        r = who % k
        if op == "sync":
            fleet.sync(r, (r + 1 + pick) % k if k > 1 else r)
        elif op == "pull":
            fleet.pull(r, fleet.heads[(r + 1 + pick) % k])
        else:
            fleet.apply(r, op, pick)
    return fleet


@settings(max_examples=examples(120), deadline=None)
@given(st.integers(1, 5), skews, steps, st.randoms(use_true_random=False))
def test_replicas_converge_whatever_the_order_of_syncs(k: int, skew: list[int], plan: list[tuple[str, int, int]],
                                                       rnd: random.Random) -> None:
    fleet = run_fleet(k, skew, plan)
    orders = [list(range(k)), list(reversed(range(k)))]
    shuffled = list(range(k))
    rnd.shuffle(shuffled)
    orders.append(shuffled)
    results = [fleet.combine(order) for order in orders]
    for other in results[1:]:
        assert parsed(other) == parsed(results[0])
    final = results[0]
    # nothing lost: every task any replica added, every session, every run
    added = {p for c in fleet.commits for p in c.state if p.startswith("tasks/")}
    assert added <= set(final)
    for number, clone in fleet.sessions:
        record = json.loads(final[f"sessions/{number}@{clone}.json"])
        assert record["clone"] == clone and record["session"] == number
    for key in fleet.runs:
        assert json.loads(final[f"dispatch/{key}.json"])["key"] == key
    # max_sessions counts every session started fleet-wide
    assert sessions_started(json.loads(final["meta.json"])) == len(fleet.sessions)


@settings(max_examples=examples(150), deadline=None)
@given(st.integers(2, 5), skews, steps)
def test_two_clones_never_mint_the_same_session_or_run(k: int, skew: list[int],
                                                       plan: list[tuple[str, int, int]]) -> None:
    fleet = run_fleet(k, skew, plan)
    assert len(set(fleet.sessions)) == len(fleet.sessions)
    assert len(set(fleet.runs)) == len(fleet.runs)
    # a clone's own numbers only grow
    for r in range(k):
        own = [n for n, c in fleet.sessions if c == fleet.clone(r)]
        assert own == sorted(set(own))


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(2, 5), skews, steps, st.randoms(use_true_random=False))
def test_a_skewed_clock_never_beats_the_causal_order(k: int, skew: list[int], plan: list[tuple[str, int, int]],
                                                     rnd: random.Random) -> None:
    fleet = run_fleet(k, skew, plan)
    order = list(range(k))
    rnd.shuffle(order)
    final = fleet.combine(order)
    for path, raw in final.items():
        if not path.startswith("tasks/"):
            continue
        title = json.loads(raw)["title"]
        winner = title.removeprefix("title ")
        if winner not in fleet.title_writes:
            continue  # never edited
        # the value kept is not one that another write of this task's title saw and overwrote
        for later, (task_path, _, past) in fleet.title_writes.items():
            assert not (task_path == path and winner in past), (
                f"{path}: kept {winner}, which {later} saw and overwrote")


def test_an_edit_after_seeing_the_other_wins_with_a_clock_an_hour_behind() -> None:
    fleet = Fleet(2, [0, -HOUR_MS])
    fleet.apply(0, "title", 0)  # clone 1 edits (its clock is right)
    fleet.sync(1, 0)  # clone 2 sees it
    fleet.apply(1, "title", 0)  # and edits after it, its clock an hour behind
    fleet.apply(0, "claim", 0)  # clone 1 goes on with the task meanwhile
    final = fleet.combine([0, 1])
    task = json.loads(final[sorted(p for p in final if p.startswith("tasks/"))[0]])
    assert task["title"] == "title w1" and task["status"] == "in_progress"


@pytest.mark.parametrize("newest_base", [True, False])
def test_criss_cross_an_edit_after_seeing_the_other_wins_with_a_clock_an_hour_behind(newest_base: bool) -> None:
    """Two clones merge each other's published state at once (a criss-cross: two best
    common ancestors, one of them without the first title). Clone 2, its clock an hour
    behind, edits the title after seeing clone 1's; clone 1 then goes on with the task
    (a later wall-clock write of the record). Whichever base the merge takes, clone 2's
    title wins: it was written after the one it replaced."""
    fleet = Fleet(2, [0, -HOUR_MS], newest_base=newest_base)
    fleet.apply(0, "title", 0)  # clone 1: title w0
    fleet.apply(1, "add", 0)  # clone 2: something else
    a1, b1 = fleet.heads
    fleet.pull(0, b1)  # each merges the other's published head
    fleet.pull(1, a1)
    assert len(fleet.best_bases(fleet.heads[0], fleet.heads[1])) == 2
    fleet.apply(1, "title", 0)  # clone 2 saw w0 and writes w1, with a clock an hour behind
    fleet.apply(0, "claim", 0)  # clone 1 claims the task (its record's time moves on)
    for order in ([0, 1], [1, 0]):
        final = fleet.combine(order)
        task = json.loads(final[tpath("a")])
        assert task["title"] == "title w1" and task["status"] == "in_progress"


# -- the claim's pick in a fleet -------------------------------------------------------


def _eligible(n_p0: int, n_p1: int) -> list[Any]:
    from git_handoff.core.model import Task

    tasks = [Task(id=f"a{i}", title="t", priority="P0", order=i) for i in range(n_p0)]
    tasks += [Task(id=f"b{i}", title="t", priority="P1", order=n_p0 + i) for i in range(n_p1)]
    return tasks


@settings(max_examples=examples(150), deadline=None)
@given(n_p0=st.integers(0, 40), n_p1=st.integers(0, 40), clones=st.integers(1, 24),
       gone=st.sets(st.integers(0, 79), max_size=30), a=st.integers(0, 23), b=st.integers(0, 23))
def test_clones_never_want_the_same_task_while_their_slots_last(n_p0: int, n_p1: int, clones: int,
                                                               gone: set[int], a: int, b: int) -> None:
    """The claim's pick in a fleet (ops.claim_plan._slot_pick): two clones of different rank,
    one looking at the state and one at a later view with some tasks claimed (`gone`),
    never want the same task while each still has eligible tasks in its own slot; a pick
    is never of a worse priority than the best eligible; alone, a clone takes the first."""
    from git_handoff.ops.claim_plan import _slot_of, _slot_pick

    found = _eligible(n_p0, n_p1)
    later = [t for n, t in enumerate(found) if n not in gone]
    a, b = a % clones, b % clones
    if not found or not later:
        return
    for view in (found, later):
        best = view[0].priority
        for rank in range(clones):
            assert _slot_pick(view, (rank, clones)).priority == best
    assert _slot_pick(found, (0, 1)) is found[0]

    def own(view: list[Any], rank: int) -> bool:
        return any(t.priority == view[0].priority and _slot_of(t.id, clones) == rank for t in view)

    if a != b and own(found, a) and own(later, b):
        for _ in range(5):
            assert _slot_pick(found, (a, clones)).id != _slot_pick(later, (b, clones)).id


def test_a_merge_whose_base_predates_the_record_keeps_both_changes() -> None:
    """A criss-cross (found by the property above): replica 0 claims t2-0, replica 3 edits
    its title without having seen the claim, and one merge order reaches them through a
    merge base older than the task. The title edit's later stamp must not carry the
    task's never-changed claim fields over the claim: every order keeps both changes."""
    plan = [("add", 0, 0), ("add", 0, 0), ("add", 1, 0), ("sync", 0, 2), ("pull", 3, 2),
            ("claim", 0, 2), ("title", 3, 2)]
    fleet = run_fleet(5, [-HOUR_MS] * 5, plan)
    results = {json.dumps(parsed(fleet.combine(list(order))), sort_keys=True, default=bytes.decode)
               for order in itertools.permutations(range(5))}
    assert len(results) == 1
    final = parsed(fleet.combine([0, 1, 2, 3, 4]))[tpath("t2-0")]
    assert (final["status"], final["claimed_by"], final["title"]) == ("in_progress", "w0", "title w0")
