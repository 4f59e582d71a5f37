"""Core scenarios: one-task change (time and new object bytes) at 100 / 1,000 /
10,000 tasks against rewriting one whole-state blob; `next`, `status`, `claim`
at 10,000 tasks against a bare `python -c "import pygit2"`; peak memory of `status`.

Run alone: python bench/bench_core.py [--quick]
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    HANDOFF,
    IMPORT_PYGIT2,
    Row,
    feature_built,
    kib,
    median,
    ms,
    new_objects,
    not_built,
    paired,
    peak_rss_kb,
    state_copy,
    state_head,
    store_for,
    task_id,
    time_call,
)
from git_handoff.core.serialization import task_to_json

WHOLE_REF = "refs/bench/whole-state"


def _whole_blob_baseline(path: Path, repeats: int) -> tuple[list[float], list[int]]:
    """The design we rejected: every task in one tasks.json blob, rewritten on each change."""
    store = store_for(path)
    repo = store.repo
    tasks = [task_to_json(t) for t in store.snapshot().tasks().values()]
    doc: dict[str, Any] = {"version": 2, "tasks": tasks}  # the rejected design's tasks.json
    times: list[float] = []
    sizes: list[int] = []
    head: list[str | None] = [None]

    def change(i: int) -> None:
        doc["tasks"][i % len(tasks)]["title"] = f"changed {i}"
        blob = repo.write_blob(json.dumps(doc, indent=2).encode())
        tree = repo.update_tree(None, {"tasks.json": blob})
        commit = repo.create_commit(tree, [head[0]] if head[0] else [], "whole-state change\n")
        repo.raw.references.create(WHOLE_REF, commit, force=True)
        head[0] = commit

    change(0)
    for i in range(1, repeats + 1):
        before = head[0]
        times.extend(time_call(functools.partial(change, i), 1, warmup=0))
        sizes.append(new_objects(path, before, str(head[0]))[1])
    return times, sizes


def one_task_change(quick: bool) -> list[Row]:
    from git_handoff.ops import tasks as ops

    rows = []
    repeats = 10 if quick else 30
    for n in (100, 1000, 10000):
        path = state_copy(f"change-{n}", n)
        store = store_for(path)
        times: list[float] = []
        sizes: list[int] = []
        disk: list[int] = []
        for i in range(repeats):
            before = state_head(path)
            tid = task_id((i * 7919) % n)
            times.extend(time_call(functools.partial(ops.edit, store, tid, title=f"changed {i}"), 1, warmup=0))
            count, content, on_disk = new_objects(path, before, state_head(path))
            sizes.append(content)
            disk.append(on_disk)
        base_t, base_b = _whole_blob_baseline(path, max(5, repeats // 3))
        rows.append(Row(f"one-task change, {n:,} tasks: time", ms(median(times)),
                        f"whole-state blob {ms(median(base_t))}", median(times) / median(base_t)))
        worst = max(sizes)
        target = "< 16 KiB" if n == 10000 else "-"
        rows.append(Row(f"one-task change, {n:,} tasks: new objects", f"{kib(worst)} ({kib(max(disk))} on disk)",
                        f"whole-state blob {kib(max(base_b))}", worst / max(base_b), target,
                        (worst < 16 * 1024) if n == 10000 else None))
    return rows


def read_commands(quick: bool) -> list[Row]:
    """next / status / claim at 10,000 tasks, each against `import pygit2`, and status's peak memory."""
    repeats = 5 if quick else 15
    path = state_copy("cli-10k", 10000)
    rows = []
    peak = 0
    base_rss = 0
    for name, argv, limit in (
        ("next --json", ["next", "--json"], 3.0),
        ("status --json", ["status", "--json"], 4.0),
    ):
        ours, base = paired(HANDOFF + argv, IMPORT_PYGIT2, path, repeats)
        a, b = median([r.seconds for r in ours]), median([r.seconds for r in base])
        rows.append(Row(f"{name}, 10,000 tasks", ms(a), f"import pygit2 {ms(b)}", a / b, f"<= {limit:g}x",
                        a / b <= limit))
        if name.startswith("status"):
            peak = max(peak_rss_kb(HANDOFF + argv, path) for _ in range(3))
            base_rss = max(peak_rss_kb(IMPORT_PYGIT2, path) for _ in range(3))
    if feature_built("work"):
        ours, base = paired(HANDOFF + ["claim", "--force", "--worker", "bench", "--json"], IMPORT_PYGIT2, path, repeats)
        a, b = median([r.seconds for r in ours]), median([r.seconds for r in base])
        rows.append(Row("claim --json, 10,000 tasks", ms(a), f"import pygit2 {ms(b)}", a / b, "<= 3x", a / b <= 3.0))
    else:
        rows.append(not_built("claim --json, 10,000 tasks", "<= 3x"))
    rows.append(Row("status --json, 10,000 tasks: peak memory", f"{peak / 1024:.1f} MiB",
                    f"import pygit2 {base_rss / 1024:.1f} MiB", peak / base_rss if base_rss else None,
                    "< 100 MB", peak * 1024 < 100 * 1000 * 1000))
    rows.append(_status_of_finished(repeats))
    return rows


def finish_all(path: Path) -> None:
    """Every task of the state at `path` completed with its work published, every other one
    landed on the target: the most `status` says about where the work is (a row's WORK)."""
    store = store_for(path)

    def apply(tx: Any) -> None:
        for n, task in enumerate(store.snapshot().tasks().values()):
            landed = {"integrated_commit": f"{n:040x}"} if n % 2 else {}
            tx.put_task(task.evolve(status="completed", completed_at=task.created_at).with_extra(
                completed_commit=f"{n + 1:040x}", work_ref=f"refs/harness/work/{task.id}/1", **landed))
        tx.log("INIT", "every task finished, for the bench")

    store.transact(apply)


def _status_of_finished(repeats: int) -> Row:
    """`status --json` at 10,000 finished tasks, each row with where its work is."""
    path = state_copy("cli-10k-finished", 10000)
    finish_all(path)
    ours, base = paired(HANDOFF + ["status", "--json"], IMPORT_PYGIT2, path, repeats)
    a, b = median([r.seconds for r in ours]), median([r.seconds for r in base])
    return Row("status --json, 10,000 finished tasks (work landed or waiting)", ms(a), f"import pygit2 {ms(b)}",
               a / b, "<= 4x", a / b <= 4.0)


if __name__ == "__main__":
    from bench.run import print_table

    q = "--quick" in sys.argv
    print_table(one_task_change(q) + read_commands(q))
