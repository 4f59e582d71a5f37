"""The secret scan against the commands it runs in, measured inside the same processes.

    python bench/bench_secrets.py [--quick]

Each timed command is a fresh `python -m git_handoff` process, as a user runs it, with a
prelude that wraps the scan's three entry points (git_handoff/state/redaction.py:
`redact_transaction`, which the store calls on every commit, `redact_text`, which the
notes and a saved attempt's message use, and `secret_files`, which reads an attempt's
files) with a timer and writes their total at exit. So each figure is the scan's share
of the very command it ran in: the regular expressions' first compilation and the git
config read included. The commands: `checkpoint` and `done` (check `true`) on states of
100 and 10,000 tasks, a `checkpoint` whose text holds a secret (redacted: the record
walked and written again), and `fail` with an untracked `.env` holding one (the attempt
kept local-only), and an `import` of 10,000 tasks (2,000 with --quick), where every task
file is scanned.

Target: the scan <= 5% of the command it runs in (within the noise of a command run). The
import row is informational: a bulk write pays the scan per file written (tens of
microseconds each: one fast pass per rule's anchor), about a tenth of the import.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    PY,
    Row,
    fresh_dir,
    handoff_ok,
    make_repo,
    median,
    ms,
    run_proc,
    state_copy,
    task_id,
)

TARGET = 0.05
PRELUDE = """
import atexit, os, runpy, sys, time
from git_handoff.state import redaction
spent = [0.0]
def timed(fn):
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start
    return run
for name in ("redact_transaction", "redact_text", "secret_files", "secret_history"):
    setattr(redaction, name, timed(getattr(redaction, name)))
atexit.register(lambda: open(os.environ["BENCH_SCAN_OUT"], "w").write(repr(spent[0])))
sys.argv = ["git-handoff", *sys.argv[1:]]
runpy.run_module("git_handoff", run_name="__main__", alter_sys=True)
"""
SECRET = "gh" + "p_" + "q8Fz2LmT7xVb4NwR9kPc3HsJa1B2c3D4e5F6"


def scanned(args: list[str], cwd: Path) -> tuple[float, float]:
    """(the command's wall time, the scan's time inside it) of one `git handoff ARGS`."""
    out = cwd.parent / f"{cwd.name}.scan"
    run = run_proc([PY, "-c", PRELUDE, *args], cwd, env={"BENCH_SCAN_OUT": str(out)})
    if run.rc not in (0, 1):
        raise RuntimeError(f"git handoff {' '.join(args)}: exit {run.rc}: {run.err.decode(errors='replace')[-300:]}")
    spent = float(out.read_text())
    out.unlink()
    return run.seconds, spent


def row(name: str, runs: list[tuple[float, float]]) -> Row:
    ratio = median([scan / wall for wall, scan in runs])
    return Row(name, ms(median([scan for _, scan in runs])), f"{ms(median([wall for wall, _ in runs]))} (the command)",
               ratio, f"<= {TARGET:.2f}x", ratio <= TARGET)


def commands(n_tasks: int, repeats: int) -> list[Row]:
    repo = state_copy(f"secrets-{n_tasks}", n_tasks)
    handoff_ok(["claim", task_id(0)], repo)
    checkpoints = [scanned(["checkpoint", task_id(0), f"step {i}: parser and tests pass"], repo)
                   for i in range(repeats)]
    leaky = [scanned(["checkpoint", task_id(0), f"deploy key {SECRET} pasted"], repo) for _ in range(repeats)]
    handoff_ok(["done", task_id(0)], repo)
    dones = []
    for i in range(1, repeats + 1):
        handoff_ok(["claim", task_id(i)], repo)
        dones.append(scanned(["done", task_id(i)], repo))
    fails = []
    for i in range(repeats + 1, 2 * repeats + 1):
        handoff_ok(["claim", task_id(i)], repo)
        (repo / ".env").write_text(f"GITHUB_TOKEN={SECRET}\n")
        fails.append(scanned(["fail", task_id(i), "--reason", "gave up"], repo))
        if (repo / ".env").exists():
            os.unlink(repo / ".env")
    tasks = f"{n_tasks:,} tasks"
    return [row(f"secret scan in checkpoint, {tasks}", checkpoints),
            row(f"secret scan in checkpoint holding a secret, {tasks}", leaky),
            row(f"secret scan in done, {tasks}", dones),
            row(f"secret scan in fail, an untracked .env holding a secret, {tasks}", fails)]


def bulk(n_tasks: int, repeats: int) -> Row:
    """`import` of a plan of `n_tasks` tasks (every task file scanned) into a fresh state."""
    plan = fresh_dir("plan") / "plan.toml"
    plan.parent.mkdir(parents=True)
    plan.write_text("".join(f'[[task]]\nid = "p{n}"\ntitle = "Implement the token parser, part {n}"\n'
                            f'check = "pytest -q tests/test_{n}.py"\n\n' for n in range(n_tasks)))
    runs = []
    for _ in range(repeats):
        repo = make_repo(fresh_dir("import"))
        handoff_ok(["init"], repo)
        runs.append(scanned(["import", str(plan)], repo))
    ratio = median([scan / wall for wall, scan in runs])
    return Row(f"secret scan in import of {n_tasks:,} tasks (informational)", ms(median([scan for _, scan in runs])),
               f"{ms(median([wall for wall, _ in runs]))} (the command)", ratio)


def secrets_rows(quick: bool) -> list[Row]:
    repeats = 5 if quick else 15
    rows = commands(100, repeats)
    rows += commands(10_000, repeats)
    rows.append(bulk(2_000 if quick else 10_000, 3))
    return rows


def main() -> None:
    from bench.common import workdir
    from bench.run import print_table

    workdir()
    print_table(secrets_rows("--quick" in sys.argv))


if __name__ == "__main__":
    main()
