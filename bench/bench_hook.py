"""Cost of the post-commit hook below its threshold.

`git commit` in one repository with the git handoff hook installed (a session open,
handoff.commitsPerSession far away) against the same repository with no hook, with
10 and with 10,000 commits on refs/harness/state. The two variants are interleaved
(core.hooksPath switched per command) so machine noise hits both alike.

Target: ratio <= 2.0 and not growing with history. Below the threshold the hook runs
no git command at all (it counts in its hook-state file); git's own count is asked
only once the counter reaches the threshold.

    PYTHONPATH=$PWD python bench/bench_hook.py [--commits N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def handoff(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "handoff", *args], cwd=cwd, check=True, capture_output=True)


def grow_state(repo: Path, count: int) -> None:
    """Append `count` state commits (one log line each) directly with pygit2."""
    import pygit2

    raw = pygit2.Repository(str(repo))
    ref = raw.references["refs/harness/state"]
    tip = ref.target
    tree = raw[tip].peel(pygit2.Commit).tree_id
    sig = pygit2.Signature("bench", "bench@example.com")
    for n in range(count):
        msg = f"[2026-07-01T10:00:00Z] [SESSION-0] WARN bench filler {n}\n"
        tip = raw.create_commit(None, sig, sig, msg, tree, [tip])
    ref.set_target(tip, "bench: grow state")
    subprocess.run(["git", "gc", "-q"], cwd=repo, check=True)


def setup(root: Path, state_commits: int) -> tuple[Path, Path, Path]:
    repo = root / f"repo-{state_commits}"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("config", "user.name", "bench", cwd=repo)
    git("config", "user.email", "bench@example.com", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "initial", cwd=repo)
    handoff("init", cwd=repo)
    git("config", "handoff.commitsPerSession", "1000000", cwd=repo)
    handoff("hooks", "install", cwd=repo)
    handoff("session", "start", cwd=repo)
    existing = int(git("rev-list", "--count", "refs/harness/state", cwd=repo))
    if state_commits > existing:
        grow_state(repo, state_commits - existing)
    hooks = repo / ".git" / "hooks"
    empty = root / f"no-hooks-{state_commits}"
    empty.mkdir()
    assert (hooks / "post-commit").exists() and (repo / ".git" / "handoff" / "hook-state").exists()
    return repo, hooks, empty


def commit_time(repo: Path, hooks_dir: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["git", "-c", f"core.hooksPath={hooks_dir}", "commit", "-q", "--allow-empty", "-m", "c"],
                   cwd=repo, check=True)
    return time.perf_counter() - start


def measure(repo: Path, hooks: Path, empty: Path, rounds: int) -> tuple[float, float]:
    with_hook, without = [], []
    for _ in range(5):  # warm up
        commit_time(repo, hooks)
        commit_time(repo, empty)
    for _ in range(rounds):
        with_hook.append(commit_time(repo, hooks))
        without.append(commit_time(repo, empty))
    return statistics.median(with_hook), statistics.median(without)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=200, help="timed commits per variant")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-hook-"))
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    try:
        print(f"git commit, median of {args.commits} per variant (hook below its threshold vs no hook)")
        print(f"{'state commits':>14} {'with hook':>12} {'without':>12} {'ratio':>7}")
        for count in (10, 10_000):
            repo, hooks, empty = setup(root, count)
            hooked, bare = measure(repo, hooks, empty, args.commits)
            actual = int(git("rev-list", "--count", "refs/harness/state", cwd=repo))
            print(f"{actual:>14} {hooked * 1000:>10.2f}ms {bare * 1000:>10.2f}ms {hooked / bare:>6.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
