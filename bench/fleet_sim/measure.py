"""Measure a real fleet for the simulation's calibration: the loop of
tests/support/fleet.py (`claim --remote` -> write a file -> `git commit` -> `done` ->
`sync`, K clones of one bare remote served by `git daemon`, optionally behind the
delay proxy), with every command's wall time and CPU (user+sys of the process and the
gits it waited for, from wait4) recorded per verb, and the retries the commands
report through GIT_HANDOFF_STATS. The audit of tests/support/fleet.py runs at the end
(0 double claims, 0 lost, same state everywhere).

    python -m bench.fleet_sim.measure --ks 1,4,8,16 --tasks 48 --repeat 3 --jsonl out.jsonl
                                      [--transport daemon|delay] [--delay-ms 100]

One JSON object per run (K, repeat) is appended to --jsonl; bench/fleet_sim/
calibration.json is the median table the simulation is checked against (written from
that jsonl by bench/fleet_sim/calibrate.py). The smallest run: --ks 1 --tasks 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import workdir  # noqa: E402
from tests.support import fleet, transports  # noqa: E402

VERBS = ("claim", "commit", "done", "sync")


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str, float, float]:
    """(rc, stdout, stderr, wall seconds, CPU seconds of the process and its waited children)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # communicate() then wait4 would race the reaping; read the pipes in threads and reap ourselves
    out: list[str] = []
    err: list[str] = []
    assert proc.stdout is not None and proc.stderr is not None
    t_out = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    t_err = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    t_out.start()
    t_err.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    t_out.join()
    t_err.join()
    return proc.returncode, out[0], err[0], time.monotonic() - t0, usage.ru_utime + usage.ru_stime


