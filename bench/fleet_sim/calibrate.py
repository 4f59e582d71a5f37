"""Calibrate the fleet model from measured runs (bench/fleet_sim/measure.py's jsonl) and
check that it reproduces them: writes bench/fleet_sim/calibration.json (the measured
medians, the derived costs, the background load each K ran beside, the simulated
figures and the tolerance) and prints the calibration table.

    python -m bench.fleet_sim.calibrate daemon.jsonl [delay.jsonl] [--scale scale.json]
                                        [--out cal.json]

(--out defaults to bench/fleet_sim/calibration.json, the file the test checks; the
measurements it was made from are bench/fleet_sim/measured-daemon.jsonl.)

How each cost is derived (nothing is fitted to throughput):
- CPU per command: the median over repeats of each verb's mean CPU (wait4 of the
  process and its gits). claim and sync grow with the state heads they merge: a least-
  squares line of the measured CPU at each K measured (K = 1, 4, 8, 16) against the heads
  the model says that command merges on average at that K (two passes, as the heads
  depend on the costs).
- the wall time that is no CPU (per verb): at K = 1 (a serial loop, always one process
  running), wall - (CPU + the server's share) / the share of a core the loop got.
- the server: its CPU per task at K = 1 split over the 2 fetches and 2 pushes of a task;
  its growth with K per new commit a fetch packs (the largest K measured against K = 1).
- round trips per fetch and push: from 100 ms delay runs (K = 1) when given: the extra
  wall per command over the daemon runs, in units of the delay; else 2 each (assumed).
- the other users of the machine: measured during each run (/proc/stat minus ours) and
  given to the model as always-runnable background jobs that take as much CPU in the
  model as the others took in the run.
- bytes and the per-head cost at 1,000 heads: bench/fleet_sim/measure_scale.py (--scale).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fleet_sim.model import Params  # noqa: E402
from bench.fleet_sim.scenarios import CALIBRATION, fixed_pool  # noqa: E402

SEEDS = (1, 2, 3, 4, 5)
TOLERANCE = 0.25  # simulated tasks/s within 25 % of the measured median (the runs' own spread is shown beside)
CPU_START = 0.2  # a `git handoff` process starting: `python -m git_handoff --version`, measured


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def measured_table(runs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for k in sorted({r["k"] for r in runs}):
        rs = [r for r in runs if r["k"] == k]
        tps = [r["tasks_per_s"] for r in rs]
        row: dict[str, Any] = {
            "runs": len(rs), "tasks": rs[0]["tasks"],
            "tasks_per_s": _med(tps), "tasks_per_s_min": min(tps), "tasks_per_s_max": max(tps),
            "cpu_per_task": _med([r["cpu_per_task"] for r in rs]),
            "server_cpu_per_task": _med([r.get("server_cpu_per_task", 0.0) for r in rs]),
            "others_cores": _med([r.get("others_cores", 0.0) for r in rs]),
            "retries_per_claim": _med([(r["claim_retries"] + r["per_verb"]["claim"]["exit3"])
                                       / max(r["per_verb"]["claim"]["n"], 1) for r in rs]),
            "claim_wall_p50": _med([r["per_verb"]["claim"]["wall_p50"] for r in rs]),
            "double": sum(r["double"] for r in rs), "lost": sum(r["lost"] for r in rs),
            "load_start": [r["load_start"][0] for r in rs],
        }
        for verb in ("claim", "commit", "done", "sync"):
            row[f"{verb}_cpu"] = _med([r["per_verb"][verb]["cpu_mean"] for r in rs])
            row[f"{verb}_wall"] = _med([r["per_verb"][verb]["wall_mean"] for r in rs])
        out[k] = row
    return out


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """y = a + b x by least squares (b >= 0)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    b = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var) if var else 0.0
    return my - b * mx, b


def simulate(p: Params, k: int, tasks: int, others: float, seeds: tuple[int, ...] = SEEDS
             ) -> tuple[list[dict[str, Any]], float]:
    """The model at K on 2 shared cores, with background jobs that take `others` cores
    on average (found by scaling the number of jobs until they do); the runs and that number."""
    def at(b: float) -> tuple[list[dict[str, Any]], float]:
        runs = [fixed_pool(p, k, tasks, seed=s, shared_cores=2.0, background=b) for s in seeds]
        return runs, statistics.fmean(r["background_cores"] for r in runs)

    if others <= 0.01:
        return at(0.0)[0], 0.0
    lo, hi = 0.0, 1.0
    while at(hi)[1] < others and hi < 1000:
        lo, hi = hi, hi * 2
    for _ in range(12):  # bisection: the background takes more as it has more jobs
        mid = (lo + hi) / 2
        if at(mid)[1] < others:
            lo = mid
        else:
            hi = mid
    b = round((lo + hi) / 2, 3)
    return at(b)[0], b


