"""The fleet simulation (bench/fleet_sim): run small, its invariants hold (no double
claim, no lost task), a broken protocol is caught by the same checks, it is
deterministic under a seed, and the calibrated model reproduces the recorded
measurement table (bench/fleet_sim/calibration.json) within its stated tolerance."""

from __future__ import annotations

import json
import statistics
from dataclasses import replace

import pytest

from bench.fleet_sim.model import World
from bench.fleet_sim.scenarios import CALIBRATION, audit, fixed_pool, load_params, month


@pytest.mark.parametrize("k", [1, 4, 16])
def test_fixed_pool_completes_every_task_once(k: int) -> None:
    r = fixed_pool(load_params(), k, 40, seed=7)
    assert r["completed"] == 40
    assert r["completions"] == 40
    assert (r["lost"], r["double_claims"], r["double_done"], r["still_held"]) == (0, 0, 0, 0)
    assert r["claims"] == 40
    # the bench's own count: a claim moves 2 refs, a sync 3 (state, notes, the claim ref deleted)
    assert r["ref_updates_per_task"] == pytest.approx(5.0, abs=0.1)
    assert r["refs_end"] == 2 * k  # each clone's state and notes; every claim ref pruned


def test_same_seed_same_run_other_seed_other_run() -> None:
    a = fixed_pool(load_params(), 8, 40, seed=3)
    b = fixed_pool(load_params(), 8, 40, seed=3)
    c = fixed_pool(load_params(), 8, 40, seed=4)
    assert a == b
    assert (a["seconds"], a["claim_pushes"], a["claim_p50"]) != (c["seconds"], c["claim_pushes"], c["claim_p50"])


def test_a_claim_without_compare_and_swap_is_caught() -> None:
    """The invariant checks can fail: the same fleet whose claim push does not
    compare-and-swap the claim ref gives double claims (clones that fetched before
    another's claim arrived take the task too)."""
    found = 0
    for seed in range(4):
        w = World(replace(load_params(), rtt=0.05), seed=seed, shared_cores=2.0, claim_cas=False)
        for _ in range(30):
            w.add_task()
        for _ in range(8):
            w.start_clone()
        w.sim.run(stop=lambda w=w: not w.live)
        found += w.stats.double_claims + audit(w)["double_done"]
    assert found > 0


def test_ephemeral_machines_over_two_days() -> None:
    """Machines come and go (new clone ids), some die holding their claim: every task is
    still completed exactly once (the expired claims are taken over), and clone refs of
    machines gone longer than retireAfter are retired by an idle clone's quiet sync."""
    p = replace(load_params(), lease=600.0, retire_after=6 * 3600.0)
    r = month(p, seed=11, machines=12, days=2.0, lifetime_h=3.0, tasks_per_day=600, work_min=3.0, poll_s=300,
              killed=0.3, rtt=0.1, drain_h=3.0)
    assert r["tasks_created"] > 900
    assert r["clone_ids"] > 100
    assert (r["lost"], r["double_claims"], r["double_done"], r["still_held"]) == (0, 0, 0, 0)
    assert r["takeovers"] > 0  # claims of dead machines were taken over after their lease
    assert r["retired"] > 0
    clone_refs = [s[2] for s in r["refs_samples"]]
    # bounded by the machines of the last retireAfter (+ those not yet retired), not every id ever seen
    assert max(clone_refs) < 2 * r["clone_ids"]
    assert clone_refs[-1] < 2 * r["clone_ids"] * 0.5


def test_calibration_reproduces_the_measured_table() -> None:
    """calibration.json records the measured medians (bench/fleet_sim/measure.py on this
    machine), the costs derived from them and the background load each run had; the
    model with those costs reproduces each K's measured tasks/s within the tolerance,
    and the simulated figures recorded there (it is deterministic)."""
    cal = json.loads(CALIBRATION.read_text())
    p = load_params()
    tol = cal["tolerance"]
    assert 0 < tol <= 0.3
    ks = [row["k"] for row in cal["table"] if not row.get("rtt")]
    assert ks == [1, 4, 8, 16]
    for row in cal["table"]:
        q = replace(p, rtt=row.get("rtt", 0.0))
        runs = [fixed_pool(q, row["k"], row["tasks"], seed=s, shared_cores=2.0, background=row["background_jobs"])
                for s in cal["seeds"]]
        sim = statistics.median(r["tasks_per_s"] for r in runs)
        assert sim == pytest.approx(row["simulated_tasks_per_s"], abs=0.0015)
        assert abs(sim / row["measured_tasks_per_s"] - 1) <= tol, row
        assert all((r["lost"], r["double_claims"]) == (0, 0) for r in runs)
