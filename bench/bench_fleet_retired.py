"""What a sync costs when the remote's history holds many clone ids, few of them active.

    PYTHONPATH=$PWD python bench/bench_fleet_retired.py [--quick]

A fleet of ephemeral machines (CI runners, cloud agents) leaves a new clone id per
machine. The world, for N = 1,000 and 10,000 (quick: 100 and 1,000):

- N clones each published a state (one task each) on the remote;
- clone `a` merged them all, and its next sync retired them (handoff.retireAfter = 0):
  their refs are deleted from the remote, their work is in `a`'s state and history;
- clone `c` synced that state (untimed: catching up once);
- then 20 active clones each published one new task.

Timed: `c`'s whole `git handoff sync` (fetch, merge the 20 heads, push), on a fresh copy
of the remote and of `c` per run. Targets: <= 2 s at each N, and flat in N (the time at
the larger N at most 1.25x the time at the smaller). Also shown: the syncs that
retired the N clones (500 per sync; once per fleet, informational).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_sync_fleet import _timed_sync
from bench.common import Row, fleet_world, fresh_dir, git, handoff_ok, median, ms, workdir
from tests.support.fleet_heads import publish_heads

ACTIVE = 20
RETIRED_FIRST = 1 << 32  # clone ids of the retired batch and of the active one never meet
ACTIVE_FIRST = 1 << 40


def _live_clone_refs(remote: Path) -> int:
    return len(git("for-each-ref", "refs/harness/clones/", cwd=remote).splitlines())


def retired_world(n: int) -> tuple[Path, Path, float]:
    """The world above for N = `n`: (remote, clone c, seconds the retiring sync took)."""
    remote, a, c = fleet_world(fresh_dir(f"fleet-retired-{n}"))
    git("config", "handoff.retireAfter", "0", cwd=a)
    publish_heads(a, n, prefix="old", first=RETIRED_FIRST)
    handoff_ok(["sync"], a)  # merges the n heads and publishes the result
    retiring = 0.0
    for _ in range(n // 400 + 3):  # our published state holds them now: their refs go, a slice per sync
        retiring += handoff_ok(["sync"], a)
        if _live_clone_refs(remote) <= 3:
            break
    left = _live_clone_refs(remote)
    if left > 3:
        raise RuntimeError(f"retirement left {left} clone refs on the remote")
    handoff_ok(["sync"], c)
    publish_heads(a, ACTIVE, prefix="new", first=ACTIVE_FIRST)
    return remote, c, retiring


def retired_rows(counts: tuple[int, int], repeats: int) -> list[Row]:
    rows: list[Row] = []
    medians: list[float] = []
    for n in counts:
        remote, c, retiring = retired_world(n)
        times = [_timed_sync(remote, c, f"run{i}") for i in range(repeats)]
        t = median(times)
        medians.append(t)
        rows.append(Row(f"sync, {n:,} clone ids in the history ({ACTIVE} active, the rest retired)", ms(t),
                        f"runs: {', '.join(ms(x) for x in times)}", None, "<= 2 s", t <= 2))
        rows.append(Row(f"  the syncs that retired those {n:,} clones (500 a sync)", ms(retiring)))
        shutil.rmtree(remote.parent, ignore_errors=True)
    growth = medians[1] / medians[0]
    rows.append(Row(f"  sync with {counts[1]:,} vs {counts[0]:,} retired ids", ms(medians[1]), ms(medians[0]),
                    growth, "<= 1.25x (flat)", growth <= 1.25))
    return rows


def fleet_retired(quick: bool) -> list[Row]:
    workdir()
    return retired_rows((100, 1_000) if quick else (1_000, 10_000), 3 if quick else 5)


if __name__ == "__main__":
    from bench.run import print_table

    print_table(fleet_retired("--quick" in sys.argv))
