"""A fleet under SIGKILL (docs/fleet.md): four clones of one remote served by `git daemon`
on 127.0.0.1 loop claim --remote -> commit -> done -> sync while their `claim` and
`sync` processes (and the gits they started) are SIGKILLed at random moments.

Then two machines die holding claims with a short lease (15 s). Once every lease has
expired: nothing is held twice, every clone shows the same state, each abandoned
task is claimable again by another clone, the fleet finishes every task, no task is
completed twice, and every clone ends with the same state.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support import fleet, transports

pytestmark = pytest.mark.slow  # real processes, a real daemon, SIGKILL

K = 4
TASKS = 11  # 8 in the killed phase, 2 abandoned, 1 left for the last phase
KILL_CHANCE = 0.5
DEAD_LEASE = "15s"  # long enough to see the dead claims held, short enough to wait out


def held(lists: list[list[dict[str, Any]]]) -> list[tuple[str, str]]:  # fleet.task_list's type
    """(task, holder) of every in-progress task as one clone sees it."""
    return [(t["id"], str(t["claimed_by"])) for t in lists[0] if t["status"] == "in_progress"]


def test_fleet_survives_sigkill_mid_claim_and_mid_sync(tmp_path: Path) -> None:
    served = tmp_path / "served"
    fleet.prepare_remote(served, TASKS)
    rng = random.Random(15)

    spans = {"claim": 1.0, "sync": 1.0}  # s; narrowed to what finished runs took
    lock = threading.Lock()

    def kill(verb: str) -> float | None:
        # a kill lands anywhere in a claim's or a sync's life (start-up, fetch, merge, push)
        with lock:
            if verb in spans and rng.random() < KILL_CHANCE:
                return rng.uniform(0.02, spans[verb])
        return None

    def observe(verb: str, seconds: float) -> None:
        if verb in spans:
            with lock:
                spans[verb] = min(spans[verb], seconds * 1.3)

    with transports.git_daemon(served) as base:
        clones = fleet.make_clones(tmp_path, f"{base}/{fleet.REMOTE_NAME}", K)
        # 1. the fleet works, and gets killed, until each clone has finished two tasks
        first = fleet.run_fleet(clones, lease="10m", kill=kill, observe=observe, stop_after=2,
                                deadline=time.monotonic() + 120)
        killed = sum((r.killed for r in first.reports), Counter())
        assert killed["claim"] > 0 and killed["sync"] > 0, killed
        assert not [e for r in first.reports for e in r.errors], [r.errors for r in first.reports]

        # 2. two machines die holding a claim with a short lease
        dead = clones[:2]
        abandoned = []
        for path in dead:
            r = fleet.handoff(path, "claim", "--remote", "origin", "--lease", DEAD_LEASE, "--json")
            assert r.returncode == 0, r.stderr
            abandoned.append(json.loads(r.stdout)["id"])
        assert len(set(abandoned)) == 2, abandoned
        assert not fleet.sync_all(clones)
        lists = [fleet.task_list(p) for p in clones]
        assert all(lst == lists[0] for lst in lists), "clones disagree after syncing"
        holders = held(lists)
        assert len({tid for tid, _ in holders}) == len(holders), holders
        # the killed claims were all resumed: only the dead machines hold anything
        assert {tid: who.rsplit("/", 1)[-1] for tid, who in holders} == {
            tid: path.name for tid, path in zip(abandoned, dead, strict=True)}, holders

        # 3. every lease expires; each abandoned task is claimable by a live clone
        expiries = [t["lease_expires_at"] for t in lists[0] if t["status"] == "in_progress"]
        wait_until = max(datetime.fromisoformat(e.replace("Z", "+00:00")).timestamp() for e in expiries)
        time.sleep(max(0.0, wait_until - time.time()) + 1.1)
        taken: list[fleet.CloneReport] = []
        for tid, path in zip(abandoned, clones[2:], strict=True):
            r = fleet.handoff(path, "claim", tid, "--remote", "origin", "--json")
            assert r.returncode == 0, f"expired {tid} not claimable from {path.name}: {r.stderr}"
            assert json.loads(r.stdout)["id"] == tid
            (path / f"takeover-{tid}.txt").write_text(tid)
            fleet.sh("git", "add", "-A", cwd=path)
            fleet.sh("git", "commit", "-q", "-m", f"take over {tid}", cwd=path)
            d = fleet.handoff(path, "done", tid, "--json")
            assert d.returncode == 0, d.stderr
            taken.append(fleet.CloneReport(path.name, claimed=[tid], completed=[tid]))

        # 4. the whole fleet finishes the rest, without kills
        last = fleet.run_fleet(clones, deadline=time.monotonic() + 120)
        assert all(r.finished for r in last.reports), [r.errors for r in last.reports]
        result = fleet.audit(clones, first.reports + taken + last.reports)
    assert result.tasks == TASKS and result.completed == TASKS, result
    assert not result.lost and not result.double_done and not result.double_logged, result
    assert result.same_list and result.same_tree and not result.sync_failures, result


def test_a_claim_taken_over_after_its_lease_expired_is_not_completed_twice(tmp_path: Path) -> None:
    """Machine a's lease expires while it is away; b takes the task over and finishes it.
    When a comes back, its `done` (from a state that still shows its own claim) must not
    complete the task a second time: one Completed line, by b."""
    served = tmp_path / "served"
    bare = fleet.prepare_remote(served, 2)
    a, b = fleet.make_clones(tmp_path, str(bare), 2)
    r = fleet.handoff(a, "claim", "--remote", "origin", "--lease", "1s", "--json")
    assert r.returncode == 0, r.stderr
    tid = json.loads(r.stdout)["id"]
    time.sleep(2.1)
    assert fleet.handoff(b, "claim", tid, "--remote", "origin").returncode == 0
    for path in (b, a):
        (path / f"{path.name}.txt").write_text(tid)
        fleet.sh("git", "add", "-A", cwd=path)
        fleet.sh("git", "commit", "-q", "-m", f"work on {tid}", cwd=path)
    assert fleet.handoff(b, "done", tid).returncode == 0
    late = fleet.handoff(a, "done", tid)  # a's lease is over: done looks at the remote first, sees b's claim
    assert late.returncode != 0 and tid in late.stderr, late.stderr
    assert not fleet.sync_all([a, b])
    assert fleet.completions(a)[tid] == 1
    assert next(t for t in fleet.task_list(a) if t["id"] == tid)["claimed_by"].endswith(b.name)


def test_the_bench_transports_carry_a_big_push_and_the_proxy_delays_and_counts(tmp_path: Path) -> None:
    """The instruments themselves: smart HTTP takes a push bigger than git's 1 MiB post
    buffer (a chunked request body) and serves it back; the delay proxy holds each
    client->server burst and counts what it carries."""
    served = tmp_path / "served"
    served.mkdir()
    fleet.sh("git", "init", "-q", "--bare", str(served / "r.git"), cwd=tmp_path)
    fleet.sh("git", "config", "http.receivepack", "true", cwd=served / "r.git")
    work = tmp_path / "work"
    work.mkdir()
    fleet.sh("git", "init", "-q", "-b", "main", cwd=work)
    (work / "big.bin").write_bytes(random.Random(1).randbytes(3 << 20))
    fleet.sh("git", "add", "big.bin", cwd=work)
    fleet.sh("git", "commit", "-q", "-m", "big", cwd=work)
    head = fleet.sh("git", "rev-parse", "HEAD", cwd=work).strip()
    with transports.smart_http(served) as url:
        fleet.sh("git", "push", "-q", f"{url}/r.git", "main", cwd=work)
        fleet.sh("git", "clone", "-q", f"{url}/r.git", str(tmp_path / "back"), cwd=tmp_path)
    assert fleet.sh("git", "rev-parse", "HEAD", cwd=tmp_path / "back").strip() == head
    stats = tmp_path / "stats"
    with transports.git_daemon(served) as base, \
            transports.delay_proxy(int(base.rsplit(":", 1)[1]), 300, stats) as port:
        started = time.monotonic()
        out = fleet.sh("git", "ls-remote", f"git://127.0.0.1:{port}/r.git", cwd=tmp_path)
        assert time.monotonic() - started >= 0.3  # the request waited in the proxy
        assert head in out
        fleet.sh("git", "push", "-q", f"git://127.0.0.1:{port}/r.git", "main:copy", cwd=tmp_path / "back")
        seen = transports.read_proxy_stats(stats)
    assert seen["upload-pack"][0] == 1 and seen["receive-pack"][0] == 1, seen
    assert seen["upload-pack"][2] > 0 and seen["receive-pack"][1] > 0, seen