def derive(table: dict[int, dict[str, Any]], delay: dict[int, dict[str, Any]] | None,
           scale: dict[str, Any] | None) -> Params:
    if 1 not in table:
        raise SystemExit("calibrate: the measurements hold no K = 1 run (measure.py --ks 1,...)")
    ks = sorted(table)  # the Ks measured: 1, 4, 8, 16 for calibration.json
    one = table[1]
    p = Params(cpu_start=CPU_START)
    srv_op = one["server_cpu_per_task"] / 4 if one["server_cpu_per_task"] else p.srv_fetch
    # the serial K = 1 loop is always running one process: the share of a core it got is
    # its CPU (and the server's, which it waits for) per second; wall - work / share is
    # what no CPU explains (on a busy machine, ~0)
    share: float = min(1.0, (one["cpu_per_task"] + one["server_cpu_per_task"]) * one["tasks_per_s"])

    def gap(verb: str, server: float) -> float:
        wall: float = one[f"{verb}_wall"]  # seconds, as measure.py wrote them
        cpu: float = one[f"{verb}_cpu"]
        return max(0.0, wall - (cpu + server) / share)

    p = replace(p, cpu_done=max(0.0, one["done_cpu"] - CPU_START), cpu_commit=one["commit_cpu"],
                srv_fetch=srv_op, srv_push=srv_op, wall_done=gap("done", 0.0), wall_commit=gap("commit", 0.0),
                wall_claim=gap("claim", 2 * srv_op), wall_sync=gap("sync", 2 * srv_op))
    if delay and 1 in delay:
        d = delay[1]
        rtt = 0.1
        extra_claim = (d["claim_wall"] - one["claim_wall"]) / rtt
        extra_sync = (d["sync_wall"] - one["sync_wall"]) / rtt
        # a claim and a sync are each one fetch and one push: half the round trips each
        per_op = max(1.0, (extra_claim + extra_sync) / 4)
        p = replace(p, rtts_fetch=round(per_op, 2), rtts_push=round(per_op, 2))
    if scale:
        p = replace(p, **{k: v for k, v in scale.get("params", {}).items()})
    # the per-head CPU of claim and sync, from the K-scaling (two passes)
    p = replace(p, cpu_claim=max(0.0, one["claim_cpu"] - CPU_START), cpu_sync=max(0.0, one["sync_cpu"] - CPU_START))
    for _ in range(2):
        heads: dict[str, list[float]] = {"claim": [], "sync": []}
        for k in ks:
            runs, _ = simulate(p, k, table[k]["tasks"], table[k]["others_cores"], seeds=SEEDS[:2])
            for verb in heads:
                heads[verb].append(statistics.fmean(r["per_verb"][verb]["heads_mean"] for r in runs))
        a_c, b_c = _fit_line(heads["claim"], [table[k]["claim_cpu"] for k in ks])
        a_s, b_s = _fit_line(heads["sync"], [table[k]["sync_cpu"] for k in ks])
        p = replace(p, cpu_claim=max(0.0, a_c - CPU_START), cpu_claim_head=b_c,
                    cpu_sync=max(0.0, a_s - CPU_START), cpu_sync_head=b_s)
    # the server's growth with K: per new commit a fetch packs (the largest K against K = 1)
    top = table[ks[-1]]
    if top["server_cpu_per_task"] and one["server_cpu_per_task"]:
        runs, _ = simulate(p, ks[-1], top["tasks"], top["others_cores"], seeds=SEEDS[:2])
        commits_per_task = statistics.fmean(r["fetch_bytes_per_task"] for r in runs) / p.bytes_per_commit
        extra = top["server_cpu_per_task"] - one["server_cpu_per_task"]
        if commits_per_task > 0 and extra > 0:
            p = replace(p, srv_per_commit=extra / commits_per_task)
    return p


