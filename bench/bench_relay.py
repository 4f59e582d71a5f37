"""The relay end to end: N tasks in the harness tasks.json layout, max_tasks_per_session
tasks per session, the built-in scripted agent; wall time per run (and per task), as a
child process and in tmux. Also the cost of a dispatch round trip.

    python bench/bench_relay.py [--tasks 100] [--per-session 10] [--no-tmux]

Runs the code of this checkout against throwaway repositories.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HANDOFF = [PY, "-m", "git_handoff"]


def hermetic(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "HANDOFF_"))}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
                "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
                "PYTHONPATH": str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")})
    return env


def sh(args: list[str], cwd: Path, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, input=stdin)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def project(base: Path, env: dict[str, str], tasks: int, per_session: int) -> Path:
    repo = base / f"repo-{time.monotonic_ns()}"
    repo.mkdir(parents=True)
    sh(["git", "init", "-q", "-b", "main"], repo, env)
    (repo / ".gitignore").write_text(".harness/\n")
    sh(["git", "add", ".gitignore"], repo, env)
    sh(["git", "commit", "-q", "-m", "initial"], repo, env)
    items = [{"id": f"task-{n:03d}", "title": f"Create task-{n:03d}.txt", "status": "pending", "priority": "P1",
              "depends_on": [], "attempts": 0, "max_attempts": 3,
              "validation": {"command": f"grep -qx done-task-{n:03d} task-{n:03d}.txt", "timeout_seconds": 30},
              "on_failure": {"cleanup": None}, "error_log": [], "checkpoints": []}
             for n in range(1, tasks + 1)]
    plan = repo / ".harness" / "tasks.json"
    plan.parent.mkdir()
    plan.write_text(json.dumps({"version": 2, "session_config": {"max_tasks_per_session": per_session,
                                                                 "max_sessions": tasks}, "tasks": items}))
    sh([*HANDOFF, "init"], repo, env)
    sh([*HANDOFF, "import", str(plan)], repo, env)
    return repo


def relay(base: Path, env: dict[str, str], tasks: int, per_session: int, tmux: bool) -> tuple[float, int]:
    repo = project(base, env, tasks, per_session)
    args = [*HANDOFF, "relay", "--agent", f"{PY} -m git_handoff.agents.scripted", "-q"]
    socket_name = f"handoff-bench-{os.getpid()}"
    if tmux:
        args += ["--tmux", "--tmux-socket", socket_name]
    started = time.monotonic()
    try:
        sh(args, repo, env)
    finally:
        if tmux:
            subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    elapsed = time.monotonic() - started
    status = json.loads(sh([*HANDOFF, "status", "--json"], repo, env).stdout)
    assert status["counts"]["completed"] == tasks, status["counts"]
    return elapsed, int(status["session_count"])


def dispatch_round_trip(base: Path, env: dict[str, str], runs: int) -> float:
    repo = project(base, env, 1, 1)
    sh(["git", "config", "handoff.backend.echo.command", "cat"], repo, env)
    started = time.monotonic()
    ids = [sh([*HANDOFF, "dispatch", "new", "-b", "echo", "-s", "bench"], repo, env, stdin="hi").stdout.strip()
           for _ in range(runs)]
    for run_id in ids:
        sh([*HANDOFF, "dispatch", "run", run_id, "--background"], repo, env)
    sh([*HANDOFF, "dispatch", "wait", *ids], repo, env)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--no-tmux", action="store_true")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="handoff-bench-relay-"))
    try:
        env = hermetic(base / "home")
        modes = [False] + ([] if args.no_tmux or shutil.which("tmux") is None else [True])
        for tmux in modes:
            elapsed, sessions = relay(base, env, args.tasks, args.per_session, tmux)
            print(f"relay{' --tmux' if tmux else ''}: {args.tasks} tasks, {sessions} sessions: "
                  f"{elapsed:.1f}s ({elapsed / args.tasks * 1000:.0f} ms/task, {elapsed / sessions:.2f}s/session)")
        elapsed = dispatch_round_trip(base, env, 4)
        print(f"dispatch: new + run --background + wait for 4 runs: {elapsed:.2f}s")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
