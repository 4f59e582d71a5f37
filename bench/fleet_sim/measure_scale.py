"""The costs the K <= 16 fleet runs cannot show, measured on the real code for the
simulation (bench/fleet_sim/calibrate.py --scale):

- a sync merging N new clone heads (N = 100 and 1,000; tests/support/fleet_heads.py
  publishes them), its CPU per head; then the same clone's next sync with those N refs
  unchanged on the remote: the CPU per ref a fetch that finds nothing new costs;
- a joining clone's bytes: a state history of T transactions (claim then done of a task,
  the work loop's two state commits per task, written in-process with the store's own
  Tx) pushed to a bare remote; a new `git clone` over file:// (a real pack transfer)
  then `git handoff sync`: the pack bytes that sync brought, at two history lengths, so
  bytes per state commit (its tree and record, deltified) and the fixed part.

    python -m bench.fleet_sim.measure_scale --out scale.json [--heads 100,1000] [--history 200,1000]

Two sizes each (the costs are the differences); bench/fleet_sim/measured-scale.json was
measured with --heads 100,500 --history 500,2000. The smallest run: --heads 2,4 --history 4,8.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import HANDOFF, fleet_remote, fleet_world, fresh_dir, git, workdir  # noqa: E402
from bench.fleet_sim.measure import _timed  # noqa: E402


def _handoff(args: list[str], cwd: Path) -> tuple[float, float]:
    rc, _, err, wall, cpu = _timed([*HANDOFF, *args], cwd, dict(os.environ))
    if rc != 0:
        raise RuntimeError(f"git handoff {' '.join(args)}: exit {rc}: {err[-300:]}")
    return wall, cpu


def heads_cost(n: int) -> dict[str, float]:
    from tests.support.fleet_heads import publish_heads

    remote, a, c = fleet_world(fresh_dir(f"scale-heads-{n}"))
    publish_heads(a, n)
    wall, cpu = _handoff(["sync"], c)
    wall2, cpu2 = _handoff(["sync"], c)  # nothing new: n clone refs unchanged
    shutil.rmtree(remote.parent, ignore_errors=True)
    return {"heads": n, "sync_wall": wall, "sync_cpu": cpu, "quiet_sync_wall": wall2, "quiet_sync_cpu": cpu2}


def _write_history(a: Path, transactions: int) -> None:
    """`transactions` state commits on a's state, the work loop's: a claim (the task in
    progress, with the fields a claim records) then its done, task after task."""
    from git_handoff.core.model import Task, now_iso, order_key_now
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state.store import StateStore, Tx

    repo = Repo.discover(a)
    store = StateStore(repo)
    base = store.head()
    assert base is not None
    first = base
    stamp = now_iso()
    n_tasks = transactions // 2 + 1
    tx = Tx(store, store.snapshot(base))
    for i in range(n_tasks):
        tx.put_task(Task(id=f"t{i:05d}", title=f"Task {i}", check="true", created_at=stamp, order=order_key_now()))
    base = store.build_commit(tx, [base])
    for j in range(transactions):
        tid = f"t{j // 2:05d}"
        tx = Tx(store, store.snapshot(base))
        task = tx.task(tid)
        assert task is not None
        if j % 2 == 0:
            task = dataclasses.replace(task, status="in_progress", claimed_by=f"worker-{j % 7}",
                                       lease_expires_at=now_iso(), started_at_commit=first).with_extra(
                worktree=f"/home/ci/runner-{j % 13}/repo", branch="main", claimed_at=now_iso(), lease_seconds=1800,
                claim_session=j + 1, clone=f"{j % 97:016x}")
            tx.put_task(task)
            tx.log("Starting", f"{task.title} (base={first[:7]})", task=tid)
        else:
            tx.put_task(dataclasses.replace(task, status="completed", completed_at=now_iso()))
            tx.log("Completed", task.title, task=tid)
        base = store.build_commit(tx, [base])
    assert store.publish(base, store.head(), "bench: history")


def _pack_bytes(repo: Path) -> int:
    out = git("count-objects", "-v", cwd=repo)
    kv = dict(line.split(": ") for line in out.splitlines())
    return (int(kv["size-pack"]) + int(kv["size"])) * 1024


def join_cost(transactions: int) -> dict[str, float]:
    remote, a = fleet_remote(fresh_dir(f"scale-join-{transactions}"))
    _write_history(a, transactions)
    _handoff(["sync"], a)
    j = remote.parent / "joiner"
    git("clone", "-q", f"file://{remote}", str(j), cwd=remote.parent)
    git("remote", "set-url", "origin", f"file://{remote}", cwd=j)
    before = _pack_bytes(j)
    t0 = time.monotonic()
    wall, cpu = _handoff(["sync"], j)
    after = _pack_bytes(j)
    state_bytes = int(git("cat-file", "-s", "refs/harness/state^{tree}", cwd=j) or 0)
    shutil.rmtree(remote.parent, ignore_errors=True)
    return {"transactions": transactions, "join_bytes": after - before, "join_sync_wall": wall, "join_sync_cpu": cpu,
            "root_tree_bytes": state_bytes, "seconds": time.monotonic() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--heads", default="100,1000")
    ap.add_argument("--history", default="200,1000")
    a = ap.parse_args(argv)
    if len(a.heads.split(",")) < 2 or len(a.history.split(",")) < 2:
        ap.error("--heads and --history each take two sizes (the costs are their differences)")
    workdir()
    heads = [heads_cost(int(n)) for n in a.heads.split(",")]
    joins = [join_cost(int(n)) for n in a.history.split(",")]
    (h1, h2), (j1, j2) = heads[:2], joins[:2]
    per_head = (h2["sync_cpu"] - h1["sync_cpu"]) / (h2["heads"] - h1["heads"])
    per_ref = max(0.0, (h2["quiet_sync_cpu"] - h1["quiet_sync_cpu"]) / (2 * (h2["heads"] - h1["heads"])))
    per_commit = (j2["join_bytes"] - j1["join_bytes"]) / (j2["transactions"] - j1["transactions"])
    out: dict[str, Any] = {
        "heads": heads, "joins": joins, "load": os.getloadavg(),
        "derived": {"sync_cpu_per_head_at_scale": per_head, "cpu_per_ref": per_ref, "bytes_per_commit": per_commit,
                    "join_fixed_bytes": j1["join_bytes"] - per_commit * j1["transactions"],
                    "join_cpu_per_transaction": (j2["join_sync_cpu"] - j1["join_sync_cpu"])
                    / (j2["transactions"] - j1["transactions"])},
        "params": {"bytes_per_commit": round(per_commit, 1), "cpu_per_ref": round(per_ref, 7)},
    }
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
