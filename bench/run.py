"""Every benchmark scenario in one run, one table.

    python bench/run.py [--quick] [--only TEXT] [--markdown FILE]

Each row: the figure, its baseline measured in the same run, the ratio, the
target and pass/FAIL. `--quick` (under 2 minutes) shrinks repeats and counts;
the full run (under 20 minutes on 2 cores) is what docs/performance.md's table shows.
A scenario whose feature has not landed prints "n/a (not built)".
Exit status: 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, workdir

# (title, module under bench/, function(quick) -> list[Row], rows shown when the module is missing)
SCENARIOS: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    ("one-task change", "bench_core", "one_task_change", []),
    ("next / status / claim at 10k", "bench_core", "read_commands", []),
    ("every command and hook at the floor", "bench_index", "index_rows", []),
    ("claim vs mkdir-lock baseline", "bench_adapters", "claim_vs_baseline",
     [("claim vs tasks.json+mkdir, 100 tasks", "<= 1.2x"), ("claim vs tasks.json+mkdir, 10,000 tasks", "<= 0.6x")]),
    ("post-commit hook", "bench_adapters", "hook_overhead",
     [("post-commit hook, 10 state commits", "<= 2.0x"), ("post-commit hook, 100,000 state commits", "<= 2.0x")]),
    ("claim storm", "bench_adapters", "claim_storm",
     [("claim storm 1/4/16 processes", "16 >= 1; 0 double claims")]),
    ("long haul", "bench_longhaul", "long_haul", []),
    ("sync", "bench_adapters", "sync_divergent", [("sync of 1,000 divergent updates", "<= 3x")]),
    ("claim and fail on a big work tree", "bench_rollback", "rollback_scenario",
     [("claim, 10k tracked + 1k untracked", "<= 1.5x"), ("fail, 10k tracked + 1k untracked", "<= 1.5x"),
      ("claim, 10k tracked, clean tree", "<= 1.15x")]),
    ("mcp e2e", "bench_mcp", "e2e",
     [("e2e 100 tasks: MCP server, total", "<= 0.3x"), ("e2e 100 tasks: CLI, total", "<= 1.7x"),
      ("e2e 100 tasks: CLI through the command server, fast client, total", "<= 1.2x")]),
    ("dashboard", "bench_serve", "serve_pages", [("serve: first page, 10,000 tasks", "< 1 s")]),
    ("dashboard imports", "bench_serve", "status_imports", [("status: import time with the dashboard", "<= 1.10x")]),
    ("sync through the parsers", "bench_trust", "sync_through_parsers",
     [("sync adopting 10,000 tasks through the parsers", "<= 1.2x"),
      ("sync adopting 10,000 worked tasks through the parsers", "<= 1.2x")]),
    ("next / claim on a dependency cycle", "bench_trust", "cycle_costs",
     [("next on a 50,000-task cycle", "< 60 s, < 1 GiB"), ("claim on a 50,000-task cycle", "< 60 s, < 1 GiB")]),
    ("sync against a fleet's pile of refs", "bench_sync_fleet", "fleet_sync",
     [("sync adopting one task from each of 1,000 clone heads", "<= 5 s"),
      ("sync adopting one task from each of 10,000 clone heads", "<= 5 s"),
      ("sync with 60,000 refs in an unknown namespace on the remote", "<= 1.2x")]),
    ("sync with retired clone ids", "bench_fleet_retired", "fleet_retired",
     [("sync, 1,000 clone ids in the history (20 active, the rest retired)", "<= 2 s"),
      ("sync, 10,000 clone ids in the history (20 active, the rest retired)", "<= 2 s"),
      ("  sync with 10,000 vs 1,000 retired ids", "<= 1.25x (flat)")]),
    ("join a fleet", "bench_join", "join_rows",
     [("join: time to the first claim, 10,000 tasks, 100,000 transactions, 20 active clones", "<= 10 s"),
      ("join: bytes fetched to the first claim, 10,000 tasks, 100,000 transactions, 20 active clones",
       "<= 10x the state alone")]),
    ("agent hooks at the floor", "bench_cmdserver", "scenario",
     [("Stop hook, 100 tasks: served, fast client", "<= 1.0x"),
      ("Stop hook, 10,000 tasks: served, fast client", "<= 1.0x"),
      ("SessionStart hook, 100 tasks: served, fast client", "<= 1.0x"),
      ("SessionStart hook, 10,000 tasks: served, fast client", "<= 1.0x")]),
    ("integrate: the work travels", "bench_integrate", "integrate_scenario",
     [("integrate, K = 1 clones, 24 tasks: tasks landed/s", "-")]),
    ("secret scan", "bench_secrets", "secrets_rows", []),
    ("relay switch of agents", "bench_switch", "switch_rows",
     [("relay switch of agents on a long limit: exit -> next process, median of 10", "<= 2 s")]),
    ("fleet", "bench_fleet", "fleet_scenario",
     [("fleet: K clones of one remote (daemon, smart HTTP, 100 ms delay)", "0 double, 0 lost; K=16 >= K=1")]),
]


def run_scenario(title: str, module: str, func: str, missing: list[tuple[str, str]], quick: bool) -> list[Row]:
    try:
        mod = importlib.import_module(f"bench.{module}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("bench."):
            return [Row(name, "n/a (not built)", target=target) for name, target in missing]
        raise
    fn: Callable[[bool], list[Row]] = getattr(mod, func)
    return fn(quick)


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def table(rows: Sequence[Row]) -> str:
    head = ("scenario", "figure", "baseline (same run)", "ratio", "target", "result")
    data = [(r.scenario, r.figure, r.baseline, fmt_ratio(r.ratio), r.target, r.verdict) for r in rows]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in data]
    return "\n".join(lines)


def print_table(rows: Sequence[Row]) -> None:
    print(table(rows), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, under 2 minutes")
    parser.add_argument("--only", action="append", default=[], help="run scenarios whose title contains TEXT")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args(argv)
    workdir()
    rows: list[Row] = []
    started = time.monotonic()
    for title, module, func, missing in SCENARIOS:
        if args.only and not any(o in title for o in args.only):
            continue
        t0 = time.monotonic()
        print(f"# {title} ...", file=sys.stderr, flush=True)
        try:
            got = run_scenario(title, module, func, missing, args.quick)
        except Exception as exc:  # noqa: BLE001 - one broken scenario must not hide the others
            traceback.print_exc(file=sys.stderr)
            got = [Row(title, f"error: {type(exc).__name__}: {str(exc)[:120]}", ok=False)]
        print(f"#   {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        rows.extend(got)
    text = table(rows)
    print(text)
    print(f"\n{'quick' if args.quick else 'full'} run, {time.monotonic() - started:.0f} s", flush=True)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 0 if all(r.ok is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
