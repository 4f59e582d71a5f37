"""bench/bench_integrate.py: the remote's clock of the target's moves gives each commit the
move that brought it and catches a move that is not a fast-forward; and the bench at its
smallest (two clones, three tasks, the real `git handoff` behind a git daemon) lands every
task with its own checks clean, against today's code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.bench_integrate import landing_times, seed_remote
from tests.support.repo import git

ROOT = Path(__file__).resolve().parents[2]


def _commit(where: Path, name: str) -> str:
    (where / name).write_text(f"{name}\n")
    git("add", name, cwd=where)
    git("commit", "-q", "-m", name, cwd=where)
    return git("rev-parse", "HEAD", cwd=where).strip()


def test_each_commit_lands_with_the_move_that_brought_it_and_a_rewind_is_seen(tmp_path: Path) -> None:
    bare = seed_remote(tmp_path / "served", 1)
    c = tmp_path / "c"
    git("clone", "-q", str(bare), str(c), cwd=tmp_path)
    first, second = _commit(c, "a.txt"), _commit(c, "b.txt")
    git("push", "-q", "origin", "HEAD:main", cwd=c)  # one move brings both
    third = _commit(c, "c.txt")
    git("push", "-q", "origin", "HEAD:main", cwd=c)
    git("push", "-q", "origin", "refs/heads/main:refs/heads/other", cwd=c)  # not the target: not logged
    seen, forward = landing_times(bare)
    assert forward
    assert seen[first] == seen[second] < seen[third]
    assert len((bare / "target-moves.log").read_text().splitlines()) == 2
    git("push", "-q", "--force", "origin", f"{second}:main", cwd=c)
    _, forward = landing_times(bare)
    assert not forward


@pytest.mark.slow
def test_the_bench_at_its_smallest_lands_every_task(tmp_path: Path) -> None:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, "bench/bench_integrate.py", "--ks", "2", "--tasks", "3", "--repeats", "1"],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {line.split("|")[1].strip(): line for line in run.stdout.splitlines() if line.startswith("| ")}
    audit = rows["K = 2: every task landed, main only fast-forwarded, every check passes at the tip"]
    assert "3/3 landed, forward only: True, checks: True |" in audit and audit.endswith("| all | pass |"), audit
    one = rows["one integration (a merge): `git handoff integrate` vs plain fetch+merge+check+push"]
    assert one.split("|")[4].strip().endswith("x"), one  # a ratio was measured
    assert "integrate, K = 2 clones, 3 tasks: tasks landed/s" in rows
