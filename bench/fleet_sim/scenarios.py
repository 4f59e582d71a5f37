"""The simulation's scenarios: the bench's fixed pool (K clones on one machine, or each
on its own), and a month of ephemeral machines. Each returns plain figures (dicts).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import fields
from pathlib import Path
from typing import Any

from bench.fleet_sim.model import COMPLETED, IN_PROGRESS, Params, World

HERE = Path(__file__).resolve().parent
CALIBRATION = HERE / "calibration.json"


def load_params(path: Path = CALIBRATION) -> Params:
    """The calibrated costs (calibration.json's "params"), defaults for anything absent."""
    if not path.exists():
        return Params()
    data = json.loads(path.read_text())["params"]
    known = {f.name for f in fields(Params)}
    return Params(**{k: v for k, v in data.items() if k in known})


def audit(w: World) -> dict[str, Any]:
    """0 double claims and 0 lost tasks: every task created ends completed exactly once
    (the timelines say so), and no claim was accepted over a live one."""
    lost = []
    completions = 0
    for t in range(w.tasks_created):
        line = w.remote.timeline.get(t, [])
        done = sum(1 for _, rec in line if rec.status == COMPLETED)
        completions += done
        if done == 0:
            lost.append(t)
    held = sum(1 for t in range(w.tasks_created) if w.remote.timeline[t][-1][1].status == IN_PROGRESS)
    return {"lost": len(lost), "still_held": held, "double_claims": w.stats.double_claims,
            "double_done": w.stats.double_done, "completions": completions}


def summary(w: World, seconds: float) -> dict[str, Any]:
    s = w.stats
    done = max(s.completed, 1)
    cpu = sum(s.verb_cpu.values())
    per_verb = {v: {"n": s.verb_n[v], "cpu_mean": s.verb_cpu[v] / s.verb_n[v],
                    "wall_mean": s.verb_wall[v] / s.verb_n[v],
                    "heads_mean": s.verb_heads[v] / s.verb_n[v]} for v in s.verb_n}
    return {
        "completed": s.completed, "seconds": seconds, "tasks_per_s": s.completed / seconds if seconds else 0.0,
        "cpu_per_task": cpu / done, "server_cpu_per_task": w.server_cpu.busy / done if w.shared is None else None,
        "claims": s.claims, "claim_pushes": s.claim_pushes,
        "retries_per_claim": (s.claim_pushes - s.claims + s.claim_exit3) / max(s.claims, 1),
        "claim_moved": s.claim_moved, "claim_locked": s.claim_locked, "claim_exit3": s.claim_exit3,
        "sync_retries": s.sync_retries, "sync_exit3": s.sync_exit3, "done_refused": s.done_refused,
        "takeovers": s.takeovers, "claims_on_completed": s.claims_on_completed,
        "ref_updates_per_task": s.ref_updates / done,
        "claim_p50": statistics.median(s.claim_seconds) if s.claim_seconds else None,
        "fetch_bytes_per_task": s.fetch_bytes / done, "per_verb": per_verb,
        "pruned": s.pruned, "retired": s.retired, "deletes_locked": s.deletes_locked,
        "refs_end": w.remote.refs(), "history_commits": w.remote.commits, "events": w.sim.events,
        **audit(w),
    }


def fixed_pool(p: Params, k: int, tasks: int, *, seed: int, rtt: float = 0.0, shared_cores: float | None = 2.0,
               background: float = 0.0, server_cores: float = 8.0, client_cores: float = 2.0) -> dict[str, Any]:
    """The bench's loop (tests/support/fleet.py): `tasks` pending tasks, K clones each
    looping claim -> commit -> done -> sync until claim finds nothing (exit 1).
    `shared_cores`: every clone and the server on one machine of that many cores (the
    measured runs); None: each clone on its own machine, the server on its own."""
    w = World(p, seed=seed, rtt=rtt, shared_cores=shared_cores, background=background, server_cores=server_cores,
              client_cores=client_cores)
    for _ in range(tasks):
        w.add_task()
    for _ in range(k):
        c = w.start_clone()
        c.seen_u, c.seen_commits, c.seen_at = w.remote.updates, w.remote.commits, 0.0  # make_clones synced them
    w.sim.run(stop=lambda: not w.live)
    out = summary(w, w.sim.now)
    out.update({"k": k, "tasks": tasks, "rtt": w.p.rtt, "background": background})
    if w.shared is not None:
        w.shared.settle()
        out["background_cores"] = w.shared.background_busy / w.sim.now if w.sim.now else 0.0
    return out


def month(p: Params, *, seed: int, machines: int, days: float = 30.0, lifetime_h: float = 24.0,
          tasks_per_day: float = 2000.0, work_min: float = 5.0, poll_s: float = 120.0, killed: float = 0.05,
          rtt: float = 0.1, server_cores: float = 8.0, sample_h: float = 6.0, drain_h: float = 6.0) -> dict[str, Any]:
    """`machines` ephemeral machines at any moment, each a new clone (a new id) that lives
    lifetime_h on average (exponential) and is replaced when it goes; `killed` of them die
    holding their claim (the lease expires, another takes the task over). Tasks arrive as
    a Poisson stream; work takes a lognormal time (median work_min minutes). Idle
    machines poll (sync, then claim) every ~poll_s. After `days`, no new tasks and
    `drain_h` hours for the fleet to finish them."""
    w = World(p, seed=seed, rtt=rtt, shared_cores=None, server_cores=server_cores)
    rng = w.rng
    horizon = days * 86400.0

    def work() -> float:
        return rng.lognormvariate(math.log(work_min * 60.0), 0.8)

    def spawn() -> None:
        if w.sim.now >= horizon:
            return
        life = rng.expovariate(1.0 / (lifetime_h * 3600.0))
        c = w.start_clone(work=work, lifetime=life, poll=poll_s, killed_at_end=rng.random() < killed, joining=True)
        w.sim.at(c.end_at + 1.0, spawn)

    def arrive() -> None:
        if w.sim.now >= horizon:
            return
        w.add_task()
        w.sim.after(rng.expovariate(tasks_per_day / 86400.0), arrive)

    def sample() -> None:
        w.sample_refs()
        if w.sim.now < horizon + drain_h * 3600:
            w.sim.after(sample_h * 3600.0, sample)

    for _ in range(machines):
        w.sim.after(rng.uniform(0, 60), spawn)
    w.sim.after(0.0, arrive)
    w.sim.after(0.0, sample)

    def keep_alive() -> None:
        # after the horizon no machine is replaced: keep `machines` of the last ones working
        # (they live on) until the backlog is done
        for c in list(w.live.values()):
            c.end_at = math.inf
            c.killed_at_end = False
    w.sim.at(horizon, keep_alive)
    w.sim.run(until=horizon + drain_h * 3600)
    out = summary(w, horizon)
    joins = w.stats.joins
    by_day = {}
    for d in (1, 7, 14, 30):
        near = [j for j in joins if j["t"] <= d * 86400.0]
        if near:
            by_day[d] = near[-1]
    out.update({"machines": machines, "clone_ids": w.next_clone, "days": days, "tasks_created": w.tasks_created,
                "refs_samples": w.stats.refs_samples, "joins_by_day": by_day, "joins": len(joins),
                "join_bytes_p50": statistics.median(j["bytes"] for j in joins) if joins else None,
                "join_heads_p50": statistics.median(j["heads"] for j in joins) if joins else None})
    return out
