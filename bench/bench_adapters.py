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
    names = [("claim vs tasks.json+mkdir, 100 tasks", 100, 1.2),
             ("claim vs tasks.json+mkdir, 10,000 tasks", 10000, 0.6)]
    bench_claim = _module("bench_claim") if feature_built("work") else None
    if bench_claim is None:
        return [not_built(n, f"<= {t:g}x") for n, _, t in names]
    work = fresh_dir("claim-baseline")
    work.mkdir()
    times = bench_claim.measure([100, 10000], 2 if quick else 11, work)
    rows = []
    for name, n, limit in names:
        ours, base = median(times[n]["ours"]), median(times[n]["baseline"])
        rows.append(Row(name, ms(ours), f"tasks.json+mkdir {ms(base)}", ours / base, f"<= {limit:g}x",
                        ours / base <= limit))
    return rows


# -- claim storm -------------------------------------------------------------------------

STORM_WORKER = """
import json, subprocess, sys, time
worker, argv = sys.argv[1], sys.argv[2:]
claimed, retries, last = [], 0, None
while True:
    p = subprocess.run(argv + ["claim", "--force", "--worker", worker, "--json"], capture_output=True, text=True)
    if p.returncode == 0:
        claimed.append(json.loads(p.stdout)["id"])
        last = time.time()
    elif p.returncode == 3:
        retries += 1
    elif p.returncode == 1:
        break
    else:
        print(json.dumps({"error": p.stderr.strip()[-300:]}))
        sys.exit(1)
print(json.dumps({"claimed": claimed, "retries": retries, "last": last}))
"""


def _storm(procs: int, tasks: int) -> dict[str, Any]:
    path = state_copy(f"storm-{procs}", tasks)
    start = time.time()
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
    # up to the last successful claim: the final "nothing left" call of each worker is not a claim
    wall = max(r["last"] or start for r in results) - start
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
    tasks = 32 if quick else 192
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


def _grow_state_fast(repo: Path, count: int) -> None:
    """`count` more state commits (one log line each) in one `git fast-import` pack:
    100,000 loose commits through libgit2 would take minutes here."""
    tip = git("rev-parse", "refs/harness/state", cwd=repo)
    chunks = []
    for n in range(count):
        msg = f"[2026-07-01T10:00:00Z] [SESSION-0] WARN bench filler {n}\n".encode()
        head = (f"commit refs/harness/state\ncommitter bench <bench@example.com> {1782900000 + n} +0000\n"
                f"data {len(msg)}\n")
        chunks.append(head.encode() + msg + (f"from {tip}\n".encode() if n == 0 else b"") + b"\n")
    git("fast-import", "--quiet", "--force", cwd=repo, input=b"".join(chunks))


def hook_overhead(quick: bool) -> list[Row]:
    names = [("post-commit hook, 10 state commits", "<= 2.0x"), ("post-commit hook, 100,000 state commits", "<= 2.0x")]
    bench_hook = _module("bench_hook") if feature_built("hooks") else None
    if bench_hook is None:
        return [not_built(n, t) for n, t in names]
    bench_hook.grow_state = _grow_state_fast
    root = fresh_dir("hook")
    root.mkdir()
    rows = []
    ratios = []
    for count in (10, 100_000):
        repo, hooks, empty = bench_hook.setup(root, count)
        actual = int(git("rev-list", "--count", "refs/harness/state", cwd=repo))
        hooked, bare = bench_hook.measure(repo, hooks, empty, 20 if quick else 100)
        ratios.append(hooked / bare)
        target = "<= 2.0x" + ("; not growing (<= 1.25x the 10-commit ratio)" if ratios[1:] else "")
        ok = hooked / bare <= 2.0 and (len(ratios) == 1 or ratios[-1] <= ratios[0] * 1.25)
        rows.append(Row(f"post-commit hook, {actual:,} state commits: git commit", ms(hooked),
                        f"no hook {ms(bare)}", hooked / bare, target, ok))
    return rows


# -- sync (branch sync) ---------------------------------------------------------------------


def sync_divergent(quick: bool) -> list[Row]:
    bench_sync = _module("bench_sync") if feature_built("sync") else None
    if bench_sync is None:
        return [not_built("sync of 1,000 divergent updates", "<= 3x")]
    import contextlib
    import io
    import os

    updates, tasks, runs = (200, 400, 1) if quick else (1000, 2000, 3)
    saved_env, saved_argv = dict(os.environ), sys.argv
    out = io.StringIO()
    try:
        sys.argv = ["bench_sync.py", "--tasks", str(tasks), "--updates", str(updates), "--runs", str(runs)]
        with contextlib.redirect_stdout(out):
            bench_sync.main()
    except SystemExit as exc:  # the script's way to fail (a command failed): a row, not the end of the run
        raise RuntimeError(str(exc)[-300:]) from None
    finally:
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    medians = []
    for line in out.getvalue().splitlines():
        if "median" in line:
            medians.append(float(line.split("median", 1)[1].split("ms")[0]) / 1000)
    if len(medians) != 2:
        raise RuntimeError(f"unexpected bench_sync output: {out.getvalue()[-300:]}")
    ours, plain = medians
    return [Row(f"sync of {updates:,} divergent updates per side", ms(ours), f"git fetch+push {ms(plain)}",
                ours / plain, "<= 3x", ours / plain <= 3.0)]
