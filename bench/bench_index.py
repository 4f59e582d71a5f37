"""Every command and hook at the floor: the same command at 10,000 tasks against 100, and
against the harness skill's own scripts (bench/baseline_harness.py), alternating in one
run, medians.

    python bench/bench_index.py [--quick]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import baseline_harness
from bench.bench_cmdserver import start_server, stop_server
from bench.common import (
    HANDOFF,
    PY,
    ROOT,
    ProcRun,
    Row,
    fresh_dir,
    median,
    ms,
    run_proc,
    state_copy,
)
from git_handoff import cmdclient

HARNESS = [PY, str(ROOT / "bench" / "baseline_harness.py")]


def _check(r: ProcRun, what: str) -> None:
    rc = r.rc
    if rc not in (0, 1):
        raise RuntimeError(f"{what} exited {rc}: {r.err.decode(errors='replace')[-300:]}")


def _ratio_row(name: str, a: list[float], b: list[float], base: str, limit: float | None) -> Row:
    """A ratio row; `limit` None: for information (the target is carried by another row)."""
    x, y = median(a), median(b)
    if limit is None:
        return Row(name, ms(x), f"{base} {ms(y)}", x / y)
    return Row(name, ms(x), f"{base} {ms(y)}", x / y, f"<= {limit:g}x", x / y <= limit)


def scale_rows(quick: bool) -> list[Row]:
    """next / status / claim / done at 10,000 tasks against the same at 100 (<= 1.2x)."""
    reps = 5 if quick else 15
    small, big = state_copy("index-100", 100), state_copy("index-10k", 10000)
    times: dict[tuple[str, int], list[float]] = {}
    for path in (small, big):  # warm: the indexes are built once, as after any first command
        run_proc([*HANDOFF, "next", "--json"], path)
        run_proc([*HANDOFF, "status", "--json"], path)
    for _ in range(reps):
        for name, argv in (("next --json", ["next", "--json"]), ("status --json", ["status", "--json"])):
            for n, path in ((100, small), (10000, big)):
                r = run_proc([*HANDOFF, *argv], path)
                _check(r, name)
                times.setdefault((name, n), []).append(r.seconds)
        claimed = {}
        for n, path in ((100, small), (10000, big)):
            r = run_proc([*HANDOFF, "claim", "--worker", "bench", "--json"], path)
            _check(r, "claim")
            claimed[n] = json.loads(r.out)["id"]
            times.setdefault(("claim --json", n), []).append(r.seconds)
        for n, path in ((100, small), (10000, big)):
            r = run_proc([*HANDOFF, "done", claimed[n], "--json"], path)
            _check(r, "done")
            times.setdefault(("done --json", n), []).append(r.seconds)
    return [_ratio_row(f"{name}: 10,000 tasks vs 100", times[(name, 10000)], times[(name, 100)], "100 tasks", 1.2)
            for name in ("next --json", "status --json", "claim --json", "done --json")]


def _harness_project(n: int) -> Path:
    path = fresh_dir(f"harness-{n}")
    baseline_harness.setup(path, n)
    return path


def _paired(a: list[str], a_cwd: Path, b: list[str], b_cwd: Path, reps: int, stdin: bytes | None = None,
            a_env: dict[str, str] | None = None) -> tuple[list[float], list[float]]:
    run_proc(a, a_cwd, input=stdin, env=a_env)
    run_proc(b, b_cwd, input=stdin)
    ta, tb = [], []
    for _ in range(reps):
        r = run_proc(a, a_cwd, input=stdin, env=a_env)
        _check(r, " ".join(a[-2:]))
        ta.append(r.seconds)
        r = run_proc(b, b_cwd, input=stdin)
        _check(r, " ".join(b[-2:]))
        tb.append(r.seconds)
    return ta, tb


def harness_rows(quick: bool) -> list[Row]:
    """next at 100 tasks against the harness's read-only selection: through the command
    server's fast client (<= 1.2x) and in-process; the Stop and SessionStart hooks (an open
    session, a claimed task) in-process against its hook scripts (for information: the
    hooks' target is met through the fast client, bench_cmdserver.py measures it against
    the harness's own scripts)."""
    reps = 5 if quick else 15
    rows = []
    for n in (100, 10000):
        ours, theirs = state_copy(f"hooks-{n}", n), _harness_project(n)
        if n == 100:
            a, b = _paired([*HANDOFF, "next", "--json"], ours, [*HARNESS, "next", str(theirs), "-"], theirs, reps)
            rows.append(_ratio_row("next --json in-process (command server off) vs the harness's selection, "
                                   "100 tasks", a, b, "harness", None))
            served = {"HANDOFF_COMMAND_SERVER": "1", "HANDOFF_COMMAND_SERVER_IDLE": "600"}
            start_server(ours, served)
            try:
                a, b = _paired(cmdclient.fast_command(["next", "--json"]), ours, [*HARNESS, "next", str(theirs), "-"],
                               theirs, reps, a_env=served)
                log = (ours / ".git" / "handoff" / "cmdserver" / "log").read_text()
            finally:
                stop_server(ours)
            if log.count(": next --json") < reps + 1:
                raise RuntimeError("next through the fast client: not every run was served (the server went stale?)")
            rows.append(_ratio_row("next --json through the command server's fast client vs the harness's "
                                   "selection, 100 tasks", a, b, "harness", 1.2))
        for setup in (["session", "start"], ["ack"], ["claim", "--worker", "bench"]):
            r = run_proc([*HANDOFF, *setup], ours)
            _check(r, " ".join(setup))
        for hook, ref, payload in (
            ("claude-stop", "stop", {"session_id": "bench", "stop_hook_active": False, "cwd": str(ours)}),
            ("claude-session-start", "session-start", {"session_id": "bench", "source": "resume", "cwd": str(ours)}),
        ):
            a, b = _paired([*HANDOFF, "hook", hook], ours, [*HARNESS, ref, str(theirs), "-"], theirs, reps,
                           json.dumps(payload).encode())
            rows.append(_ratio_row(f"hook {hook} in-process vs the harness's hook script, {n:,} tasks (the target "
                                   "is the fast client's: bench_cmdserver.py)", a, b, "harness", None))
    return rows


def index_rows(quick: bool) -> list[Row]:
    return scale_rows(quick) + harness_rows(quick)


if __name__ == "__main__":
    from bench.run import print_table

    print_table(index_rows("--quick" in sys.argv))
