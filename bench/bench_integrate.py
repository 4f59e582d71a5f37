"""Integration (the work travels, SPEC §10): latency and throughput of `git handoff
integrate` with K = 1, 4, 8 clones of one remote, and the cost of one integration
against a plain `git fetch && git merge && <check> && git push` of the same work.

    PYTHONPATH=$PWD python bench/bench_integrate.py [--quick] [--ks 1,4,8] [--tasks N] [--repeats R]

The remote is a bare repository served by `git daemon` on 127.0.0.1; it holds N
independent tasks, task t0007's check `test -s work/t0007.txt`, and a
reference-transaction hook that stamps every move of `main` (the target) with the time.

Fleet runs: K clones (`git clone`, `sync`, `trust --all`, `handoff.target main`), each a
loop of processes run at once, K loops together: `claim --remote origin` -> write
work/<task>.txt -> `git commit` -> `done` -> `integrate --json`, until `claim` finds
nothing eligible; then `integrate` until the target holds every task this clone finished.
Any clone lands anyone's published work, so the loops race for the target's push.
Measured per run: latency of each task from the end of its `done` to the move of `main`
on the remote that brought its commit (the hook's clock, the same host's); median and
p90; throughput = N / (the last landing - the loops' start); `integrate` runs and how
they ended (0: landed or nothing to do, 1: something went back to work, 3: contention);
target pushes refused because another clone moved it first (pushes of `main` counted
from GIT_TRACE in every `integrate` process, less the landings they made); and the
checks: every task landed once, every move of `main` a fast-forward, every task's check
passing at the final tip.

Baselines, same run:
- one integration: the world is a remote whose `main` moved past the base of clone c's
  finished, published task (so both sides make a real merge); on fresh copies of that
  world, alternately, c's `git handoff integrate` and, in c, the plain
  `git fetch origin && git merge --no-edit origin/main && test -s work/T.txt &&
  git push origin HEAD:main`; medians over R runs each, and their ratio (no target: what
  the queue costs over the hand-made sequence; it also syncs the state before and after,
  and records `integrated_commit`);
- the plain loop: one clone, the same N tasks in sequence, each `git commit` of the same
  file then that plain sequence; tasks per second, against the K = 1 fleet run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, fresh_dir, median, ms, percentile, workdir
from tests.support import fleet, transports

MOVES_LOG = "target-moves.log"  # in the bare repository, written by its hook
_HOOK = """#!/bin/sh
# one line per move of main: "<epoch seconds> <old> <new>" (the integrate bench)
[ "$1" = committed ] || { cat > /dev/null; exit 0; }
while read -r old new ref; do
  [ "$ref" = refs/heads/main ] && echo "$(date +%s.%N) $old $new" >> target-moves.log
done
exit 0
"""
PLAIN = "git fetch -q origin && git merge -q --no-edit origin/main && {check} && git push -q origin HEAD:main"
ZERO = "0" * 40


def check_of(tid: str) -> str:
    return f"test -s work/{tid}.txt"


def seed_remote(served: Path, n_tasks: int) -> Path:
    """`served/remote.git`: main with a README, the state (concurrent mode) with `n_tasks`
    independent tasks, each checked by its own file; the hook stamping main's moves."""
    served.mkdir(parents=True)
    bare = served / fleet.REMOTE_NAME
    fleet.sh("git", "init", "-q", "--bare", str(bare), cwd=served)
    seed = served.parent / "seed"
    seed.mkdir()
    fleet.sh("git", "init", "-q", "-b", "main", cwd=seed)
    (seed / "README").write_text("integrate bench\n")
    fleet.sh("git", "add", "README", cwd=seed)
    fleet.sh("git", "commit", "-q", "-m", "initial", cwd=seed)
    fleet.sh("git", "remote", "add", "origin", str(bare), cwd=seed)
    fleet.sh("git", "push", "-q", "origin", "main", cwd=seed)
    fleet.sh(*fleet.handoff_argv("init", "--mode", "concurrent"), cwd=seed)
    plan = served.parent / "plan.toml"
    plan.write_text("".join(f'[[task]]\nid = "{fleet.task_id(n)}"\ntitle = "Task {n}"\n'
                            f'check = "{check_of(fleet.task_id(n))}"\n\n' for n in range(n_tasks)))
    fleet.sh(*fleet.handoff_argv("import", str(plan)), cwd=seed)
    fleet.sh(*fleet.handoff_argv("sync", "origin"), cwd=seed)
    hook = bare / "hooks" / "reference-transaction"
    hook.write_text(_HOOK)
    hook.chmod(0o755)
    return bare


