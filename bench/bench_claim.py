"""Claim latency: `git handoff claim` against the harness skill's way (one tasks.json
rewritten whole under a mkdir lock, bench/baseline_harness.py) and against a bare
`python -c "import pygit2"`, at 100 and 10,000 tasks, side by side in one run.

    python bench/bench_claim.py [--reps 9] [--sizes 100,10000]

Each figure is the wall time of a fresh process claiming one task; between two
timed claims the task is released (untimed) so every claim sees the same state.
"no index" is the same claim with the per-clone claim index removed first (as after
a command outside the work cycle changed the state): the full selection runs.
"import/base" is the floor any pygit2-based command starts from.
Targets: at 10,000 tasks ours <= 0.6x the baseline and <= 3x import pygit2;
at 100 tasks ours <= 1.2x the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import baseline_harness  # noqa: E402

PY = sys.executable


def env() -> dict[str, str]:
    out = dict(os.environ)
    out.update(
        PYTHONPATH=str(ROOT),
        GIT_AUTHOR_NAME="Bench",
        GIT_AUTHOR_EMAIL="bench@example.com",
        GIT_COMMITTER_NAME="Bench",
        GIT_COMMITTER_EMAIL="bench@example.com",
        GIT_CONFIG_NOSYSTEM="1",
    )
    out.pop("HANDOFF_SESSION", None)
    # an installed package runs from cached bytecode: let the warm-up run write it
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def sh(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env())
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


def make_repo(path: Path) -> None:
    path.mkdir(parents=True)
    sh(["git", "init", "-q", "-b", "main", "."], path)
    (path / "README").write_text("bench\n")
    sh(["git", "add", "README"], path)
    sh(["git", "commit", "-q", "-m", "initial"], path)


def setup_ours(path: Path, count: int) -> None:
    make_repo(path)
    lines = []
    for n in range(count):
        t = baseline_harness.make_task(n)
        deps = json.dumps(t["depends_on"])
        lines.append(
            f'[[task]]\nid = "{t["id"]}"\ntitle = "{t["title"]}"\npriority = "{t["priority"]}"\n'
            f'depends_on = {deps}\ncheck = "{t["validation"]["command"]}"\n'
        )
    plan = path.parent / f"plan-{count}.toml"
    plan.write_text("\n".join(lines))
    sh([PY, "-m", "git_handoff", "init", "--mode", "concurrent"], path)
    sh([PY, "-m", "git_handoff", "import", str(plan)], path)
    sh(["git", "gc", "-q"], path)


def setup_baseline(path: Path, count: int) -> None:
    make_repo(path)
    baseline_harness.setup(path, count)


def timed(args: list[str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env())
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return elapsed, proc.stdout


def measure(sizes: list[int], reps: int, work: Path) -> dict[int, dict[str, list[float]]]:
    """Interleaved: each round times every size once, so load on a shared machine hits all alike."""
    baseline_script = str(ROOT / "bench" / "baseline_harness.py")
    repos = {}
    for n in sizes:
        repos[n] = (work / f"ours-{n}", work / f"baseline-{n}")
        setup_ours(repos[n][0], n)
        setup_baseline(repos[n][1], n)
    times: dict[int, dict[str, list[float]]] = {
        n: {"ours": [], "ours_cold": [], "baseline": [], "import_pygit2": []} for n in sizes
    }
    for rep in range(reps + 1):  # round 0 warms up (page cache, bytecode, indexes) and is not counted
        for n in sizes:
            ours_repo, base_repo = repos[n]
            t, out = timed([PY, "-m", "git_handoff", "claim", "--json"], ours_repo)
            sh([PY, "-m", "git_handoff", "release", json.loads(out)["id"]], ours_repo)
            # the same claim when the claim index is absent (another command changed the state)
            for index in ("claim-index.marshal", "claim-head.marshal"):
                (ours_repo / ".git" / "handoff" / index).unlink(missing_ok=True)
            tc, out = timed([PY, "-m", "git_handoff", "claim", "--json"], ours_repo)
            sh([PY, "-m", "git_handoff", "release", json.loads(out)["id"]], ours_repo)
            tb, out = timed([PY, baseline_script, "claim", str(base_repo), "bench"], base_repo)
            sh([PY, baseline_script, "release", str(base_repo), out.strip()], base_repo)
            ti, _ = timed([PY, "-c", "import pygit2"], work)
            if rep:
                times[n]["ours"].append(t)
                times[n]["ours_cold"].append(tc)
                times[n]["baseline"].append(tb)
                times[n]["import_pygit2"].append(ti)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--sizes", default="100,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-claim-") as tmp:
        results = measure(sizes, args.reps, Path(tmp))
    for label, pick in (("median", statistics.median), ("min", min)):
        print(f"claim latency, {label} of {args.reps} fresh processes (ms)")
        print(f"{'tasks':>7} {'ours':>8} {'no index':>9} {'baseline':>9} {'import pygit2':>14} "
              f"{'ours/base':>10} {'ours/import':>12} {'import/base':>12}")
        for n, r in results.items():
            ours, cold = pick(r["ours"]), pick(r["ours_cold"])
            base, imp = pick(r["baseline"]), pick(r["import_pygit2"])
            print(f"{n:>7} {ours * 1000:8.1f} {cold * 1000:9.1f} {base * 1000:9.1f} {imp * 1000:14.1f} "
                  f"{ours / base:10.2f} {ours / imp:12.2f} {imp / base:12.2f}")
    print("targets: ours/base <= 0.6 at 10000 and <= 1.2 at 100; ours/import <= 3 at 10000")
    return 0


if __name__ == "__main__":
    sys.exit(main())
