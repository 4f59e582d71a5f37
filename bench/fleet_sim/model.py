"""A discrete-event model of git handoff's fleet protocol (the code it follows:
git_handoff/ops/claim.py, ops/sync.py, ops/fleet_claims.py, ops/retire.py,
state/integrate.py, state/fold_heads.py, remote/transport.py, remote/tracked.py).

What is modelled, per clone (a machine's clone of the one remote):

- `claim --remote` (sync.transact_remote): fetch every ref under refs/harness/ (the
  server advertises them all: ls-refs), merge the state heads that moved since the last
  fetch (one fold, cost growing with the heads), pick a task (claim_plan._slot_pick: a hash
  of the task id modulo the publishing clones; the clone's rank among them), then ONE
  atomic push: the claim ref refs/harness/claims/<task> by compare-and-swap against what
  the fetch saw (absent, or an expired claim taken over) and the clone's own state ref.
  A push refused because a ref moved (MOVED) starts again at once; a ref the server
  could not lock (LOCKED) waits transport.backoff first; 30 tries, then exit 3.
- `done` (local: one state commit; a claim whose lease is over moves its claim ref by
  compare-and-swap, and is refused if another clone took the task over).
- `sync` (sync._round): fetch, merge, push this clone's state and notes, delete the
  claim refs of its finished claims (and any claim ref dead for DEAD_CLAIM_SECONDS), and
  - only in a round where the remote already has this clone's state as it is locally -
  the state and notes refs of clones contained in it and older than retireAfter
  (ops/retire.py). 8 tries with backoff.
- the server: a CPU shared by upload-pack and receive-pack, a ref transaction that holds
  each ref's lock for a moment (a concurrent push on the same ref fails LOCKED), and
  deletions that rewrite packed-refs under its lock (git waits up to 1 s for it).

What a clone sees of the state is exact under the protocol's own rule that every fetch
merges every state head the remote holds and that the merge is a join: a clone's view
of a task after fetching at time t is the last record published (reached the remote in
a state ref) at or before t, or its own unpublished record. So the model keeps one
timeline per task instead of a commit graph, and counts commits, heads and bytes.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench.fleet_sim.engine import CPU, Sim

PENDING, IN_PROGRESS, COMPLETED = 0, 1, 2
MAX_PARENTS = 16  # state/fold_heads.py: a merge commit takes at most 15 new heads
CLAIM_TRIES = 30  # sync.transact_remote
SYNC_TRIES = 8  # sync.PUSH_TRIES
PACKED_REFS_TIMEOUT = 1.0  # git's core.packedRefsTimeout: a deletion waits this long for packed-refs.lock


@dataclass(frozen=True)
class Params:
    """Costs, in seconds of one core, seconds of wall time, and bytes. The defaults are
    placeholders; bench/fleet_sim/calibration.json holds the calibrated values."""

    cpu_start: float = 0.15  # a `git handoff` process starting (python, pygit2, click)
    cpu_claim: float = 0.30  # the rest of a claim with no new head (fetch client, fleet view, commit, push)
    cpu_claim_head: float = 0.01  # per state head merged (the fold, its ancestry and edge checks)
    cpu_sync: float = 0.25
    cpu_sync_head: float = 0.01
    cpu_done: float = 0.25
    cpu_commit: float = 0.012  # `git add -A && git commit` of the work loop
    cpu_per_ref: float = 0.00005  # client, per ref the server advertises (compared against staging)
    # per command, the wall time that is neither CPU nor network (waits on pipes, disk, the
    # loopback server's replies beyond its CPU): measured at K = 1 as wall - CPU
    wall_claim: float = 0.05
    wall_done: float = 0.05
    wall_sync: float = 0.05
    wall_commit: float = 0.01
    rtt: float = 0.0  # one network round trip
    rtts_fetch: float = 2.0  # round trips of one fetch (connect + ls-refs + fetch)
    rtts_push: float = 2.0  # of one push (connect + advertisement + pack and report)
    srv_fetch: float = 0.02  # upload-pack with nothing much to send
    srv_push: float = 0.02  # receive-pack
    srv_per_commit: float = 0.001  # packing one new state commit for a fetch
    srv_per_ref: float = 0.00002  # advertising one ref
    ref_lock_hold: float = 0.003  # a ref transaction holds its refs' locks this long
    packed_rewrite: float = 0.002  # rewriting packed-refs (a deletion), plus per ref below
    packed_rewrite_per_ref: float = 0.000001
    bytes_per_commit: float = 1500.0  # a state commit with its tree and blob, packed on the wire
    bytes_per_ref: float = 80.0  # one ref advertised
    bandwidth: float = 12.5e6  # bytes/s of a clone's link (100 Mbit/s)
    lease: float = 1800.0  # claims.DEFAULT_LEASE_SECONDS
    dead_claim: float = 24 * 3600.0  # fleet_claims.DEAD_CLAIM_SECONDS
    retire_after: float = 7 * 24 * 3600.0  # retire.RETIRE_AFTER_SECONDS
    notes_per_done: bool = True  # `done` writes a note: sync pushes the notes ref


@dataclass
class Stats:
    completed: int = 0
    claims: int = 0
    claim_pushes: int = 0  # pushes inside claim commands (retries = pushes - claims)
    claim_moved: int = 0  # pushes refused: a ref moved (another clone took the task)
    claim_locked: int = 0  # pushes refused: the server could not lock a ref
    claim_exit3: int = 0  # claim commands that gave up after CLAIM_TRIES
    claims_empty: int = 0  # claim commands that found nothing eligible (exit 1)
    sync_retries: int = 0
    sync_exit3: int = 0
    done_refused: int = 0  # `done` after the lease, the task taken over meanwhile
    takeovers: int = 0  # expired claims taken over
    ref_updates: int = 0
    pruned: int = 0
    retired: int = 0  # clone refs deleted by retirement
    deletes_locked: int = 0  # deletions that did not get packed-refs.lock in time
    double_claims: int = 0  # a claim accepted while another clone's live claim held the task
    double_done: int = 0  # a task completed twice
    claims_on_completed: int = 0  # of double_claims: a claim accepted on a task completed meanwhile
    verb_cpu: dict[str, float] = field(default_factory=dict)
    verb_n: dict[str, int] = field(default_factory=dict)
    verb_wall: dict[str, float] = field(default_factory=dict)
    verb_heads: dict[str, int] = field(default_factory=dict)
    fetch_bytes: float = 0.0
    joins: list[dict[str, float]] = field(default_factory=list)
    refs_samples: list[tuple[float, int, int, int]] = field(default_factory=list)  # (t, all, clone refs, claims)
    claim_seconds: list[float] = field(default_factory=list)

    def verb(self, name: str, cpu: float, wall: float, heads: int = 0) -> None:
        self.verb_cpu[name] = self.verb_cpu.get(name, 0.0) + cpu
        self.verb_wall[name] = self.verb_wall.get(name, 0.0) + wall
        self.verb_n[name] = self.verb_n.get(name, 0) + 1
        self.verb_heads[name] = self.verb_heads.get(name, 0) + heads


def slot_of(task: int, clones: int) -> int:
    """A fixed hash of the task id modulo the clones (claim_plan._slot_of's role)."""
    x = (task + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (x ^ (x >> 31)) % clones


class _Fenwick:
    """Counts, over update numbers, the refs whose last update is at each number."""

    def __init__(self) -> None:
        self.vals = [0] * 1024
        self.tree = [0] * 1025

    def _rebuild(self) -> None:
        n = len(self.vals)
        self.tree = [0] * (n + 1)
        for i, v in enumerate(self.vals, 1):
            self.tree[i] += v
            j = i + (i & -i)
            if j <= n:
                self.tree[j] += self.tree[i]

    def add(self, i: int, v: int) -> None:
        if i >= len(self.vals):
            self.vals.extend([0] * max(len(self.vals), i + 1 - len(self.vals)))
            self._rebuild()
        self.vals[i] += v
        i += 1
        while i < len(self.tree):
            self.tree[i] += v
            i += i & -i

    def prefix(self, i: int) -> int:
        """The count at update numbers 0..i."""
        i = min(i + 1, len(self.tree) - 1)
        s = 0
        while i > 0:
            s += self.tree[i]
            i -= i & -i
        return s


class Pool:
    """A set with O(1) add, remove and a uniform random member (deterministic order)."""

    def __init__(self) -> None:
        self.items: list[int] = []
        self.pos: dict[int, int] = {}

    def add(self, x: int) -> None:
        if x not in self.pos:
            self.pos[x] = len(self.items)
            self.items.append(x)

    def discard(self, x: int) -> None:
        i = self.pos.pop(x, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class Rec:
    status: int
    holder: int = -1
    lease_end: float = 0.0
    token: int = 0  # the claim (its claim ref's value)


class Remote:
    """The remote's refs and the published task timelines."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.state_u: dict[int, int] = {}  # clone -> update number of its state ref's last move
        self.state_time: dict[int, float] = {}  # clone -> when its head was committed (its last push)
        self.by_age: OrderedDict[int, None] = OrderedDict()  # clone state refs, oldest head first
        self.ids: list[int] = []  # the clones with a state ref, sorted (their rank order)
        self.notes: set[int] = set()
        self.claims: dict[int, int] = {}  # task -> token
        self.claim_hist: dict[int, list[tuple[float, int | None]]] = {}  # task -> [(when, token or None)]
        self.claim_owner: dict[int, int] = {}  # token -> clone
        self.updates = 0
        self.fen = _Fenwick()
        self.commits = 0  # state commits reachable on the remote (history a joining clone fetches)
        self.locks: dict[Any, float] = {}  # ref -> until
        self.packed_lock_until = 0.0
        self.timeline: dict[int, list[tuple[float, Rec]]] = {}
        self.recent: deque[tuple[float, int]] = deque()  # (publish time, task) of the last minutes

    def refs(self) -> int:
        return len(self.state_u) + len(self.notes) + len(self.claims)

    def move_state(self, clone: int, commits: int) -> None:
        old = self.state_u.get(clone)
        if old is not None:
            self.fen.add(old, -1)
        else:
            bisect.insort(self.ids, clone)
        self.updates += 1
        self.state_u[clone] = self.updates
        self.fen.add(self.updates, 1)
        self.state_time[clone] = self.w.sim.now
        self.by_age[clone] = None
        self.by_age.move_to_end(clone)
        self.commits += commits
        self.w.stats.ref_updates += 1

    def drop_state(self, clone: int) -> None:
        old = self.state_u.pop(clone)
        self.fen.add(old, -1)
        self.ids.pop(bisect.bisect_left(self.ids, clone))
        del self.by_age[clone]
        self.state_time.pop(clone, None)
        self.w.stats.ref_updates += 1

    def set_claim(self, task: int, token: int | None) -> None:
        if token is None:
            self.claims.pop(task, None)
        else:
            self.claims[task] = token
        self.claim_hist.setdefault(task, []).append((self.w.sim.now, token))

    def claim_at(self, task: int, at: float) -> int | None:
        """The claim ref of `task` as a fetch at `at` saw it."""
        for when, token in reversed(self.claim_hist.get(task, [])):
            if when <= at:
                return token
        return None

    def heads_since(self, u: int) -> int:
        """State refs that moved after update number `u`."""
        return len(self.state_u) - self.fen.prefix(u)

    def publish(self, task: int, rec: Rec) -> None:
        now = self.w.sim.now
        line = self.timeline.setdefault(task, [])
        if rec.status == COMPLETED and line and line[-1][1].status == COMPLETED:
            self.w.stats.double_done += 1
        line.append((now, rec))
        self.recent.append((now, task))
        while self.recent and self.recent[0][0] < now - self.w.recent_window:
            self.recent.popleft()
        self.w.on_published(task, rec)

    def view(self, task: int, at: float) -> Rec | None:
        line = self.timeline.get(task)
        if not line:
            return None
        for when, rec in reversed(line):
            if when <= at:
                return rec
        return None

    def lock(self, refs: list[Any]) -> bool:
        now = self.w.sim.now
        if any(self.locks.get(r, -1.0) > now for r in refs):
            return False
        for r in refs:
            self.locks[r] = now + self.w.p.ref_lock_hold
        return True


class World:
    """One simulated fleet: the remote, its clones, the tasks and the figures."""

    def __init__(self, p: Params, *, seed: int, rtt: float | None = None, shared_cores: float | None = None,
                 background: float = 0.0, client_cores: float = 2.0, server_cores: float = 8.0,
                 recent_window: float = 900.0, claim_cas: bool = True) -> None:
        self.p = p if rtt is None else replace(p, rtt=rtt)
        self.sim = Sim()
        self.rng = random.Random(seed)
        self.stats = Stats()
        self.recent_window = recent_window
        self.claim_cas = claim_cas  # False: a claim push without the compare-and-swap (a broken protocol)
        self.shared = CPU(self.sim, shared_cores, background) if shared_cores else None
        self.server_cpu = self.shared or CPU(self.sim, server_cores)
        self.client_cores = client_cores
        self.remote = Remote(self)
        self.eligible = Pool()  # tasks whose current published record is claimable (pending)
        self.buckets: dict[int, list[Pool]] = {}
        self.tasks_created = 0
        self.next_token = 0
        self.next_clone = 0
        self.live: dict[int, Clone] = {}
        self.ended: list[Clone] = []

    # -- tasks ---------------------------------------------------------------------------

    def add_task(self) -> int:
        """A task published on the remote (as `add` + sync by someone; its commit counted)."""
        t = self.tasks_created
        self.tasks_created += 1
        self.remote.commits += 1
        self.remote.publish(t, Rec(PENDING))
        return t

    def on_published(self, task: int, rec: Rec) -> None:
        if rec.status == PENDING:
            self._eligible(task, True)
        elif rec.status == IN_PROGRESS:
            self._eligible(task, False)
            self.sim.at(rec.lease_end + 1e-6, self._lease_over, task, rec.token)
        else:
            self._eligible(task, False)

    def _lease_over(self, task: int, token: int) -> None:
        cur = self.remote.timeline[task][-1][1]
        if cur.status == IN_PROGRESS and cur.token == token:
            self._eligible(task, True)  # claimable again: an expired lease (schedule.prepare)

    def _eligible(self, task: int, yes: bool) -> None:
        if yes:
            self.eligible.add(task)
        else:
            self.eligible.discard(task)
        for n, pools in self.buckets.items():
            if yes:
                pools[slot_of(task, n)].add(task)
            else:
                pools[slot_of(task, n)].discard(task)

    def bucket(self, n: int, rank: int) -> Pool:
        pools = self.buckets.get(n)
        if pools is None:
            if len(self.buckets) > 8:
                self.buckets.pop(next(iter(self.buckets)))
            pools = [Pool() for _ in range(n)]
            for t in self.eligible.items:
                pools[slot_of(t, n)].add(t)
            self.buckets[n] = pools
        return pools[rank]

    def claimable(self, task: int, seen: float) -> Rec | None:
        """The task's record as a clone that fetched at `seen` sees it, when it may claim it."""
        rec = self.remote.view(task, seen)
        if rec is None or rec.status == COMPLETED:
            return None
        if rec.status == IN_PROGRESS and rec.lease_end > self.sim.now:
            return None
        return rec

    def pick(self, seen: float, rank: int, n: int) -> tuple[int, Rec] | None:
        """claim_plan._slot_pick on the view fetched at `seen`: at random among the eligible
        tasks of this clone's slot, else among all eligible ones."""
        extra = []
        cutoff = False
        for when, task in reversed(self.remote.recent):
            if when <= seen:
                cutoff = True
                break
            if self.claimable(task, seen) is not None and task not in self.eligible.pos:
                extra.append(task)
        if not cutoff and self.remote.recent and self.remote.recent[0][0] > seen:
            pass  # the window is long against any command; a view older than it is not expected
        extra = sorted(set(extra))
        for pool, mine in ((self.bucket(n, rank) if n > 1 else self.eligible,
                            [t for t in extra if n <= 1 or slot_of(t, n) == rank]),
                           (self.eligible, extra)):
            size = len(pool) + len(mine)
            for _ in range(min(32, size * 2)):
                i = self.rng.randrange(size)
                task = pool.items[i] if i < len(pool) else mine[i - len(pool)]
                rec = self.claimable(task, seen)
                if rec is not None:
                    return task, rec
            if size:
                every = sorted(set(pool.items) | set(mine))
                ok = [t for t in every if self.claimable(t, seen) is not None]
                if ok:
                    task = ok[self.rng.randrange(len(ok))]
                    rec = self.claimable(task, seen)
                    assert rec is not None
                    return task, rec
        return None

    # -- clones ----------------------------------------------------------------------------

    def start_clone(self, **behaviour: Any) -> Clone:
        c = Clone(self, self.next_clone, **behaviour)
        self.next_clone += 1
        self.live[c.id] = c
        c.start()
        return c

    def sample_refs(self) -> None:
        r = self.remote
        self.stats.refs_samples.append((self.sim.now, r.refs(), len(r.state_u) + len(r.notes), len(r.claims)))

    def cpu_for(self, clone: Clone) -> CPU:
        return self.shared or clone.cpu


class Clone:
    """One clone's work loop: claim -> work -> commit -> done -> sync, until nothing is
    eligible (fixed pool) or its machine goes away (ephemeral)."""

    def __init__(self, w: World, cid: int, *, work: Callable[[], float] | None = None, lifetime: float = math.inf,
                 poll: float | None = None, killed_at_end: bool = False, joining: bool = False) -> None:
        self.w = w
        self.id = cid
        self.cpu = CPU(w.sim, w.client_cores) if w.shared is None else w.shared
        self.work = work or (lambda: 0.0)
        self.end_at = w.sim.now + lifetime
        self.poll = poll
        self.killed_at_end = killed_at_end
        self.joining = joining
        self.seen_u = 0  # the remote's update number at this clone's last fetch
        self.seen_commits = 0
        self.seen_at = -1.0
        self.local_commits = 0  # state commits made here and not pushed yet
        self.holding: tuple[int, Rec] | None = None
        self.finished: list[int] = []  # tasks done here whose claim ref this clone still has to delete
        self.done_unpublished: list[tuple[int, Rec]] = []
        self.published_is_local = False
        self.gone = False
        self.started = w.sim.now

    # -- plumbing ------------------------------------------------------------------------------

    def _cpu(self, seconds: float, then: Callable[[], None]) -> None:
        self.w.cpu_for(self).run(seconds, then)

    def _fetch(self, then: Callable[[int], None]) -> None:
        """A fetch: round trips, upload-pack's CPU on the server; `then(new heads)`."""
        p, w, r = self.w.p, self.w, self.w.remote
        refs = r.refs()
        new_commits = max(0, r.commits - self.seen_commits)
        first = self.seen_u == 0 and self.joining

        def served() -> None:
            heads = r.heads_since(self.seen_u)
            if self.id in r.state_u and r.state_u[self.id] > self.seen_u:
                heads -= 1  # our own ref: tracked at our push (remote/tracked.track)
            got = (p.bytes_per_ref * refs
                   + p.bytes_per_commit * max(0, r.commits - self.seen_commits - self.local_commits))
            w.stats.fetch_bytes += got
            if first:
                w.stats.joins.append({"t": w.sim.now, "bytes": got, "heads": heads, "refs": refs})
            self.seen_u, self.seen_commits, self.seen_at = r.updates, r.commits, w.sim.now
            transfer = got / p.bandwidth
            w.sim.after(p.rtt / 2 + transfer, then, heads)

        w.sim.after(p.rtt * max(0.0, p.rtts_fetch - 0.5), lambda: w.server_cpu.run(
            p.srv_fetch + p.srv_per_ref * refs + p.srv_per_commit * new_commits, served))

    def _push(self, transaction: Callable[[], Any], then: Callable[[Any], None]) -> None:
        p, w = self.w.p, self.w
        w.sim.after(p.rtt * max(0.0, p.rtts_push - 0.5), lambda: w.server_cpu.run(
            p.srv_push, lambda: w.sim.after(p.rtt / 2, then, transaction())))

    def _merge_commits(self, heads: int) -> int:
        return math.ceil(heads / (MAX_PARENTS - 1)) if heads else 0

    # -- the loop --------------------------------------------------------------------------------

    def start(self) -> None:
        self.w.sim.after(0.0, self.claim)

    def _leave(self) -> None:
        self.gone = True
        self.w.live.pop(self.id, None)
        self.w.ended.append(self)

    def claim(self) -> None:
        if self.w.sim.now >= self.end_at:
            if self.killed_at_end or not self.finished:
                return self._leave()
            return self.sync(then=self._leave)
        t0 = self.w.sim.now
        cpu_used = [self.w.p.cpu_start]
        heads_seen = [0]
        self._cpu(self.w.p.cpu_start, lambda: self.w.sim.after(self.w.p.wall_claim, self._claim_try, 0, t0,
                                                               cpu_used, heads_seen))

    def _claim_try(self, attempt: int, t0: float, cpu_used: list[float], heads_seen: list[int]) -> None:
        w, p, r = self.w, self.w.p, self.w.remote

        def merged(heads: int) -> None:
            seen = self.seen_at
            refs = r.refs()
            cost = p.cpu_claim + p.cpu_claim_head * heads + p.cpu_per_ref * refs
            cpu_used[0] += cost
            heads_seen[0] += heads
            merge = self._merge_commits(heads)
            n = len(r.ids) + (0 if self.id in r.state_u else 1)
            rank = bisect.bisect_left(r.ids, self.id)
            picked = w.pick(seen, rank, n)

            def decided() -> None:
                if picked is None:
                    w.stats.claims_empty += 1
                    w.stats.verb("claim_empty", cpu_used[0], w.sim.now - t0, heads_seen[0])
                    self.local_commits += merge
                    return self._idle()
                task, seen_rec = picked
                expected = r.claim_at(task, seen)  # as fetched (fleet.claims)
                w.stats.claim_pushes += 1
                w.next_token += 1
                token = w.next_token

                def transaction() -> str:
                    if not r.lock([("claim", task), ("state", self.id)]):
                        return "locked"
                    if w.claim_cas and r.claims.get(task) != expected:
                        return "moved"
                    cur = r.timeline[task][-1][1]
                    if cur.status == IN_PROGRESS and cur.lease_end > w.sim.now:
                        w.stats.double_claims += 1
                    if cur.status == COMPLETED:
                        # the claim ref was deleted after the task was completed: a claim
                        # pushed with "must not exist" from a view fetched before that
                        # claim was made passes the compare-and-swap (ABA)
                        w.stats.double_claims += 1
                        w.stats.claims_on_completed += 1
                    if seen_rec.status == IN_PROGRESS:
                        w.stats.takeovers += 1
                    r.set_claim(task, token)
                    r.claim_owner[token] = self.id
                    commits = self.local_commits + merge + 1
                    r.move_state(self.id, commits)
                    w.stats.ref_updates += 1
                    self.local_commits = 0
                    for t, done in self.done_unpublished:
                        r.publish(t, done)
                        w.stats.completed += 1
                    self.done_unpublished = []
                    rec = Rec(IN_PROGRESS, self.id, w.sim.now + p.lease, token)
                    r.publish(task, rec)
                    self.holding = (task, rec)
                    self.published_is_local = True
                    return "ok"

                def answered(outcome: str) -> None:
                    if outcome == "ok":
                        w.stats.claims += 1
                        w.stats.claim_seconds.append(w.sim.now - t0)
                        w.stats.verb("claim", cpu_used[0], w.sim.now - t0, heads_seen[0])
                        return self._work()
                    self.local_commits += merge
                    if attempt + 1 >= CLAIM_TRIES:
                        w.stats.claim_exit3 += 1
                        return w.sim.after(0.0, self.claim)
                    if outcome == "moved":
                        w.stats.claim_moved += 1
                        return self._claim_try(attempt + 1, t0, cpu_used, heads_seen)
                    w.stats.claim_locked += 1
                    w.sim.after(self._backoff(attempt, n), self._claim_try, attempt + 1, t0, cpu_used, heads_seen)

                self._push(transaction, answered)

            self._cpu(cost, decided)

        self._fetch(merged)

    def _backoff(self, attempt: int, contenders: int) -> float:
        spread = 0.02 * max(1, min(contenders, 64)) * (2 ** min(attempt, 4))
        return self.w.rng.uniform(0.005, min(spread, 2.0))

    def _work(self) -> None:
        w = self.w
        dur = self.work()
        if w.sim.now + dur >= self.end_at and self.killed_at_end:
            return w.sim.at(self.end_at, self._leave)  # the machine goes away holding the claim
        w.sim.after(dur, lambda: self._cpu(w.p.cpu_commit, lambda: w.sim.after(w.p.wall_commit, self._done)))

    def _done(self) -> None:
        w, p = self.w, self.w.p
        t0 = w.sim.now
        assert self.holding is not None
        task, rec = self.holding

        def finish() -> None:
            w.stats.verb("commit", p.cpu_commit, 0.0)
            w.stats.verb("done", p.cpu_start + p.cpu_done, w.sim.now - t0)
            if rec.lease_end <= w.sim.now:
                return self._done_late(task, rec)
            self.local_commits += 1
            self.published_is_local = False
            self.done_unpublished.append((task, Rec(COMPLETED, self.id, 0.0, rec.token)))
            self.finished.append(task)
            self.holding = None
            self.sync(then=self.claim)

        self._cpu(p.cpu_start + p.cpu_done, lambda: w.sim.after(p.wall_done, finish))

    def _done_late(self, task: int, rec: Rec) -> None:
        """`done` after the lease (ops/work.py): fetch and merge (sync.pull_if_taken_over),
        then one atomic push moving the claim ref by compare-and-swap with this clone's
        state: refused when another clone took the task over meanwhile."""
        w, r = self.w, self.w.remote

        def fetched(heads: int) -> None:
            self.local_commits += self._merge_commits(heads)
            w.next_token += 1
            token = w.next_token

            def transaction() -> bool:
                if r.claims.get(task) != rec.token or not r.lock([("claim", task), ("state", self.id)]):
                    return False
                r.set_claim(task, token)
                r.claim_owner[token] = self.id
                r.move_state(self.id, self.local_commits + 1)
                w.stats.ref_updates += 1
                self.local_commits = 0
                for t, done in self.done_unpublished:
                    r.publish(t, done)
                    w.stats.completed += 1
                self.done_unpublished = []
                r.publish(task, Rec(COMPLETED, self.id, 0.0, token))
                w.stats.completed += 1
                self.published_is_local = True
                self.finished.append(task)
                return True

            def answered(ok: bool) -> None:
                if not ok:
                    w.stats.done_refused += 1
                self.holding = None
                self.sync(then=self.claim)

            self._cpu(w.p.cpu_claim, lambda: self._push(transaction, answered))

        self._fetch(fetched)

    def _idle(self) -> None:
        """Nothing eligible: a fixed-pool loop ends (claim exit 1); an ephemeral machine
        polls (a sync, then a claim) until it goes away."""
        if self.poll is None:
            return self._leave()
        self.w.sim.after(self.poll * (0.5 + self.w.rng.random()), self.sync, self.claim)

    def sync(self, then: Callable[[], None]) -> None:
        w, p = self.w, self.w.p
        t0 = w.sim.now
        cpu_used = [p.cpu_start]
        heads_seen = [0]
        self._cpu(p.cpu_start, lambda: w.sim.after(p.wall_sync, self._sync_round, 0, t0, cpu_used, heads_seen, then))

    def _sync_round(self, attempt: int, t0: float, cpu_used: list[float], heads_seen: list[int],
                    then: Callable[[], None]) -> None:
        w, p, r = self.w, self.w.p, self.w.remote

        def merged(heads: int) -> None:
            refs = r.refs()
            cost = p.cpu_sync + p.cpu_sync_head * heads + p.cpu_per_ref * refs
            cpu_used[0] += cost
            heads_seen[0] += heads
            merge = self._merge_commits(heads)
            self.local_commits += merge
            if merge:
                self.published_is_local = False
            seen = w.sim.now
            prune = {}
            for task in self.finished:
                tok = r.claims.get(task)
                if tok is not None and r.claim_owner.get(tok) == self.id:
                    prune[task] = tok
            quiet = self.published_is_local and self.id in r.state_u
            retire: list[tuple[int, int]] = []
            if quiet:
                for c in r.by_age:
                    if seen - r.state_time[c] < p.retire_after:
                        break
                    if c != self.id and r.state_u[c] <= self.seen_u:
                        retire.append((c, r.state_u[c]))
            dead = [(t, tok) for t, tok in r.claims.items()
                    if r.timeline[t][-1][1].token == tok and r.timeline[t][-1][1].status == IN_PROGRESS
                    and seen - r.timeline[t][-1][1].lease_end > p.dead_claim] \
                if attempt == 0 and w.rng.random() < 0.02 else []

            def transaction() -> bool:
                ok = True
                if not self.published_is_local or self.id not in r.state_u:
                    if r.lock([("state", self.id)]):
                        r.move_state(self.id, self.local_commits)
                        self.local_commits = 0
                        for task, rec in self.done_unpublished:
                            r.publish(task, rec)
                            w.stats.completed += 1
                        self.done_unpublished = []
                        self.published_is_local = True
                        if p.notes_per_done and self.finished:
                            r.notes.add(self.id)
                            w.stats.ref_updates += 1
                    else:
                        ok = False
                deletes = [("claim", t, tok) for t, tok in prune.items()] + [("claim", t, tok) for t, tok in dead]
                deletes += [("clone", c, u) for c, u in retire]
                if deletes:
                    if not self._packed_refs_lock():
                        w.stats.deletes_locked += len(deletes)
                        return ok
                    for kind, key, val in deletes:
                        if kind == "claim" and r.claims.get(key) == val:
                            r.set_claim(key, None)
                            r.claim_owner.pop(val, None)
                            w.stats.pruned += 1
                            w.stats.ref_updates += 1
                            if key in self.finished:
                                self.finished.remove(key)
                        elif kind == "clone" and r.state_u.get(key) == val:
                            r.drop_state(key)
                            if key in r.notes:
                                r.notes.discard(key)
                                w.stats.ref_updates += 1
                            w.stats.retired += 1
                # a claim ref someone else moved (taken over) is no longer ours to delete
                self.finished = [t for t in self.finished if r.claim_owner.get(r.claims.get(t, -1)) == self.id]
                return ok

            def answered(ok: bool) -> None:
                if ok:
                    w.stats.verb("sync", cpu_used[0], w.sim.now - t0, heads_seen[0])
                    return then()
                if attempt + 1 >= SYNC_TRIES:
                    w.stats.sync_exit3 += 1
                    w.stats.verb("sync", cpu_used[0], w.sim.now - t0, heads_seen[0])
                    return then()
                w.stats.sync_retries += 1
                w.sim.after(self._backoff(attempt, len(r.state_u)), self._sync_round, attempt + 1, t0, cpu_used,
                            heads_seen, then)

            self._cpu(cost, lambda: self._push(transaction, answered))

        self._fetch(merged)

    def _packed_refs_lock(self) -> bool:
        """Deleting refs rewrites packed-refs under its lock; git waits up to 1 s for it.
        The wait is folded into the transaction (a simplification: the push's answer is
        not delayed by it)."""
        w, p, r = self.w, self.w.p, self.w.remote
        now = w.sim.now
        start = max(now, r.packed_lock_until)
        if start - now > PACKED_REFS_TIMEOUT:
            return False
        r.packed_lock_until = start + p.packed_rewrite + p.packed_rewrite_per_ref * r.refs()
        return True