def clones_of(work: Path, url: str, k: int) -> list[Path]:
    return fleet.make_clones(work, url, k, parallel=2, config=lambda _i: ["handoff.target=main"])


def commit_work(path: Path, tid: str) -> str:
    (path / "work").mkdir(exist_ok=True)
    (path / "work" / f"{tid}.txt").write_text(f"{tid} by {path.name}\n")
    fleet.sh("git", "add", "work", cwd=path)
    fleet.sh("git", "commit", "-q", "-m", f"work on {tid}", cwd=path)
    return fleet.sh("git", "rev-parse", "HEAD", cwd=path).strip()


# -- the fleet run ---------------------------------------------------------------------


@dataclass
class Loop:
    clone: str
    done_at: dict[str, float] = field(default_factory=dict)  # task -> epoch seconds its `done` ended
    commits: dict[str, str] = field(default_factory=dict)  # task -> its work commit
    exits: dict[int, int] = field(default_factory=dict)  # integrate exit code -> runs
    integrate_seconds: list[float] = field(default_factory=list)
    moves: int = 0  # landings this clone's integrates made (fast-forward or merge)
    target_pushes: int = 0  # pushes of main its integrates ran
    claim_exit3: int = 0
    contention: list[str] = field(default_factory=list)  # what each integrate that exited 3 said
    errors: list[str] = field(default_factory=list)