def calibrate(daemon: list[dict[str, Any]], delay_runs: list[dict[str, Any]] | None,
              scale: dict[str, Any] | None) -> dict[str, Any]:
    table = measured_table(daemon)
    delay = measured_table(delay_runs) if delay_runs else None
    p = derive(table, delay, scale)
    rows = []
    for k in sorted(table):
        m = table[k]
        runs, b = simulate(p, k, m["tasks"], m["others_cores"])
        sim_tps = _med([r["tasks_per_s"] for r in runs])
        rows.append({
            "k": k, "tasks": m["tasks"], "background_jobs": round(b, 3), "others_cores": round(m["others_cores"], 3),
            "measured_tasks_per_s": round(m["tasks_per_s"], 3),
            "measured_range": [round(m["tasks_per_s_min"], 3), round(m["tasks_per_s_max"], 3)],
            "simulated_tasks_per_s": round(sim_tps, 3),
            "simulated_range": [round(min(r["tasks_per_s"] for r in runs), 3),
                                round(max(r["tasks_per_s"] for r in runs), 3)],
            "ratio": round(sim_tps / m["tasks_per_s"], 3),
            "measured_cpu_per_task": round(m["cpu_per_task"], 3),
            "simulated_cpu_per_task": round(_med([r["cpu_per_task"] for r in runs]), 3),
            "measured_retries_per_claim": round(m["retries_per_claim"], 3),
            "simulated_retries_per_claim": round(_med([r["retries_per_claim"] for r in runs]), 3),
            "measured_claim_p50": round(m["claim_wall_p50"], 3),
            "simulated_claim_p50": round(_med([r["claim_p50"] for r in runs]), 3),
        })
    if delay:
        for k, m in sorted(delay.items()):
            runs, b = simulate(replace(p, rtt=0.1), k, m["tasks"], m["others_cores"])
            sim_tps = _med([r["tasks_per_s"] for r in runs])
            rows.append({"k": k, "tasks": m["tasks"], "rtt": 0.1, "background_jobs": round(b, 3),
                         "others_cores": round(m["others_cores"], 3),
                         "measured_tasks_per_s": round(m["tasks_per_s"], 3),
                         "measured_range": [round(m["tasks_per_s_min"], 3), round(m["tasks_per_s_max"], 3)],
                         "simulated_tasks_per_s": round(sim_tps, 3), "ratio": round(sim_tps / m["tasks_per_s"], 3),
                         "measured_cpu_per_task": round(m["cpu_per_task"], 3),
                         "simulated_cpu_per_task": round(_med([r["cpu_per_task"] for r in runs]), 3)})
    return {"params": asdict(p), "tolerance": TOLERANCE, "seeds": list(SEEDS), "table": rows,
            "measured": {str(k): v for k, v in table.items()},
            "measured_delay": {str(k): v for k, v in (delay or {}).items()}}


def print_table(cal: dict[str, Any]) -> None:
    print("| K | RTT | tasks | others' load (cores) | tasks/s measured (median, min-max) | tasks/s simulated (median, "
          "5 seeds) | sim / measured | CPU/task measured / simulated | retries/claim measured / simulated | claim p50 "
          "measured / simulated |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in cal["table"]:
        lo, hi = r["measured_range"]
        print(f"| {r['k']} | {r.get('rtt', 0) * 1000:.0f} ms | {r['tasks']} | {r['others_cores']:.2f} | "
              f"{r['measured_tasks_per_s']:.3f} ({lo:.3f}-{hi:.3f}) | {r['simulated_tasks_per_s']:.3f} | "
              f"{r['ratio']:.2f} | {r['measured_cpu_per_task']:.2f} / {r['simulated_cpu_per_task']:.2f} s | "
              f"{r.get('measured_retries_per_claim', float('nan')):.3f} / "
              f"{r.get('simulated_retries_per_claim', float('nan')):.3f} | "
              f"{r.get('measured_claim_p50', float('nan')):.2f} / {r.get('simulated_claim_p50', float('nan')):.2f} s |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("daemon", type=Path)
    ap.add_argument("delay", type=Path, nargs="?")
    ap.add_argument("--scale", type=Path,
                    help="measure_scale.py's JSON (bytes per commit, per-head cost at 1,000 heads)")
    ap.add_argument("--out", type=Path, default=CALIBRATION)
    a = ap.parse_args(argv)

    def read(path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    cal = calibrate(read(a.daemon), read(a.delay) if a.delay else None,
                    json.loads(a.scale.read_text()) if a.scale else None)
    a.out.write_text(json.dumps(cal, indent=1) + "\n")
    print_table(cal)
    print(json.dumps(cal["params"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
