"""Long haul: many transactions on one state ref, in one process through the
store API (the cost of a transaction, without process start-up). Latency p50/p99
over the first and the last 1,000 transactions; loose objects and disk per
transaction, with the store's own background `git gc --auto` doing the packing.

Run alone: python bench/bench_longhaul.py [--quick] [--transactions N]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    Row,
    disk_bytes,
    kib,
    loose_objects,
    ms,
    percentile,
    state_copy,
    store_for,
    task_id,
    wait_for_gc,
)

TASKS = 200
WINDOW = 1000


def long_haul(quick: bool, transactions: int | None = None) -> list[Row]:
    from git_handoff.ops import tasks as ops

    total = transactions or (2000 if quick else 20000)
    path = state_copy("longhaul", TASKS)
    store = store_for(path)
    git_dir = store.repo.common_dir
    objects_dir = git_dir / "objects"
    disk_before = disk_bytes(objects_dir)
    latencies: list[float] = []
    max_loose = 0
    for i in range(total):
        tid = task_id((i * 31) % TASKS)
        start = time.perf_counter()
        if i % 2:
            ops.edit(store, tid, title=f"title {i}")
        else:
            ops.edit(store, tid, priority=("P0", "P1", "P2")[i % 3])
        latencies.append(time.perf_counter() - start)
        if i % 250 == 0:
            max_loose = max(max_loose, loose_objects(git_dir))
    max_loose = max(max_loose, loose_objects(git_dir))
    wait_for_gc(git_dir)
    loose_end = loose_objects(git_dir)
    disk_after = disk_bytes(objects_dir)
    window = min(WINDOW, total // 4)
    first, last = latencies[:window], latencies[-window:]
    p50s, p99s = percentile(first, 50), percentile(first, 99)
    p50e, p99e = percentile(last, 50), percentile(last, 99)
    per_k = loose_end / (total / 1000)
    return [
        Row(f"long haul {total:,} tx: p50 start / end", f"{ms(p50s)} / {ms(p50e)}", "-", p50e / p50s),
        Row(f"long haul {total:,} tx: p99 end vs start", ms(p99e), f"p99 start {ms(p99s)}", p99e / p99s,
            "<= 2x", p99e <= 2 * p99s),
        # Loose objects stay under a bound that does not depend on the run's length, so
        # per 1,000 transactions is only meaningful at the full run's 20,000.
        Row(f"long haul {total:,} tx: loose objects after gc",
            f"{loose_end} ({per_k:.1f} per 1,000 tx; peak {max_loose})",
            "-", None, "< 20 per 1,000 tx" + (" (at 20,000 tx)" if total < 20000 else ""),
            per_k < 20 if total >= 20000 else None),
        Row(f"long haul {total:,} tx: disk per transaction", kib((disk_after - disk_before) / total),
            f"objects/ {kib(disk_after)} total", None),
    ]


if __name__ == "__main__":
    from bench.run import print_table

    n = None
    if "--transactions" in sys.argv:
        n = int(sys.argv[sys.argv.index("--transactions") + 1])
    print_table(long_haul("--quick" in sys.argv, n))
