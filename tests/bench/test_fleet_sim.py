"""The fleet simulation (bench/fleet_sim): run small, its invariants hold (no double
claim, no lost task), a broken protocol is caught by the same checks, it is
deterministic under a seed, and the calibrated model reproduces the recorded
measurement table (bench/fleet_sim/calibration.json) within its stated tolerance.

And the scripts keep running against today's code (measure_scale.py once imported
modules the package split had moved, and nothing ran it): each at its smallest run,
the two that measure the real `git handoff` as the commands docs/fleet-simulation.md
gives, and every file, module and option that page names exists."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench.fleet_sim import calibrate, run_scale
from bench.fleet_sim.model import World
from bench.fleet_sim.scenarios import CALIBRATION, audit, fixed_pool, load_params, month

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "bench" / "fleet_sim"
DOC = ROOT / "docs" / "fleet-simulation.md"


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
        def idle(w: World = w) -> bool:
            return not w.live

        w.sim.run(stop=idle)
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


def _script(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench.fleet_sim.<module> args` from the checkout, as the doc runs it."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, "-m", f"bench.fleet_sim.{module}", *args], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    return run


@pytest.mark.slow
def test_measure_runs_a_real_fleet_and_calibrate_reads_it(tmp_path: Path) -> None:
    """measure.py's smallest run (one clone, two tasks, the real `git handoff` behind a
    git daemon) completes both tasks with the audit clean; calibrate.py takes that jsonl
    (the Ks it holds) and writes a calibration where it is told, not over the kept one."""
    jsonl = tmp_path / "daemon.jsonl"
    _script("measure", "--ks", "1", "--tasks", "2", "--jsonl", str(jsonl))
    (row,) = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert (row["k"], row["tasks"], row["completed"]) == (1, 2, 2)
    assert (row["double"], row["lost"], row["same_state"], row["errors"]) == (0, 0, True, [])
    verbs = ("claim", "commit", "done", "sync")
    assert {v: row["per_verb"][v]["n"] for v in verbs} == dict.fromkeys(verbs, 2)
    kept = CALIBRATION.read_bytes()
    out = tmp_path / "calibration.json"
    assert calibrate.main([str(jsonl), "--out", str(out)]) == 0
    cal = json.loads(out.read_text())
    assert [r["k"] for r in cal["table"]] == [1]
    assert cal["table"][0]["measured_tasks_per_s"] == round(row["tasks_per_s"], 3)
    assert CALIBRATION.read_bytes() == kept


@pytest.mark.slow
def test_measure_scale_measures_the_real_sync_and_join(tmp_path: Path) -> None:
    """measure_scale.py's smallest run: syncs merging 2 and 4 published heads, and clones
    joining a state history of 4 and 8 transactions, each through the real command."""
    out = tmp_path / "scale.json"
    _script("measure_scale", "--heads", "2,4", "--history", "4,8", "--out", str(out))
    got = json.loads(out.read_text())
    assert [h["heads"] for h in got["heads"]] == [2, 4]
    assert [j["transactions"] for j in got["joins"]] == [4, 8]
    assert all(h["sync_cpu"] > 0 and h["quiet_sync_cpu"] > 0 for h in got["heads"])
    assert all(j["join_bytes"] > 0 and j["join_sync_cpu"] > 0 for j in got["joins"])
    assert set(got["params"]) == {"bytes_per_commit", "cpu_per_ref"}
    # what calibrate --scale passes to the model
    assert set(got["params"]) <= set(load_params().__dict__)


@pytest.mark.slow
def test_calibrate_writes_the_kept_calibration_from_the_kept_measurements(tmp_path: Path) -> None:
    """calibration.json is what calibrate.py makes of measured-daemon.jsonl, byte for byte
    (slow: its bisections run the model some hundreds of times, 6-17 s)."""
    out = tmp_path / "calibration.json"
    assert calibrate.main([str(SIM / "measured-daemon.jsonl"), "--out", str(out)]) == 0
    assert out.read_text() == CALIBRATION.read_text()


def test_run_scale_at_its_smallest(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    smallest = ["--fleets", "4:1", "--month-days", "0.1", "--month-machines", "2"]
    assert run_scale.main([*smallest, "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    (fixed,) = got["fixed"]
    assert (fixed["k"], fixed["server_cores"], fixed["completed"]) == (4, 1, 20)
    assert got["month"]["tasks_created"] == got["month"]["completed"] > 0
    assert (got["month"]["lost"], got["month"]["double_claims"]) == (0, 0)


# -- docs/fleet-simulation.md names only what exists -----------------------------------------------

_OUTPUTS = {"daemon.jsonl", "scale.json", "results.json"}  # what the page's commands write
_PACKAGE_DIRS = ("core", "infra", "state", "remote", "ops", "cli", "agent_cli", "mcp", "dashboard")


def _named_file(name: str) -> Path | None:
    """Where a file the page names lives: a path from the root, a module path below
    git_handoff/ (ops/sync.py), or a bench/fleet_sim file by its name; None if nowhere."""
    for candidate in (ROOT / name, ROOT / "git_handoff" / name, SIM / name):
        if candidate.is_file():
            return candidate
    return None


def test_every_file_the_page_names_exists() -> None:
    text = DOC.read_text()
    names = set(re.findall(r"[\w./-]*\w\.(?:py|json|jsonl|md)\b", text)) - _OUTPUTS
    assert names, "the page names no file?"
    assert sorted(n for n in names if _named_file(n) is None) == []
    for name in names:
        if name.startswith(_PACKAGE_DIRS):
            assert not (ROOT / name).exists(), name  # unambiguous: only below git_handoff/


def test_every_definition_the_page_points_to_is_where_it_says() -> None:
    """`ops/sync.py: transact_remote`, `sync.pull_if_taken_over`, `scenarios.month`: the
    module exists and defines the name."""
    text = DOC.read_text()
    pointers = re.findall(r"`([\w/]+)\.py: (\w+)`", text)
    pointers += [(m, n) for m, n in re.findall(r"`(\w+)\.(\w+)`", text)
                 if n not in ("py", "json", "jsonl", "md")]
    assert len(pointers) >= 6
    for module, name in pointers:
        found = [p for p in [_named_file(module + ".py"), *ROOT.glob(f"git_handoff/*/{module}.py")]
                 if p]
        assert found, module
        defines = re.compile(rf"^(def |class )?{name}\b", re.M)
        assert any(defines.search(p.read_text()) for p in found), (module, name)


def test_every_command_the_page_gives_is_a_script_with_those_options() -> None:
    block = re.findall(r"^    (?:PYTHONPATH=\$PWD )?python -m (\S+)(.*)$", DOC.read_text(), re.M)
    modules = {m for m, _ in block}
    scripts = ("measure", "measure_scale", "calibrate", "run_scale")
    assert {f"bench.fleet_sim.{s}" for s in scripts} <= modules
    for module, args in block:
        if module == "pytest":
            assert all((ROOT / a).is_file() for a in args.split() if a.endswith(".py"))
            continue
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        for option in re.findall(r"--[\w-]+", args):
            assert f'"{option}"' in source, (module, option)
    smallest = re.search(r"Each script's smallest run.*?\n\n", DOC.read_text(), re.S)
    assert smallest is not None
    for option in re.findall(r"--[\w-]+", smallest.group(0)):
        assert any(f'"{option}"' in (SIM / f"{s}.py").read_text() for s in scripts), option
