"""Claim and fail on a big work tree: this checkout against the code before the
claim-time snapshot, both measured in the same run.

    python bench/bench_rollback.py [--quick]

The repository holds 10,000 tracked files (100 directories) and, for the "dirty"
figures, 1,000 untracked ones made before each claim; the attempt modifies 10
tracked files and adds 10 new ones before `fail`. The baseline is the package as it
was at BASELINE_COMMIT, extracted with `git archive` and run the same way (a fresh
`python -m git_handoff` process per command), its rounds alternating with ours.
Between timed commands everything is put back untimed, so every repeat sees the
same tree.

Targets: claim and fail with 1,000 untracked files <= 1.5x the baseline; claim on a
clean tree within noise of it (<= 1.15x).
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PY, ROOT, Row, fresh_dir, git, make_repo, median, ms, run_proc

# The last commit before the claim-time snapshot: `claim` recorded HEAD only and
# `fail` ran `git reset --hard` + `git clean -fd`.
BASELINE_COMMIT = "1b7c18e"

TRACKED = 10_000
UNTRACKED = 1_000


def baseline_tree(into: Path) -> Path | None:
    """The baseline package extracted from git (None when the commit is not here)."""
    proc = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", BASELINE_COMMIT, "git_handoff"],
                          capture_output=True)
    if proc.returncode != 0:
        return None
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def big_repo(path: Path) -> Path:
    make_repo(path)
    for d in range(100):
        sub = path / f"d{d:02d}"
        sub.mkdir()
        for f in range(TRACKED // 100):
            (sub / f"f{f:03d}.txt").write_text(f"file {d}/{f}\n" * 4)
    (path / ".gitignore").write_text("*.log\n")
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "10k files", cwd=path)
    return path


def untracked(path: Path, on: bool) -> None:
    sub = path / "scratch"
    if on:
        sub.mkdir(exist_ok=True)
        for n in range(UNTRACKED):
            (sub / f"u{n:04d}.txt").write_text(f"untracked {n}\n")
    else:
        subprocess.run(["rm", "-rf", str(sub)], check=True)


def attempt_work(path: Path) -> None:
    for n in range(10):
        (path / "d00" / f"f{n:03d}.txt").write_text(f"changed by the attempt {n}\n")
        (path / "d01" / f"new{n}.txt").write_text(f"new {n}\n")


def cmd(pkg: Path, path: Path, *args: str) -> float:
    run = run_proc([PY, "-m", "git_handoff", *args], path, env={"PYTHONPATH": str(pkg)})
    if run.rc != 0:
        raise RuntimeError(f"{pkg.name}: git handoff {' '.join(args)} exited {run.rc}: "
                           f"{run.err.decode(errors='replace').strip()[-300:]}")
    return run.seconds


def _round(pkg: Path, path: Path) -> tuple[float, float, float]:
    clean = cmd(pkg, path, "claim", "t")
    cmd(pkg, path, "release", "t")
    untracked(path, True)
    dirty = cmd(pkg, path, "claim", "t")
    attempt_work(path)
    failed = cmd(pkg, path, "fail", "t", "--reason", "bench")
    git("reset", "-q", "--hard", cwd=path)
    untracked(path, False)
    return clean, dirty, failed


def measure(sides: dict[str, Path], work: Path, reps: int) -> dict[str, dict[str, list[float]]]:
    """{side: {figure: seconds...}}; the sides' rounds alternate, so a noisy neighbour
    hits both alike. The first round of each side warms caches and bytecode, untimed."""
    repos = {}
    for side, pkg in sides.items():
        path = big_repo(work / f"repo-{side}")
        cmd(pkg, path, "init", "--mode", "concurrent")
        cmd(pkg, path, "add", "Try", "--id", "t", "--check", "false", "--max-attempts", "1000")
        repos[side] = path
    out: dict[str, dict[str, list[float]]] = {s: {"claim clean": [], "claim dirty": [], "fail dirty": []}
                                              for s in sides}
    for rep in range(reps + 1):
        for side, pkg in sides.items():
            clean, dirty, failed = _round(pkg, repos[side])
            if rep:
                out[side]["claim clean"].append(clean)
                out[side]["claim dirty"].append(dirty)
                out[side]["fail dirty"].append(failed)
    return out


def rollback_scenario(quick: bool) -> list[Row]:
    work = fresh_dir("rollback")
    base_pkg = baseline_tree(work / "baseline")
    names = [("claim, 10k tracked + 1k untracked", "claim dirty", 1.5),
             ("fail, 10k tracked + 1k untracked", "fail dirty", 1.5),
             ("claim, 10k tracked, clean tree", "claim clean", 1.15)]
    if base_pkg is None:
        return [Row(n, "n/a (baseline commit missing)", target=f"<= {t:g}x") for n, _, t in names]
    times = measure({"ours": ROOT, "base": base_pkg}, work, 3 if quick else 9)
    rows = []
    for name, key, limit in names:
        a, b = median(times["ours"][key]), median(times["base"][key])
        rows.append(Row(name, ms(a), f"before the snapshot {ms(b)}", a / b, f"<= {limit:g}x", a / b <= limit))
    return rows


if __name__ == "__main__":
    from bench.common import workdir
    from bench.run import print_table

    workdir()
    print_table(rollback_scenario("--quick" in sys.argv))
