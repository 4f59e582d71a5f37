"""The fleet beyond this machine, by the calibrated model: K = 100 and 1,000 clones,
each on its own machine, 100 ms round trips, one server; and a month of ephemeral
machines. Prints the figures docs/fleet-simulation.md reports (and writes them as JSON).

    python -m bench.fleet_sim.run_scale [--out results.json] [--month-days 30] [--seed 1]
                                        [--fleets 16:8,100:8,...] [--skip-month]

--fleets is the fixed pools to run, each K:server cores (5 x K tasks each); the
smallest run: --fleets 4:1 --month-days 0.1 --month-machines 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.fleet_sim.scenarios import fixed_pool, load_params, month  # noqa: E402

FLEETS = "16:8,100:8,100:32,1000:8,1000:32,1000:128"  # the table of docs/fleet-simulation.md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--month-days", type=float, default=30.0)
    ap.add_argument("--month-machines", type=int, default=50)
    ap.add_argument("--skip-month", action="store_true")
    ap.add_argument("--bytes-per-commit", type=float, help="override (measure_scale.py's figure)")
    ap.add_argument("--fleets", default=FLEETS,
                    help="fixed pools to run, each K:server cores (default %(default)s)")
    a = ap.parse_args(argv)
    p = load_params()
    if a.bytes_per_commit:
        p = replace(p, bytes_per_commit=a.bytes_per_commit)
    out: dict[str, object] = {"params": p.__dict__}
    rows = []
    fleets = [(int(k), int(cores)) for k, cores in (f.split(":") for f in a.fleets.split(","))]
    for k, server_cores in fleets:
        t0 = time.monotonic()
        r = fixed_pool(p, k, 5 * k, seed=a.seed, rtt=0.1, shared_cores=None, server_cores=server_cores)
        r.pop("per_verb", None)
        r["server_cores"] = server_cores
        r["sim_seconds"] = round(time.monotonic() - t0, 1)
        rows.append(r)
        print(f"K={k} server {server_cores} cores: {r['tasks_per_s']:.2f} tasks/s, retries/claim "
              f"{r['retries_per_claim']:.3f}, claim p50 {r['claim_p50']:.1f} s, CPU/task {r['cpu_per_task']:.2f} s, "
              f"server CPU/task {r['server_cpu_per_task']:.2f} s, fetched/task "
              f"{r['fetch_bytes_per_task'] / 1e6:.2f} MB, double {r['double_claims']} lost {r['lost']}", flush=True)
    out["fixed"] = rows
    if not a.skip_month:
        t0 = time.monotonic()
        m = month(p, seed=a.seed, machines=a.month_machines, days=a.month_days, lifetime_h=12.0, tasks_per_day=1000.0,
                  work_min=5.0, poll_s=1800.0, killed=0.05, rtt=0.1, server_cores=8.0, sample_h=24.0)
        m.pop("per_verb", None)
        m["sim_seconds"] = round(time.monotonic() - t0, 1)
        out["month"] = m
        print(json.dumps({k: v for k, v in m.items() if k != "refs_samples"}, indent=1))
        print("refs samples (day, all refs, clone refs, claim refs):",
              [(round(t / 86400, 2), a_, c, cl) for t, a_, c, cl in m["refs_samples"]][::4])
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
