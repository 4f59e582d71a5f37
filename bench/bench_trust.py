"""What parsing at the edge costs, and what a dependency cycle costs.

    PYTHONPATH=$PWD python bench/bench_trust.py [--quick]

- `sync` adopting a 10,000-task state (every record new to the clone, so every one goes
  through its parser) against the same sync with the edge check swapped for the check
  `sync` made before it (load_task of each changed task file, nothing else), on
  identical copies, alternately. Target: <= 1.2x. Also: how many of the task files the
  one-pass recognizer of the layout git handoff writes took (task_file.written_task_id).
- `next` and `claim` on a state whose tasks form one dependency cycle of 5,000 and of
  50,000 (`--quick`: 5,000), and on as many tasks without dependencies (the floor):
  time and peak memory of the real executable, against the code before the linear-cost
  work (BEFORE_REV) and main before the bulk-path work (MAIN_REV), both exported and run
  in the same run. Target: seconds, and bounded memory.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    HANDOFF,
    PY,
    Row,
    build_state,
    copy_repo,
    fresh_dir,
    git,
    make_repo,
    ms,
    run_proc,
    store_for,
    task_id,
    workdir,
)


def _old_check(repo: Any, tree: str, known_good: Any = ()) -> int:
    """The pre-edge check: each task file changed since the first known-good tree (where
    the incoming history meets ours; none for a clone adopting) through load_task."""
    from git_handoff.core.serialization import load_task

    base = next((t for t in known_good if t), None)
    n = 0
    for path, (_, new) in repo.tree_diff(base, tree).items():
        if new is not None and path.startswith("tasks/"):
            load_task(repo.read_blob(new), source=path)
            n += 1
    return n


def _sync_once(remote: Path, tmp: Path, name: str, edge: bool) -> float:
    from git_handoff.ops import sync as sync_ops
    from git_handoff.remote import incoming

    clone = tmp / name
    if clone.exists():
        shutil.rmtree(clone)
    git("clone", "-q", str(remote), str(clone), cwd=tmp)
    store = store_for(clone)
    saved = incoming.check_state
    if not edge:
        incoming.check_state = _old_check
    sync_ops._CHECKED.clear() if hasattr(sync_ops, "_CHECKED") else None
    incoming.forget_checked()
    try:
        start = time.perf_counter()
        sync_ops.sync(store, "origin")
        return time.perf_counter() - start
    finally:
        incoming.check_state = saved


def sync_through_parsers(quick: bool) -> list[Row]:
    n = 2_000 if quick else 10_000
    rows = []
    for label, build in ((f"{n:,} tasks", build_state), (f"{n:,} worked tasks", worked_state)):
        rows += _sync_rows(label, build, n, repeats=2 if quick else 5)
    return rows


def _sync_rows(label: str, build: Any, n: int, repeats: int) -> list[Row]:
    tmp = workdir() / "trust-sync"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    src = build(tmp / "src", n)
    remote = tmp / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp)
    git("remote", "add", "origin", str(remote), cwd=src)
    git("push", "-q", "origin", "main", "refs/harness/state:refs/harness/state", cwd=src)
    edge, old = [], []
    for i in range(repeats):
        old.append(_sync_once(remote, tmp, f"old{i}", edge=False))
        edge.append(_sync_once(remote, tmp, f"edge{i}", edge=True))
    a, b = statistics.median(edge), statistics.median(old)
    ratio = a / b
    return [Row(f"sync adopting {label} through the parsers", ms(a), ms(b), ratio, "<= 1.2x", ratio <= 1.2),
            Row("  of them recognized in one pass", f"{_recognized(src):,} of {n:,}",
                "the rest: the full parser")]


def worked_state(path: Path, n: int) -> Path:
    """A state of `n` tasks in the layouts the verbs leave (a quarter each: pending on
    another, claimed, completed after two checkpoints, failed with its error log): the
    real `claim`, `checkpoint`, `done` and `fail` worked four tasks in a scratch
    repository; each of the `n` is a copy of one of them under its own id, title and
    order, written through the store as every verb writes (dump_task)."""
    from git_handoff.core.serialization import load_task
    from git_handoff.state.snapshot import task_path

    scratch = make_repo(path.parent / f"{path.name}-verbs")
    for args in (("init",), ("add", "Claimed", "--id", "w1", "--check", "true"),
                 ("add", "Completed", "--id", "w2", "--check", "true", "--spec", "docs/w2.md"),
                 ("add", "Failed", "--id", "w3", "--check", "false", "-p", "P0"),
                 ("add", "Pending", "--id", "w0", "--check", "true", "--after", "w1"),
                 ("claim", "w3"), ("fail", "w3", "--reason", "the check broke"),
                 ("claim", "w2"), ("checkpoint", "w2", "parser written", "--of", "2"),
                 ("checkpoint", "w2", "tests pass"), ("done", "w2"), ("claim", "w1")):
        ran = run_proc([*HANDOFF, *args], scratch)
        if ran.rc != 0:
            raise RuntimeError(f"git handoff {' '.join(args)} exited {ran.rc}: {ran.err.decode()[-300:]}")
    models = [load_task(git("show", f"refs/harness/state:{task_path(f'w{k}')}", cwd=scratch).encode())
              for k in range(4)]
    assert [t.status for t in models] == ["pending", "in_progress", "completed", "failed"], models
    build_state(path, 0)
    store = store_for(path)

    def apply(tx: Any) -> None:
        for i in range(n):
            model = models[i % 4]
            tx.put_task(model.evolve(id=task_id(i), title=f"{model.title} task {i}", order=i + 1,
                                     depends_on=(task_id(i + 1),) if model.depends_on and i + 1 < n else ()))
        tx.log("INIT", f"Imported {n} worked task(s) from bench")

    store.transact(apply)
    return path


def _recognized(repo_path: Path) -> int:
    """How many task files of the state at `repo_path` task_file.written_task_id takes (the
    one-pass recognizer of the layout git handoff writes); the others go to task_file.task."""
    from git_handoff.core import task_file
    from git_handoff.infra.gitrepo import Repo

    repo = Repo.discover(repo_path)
    head = repo.ref_target("refs/harness/state")
    assert head is not None, f"no state at {repo_path}"
    tree = repo.commit_tree(head)
    return sum(1 for path, (_, new) in repo.tree_diff(None, tree).items()
               if new is not None and path.startswith("tasks/")
               and task_file.written_task_id(repo.read_blob(new)) is not None)


def cycle_state(path: Path, n: int) -> Path:
    from git_handoff.core.model import Task, now_iso
    from git_handoff.ops import tasks as ops

    build_state(path, 0)
    store = store_for(path)
    stamp = now_iso()

    def apply(tx: Any) -> None:
        for i in range(n):
            tx.put_task(Task(id=task_id(i), title=f"Task {i}", depends_on=(task_id((i + 1) % n),),
                             created_at=stamp, order=i + 1))
        tx.log("INIT", f"Imported {n} task(s) from bench")

    store.transact(apply)
    del ops
    return path


# The baselines, each exported and run in the same run as the current code: the code
# before the linear-cost work (next and claim on a cycle were quadratic), and main before
# the bulk-path work (linear, with the constant factors of one blob, one stamp and one
# parse per task).
BEFORE_REV = "b575e9c"
MAIN_REV = "19b0211"
BASELINES = (BEFORE_REV, MAIN_REV)
# A baseline run is stopped after this long (BEFORE_REV on a 50,000-task cycle ran for
# more than 11 minutes and reached 3.5 GB): the figure then says "stopped after".
BASELINE_CAP_SECONDS = 120


def _export(rev: str) -> Path | None:
    """`git_handoff/` as of `rev`, in a directory to put first on PYTHONPATH (None if absent)."""
    root = Path(__file__).resolve().parent.parent
    out = workdir() / f"code-{rev}"
    if not out.exists():
        archive = subprocess.run(["git", "archive", rev, "git_handoff"], cwd=root, capture_output=True)
        if archive.returncode != 0:
            return None
        out.mkdir(parents=True)
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


def _timed(verb: str, base: Path, code: Path | None, expect_rc: int,
           cap: float = 1800) -> tuple[float, int] | None:
    """(seconds, peak RSS in KiB) of one `git handoff VERB` on a fresh copy of `base`, with
    no per-clone task cache or claim index (the first command after a sync); None when it
    was stopped after `cap` seconds."""
    repo = fresh_dir(f"cycle-{verb}")
    copy_repo(base, repo)
    for cache in ("tasks-cache.pickle", "tasks-index.marshal", "claim-index.marshal", "claim-head.marshal",
                  "status-index.marshal"):
        (repo / ".git" / "handoff" / cache).unlink(missing_ok=True)
    env = {"PYTHONPATH": str(code)} if code is not None else None
    wrap = ["/usr/bin/time", "-f", "maxrss_kb=%M"] if Path("/usr/bin/time").exists() else []
    if shutil.which("timeout"):  # stops the command itself, not only the wrapper
        wrap += ["timeout", "-s", "KILL", str(int(cap))]
    r = run_proc([*wrap, PY, "-m", "git_handoff", verb], repo, env=env, timeout=cap + 30)
    shutil.rmtree(repo, ignore_errors=True)
    if r.seconds >= cap or r.rc in (-9, 137):
        return None
    if r.rc != expect_rc:
        raise RuntimeError(f"{verb} exited {r.rc}, not {expect_rc}: {r.err.decode(errors='replace')[-300:]}")
    rss = r.max_rss_kb
    for line in r.err.decode(errors="replace").splitlines()[::-1]:
        if line.startswith("maxrss_kb="):
            rss = int(line.split("=", 1)[1])
            break
    return r.seconds, rss


def _fig(found: tuple[float, int] | None, cap: float = BASELINE_CAP_SECONDS) -> str:
    if found is None:
        return f"stopped after {cap:.0f} s"
    seconds, rss_kb = found
    return f"{seconds:.1f} s, {rss_kb / 1024:.0f} MiB peak"


def flat_state(path: Path, n: int) -> Path:
    """n pending tasks without dependencies (the floor: what loading n tasks costs)."""
    return build_state(path, n)


def cycle_costs(quick: bool) -> list[Row]:
    """`next` and `claim` on an n-task cycle (every task fails with a [DEPENDENCY] entry:
    one transaction writing n task files) and on n tasks without dependencies (the
    floor: loading n tasks; claim takes one), the current code against BASELINES in the
    same run, each on a fresh copy of the state with no task cache. The target is on the
    current code; the ratio is now / MAIN_REV."""
    codes = [(rev, _export(rev)) for rev in BASELINES]
    rows = []
    for n in (5_000,) if quick else (5_000, 50_000):
        for shape, build, expect in (("cycle", cycle_state, 1), ("flat", flat_state, 0)):
            base = build(fresh_dir(f"{shape}-{n}"), n)
            for verb in ("next", "claim"):
                now = _timed(verb, base, None, expect)
                assert now is not None
                figures, ratio = [], None
                for rev, code in codes:
                    if code is None:
                        figures.append(f"{rev}: n/a (not in this clone)")
                        continue
                    then = _timed(verb, base, code, expect, cap=BASELINE_CAP_SECONDS)
                    figures.append(f"{rev}: " + _fig(then))
                    if rev == MAIN_REV and then is not None:
                        ratio = now[0] / then[0]
                what = f"a {n:,}-task cycle" if shape == "cycle" else f"{n:,} tasks, no dependencies"
                rows.append(Row(f"{verb} on {what}", _fig(now), "; ".join(figures), ratio,
                                target="< 60 s, < 1 GiB", ok=now[0] < 60 and now[1] < 1024 * 1024))
            shutil.rmtree(base, ignore_errors=True)
    return rows


def trust_figures(quick: bool) -> list[Row]:
    return sync_through_parsers(quick) + cycle_costs(quick)


if __name__ == "__main__":
    for row in trust_figures("--quick" in sys.argv):
        print(f"{row.scenario:45} {row.figure:22} {row.baseline:70} "
              f"{'' if row.ratio is None else f'{row.ratio:.2f}x':8} {row.target:16} {row.verdict}")
