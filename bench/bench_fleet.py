"""A fleet on one remote (docs/fleet.md): K clones of one bare remote, each looping
`claim --remote origin` -> write a file -> `git commit` -> `done` -> `sync` as
separate processes until `claim` exits 1 (nothing eligible).

    python bench/bench_fleet.py [--quick] [--ks 1,4,8,16,32] [--tasks 200]
                                [--transports daemon,http,delay] [--delay-ms 100] [--jsonl FILE]
                                [--served no|yes|both] [--client full|launcher|both]

Transports: `daemon` (git daemon on 127.0.0.1), `http` (smart HTTP: `git http-backend`
behind a threaded web server on 127.0.0.1), `delay` (git daemon behind a TCP proxy
holding each client->server burst 100 ms, a forge's round trip). The loop, the
remote and the accounting are tests/support/fleet.py (shared with the fleet torture
test).

Per run: tasks/s and its ratio to K = 1 on the same transport; exit-3 answers (all
verbs); retries per claim = (extra `git push` runs inside claim processes, counted
from GIT_TRACE) + (claims re-run after exit 3), per successful claim; `sync`'s own
`retries`; claim p50; ref updates on the remote per task (a reference-transaction
hook on the bare repo); bytes per task the remote stores (on-disk size of the new
objects); with the proxy, wire bytes pushed per task; client CPU per task
(RUSAGE_CHILDREN of the loops, counting what their commands leave running: this process
adopts orphans, so a command server or a background repack is counted once it is ended
and reaped after the loops) and server CPU per task; double claims (a task
`done` by two clones, or completed twice in the final history); tasks lost (not
completed at the end); and whether every clone shows the same state (`list --json`
and the state tree) after every clone synced twice. The load average is printed at
the start and end of every run: the 2-core machine is shared, so read ratios.

`--served yes` turns on `handoff.commandServer` in every clone (docs/command-server.md),
as a fleet's machines would; `both` runs each configuration twice in a row, in process
then served. `--client launcher` runs the loops' commands through a launcher written by
`git handoff launcher` (the command server's fast client, docs/command-server.md) instead of
`python -m git_handoff`; `both` runs each configuration twice in a row.

bench/run.py's full run adds K = 16 served, through the full client and through a launcher:
issue 25's target is a client CPU per task <= 0.5 s at K = 16 (daemon, 200 tasks).

Targets: 0 double claims, 0 lost, same state everywhere; retries per
claim <= 0.1 at K = 16; tasks/s at K = 16 >= K = 1 (daemon); with the delay,
tasks/s at K = 16 >= 8x K = 1.

before (main f916c92), 2026-12-01 13:30-14:26, 100 tasks per run (not 200: the time
box), run as `--transports daemon --ks 1,4,8,16`, then `--transports delay --delay-ks
1,16`, then `--transports http --http-ks 4`. The 2-core machine was shared with four
other engineers' test suites (load averages 1/5/15 min in the last column, up to 35
during the delay K=16 run): read the ratios, not the rates. K = 32 not run. At K = 8
and 16 the remote's ref updates include 2 counted from `gc --auto` packing the refs
(the hook now leaves those out): at most 0.06 per task.

| transport | K | tasks | tasks/s (vs K=1) | exit 3 claim/sync | retries/claim (in cmd + exit-3 reruns) | claim p50 |
| --- | --- | --- | --- | --- | --- | --- |
| daemon | 1 | 100 | 0.44 (1.00x) | 0/0 | 0.00 (0 + 0) | 0.80 s |
| daemon | 4 | 100 | 0.38 (0.86x) | 18/26 | 0.44 (26 + 18) | 3.44 s |
| daemon | 8 | 100 | 0.26 (0.58x) | 60/44 | 1.30 (70 + 60) | 8.85 s |
| daemon | 16 | 100 | 0.18 (0.41x) | 181/67 | 3.07 (126 + 181) | 17.13 s |
| delay 100 ms | 1 | 100 | 0.22 (1.00x) | 0/0 | 0.00 (0 + 0) | 1.62 s |
| delay 100 ms | 16 | 100 | 0.12 (0.56x) | 202/62 | 3.21 (119 + 202) | 27.75 s |
| http | 4 | 100 | 0.24 | 27/16 | 0.67 (40 + 27) | 5.23 s |

| transport | K | ref updates/task | bytes stored/task | wire bytes pushed/task | CPU/task client/server | double |
| --- | --- | --- | --- | --- | --- | --- |
| daemon | 1 | 3.0 | 5,847 | n/a | 1.01 / 0.05 s | 0 |
| daemon | 4 | 2.7 | 4,784 | n/a | 1.43 / 0.11 s | 0 |
| daemon | 8 | 2.5 | 5,252 | n/a | 1.83 / 0.17 s | 0 |
| daemon | 16 | 2.1 | 8,127 | n/a | 2.37 / 0.28 s | 0 |
| delay 100 ms | 1 | 3.0 | 5,840 | 2,207 | 1.23 / 0.08 s | 0 |
| delay 100 ms | 16 | 2.2 | 9,561 | 99,872 | 3.35 / 0.47 s | 0 |
| http | 4 | 2.8 | 4,114 | n/a | 1.74 / 0.23 s | 0 |

| transport | K | lost | same state | load start → end |
| --- | --- | --- | --- | --- |
| daemon | 1 | 0 | yes | 10.0/7.0/3.9 → 4.6/6.3/4.4 |
| daemon | 4 | 0 | yes | 4.6/6.3/4.4 → 9.3/8.4/5.8 |
| daemon | 8 | 0 | yes | 9.2/8.4/5.9 → 13.3/13.7/9.4 |
| daemon | 16 | 0 | yes | 13.3/13.7/9.4 → 14.6/23.7/18.1 |
| delay 100 ms | 1 | 0 | yes | 12.6/22.8/17.9 → 10.7/13.4/15.0 |
| delay 100 ms | 16 | 0 | yes | 10.7/13.4/15.0 → 13.0/23.3/22.4 |
| http | 4 | 0 | yes | 10.0/21.4/21.8 → 14.0/16.1/18.9 |

Reading: throughput falls as clones are added (0.86x, 0.58x, 0.41x at K = 4, 8, 16;
0.56x at K = 16 with the 100 ms delay, against a target of >= 8x); every claim that
loses the race costs another push inside the command or a new process after exit 3
(3.07 retries per claim at K = 16); correctness holds: no double claim, nothing lost,
one state on every clone in every run.

after (the fleet layout: per-clone state refs, per-task claim refs), 2026-12-01
14:20-15:10, 100 tasks, load 3-11: K = 1 0.23 tasks/s, K = 16 0.63 (2.77x, K = 1 itself
slowed by the load), retries per claim 0.17 at K = 16.

series A (the same layout, pick at random among the first 4 x clones eligible tasks),
2026-12-01 16:18-16:45, 200 tasks, `--transports daemon --ks 1,4,8,16,32 --tasks 200`;
quiet for K = 1 and 4 (load 0.5-1), profiling beside K = 8 and 16 (load 5-13):

| transport | K | tasks/s (vs K=1) | exit 3 | retries/claim | claim p50 | ref updates/task | CPU/task client/server |
| --- | --- | --- | --- | --- | --- | --- | --- |
| daemon | 1 | 0.59 (1.00x) | 0 | 0.00 | 0.61 s | 5.0 | 1.15 / 0.10 s |
| daemon | 4 | 1.05 (1.78x) | 0 | 0.03 | 1.43 s | 5.0 | 1.42 / 0.14 s |
| daemon | 8 | 0.91 (1.53x) | 0 | 0.04 | 3.38 s | 5.0 | 1.63 / 0.24 s |
| daemon | 16 | 0.56 (0.94x) | 0 | 0.14 | 11.75 s | 5.2 | 2.75 / 0.34 s |

| transport | K | double | lost | same state |
| --- | --- | --- | --- | --- |
| daemon | 1 | 0 | 0 | yes |
| daemon | 4 | 0 | 0 | yes |
| daemon | 8 | 0 | 0 | yes |
| daemon | 16 | 0 | 0 | yes |

(Its K = 32 run is void: the servers' lifetime, 1800 s then, ended under it.)

series B (the slot pick: each clone takes from its own slot, a hash of the task id
modulo the publishing clones), 2026-12-01 17:18-18:20, daemon 200 tasks, delay and
HTTP 100; two other engineers' test suites beside it (load 3-21):

| transport | K | tasks/s (vs K=1) | exit 3 | retries/claim | claim p50 | ref updates/task | CPU/task client/server |
| --- | --- | --- | --- | --- | --- | --- | --- |
| daemon | 1 | 0.35 (1.00x) | 0 | 0.00 | 0.90 s | 5.0 | 1.18 / 0.09 s |
| daemon | 16 | 0.21 (0.60x) | 0 | 0.03 | 32.47 s | 5.2 | 3.03 / 0.31 s |
| delay 100 ms | 1 | 0.38 (1.00x) | 0 | 0.00 | 1.09 s | 5.0 | 1.09 / 0.11 s |
| delay 100 ms | 16 | 0.51 (1.36x) | 0 | 0.07 | 12.10 s | 5.1 | 2.36 / 0.34 s |
| http | 16 | 0.57 | 0 | 0.06 | 11.10 s | 5.1 | 2.68 / 0.39 s |

| transport | K | double | lost | same state |
| --- | --- | --- | --- | --- |
| daemon | 1 | 0 | 0 | yes |
| daemon | 16 | 0 | 0 | yes |
| delay 100 ms | 1 | 0 | 0 | yes |
| delay 100 ms | 16 | 0 | 0 | yes |
| http | 16 | 0 | 0 | yes |

Reading: the slot pick takes retries per claim at K = 16 from 0.14 to 0.03 (target
<= 0.1). Throughput past K = 8 is bound by the two cores: client CPU per task grows
from 1.15 s at K = 1 to 2.75-3.03 s at K = 16 (each sync and remote claim integrates
every clone's moved head as its own merge commit: ~25 state commits per task at
K = 16), which caps 2 cores near 0.6 tasks/s, what one quiet K = 1 loop does. The
delay target (K = 16 >= 8x K = 1) needs 8 x 0.38 = 3 tasks/s: 3.6 CPU-seconds a second
at K = 1's cost per task, 8 at K = 16's; two cores cap K = 16 near 0.74 (2.0x).

series C (one commit per sync for every clone head it brings in; `done` after the lease
is over moves the claim ref by compare-and-swap), 2026-12-01 20:18-21:10, daemon 200
tasks, delay and HTTP 100; one other engineer's test suite beside K = 1 and 16 (load 3-12,
32 during K = 32):

| transport | K | tasks/s (vs K=1) | exit 3 | retries/claim | claim p50 | ref updates/task | CPU/task client/server |
| --- | --- | --- | --- | --- | --- | --- | --- |
| daemon | 1 | 0.57 (1.00x) | 0 | 0.00 | 0.67 s | 5.0 | 1.16 / 0.10 s |
| daemon | 4 | 1.42 (2.49x) | 0 | 0.01 | 1.07 s | 5.0 | 1.22 / 0.13 s |
| daemon | 8 | 1.09 (1.91x) | 0 | 0.01 | 2.81 s | 5.0 | 1.58 / 0.19 s |
| daemon | 16 | 0.59 (1.04x) | 0 | 0.01 | 9.86 s | 5.0 | 2.42 / 0.32 s |
| daemon | 32 | 0.18 (0.31x) | 0 | 0.09 | 65.07 s | 5.2 | 10.76 / 0.39 s |
| delay 100 ms | 1 | 0.56 (1.00x) | 0 | 0.00 | 0.76 s | 5.0 | 0.90 / 0.10 s |
| delay 100 ms | 16 | 0.96 (1.72x) | 0 | 0.06 | 6.47 s | 5.0 | 1.81 / 0.26 s |
| http | 16 | 0.83 | 0 | 0.06 | 7.65 s | 5.0 | 2.05 / 0.35 s |

| transport | K | double | lost | same state |
| --- | --- | --- | --- | --- |
| daemon | 1 | 0 | 0 | yes |
| daemon | 4 | 0 | 0 | yes |
| daemon | 8 | 0 | 0 | yes |
| daemon | 16 | 0 | 0 | yes |
| daemon | 32 | 0 | 0 | yes |
| delay 100 ms | 1 | 0 | 0 | yes |
| delay 100 ms | 16 | 0 | 0 | yes |
| http | 16 | 0 | 0 | yes |

Reading: one commit per sync takes the state history at K = 16 from 27 commits per
task to 4.4, and with it the ancestry walks, merge bases and edge checks each sync
makes; K = 16 now matches K = 1 (target met, narrowly). K = 32 on 2 cores thrashes
(claims killed at the loop's 300 s limit) but stays correct.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import Row, fresh_dir, workdir  # noqa: E402
from tests.support import cmdserver, fleet, transports  # noqa: E402


class Sizes(TypedDict):
    """The runs of a scenario: clone counts and tasks, per transport."""

    ks: list[int]  # clone counts of the daemon runs
    tasks: int  # tasks in each daemon run
    http_k: list[int]  # clone counts of the smart-HTTP runs
    delay_ks: list[int]  # clone counts of the delay-proxy runs
    transport_tasks: int  # tasks in each http/delay run


FULL: Sizes = {"ks": [1, 4, 8, 16, 32], "tasks": 200, "http_k": [4], "delay_ks": [1, 16], "transport_tasks": 100}
QUICK: Sizes = {"ks": [1, 4], "tasks": 12, "http_k": [4], "delay_ks": [1, 4], "transport_tasks": 8}


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def one_run(transport: str, k: int, n_tasks: int, *, delay_ms: float = 100.0, cmd_server: bool = False,
            launcher: bool = False) -> dict[str, Any]:
    work = fresh_dir(f"fleet-{transport}-k{k}" + ("-served" if cmd_server else "") + ("-launcher" if launcher else ""))
    work.mkdir(parents=True)
    served = work / "served"
    bare = fleet.prepare_remote(served, n_tasks)
    load_start = load()
    stats = work / "proxy-stats.txt"
    with contextlib.ExitStack() as stack:
        if transport == "http":
            url = f"{stack.enter_context(transports.smart_http(served))}/{fleet.REMOTE_NAME}"
        else:
            url = f"{stack.enter_context(transports.git_daemon(served))}/{fleet.REMOTE_NAME}"
        if transport == "delay":
            port = stack.enter_context(transports.delay_proxy(int(url.split(":")[2].split("/")[0]), delay_ms, stats))
            url = f"git://127.0.0.1:{port}/{fleet.REMOTE_NAME}"
        clones = fleet.make_clones(work, url, k,
                                   config=(lambda i: ["handoff.commandServer=true"]) if cmd_server else None)
        for clone in clones if cmd_server else ():
            # the servers the set-up started are no descendants of this process: the loops
            # start their own, which it adopts and counts (fleet.run_fleet, orphans=True)
            cmdserver.stop_servers(clone)
        if stats.exists():
            stats.unlink()  # count the loops' traffic only
        refs_before = len(fleet.ref_updates(bare))
        objects_before = fleet.objects_on_disk(bare)
        client = None
        if launcher:  # every loop's commands through one launcher, as a fleet machine's script would
            fleet.sh(*fleet.handoff_argv("launcher", str(work / "handoff")), cwd=clones[0])
            client = [str(work / "handoff")]
        run = fleet.run_fleet(clones, orphans=True, client=client)
        refs_after = fleet.ref_updates(bare)[refs_before:]
        objects_after = fleet.objects_on_disk(bare)
        wire = transports.read_proxy_stats(stats)
        result = fleet.audit(clones, run.reports)
        cpu_before_stop = fleet.children_cpu()
    server_cpu = fleet.children_cpu() - cpu_before_stop
    kept = None
    if result.double_done or result.double_logged or result.lost or not (result.same_list and result.same_tree):
        # the bench's work directory goes at exit: keep the clones of a run that failed
        # its audit, so that what happened can be read
        kept = shutil.move(str(work), tempfile.mkdtemp(prefix=f"handoff-fleet-failed-{transport}-k{k}-"))
        print(f"#     the audit failed: the clones and the remote are kept in {kept}", file=sys.stderr, flush=True)
    reports = run.reports
    start, start_bare = fleet.python_start_cpu()
    done = sum(len(r.completed) for r in reports)
    claims = sum(len(r.claimed) for r in reports)
    in_claim = sum(max(0, p - 1) for r in reports for p in r.claim_pushes)
    claim_exit3 = sum(r.exit3["claim"] for r in reports)
    claim_secs = [s for r in reports for s in r.claim_seconds]
    kinds: dict[str, int] = {}
    for line in refs_after:
        kind = fleet.ref_kind(line.split()[-1])
        kinds[kind] = kinds.get(kind, 0) + 1
    new_bytes = sum(size for oid, size in objects_after.items() if oid not in objects_before)
    per = max(done, 1)
    return {
        "transport": (transport + (f" {delay_ms:.0f} ms" if transport == "delay" else "")
                      + (" served" if cmd_server else ""))
        + (" launcher" if launcher else ""),
        "k": k, "tasks": n_tasks, "seconds": round(run.seconds, 2), "completed": done,
        "tasks_per_s": round(done / run.seconds, 3) if run.seconds else 0.0,
        "exit3": {verb: sum(r.exit3[verb] for r in reports) for verb in ("claim", "done", "sync")},
        "claims": claims, "claim_retries_in_command": in_claim, "claim_exit3_reruns": claim_exit3,
        "retries_per_claim": round((in_claim + claim_exit3) / max(claims, 1), 3),
        "sync_retries": sum(sum(r.sync_retries) for r in reports),
        "claim_p50_s": round(statistics.median(claim_secs), 3) if claim_secs else None,
        "ref_updates_per_task": round(len(refs_after) / per, 2), "ref_updates_by_kind": kinds,
        "stored_bytes_per_task": round(new_bytes / per),
        "wire_pushed_bytes_per_task": round(wire["receive-pack"][1] / per) if "receive-pack" in wire else None,
        "connections_per_task": round(sum(v[0] for v in wire.values()) / per, 1) if wire else None,
        "cpu_per_task_s": round(run.cpu_seconds / per, 3), "orphans_reaped": run.orphans_reaped,
        "server_cpu_per_task_s": round(server_cpu / per, 3),
        "python_start_ms": round(start * 1000, 1), "python_start_without_site_ms": round(start_bare * 1000, 1),
        "python_starts_per_task": round(sum(sum(r.runs.values()) for r in reports) / per, 2),
        "double_claims": sorted(set(result.double_done) | set(result.double_logged)),
        "lost": result.lost, "same_state": result.same_list and result.same_tree,
        "audit": asdict(result) | {"lost": len(result.lost)},
        "errors": [e for r in reports for e in r.errors][:5],
        "load_start": load_start, "load_end": load(), "kept": kept,
    }


def table(results: list[dict[str, Any]]) -> str:
    head = ["transport", "K", "tasks/s (vs K=1)", "exit 3 (claim/done/sync)",
            "retries per claim (in cmd + exit-3 reruns)", "sync retries", "claim p50", "remote ref updates per task",
            "bytes stored per task", "wire bytes pushed per task", "CPU per task (clients / server)",
            "Python start-ups per task × site's cost", "double claims", "lost", "same state everywhere",
            "load start → end"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base: dict[str, float] = {}
    for r in results:
        if r["k"] == 1:
            base[r["transport"]] = r["tasks_per_s"]
        b = base.get(r["transport"])
        ratio = f" ({r['tasks_per_s'] / b:.2f}x)" if b else ""
        e = r["exit3"]
        wire = "n/a" if r["wire_pushed_bytes_per_task"] is None else f"{r['wire_pushed_bytes_per_task']:,}"
        lines.append("| " + " | ".join([
            r["transport"], str(r["k"]), f"{r['tasks_per_s']:.2f}{ratio}",
            f"{sum(e.values())} ({e['claim']}/{e['done']}/{e['sync']})",
            f"{r['retries_per_claim']:.2f} ({r['claim_retries_in_command']} + {r['claim_exit3_reruns']})",
            str(r["sync_retries"]), "-" if r["claim_p50_s"] is None else f"{r['claim_p50_s']:.2f} s",
            f"{r['ref_updates_per_task']:.1f}", f"{r['stored_bytes_per_task']:,}", wire,
            f"{r['cpu_per_task_s']:.2f} / {r['server_cpu_per_task_s']:.2f} s",
            f"{r['python_starts_per_task']:.1f} × {r['python_start_ms'] - r['python_start_without_site_ms']:.0f} ms",
            str(len(r["double_claims"])),
            f"{len(r['lost'])} of {r['tasks']}", "yes" if r["same_state"] else "NO",
            f"{r['load_start']} → {r['load_end']}",
        ]) + " |")
    return "\n".join(lines)


def rows(results: list[dict[str, Any]]) -> list[Row]:
    out: list[Row] = []
    by = {(r["transport"].split()[0], r["k"]): r for r in results}
    for r in results:
        correct = not r["double_claims"] and not r["lost"] and r["same_state"]
        out.append(Row(f"fleet {r['transport']} K={r['k']}, {r['tasks']} tasks",
                       f"{r['tasks_per_s']:.2f} tasks/s, {r['retries_per_claim']:.2f} retries/claim, "
                       f"{len(r['double_claims'])} double, {len(r['lost'])} lost",
                       target="0 double, 0 lost, same state", ok=correct))
    kmax = max((r["k"] for r in results if r["transport"] == "daemon"), default=1)
    one, top = by.get(("daemon", 1)), by.get(("daemon", kmax))
    if one and top and kmax > 1:
        out.append(Row(f"fleet daemon tasks/s K={kmax} vs K=1", f"{top['tasks_per_s']:.2f}",
                       f"{one['tasks_per_s']:.2f}",
                       top["tasks_per_s"] / one["tasks_per_s"], ">= 1.0x", top["tasks_per_s"] >= one["tasks_per_s"]))
    for r in results:
        if r["transport"].startswith("daemon") and r["k"] == 16:
            out.append(Row(f"fleet {r['transport']} K=16 client CPU per task", f"{r['cpu_per_task_s']:.2f} s",
                           target="<= 0.5 s", ok=r["cpu_per_task_s"] <= 0.5))
    k16 = by.get(("daemon", 16))
    if k16:
        out.append(Row("fleet daemon retries per claim, K=16", f"{k16['retries_per_claim']:.2f}", target="<= 0.1",
                       ok=k16["retries_per_claim"] <= 0.1))
    delays = sorted((r for r in results if r["transport"].startswith("delay")), key=lambda r: r["k"])
    if len(delays) >= 2 and delays[0]["k"] == 1:
        d1, dk = delays[0], delays[-1]
        out.append(Row(f"fleet {d1['transport']} tasks/s K={dk['k']} vs K=1", f"{dk['tasks_per_s']:.2f}",
                       f"{d1['tasks_per_s']:.2f}", dk["tasks_per_s"] / d1["tasks_per_s"], ">= 8x at K=16",
                       dk["tasks_per_s"] >= 8 * d1["tasks_per_s"] if dk["k"] >= 16 else None))
    return out


def measure(ks: list[int], tasks: int, kinds: list[str], http_k: list[int], delay_ks: list[int],
            transport_tasks: int, delay_ms: float, jsonl: Path | None = None,
            modes: tuple[tuple[bool, bool], ...] = ((False, False),)) -> list[dict[str, Any]]:
    """Each run of the plan; `modes`: (served, through a launcher) configurations, each
    run in turn for every transport and K."""
    workdir()
    plan = [("daemon", k, tasks, m) for k in ks for m in modes if "daemon" in kinds]
    plan += [("http", k, transport_tasks, m) for k in http_k for m in modes if "http" in kinds]
    plan += [("delay", k, transport_tasks, m) for k in delay_ks for m in modes if "delay" in kinds]
    results = []
    for transport, k, n, (served, launcher) in plan:
        t0 = time.monotonic()
        print(f"#   fleet {transport} K={k}, {n} tasks{' served' if served else ''}{' launcher' if launcher else ''}"
              f" (load {load()}) ...", file=sys.stderr, flush=True)
        r = one_run(transport, k, n, delay_ms=delay_ms, cmd_server=served, launcher=launcher)
        print(f"#     {r['tasks_per_s']:.2f} tasks/s, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        results.append(r)
        if jsonl:
            with jsonl.open("a") as f:
                f.write(json.dumps(r) + "\n")
    return results


def fleet_scenario(quick: bool) -> list[Row]:
    """bench/run.py's scenario "fleet"."""
    p = QUICK if quick else FULL
    results = measure(p["ks"], p["tasks"], ["daemon", "http", "delay"], p["http_k"], p["delay_ks"],
                      p["transport_tasks"], 100.0)
    if not quick:  # the configuration a fleet's machines are told to use (docs/fleet.md)
        results += measure([16], p["tasks"], ["daemon"], [], [], p["transport_tasks"], 100.0,
                           modes=((True, False), (True, True)))
    print(table(results), flush=True)
    return rows(results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="K = 1 and 4, a few tasks (the bench/run.py --quick sizes)")
    parser.add_argument("--ks", help="clone counts for the daemon runs, e.g. 1,4,8,16,32")
    parser.add_argument("--tasks", type=int, help="tasks in each daemon run")
    parser.add_argument("--transports", default="daemon,http,delay", help="which of daemon,http,delay to run")
    parser.add_argument("--http-ks", help="clone counts for the smart-HTTP runs")
    parser.add_argument("--delay-ks", help="clone counts for the delay-proxy runs")
    parser.add_argument("--transport-tasks", type=int, help="tasks in each http/delay run")
    parser.add_argument("--delay-ms", type=float, default=100.0, help="delay per client->server burst")
    parser.add_argument("--served", choices=["no", "yes", "both"], default="no",
                        help="handoff.commandServer in every clone (both: each run twice, in process then served)")
    parser.add_argument("--client", choices=["full", "launcher", "both"], default="full",
                        help="the loops' commands through `python -m git_handoff` or a launcher written by "
                             "`git handoff launcher` (both: each run twice in a row)")
    parser.add_argument("--jsonl", type=Path, help="append every run's figures, one JSON object a line")
    args = parser.parse_args(argv)
    p = QUICK if args.quick else FULL  # read only

    def ints(text: str | None, default: list[int]) -> list[int]:
        return [int(x) for x in text.split(",") if x] if text else default

    results = measure(ints(args.ks, p["ks"]), args.tasks or p["tasks"], args.transports.split(","),
                      ints(args.http_ks, p["http_k"]), ints(args.delay_ks, p["delay_ks"]),
                      args.transport_tasks or p["transport_tasks"], args.delay_ms, args.jsonl,
                      tuple((served, launcher)
                            for served in {"no": (False,), "yes": (True,), "both": (False, True)}[args.served]
                            for launcher in {"full": (False,), "launcher": (True,),
                                             "both": (False, True)}[args.client]))
    print(table(results))
    for row in rows(results):
        print(f"{row.scenario}: {row.figure} [{row.verdict}]")
    return 0 if all(r.ok is not False for r in rows(results)) else 1


if __name__ == "__main__":
    sys.exit(main())
