"""What a sync costs against a remote a fleet piled up (docs/threat-model.md).

    PYTHONPATH=$PWD python bench/bench_sync_fleet.py [--quick]

- One new task from each of N clone heads (refs/harness/clones/<id>/state, each one
  `add` on the same state): the whole `git handoff sync` of a clone that holds that state,
  for N = 1,000 and 10,000 (quick: 100 and 1,000). Target: <= 5 s, and growing linearly
  (the time per head at the larger N at most 1.5x the time per head at the smaller).
- Under each of those, git's own share of the sync: the seconds the git processes the
  sync ran took (fetch, update-ref, fast-import, push, from GIT_TRACE2_EVENT), and the
  rest, ours (Python, libgit2, process starts).
- A remote holding 60,000 refs in a namespace this version does not read
  (refs/harness/junk/*): a sync bringing one new task, against the same sync without
  them. Target: <= 1.2x.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    Row,
    copy_repo,
    copy_world,
    fleet_world,
    fresh_dir,
    git,
    handoff_ok,
    median,
    ms,
    workdir,
)
from tests.support.fleet_heads import publish_heads, publish_unknown_refs

GIT_SHARE = ("fetch", "update-ref", "fast-import", "push")


def _git_seconds(trace: Path) -> dict[str, float]:
    """{git command: seconds} of the git processes the sync itself started (a trace2
    event file; their children, under a sid with a '/', are inside those seconds)."""
    name: dict[str, str] = {}
    out: dict[str, float] = {}
    for line in trace.read_text(errors="replace").splitlines():
        event = json.loads(line)
        sid = event.get("sid", "/")
        if "/" in sid:
            continue
        if event.get("event") == "cmd_name":
            name[sid] = str(event.get("name"))
        elif event.get("event") == "exit" and sid in name:
            out[name[sid]] = out.get(name[sid], 0.0) + float(event.get("t_abs", 0.0))
    return out


def _timed_sync(remote: Path, c: Path, name: str, gits: list[dict[str, float]] | None = None) -> float:
    """Sync a copy of clone `c` against a copy of `remote` (so every run starts alike);
    with `gits`, the sync's git seconds are appended to it."""
    base = c.parent / name
    _, clone = copy_world(remote, c, base)
    trace = base / "trace2.json"
    took = handoff_ok(["sync"], clone, {"GIT_TRACE2_EVENT": str(trace)} if gits is not None else None)
    if gits is not None:
        gits.append(_git_seconds(trace))
    shutil.rmtree(base, ignore_errors=True)
    return took


def _share_rows(took: float, gits: dict[str, float]) -> list[Row]:
    total = sum(gits.values())
    rows = [Row(f"  of which git {cmd}", ms(gits.get(cmd, 0.0))) for cmd in GIT_SHARE]
    rows.append(Row("  of which other git commands", ms(total - sum(gits.get(cmd, 0.0) for cmd in GIT_SHARE))))
    rows.append(Row("  of which ours (the rest)", ms(took - total)))
    return rows


def heads_rows(counts: tuple[int, int], repeats: int) -> list[Row]:
    rows: list[Row] = []
    per_head: list[float] = []
    for n in counts:
        remote, a, c = fleet_world(fresh_dir(f"fleet-heads-{n}"))
        publish_heads(a, n)
        gits: list[dict[str, float]] = []
        times = [_timed_sync(remote, c, f"run{i}", gits) for i in range(repeats)]
        t = median(times)
        per_head.append(t / n)
        rows.append(Row(f"sync adopting one task from each of {n:,} clone heads", ms(t),
                        f"runs: {', '.join(ms(x) for x in times)}", None, "<= 5 s", t <= 5))
        at = times.index(sorted(times)[(len(times) - 1) // 2])  # the run of the median (the lower one of two)
        rows += _share_rows(times[at], gits[at])
        shutil.rmtree(remote.parent, ignore_errors=True)
    growth = per_head[1] / per_head[0]
    rows.append(Row(f"  time per head, {counts[1]:,} vs {counts[0]:,} heads",
                    f"{per_head[1] * 1000:.2f} ms", f"{per_head[0] * 1000:.2f} ms", growth,
                    "<= 1.5x (linear)", growth <= 1.5))
    return rows


def unknown_refs_rows(n_refs: int, repeats: int) -> list[Row]:
    remote, a, c = fleet_world(fresh_dir("fleet-unknown"))
    handoff_ok(["add", "one more", "--id", "more"], a)
    handoff_ok(["sync"], a)
    piled = remote.parent / "piled.git"
    copy_repo(remote, piled)
    publish_unknown_refs(piled, n_refs, git("rev-parse", "HEAD", cwd=a))
    plain, junk = [], []
    for i in range(repeats):
        plain.append(_timed_sync(remote, c, f"plain{i}"))
        junk.append(_timed_sync(piled, c, f"junk{i}"))
    p, j = median(plain), median(junk)
    ratio = j / p
    return [Row(f"sync with {n_refs:,} refs in an unknown namespace on the remote", ms(j), ms(p), ratio,
                "<= 1.2x", ratio <= 1.2)]


def fleet_sync(quick: bool) -> list[Row]:
    workdir()
    counts = (100, 1_000) if quick else (1_000, 10_000)
    return heads_rows(counts, 1 if quick else 2) + unknown_refs_rows(60_000, 3 if quick else 5)


if __name__ == "__main__":
    from bench.run import print_table

    print_table(fleet_sync("--quick" in sys.argv))