def machine_busy() -> float:
    """CPU seconds every process on this machine has used so far (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in parts[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def loop(path: Path, record: list[dict[str, Any]], stats_file: Path) -> dict[str, Any]:
    """One clone's loop until claim exits 1; every command's figures go to `record`."""
    env = fleet.child_env(GIT_HANDOFF_STATS=str(stats_file))
    done_ids: list[str] = []
    errors: list[str] = []
    n = 0

    def run(verb: str, argv: list[str]) -> tuple[int, str, str]:
        rc, out, err, wall, cpu = _timed(argv, path, env)
        record.append({"verb": verb, "rc": rc, "wall": wall, "cpu": cpu, "t": time.monotonic()})
        return rc, out, err

    while len(errors) <= 5:
        rc, out, err = run("claim", fleet.handoff_argv("claim", "--remote", "origin", "--json"))
        if rc == 3:
            continue
        if rc == 1:
            break
        if rc != 0:
            errors.append(f"claim exit {rc}: {err.strip()[:200]}")
            continue
        tid = json.loads(out)["id"]
        n += 1
        (path / f"work-{path.name}-{n}.txt").write_text(f"{tid} by {path.name}\n")
        rc, _, err = run("commit", ["sh", "-c", "git add -A && git commit -q -m work"])
        for _ in range(5):
            rc, out, err = run("done", fleet.handoff_argv("done", tid, "--json"))
            if rc != 3:
                break
        if rc == 0:
            done_ids.append(tid)
        else:
            errors.append(f"done {tid} exit {rc}: {err.strip()[:200]}")
        rc, out, err = run("sync", fleet.handoff_argv("sync", "origin", "--json"))
        if rc not in (0, 3):
            errors.append(f"sync exit {rc}: {err.strip()[:200]}")
    return {"completed": done_ids, "errors": errors}


def one_run(k: int, n_tasks: int, transport: str, delay_ms: float) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"handoff-fleetsim-k{k}-", dir=workdir()))
    served = work / "served"
    bare = fleet.prepare_remote(served, n_tasks)
    load_start = os.getloadavg()
    with contextlib.ExitStack() as stack:
        url = f"{stack.enter_context(transports.git_daemon(served))}/{fleet.REMOTE_NAME}"
        if transport == "delay":
            port = stack.enter_context(transports.delay_proxy(int(url.split(":")[2].split("/")[0]), delay_ms))
            url = f"git://127.0.0.1:{port}/{fleet.REMOTE_NAME}"
        clones = fleet.make_clones(work, url, k)
        refs0 = len(fleet.ref_updates(bare))
        records: list[list[dict[str, Any]]] = [[] for _ in clones]
        results: list[dict[str, Any]] = [{} for _ in clones]
        stats = [work / f"stats-{i}.jsonl" for i in range(k)]
        cpu0, t0, busy0 = fleet.children_cpu(), time.monotonic(), machine_busy()

        def one(i: int) -> None:
            try:
                results[i] = loop(clones[i], records[i], stats[i])
            except Exception as exc:  # noqa: BLE001 - reported
                results[i] = {"completed": [], "errors": [f"{type(exc).__name__}: {exc}"]}

        threads = [threading.Thread(target=one, args=(i,)) for i in range(k)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.monotonic() - t0
        loops_cpu = fleet.children_cpu() - cpu0
        busy = machine_busy() - busy0
        refs = fleet.ref_updates(bare)[refs0:]
        reports = [fleet.CloneReport(p.name, completed=r["completed"]) for p, r in zip(clones, results, strict=True)]
        audit = fleet.audit(clones, reports)
        cpu_before_stop = fleet.children_cpu()
    # the server (git daemon and the upload-pack/receive-pack it forked) is reaped as the
    # context closes: its CPU, as bench_fleet.py counts it (clone setup and the audit's
    # syncs included, so a little over the loops' share)
    server_cpu = fleet.children_cpu() - cpu_before_stop
    # what the rest of the machine (other users) took meanwhile, in cores on average; the
    # server's share is estimated from its CPU over the whole context
    others = max(0.0, busy - loops_cpu - server_cpu) / seconds
    load_end = os.getloadavg()
    flat = [r for rs in records for r in rs]
    per_verb: dict[str, dict[str, float]] = {}
    for verb in VERBS:
        ok = [r for r in flat if r["verb"] == verb and r["rc"] == 0]
        per_verb[verb] = {
            "n": len(ok), "cpu_mean": statistics.fmean(r["cpu"] for r in ok) if ok else 0.0,
            "wall_mean": statistics.fmean(r["wall"] for r in ok) if ok else 0.0,
            "wall_p50": statistics.median(r["wall"] for r in ok) if ok else 0.0,
            "exit3": sum(1 for r in flat if r["verb"] == verb and r["rc"] == 3),
            "calls": sum(1 for r in flat if r["verb"] == verb),
            "cpu_all": sum(r["cpu"] for r in flat if r["verb"] == verb),
        }
    claim_stats = [json.loads(line) for s in stats if s.exists() for line in s.read_text().splitlines()]
    done = sum(len(r["completed"]) for r in results)
    out = {
        "k": k, "tasks": n_tasks, "transport": transport, "delay_ms": delay_ms if transport == "delay" else 0,
        "seconds": seconds, "completed": done, "tasks_per_s": done / seconds,
        "cpu_per_task": loops_cpu / max(done, 1),
        "server_cpu_per_task": server_cpu / max(done, 1),
        "others_cores": others, "machine_busy_cores": busy / seconds, "per_verb": per_verb,
        "claim_retries": sum(s.get("retries", 0) for s in claim_stats if s["command"] == "claim"),
        "claim_lost": sum(s.get("lost", 0) for s in claim_stats if s["command"] == "claim"),
        "sync_retries": sum(s.get("retries", 0) for s in claim_stats if s["command"] == "sync"),
        "ref_updates_per_task": len(refs) / max(done, 1),
        "double": len(audit.double_done) + len(audit.double_logged), "lost": len(audit.lost),
        "same_state": audit.same_list and audit.same_tree,
        "errors": [e for r in results for e in r["errors"]][:5],
        "load_start": [round(x, 2) for x in load_start], "load_end": [round(x, 2) for x in load_end],
    }
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ks", default="1,4,8,16")
    p.add_argument("--tasks", type=int, default=48)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--transport", default="daemon", choices=("daemon", "delay"))
    p.add_argument("--delay-ms", type=float, default=100.0)
    p.add_argument("--jsonl", type=Path, required=True)
    a = p.parse_args(argv)
    workdir()  # hermetic git config (HOME, init.defaultBranch) and the package byte-compiled, as bench/ runs
    for rep in range(a.repeat):
        for k in [int(x) for x in a.ks.split(",")]:
            print(f"# K={k} repeat {rep} load {os.getloadavg()}", file=sys.stderr, flush=True)
            r = one_run(k, a.tasks, a.transport, a.delay_ms)
            r["repeat"] = rep
            print(f"#   {r['tasks_per_s']:.3f} tasks/s cpu/task {r['cpu_per_task']:.2f} double {r['double']} "
                  f"lost {r['lost']}", file=sys.stderr, flush=True)
            with a.jsonl.open("a") as f:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