def _handoff(path: Path, *args: str, trace: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = fleet.child_env(**({"GIT_TRACE": str(trace)} if trace else {}))
    return subprocess.run(fleet.handoff_argv(*args), cwd=path, capture_output=True, text=True, env=env, timeout=300)


def _integrate(path: Path, loop: Loop) -> None:
    trace = path.parent / f"trace-{path.name}.log"
    trace.unlink(missing_ok=True)
    t0 = time.monotonic()
    ran = _handoff(path, "integrate", "--json", trace=trace)
    loop.integrate_seconds.append(time.monotonic() - t0)
    loop.exits[ran.returncode] = loop.exits.get(ran.returncode, 0) + 1
    with open(trace, errors="replace") as f:
        loop.target_pushes += sum(1 for line in f if "built-in: git push" in line and ":refs/heads/main" in line)
    if ran.returncode in (0, 1):
        loop.moves += sum(1 for x in json.loads(ran.stdout)["landed"] if x["how"] != "already")
    elif ran.returncode == 3:
        loop.contention.append(" ".join(ran.stderr.split())[:160])
    else:
        loop.errors.append(f"integrate exit {ran.returncode}: {ran.stderr.strip()[:300]}")


def _landed_all(path: Path, commits: list[str]) -> bool:
    fleet.sh("git", "fetch", "-q", "origin", "main", cwd=path)
    return all(subprocess.run(["git", "merge-base", "--is-ancestor", c, "FETCH_HEAD"], cwd=path).returncode == 0
               for c in commits)


def work_loop(path: Path) -> Loop:
    loop = Loop(path.name)
    while len(loop.errors) < 5:
        claimed = _handoff(path, "claim", "--remote", "origin", "--json")
        if claimed.returncode == 3:
            loop.claim_exit3 += 1
            continue
        if claimed.returncode == 1:
            break
        if claimed.returncode != 0:
            loop.errors.append(f"claim exit {claimed.returncode}: {claimed.stderr.strip()[:300]}")
            continue
        tid = json.loads(claimed.stdout)["id"]
        loop.commits[tid] = commit_work(path, tid)
        done = _handoff(path, "done", tid, "--json")
        if done.returncode != 0:
            loop.errors.append(f"done {tid} exit {done.returncode}: {done.stderr.strip()[:300]}")
            continue
        loop.done_at[tid] = time.time()
        _integrate(path, loop)
    for _ in range(10):  # what this clone finished, until it is on the target
        if _landed_all(path, list(loop.commits.values())):
            return loop
        _integrate(path, loop)
    loop.errors.append("work still not on the target after 10 more integrates")
    return loop


def moves(bare: Path) -> list[tuple[float, str, str]]:
    log = bare / MOVES_LOG
    lines = log.read_text().split("\n") if log.exists() else []
    return [(float(t), old, new) for t, old, new in (line.split() for line in lines if line.strip())]


def landing_times(bare: Path) -> tuple[dict[str, float], bool]:
    """Commit -> when a move of main first brought it; whether every move was a fast-forward."""
    seen: dict[str, float] = {}
    forward = True
    for at, old, new in moves(bare):
        if old != ZERO and subprocess.run(["git", "merge-base", "--is-ancestor", old, new], cwd=bare).returncode:
            forward = False
        span = new if old == ZERO else f"{old}..{new}"
        for commit in fleet.sh("git", "rev-list", span, cwd=bare).split():
            seen.setdefault(commit, at)
    return seen, forward


def checks_pass_at_tip(bare: Path, n_tasks: int) -> bool:
    """Every task's check, run in a checkout of the final tip."""
    where = bare.parent.parent / "final"
    fleet.sh("git", "clone", "-q", str(bare), str(where), cwd=bare.parent)
    return all(subprocess.run(check_of(fleet.task_id(n)), shell=True, cwd=where).returncode == 0
               for n in range(n_tasks))


@dataclass
class FleetResult:
    k: int
    tasks: int
    landed: int
    latencies: list[float]
    seconds: float  # start of the loops to the last landing
    loops: list[Loop]
    forward_only: bool
    checks_pass: bool
    cpu: float  # user+sys seconds of every process the loops ran
    load: str  # load averages at the start and the end of the loops

    @property
    def cpu_per_task(self) -> float:
        return self.cpu / self.landed if self.landed else float("nan")

    @property
    def throughput(self) -> float:
        return self.landed / self.seconds if self.seconds > 0 else 0.0

    def count(self, code: int) -> int:
        return sum(loop.exits.get(code, 0) for loop in self.loops)

    @property
    def refused_pushes(self) -> int:
        return sum(max(0, loop.target_pushes - loop.moves) for loop in self.loops)


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def fleet_run(k: int, n_tasks: int) -> FleetResult:
    work = fresh_dir(f"integrate-k{k}")
    work.mkdir(parents=True)
    bare = seed_remote(work / "served", n_tasks)
    with transports.git_daemon(work / "served") as url:
        clones = clones_of(work, f"{url}/{fleet.REMOTE_NAME}", k)
        load_start, cpu0, start = _load(), fleet.children_cpu(), time.time()
        with ThreadPoolExecutor(k) as pool:
            loops = list(pool.map(work_loop, clones))
        cpu, load = fleet.children_cpu() - cpu0, f"{load_start} -> {_load()}"
    landed_at, forward = landing_times(bare)
    latencies = [landed_at[loop.commits[tid]] - done for loop in loops for tid, done in loop.done_at.items()
                 if loop.commits[tid] in landed_at]
    last = max((landed_at[c] for loop in loops for c in loop.commits.values() if c in landed_at), default=start)
    result = FleetResult(k, n_tasks, len(latencies), latencies, last - start, loops, forward,
                         checks_pass_at_tip(bare, n_tasks), cpu, load)
    shutil.rmtree(work, ignore_errors=True)
    return result


# -- the baselines ---------------------------------------------------------------------


def plain_loop(n_tasks: int) -> tuple[float, float]:
    """One clone, the N tasks in sequence by hand: commit, fetch, merge, check, push;
    seconds, and CPU seconds of the processes."""
    work = fresh_dir("integrate-plain")
    work.mkdir(parents=True)
    seed_remote(work / "served", n_tasks)
    with transports.git_daemon(work / "served") as url:
        c = work / "c"
        fleet.sh("git", "clone", "-q", f"{url}/{fleet.REMOTE_NAME}", str(c), cwd=work)
        t0, cpu0 = time.perf_counter(), fleet.children_cpu()
        for n in range(n_tasks):
            tid = fleet.task_id(n)
            commit_work(c, tid)
            fleet.sh("sh", "-c", PLAIN.format(check=check_of(tid)), cwd=c)
        seconds, cpu = time.perf_counter() - t0, fleet.children_cpu() - cpu0
    shutil.rmtree(work, ignore_errors=True)
    return seconds, cpu


def one_task_world(work: Path, url: str) -> Path:
    """Clone c's task t0001 finished and published, its base behind main: clone a landed
    t0000 meanwhile. Returns c."""
    a, c = clones_of(work, url, 2)
    for path, tid in ((c, "t0001"), (a, "t0000")):
        fleet.sh(*fleet.handoff_argv("claim", tid, "--remote", "origin"), cwd=path)
        commit_work(path, tid)
        fleet.sh(*fleet.handoff_argv("done", tid), cwd=path)
    fleet.sh(*fleet.handoff_argv("integrate"), cwd=a)  # t0000 only: c has not published t0001 yet
    fleet.sh(*fleet.handoff_argv("sync", "origin"), cwd=c)
    return c


def one_integration(repeats: int) -> dict[str, list[tuple[float, float]]]:
    """Seconds and CPU seconds of c's `integrate` and of the plain sequence, alternately,
    each on a fresh copy of the one-task world."""
    work = fresh_dir("integrate-one")
    work.mkdir(parents=True)
    served = work / "served"
    bare = seed_remote(served, 2)
    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "integrate": []}
    with transports.git_daemon(served) as url:
        c = one_task_world(work, f"{url}/{fleet.REMOTE_NAME}")
        for run in range(repeats + 1):  # the first pair warms up, not counted
            for kind in ("plain", "integrate"):
                name = f"{kind}-{run}"
                fleet.sh("git", "clone", "-q", "--bare", "--mirror", str(bare), str(served / f"{name}.git"), cwd=work)
                copy = work / name
                shutil.copytree(c, copy, symlinks=True)
                fleet.sh("git", "remote", "set-url", "origin", f"{url}/{name}.git", cwd=copy)
                before = fleet.sh("git", "rev-parse", "main", cwd=served / f"{name}.git").strip()
                t0, cpu0 = time.perf_counter(), fleet.children_cpu()
                if kind == "plain":
                    fleet.sh("sh", "-c", PLAIN.format(check=check_of("t0001")), cwd=copy)
                else:
                    report = json.loads(fleet.sh(*fleet.handoff_argv("integrate", "--json"), cwd=copy))
                    if [(x["task"], x["how"]) for x in report["landed"]] != [("t0001", "merged")]:
                        raise RuntimeError(f"integrate did not merge t0001: {report}")
                seconds, cpu = time.perf_counter() - t0, fleet.children_cpu() - cpu0
                after = fleet.sh("git", "rev-parse", "main", cwd=served / f"{name}.git").strip()
                if after == before:
                    raise RuntimeError(f"{kind} did not move main")
                if run:
                    runs[kind].append((seconds, cpu))
                shutil.rmtree(copy, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return runs


# -- the rows --------------------------------------------------------------------------


def fleet_rows(results: list[FleetResult], plain: tuple[float, float], n: int) -> list[Row]:
    rows: list[Row] = []
    base = results[0].throughput if results and results[0].k == 1 else None
    for r in results:
        lat = f"latency done -> landed: median {ms(median(r.latencies))}, p90 {ms(percentile(r.latencies, 90))}"
        ratio = r.throughput / base if base else None
        rows.append(Row(f"integrate, K = {r.k} clones, {r.tasks} tasks: tasks landed/s", f"{r.throughput:.2f}/s",
                        f"K = 1: {base:.2f}/s" if base else "-", ratio))
        rows.append(Row(f"  K = {r.k}: {lat}", ms(median(r.latencies))))
        runs = sum(len(loop.integrate_seconds) for loop in r.loops)
        rows.append(Row(f"  K = {r.k}: integrate runs (exit 0/1/3), target pushes lost to another clone",
                        f"{runs} ({r.count(0)}/{r.count(1)}/{r.count(3)}), {r.refused_pushes} lost",
                        f"integrate median {ms(median([s for loop in r.loops for s in loop.integrate_seconds]))}"))
        said = sorted({c for loop in r.loops for c in loop.contention})
        if said:
            rows.append(Row(f"  K = {r.k}: what exit 3 said", "; ".join(said[:3])))
        rows.append(Row(f"  K = {r.k}: client CPU per task landed (every process of the loops)",
                        ms(r.cpu_per_task), f"load {r.load}"))
        errors = [e for loop in r.loops for e in loop.errors]
        good = r.landed == r.tasks and r.forward_only and r.checks_pass and not errors
        rows.append(Row(f"  K = {r.k}: every task landed, main only fast-forwarded, every check passes at the tip",
                        f"{r.landed}/{r.tasks} landed, forward only: {r.forward_only}, checks: {r.checks_pass}"
                        + (f", errors: {errors[:2]}" if errors else ""), target="all", ok=good))
    if base:
        rate = n / plain[0]
        rows.append(Row("plain loop, 1 clone: commit + fetch/merge/check/push per task: tasks/s",
                        f"{rate:.2f}/s", f"integrate K = 1: {base:.2f}/s", rate / base))
        rows.append(Row("  plain loop: client CPU per task", ms(plain[1] / n),
                        f"integrate K = 1: {ms(results[0].cpu_per_task)}", plain[1] / n / results[0].cpu_per_task))
    return rows


def integrate_rows(quick: bool, ks: list[int] | None = None, tasks: int | None = None,
                   repeats: int | None = None) -> list[Row]:
    workdir()
    ks = ks or ([1, 4] if quick else [1, 4, 8])
    n = tasks or (8 if quick else 24)
    one = one_integration(repeats or (5 if quick else 7))
    ours, plain = [s for s, _ in one["integrate"]], [s for s, _ in one["plain"]]
    a, b = median(ours), median(plain)
    cpu_a, cpu_b = median([c for _, c in one["integrate"]]), median([c for _, c in one["plain"]])
    rows = [Row("one integration (a merge): `git handoff integrate` vs plain fetch+merge+check+push", ms(a),
                f"{ms(b)} (runs: {', '.join(ms(x) for x in plain)})", a / b),
            Row("  integrate runs", ", ".join(ms(x) for x in ours)),
            Row("  one integration: client CPU", ms(cpu_a), ms(cpu_b), cpu_a / cpu_b)]
    by_hand = plain_loop(n)
    results = [fleet_run(k, n) for k in ks]
    return rows + fleet_rows(results, by_hand, n)


def integrate_scenario(quick: bool) -> list[Row]:
    return integrate_rows(quick)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ks", help="clone counts, e.g. 1,4,8")
    parser.add_argument("--tasks", type=int)
    parser.add_argument("--repeats", type=int)
    opts = parser.parse_args()
    print(f"load {_load()}", file=sys.stderr)
    rows = integrate_rows(opts.quick, [int(x) for x in opts.ks.split(",")] if opts.ks else None, opts.tasks,
                          opts.repeats)
    print(f"load {_load()}", file=sys.stderr)
    from bench.run import print_table

    print_table(rows)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
