"""Sync of two clones with 1,000 divergent task updates each, against a plain
`git fetch` + `git push` of the same refs. Target: sync <= 3x the plain transfer.

    PYTHONPATH=$PWD python bench/bench_sync.py [--tasks 2000] [--updates 1000] [--runs 3]

Clone A and clone B share 2,000 tasks; offline, A edits the titles of tasks 0..999 and B
the priorities of tasks 500..1499 (one transaction each: 1,000 state commits per side,
500 tasks changed on both sides). A syncs first; then B's `git handoff sync` (fetch,
3-way merge, merge commit, push) is timed against, on identical copies, a plain
`git fetch` of the remote's refs plus a `git push` of B's state ref.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def sh(*args: str, cwd: Path) -> str:
    proc = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def hermetic(home: Path) -> None:
    os.environ.update({
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
        "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    })
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")


def published_ref(path: Path) -> str:
    """Where the clone at `path` publishes its state on the remote: its own ref
    (refs/harness/clones/<clone id>/state), not refs/harness/state, since fleet ids."""
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.remote.transport import CLONES
    from git_handoff.state.identity import clone_id

    return f"{CLONES}{clone_id(Repo.discover(path))}/state"


def edit_many(path: Path, ids: list[str], field: str) -> None:
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state.store import StateStore

    store = StateStore(Repo.discover(path))
    for n, tid in enumerate(ids):
        def apply(tx, tid=tid, n=n):  # type: ignore[no-untyped-def]
            t = tx.require_task(tid)
            t = dataclasses.replace(t, **({"title": f"renamed {n}"} if field == "title" else {"priority": "P0"}))
            tx.put_task(t)
            tx.log("INIT", f"Edited {field}", task=tid)
        store.transact(apply)


def timed(*args: str, cwd: Path) -> float:
    start = time.perf_counter()
    sh(*args, cwd=cwd)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    try:
        hermetic(work / "home")
        remote = work / "remote.git"
        sh("git", "init", "-q", "--bare", str(remote), cwd=work)
        a = work / "a"
        a.mkdir()
        sh("git", "init", "-q", str(a), cwd=work)
        (a / "README").write_text("bench\n")
        sh("git", "add", "README", cwd=a)
        sh("git", "commit", "-qm", "initial", cwd=a)
        sh("git", "remote", "add", "origin", str(remote), cwd=a)
        sh("git", "push", "-q", "origin", "main", cwd=a)
        plan = "".join(f'[[task]]\nid = "t{n:05d}"\ntitle = "task {n}"\ncheck = "true"\n' for n in range(opts.tasks))
        (work / "plan.toml").write_text(plan)
        sh("git", "handoff", "init", cwd=a)
        sh("git", "handoff", "import", str(work / "plan.toml"), cwd=a)
        sh("git", "handoff", "sync", cwd=a)
        b = work / "b"
        sh("git", "clone", "-q", str(remote), str(b), cwd=work)
        sh("git", "handoff", "sync", cwd=b)
        ids = [f"t{n:05d}" for n in range(opts.tasks)]
        u = opts.updates
        t0 = time.perf_counter()
        edit_many(a, ids[:u], "title")
        edit_many(b, ids[u // 2: u // 2 + u], "priority")
        setup = time.perf_counter() - t0
        sh("git", "handoff", "sync", cwd=a)
        print(f"setup: {opts.tasks} tasks, {u} state commits on each clone ({setup:.1f}s), "
              f"{u // 2} tasks changed on both sides")
        ours, plain = [], []
        for run in range(opts.runs):
            for kind in ("plain", "sync"):
                r = work / f"r-{kind}-{run}.git"
                c = work / f"b-{kind}-{run}"
                shutil.copytree(remote, r)
                shutil.copytree(b, c, symlinks=True)
                sh("git", "remote", "set-url", "origin", str(r), cwd=c)
                if kind == "plain":
                    plain.append(
                        timed("git", "fetch", "-q", "origin", "+refs/harness/*:refs/remotes/origin/harness/*",
                              "+refs/notes/*:refs/remotes/origin/notes/*", cwd=c)
                        + timed("git", "push", "-q", "origin", "refs/harness/state:refs/harness/plain-copy", cwd=c)
                    )
                else:
                    ours.append(timed("git", "handoff", "sync", cwd=c))
                    state = sh("git", "rev-parse", "refs/harness/state", cwd=c)
                    ref = published_ref(c)
                    pushed = sh("git", "ls-remote", str(r), ref, cwd=c).split()
                    if pushed[:1] != [state]:
                        raise RuntimeError(f"sync did not push its merge: {ref} on the remote is {pushed[:1]}, "
                                         f"the state {state}")
        s, p = statistics.median(ours), statistics.median(plain)
        print(f"git handoff sync (fetch + merge + push, whole command): median {s * 1000:.0f} ms "
              f"(runs: {', '.join(f'{x * 1000:.0f}' for x in ours)})")
        print(f"plain git fetch + git push of the same refs:           median {p * 1000:.0f} ms "
              f"(runs: {', '.join(f'{x * 1000:.0f}' for x in plain)})")
        print(f"ratio: {s / p:.2f}x (target <= 3x) -> {'OK' if s / p <= 3 else 'OVER TARGET'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
