"""One steady-state step of a K-clone fleet, measured alone: where a sync's (or a remote
claim's) CPU goes when K - 1 other clones have moved their heads since this clone's
last sync.

    python bench/bench_fleet_step.py [--k 16] [--reps 5] [--verbs sync,claim] [--profile]

Set-up (tests/support/fleet.py, over `git daemon`): a remote with 200 tasks, K clones;
each clone in turn runs the fleet's loop once (`claim --remote origin` -> commit ->
`done` -> `sync origin`), twice round, so that clone 0 is K - 1 heads behind. Then,
`--reps` times for each verb, a copy (`cp -a`) of clone 0 runs `sync origin --json`
(or `claim --remote origin --json`) against a copy of the remote as it was, so every
repetition sees the same world.

Each command runs in a forked child of this process, which has already imported what a
command server imports (docs/command-server.md): what is measured is the command's own
CPU (its Python, split from the git processes it starts, through RUSAGE_SELF and
RUSAGE_CHILDREN in the child), not Python's start. The git processes are counted from
GIT_TRACE. `--profile` adds the child's cProfile (timer: process CPU) of the first
repetition: it inflates pure-Python code, so read it for where, not how much.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import os
import pstats
import re
import resource
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import copy_repo, fresh_dir, workdir  # noqa: E402
from tests.support import fleet, transports  # noqa: E402

_GIT = re.compile(r"(?:built-in|run_command|exec): (?:git )?(\S+)(?: (\S+))?")


def preload() -> None:
    from git_handoff.cli import command_server
    from git_handoff.core import patterns

    for name in (*command_server.PRELOAD, "git_handoff.cli.sync", "git_handoff.ops.sync"):
        with contextlib.suppress(ImportError):
            __import__(name)
    patterns.compile_all()
    gc.collect()
    gc.freeze()


def run_in_child(path: Path, args: list[str], trace: Path, profile: Path | None) -> dict[str, float]:
    """`git handoff ARGS` in a forked child, in `path`: its exit code, its own CPU and
    its git children's."""
    out = path.parent / f"result-{os.getpid()}.json"
    pid = os.fork()
    if pid == 0:  # the child
        code: object = 1
        try:
            os.chdir(path)
            os.environ["GIT_TRACE"] = str(trace)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            sys.argv = ["git-handoff", *args]
            from git_handoff.cli import main

            prof = cProfile.Profile(time.process_time) if profile else None
            try:
                if prof:
                    prof.enable()
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code
            finally:
                if prof and profile:
                    prof.disable()
                    prof.dump_stats(str(profile))
            own = resource.getrusage(resource.RUSAGE_SELF)
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            out.write_text(json.dumps({"rc": code, "own": own.ru_utime + own.ru_stime,
                                       "git": kids.ru_utime + kids.ru_stime}))
        finally:
            os._exit(0)
    _, _status, _usage = os.wait4(pid, 0)
    result = json.loads(out.read_text())
    out.unlink()
    return dict(result)


def git_counts(trace: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    if not trace.exists():
        return counts
    for line in trace.read_text(errors="replace").splitlines():
        if "trace: built-in: git " in line:
            words = line.split("built-in: git ", 1)[1].split()
            name = words[0] if words else "?"
            counts[name + (" " + words[1] if name in ("maintenance", "for-each-ref") and len(words) > 1 else "")] += 1
        elif "trace: run_command: " in line and "git" not in line.split("run_command: ", 1)[1].split()[0]:
            counts["(run) " + line.split("run_command: ", 1)[1].split()[0]] += 1
    return counts


def loop_once(path: Path) -> None:
    r = fleet.handoff(path, "claim", "--remote", "origin", "--json")
    if r.returncode != 0:
        raise RuntimeError(f"claim in {path.name}: exit {r.returncode}: {r.stderr.strip()}")
    tid = json.loads(r.stdout)["id"]
    (path / f"work-{tid}.txt").write_text(f"{tid} by {path.name}\n")
    fleet.sh("git", "add", "-A", cwd=path)
    fleet.sh("git", "commit", "-q", "-m", f"work on {tid}", cwd=path)
    for verb in (["done", tid, "--json"], ["sync", "origin", "--json"]):
        r = fleet.handoff(path, *verb)
        if r.returncode != 0:
            raise RuntimeError(f"{verb[0]} in {path.name}: exit {r.returncode}: {r.stderr.strip()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2, help="loops of every clone before measuring")
    ap.add_argument("--verbs", default="sync,claim")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=40)
    opts = ap.parse_args()
    work = fresh_dir(f"fleet-step-k{opts.k}")
    work.mkdir(parents=True)
    served = work / "served"
    bare = fleet.prepare_remote(served, 200)
    print(f"# load {os.getloadavg()}", flush=True)
    with transports.git_daemon(served) as prefix:
        clones = fleet.make_clones(work, f"{prefix}/{fleet.REMOTE_NAME}", opts.k)
        t0 = time.monotonic()
        for _ in range(opts.rounds):
            for path in clones:
                loop_once(path)
        print(f"# set-up: {opts.rounds} rounds of {opts.k} clones in {time.monotonic() - t0:.0f} s", flush=True)
        pristine_remote = work / "remote-pristine.git"
        copy_repo(bare, pristine_remote)
        preload()
        verbs = {"sync": ["sync", "origin", "--json"], "claim": ["claim", "--remote", "origin", "--json"]}
        for verb in opts.verbs.split(","):
            own, git, total, counts_first = [], [], [], Counter[str]()
            for rep in range(opts.reps):
                shutil.rmtree(bare)
                copy_repo(pristine_remote, bare)
                copy = work / f"copy-{verb}-{rep}"
                fleet.sh("cp", "-a", str(clones[0]), str(copy), cwd=work)
                trace = work / f"trace-{verb}-{rep}.log"
                profile = work / f"profile-{verb}.out" if opts.profile and rep == 0 else None
                r = run_in_child(copy, verbs[verb], trace, profile)
                if r["rc"] != 0:
                    raise SystemExit(f"{verb} exit {r['rc']} in {copy}")
                own.append(r["own"])
                git.append(r["git"])
                total.append(r["own"] + r["git"])
                if rep == 0:
                    counts_first = git_counts(trace)
                shutil.rmtree(copy)
            print(f"{verb}: CPU median of {opts.reps}: total {statistics.median(total):.3f} s = "
                  f"own {statistics.median(own):.3f} + git {statistics.median(git):.3f}  "
                  f"(totals {' '.join(f'{t:.3f}' for t in total)})", flush=True)
            print(f"  git processes: {sum(counts_first.values())}: "
                  + ", ".join(f"{name} {n}" for name, n in counts_first.most_common()), flush=True)
            if opts.profile:
                buf = io.StringIO()
                (pstats.Stats(str(work / f"profile-{verb}.out"), stream=buf)
                 .sort_stats("cumulative").print_stats(opts.top))
                print(buf.getvalue(), flush=True)
    print(f"# load {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    workdir()
    main()
