"""Scenarios that reuse the feature branches' own benchmark scripts as modules
(bench_claim + baseline_harness, bench_hook, bench_sync), plus the claim storm.
Each returns rows for bench/run.py; a feature not built yet gives "n/a (not built)".
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    HANDOFF,
    ROOT,
    Row,
    feature_built,
    fresh_dir,
    git,
    median,
    ms,
    not_built,
    state_copy,
)

sys.path.insert(0, str(ROOT / "bench"))  # the branch scripts import each other by bare name


def _module(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


# -- claim vs the harness skill's tasks.json under a mkdir lock --------------------------


def claim_vs_baseline(quick: bool) -> list[Row]:
    names = [("claim vs tasks.json+mkdir, 100 tasks", 100, 1.2), ("claim vs tasks.json+mkdir, 10,000 tasks", 10000, 0.6)]
    bench_claim = _module("bench_claim") if feature_built("work") else None
    if bench_claim is None:
        return [not_built(n, f"<= {t:g}x") for n, _, t in names]
    work = fresh_dir("claim-baseline")
    work.mkdir()
    times = bench_claim.measure([100, 10000], 4 if quick else 11, work)
    rows = []
    for name, n, limit in names:
        ours, base = median(times[n]["ours"]), median(times[n]["baseline"])
        rows.append(Row(name, ms(ours), f"tasks.json+mkdir {ms(base)}", ours / base, f"<= {limit:g}x", ours / base <= limit))
    return rows


# -- claim storm -------------------------------------------------------------------------

STORM_WORKER = """
import json, subprocess, sys, time
worker, argv = sys.argv[1], sys.argv[2:]
claimed, retries = [], 0
while True:
    p = subprocess.run(argv + ["claim", "--force", "--worker", worker, "--json"], capture_output=True, text=True)
    if p.returncode == 0:
        claimed.append(json.loads(p.stdout)["id"])
    elif p.returncode == 3:
        retries += 1
    elif p.returncode == 1:
        break
    else:
        print(json.dumps({"error": p.stderr.strip()[-300:]}))
        sys.exit(1)
print(json.dumps({"claimed": claimed, "retries": retries}))
"""


def _storm(procs: int, tasks: int) -> dict[str, Any]:
    path = state_copy(f"storm-{procs}", tasks)
    start = time.perf_counter()
    children = [
        subprocess.Popen([sys.executable, "-c", STORM_WORKER, f"w{k}", *HANDOFF], cwd=path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for k in range(procs)
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=1800)
        if child.returncode != 0:
            raise RuntimeError(f"storm worker failed: {out.strip()[-300:]} {err.strip()[-300:]}")
        results.append(json.loads(out))
    wall = time.perf_counter() - start
    claimed = [tid for r in results for tid in r["claimed"]]
    counts = Counter(claimed)
    starting = Counter(
        line.split("[", 4)[3].split("]")[0]
        for line in git("log", "--format=%B", "refs/harness/state", cwd=path).splitlines()
        if "] Starting [" in line
    )
    lost = git("fsck", "--unreachable", "--no-reflogs", "--no-progress", cwd=path, check=False)
    lost_commits = sum(1 for line in lost.splitlines() if line.startswith("unreachable commit"))
    return {
        "claims": len(claimed),
        "unique": len(counts),
        "double": sum(1 for c in counts.values() if c > 1) + sum(1 for c in starting.values() if c > 1),
        "retries": sum(r["retries"] for r in results) + lost_commits,
        "rate": len(claimed) / wall,
        "wall": wall,
    }


def claim_storm(quick: bool) -> list[Row]:
    if not feature_built("work"):
        return [not_built("claim storm 1/4/16 processes", "16 >= 1; 0 double claims")]
    tasks = 32 if quick else 160
    rows = []
    rates = {}
    for procs in (1, 4, 16):
        r = _storm(procs, tasks)
        rates[procs] = r["rate"]
        complete = r["claims"] == tasks == r["unique"]
        rows.append(Row(
            f"claim storm, {procs} process{'es' if procs > 1 else ''}, {tasks} tasks",
            f"{r['rate']:.1f} claims/s; {r['retries'] / max(1, r['claims']):.2f} retries/success; "
            f"{r['double']} double claims",
            "1 process" if procs > 1 else "-",
            r["rate"] / rates[1] if procs > 1 else None,
            "0 double, all claimed" + ("; >= 1 process" if procs == 16 else ""),
            r["double"] == 0 and complete and (procs != 16 or r["rate"] >= rates[1]),
        ))
    return rows


# -- post-commit hook (branch session) -----------------------------------------------------


def hook_overhead(quick: bool) -> list[Row]:
    names = [("post-commit hook, 10 state commits", "<= 2.0x"), ("post-commit hook, 100,000 state commits", "<= 2.0x")]
    bench_hook = _module("bench_hook") if feature_built("hooks") else None
    if bench_hook is None:
        return [not_built(n, t) for n, t in names]
    return bench_hook.rows_for_run(quick)


# -- sync (branch sync) ---------------------------------------------------------------------


def sync_divergent(quick: bool) -> list[Row]:
    bench_sync = _module("bench_sync") if feature_built("sync") else None
    if bench_sync is None:
        return [not_built("sync of 1,000 divergent updates", "<= 3x")]
    return bench_sync.rows_for_run(quick)
