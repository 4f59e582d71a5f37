"""The relay end to end: N tasks in the harness tasks.json layout, max_tasks_per_session
tasks per session, the built-in scripted agent; wall time per run (and per task), as a
child process and in tmux. Also the cost of a dispatch round trip.

And the relay's own overhead between sessions: one task per session, 10
sessions; per session boundary, from the moment one agent exits to the moment the next
one's ACK is in the state, split into the relay's part (agent exit -> next agent
process started: session end, document, session start, prompt, launch) and the agent's
own start-up (its process start -> its ACK). Median over the boundaries, for the
scripted agent and, when installed, the real `claude -p` against the loopback model
stub. Target: relay's part <= 2 s.

    python bench/bench_relay.py [--tasks 100] [--per-session 10] [--no-tmux] [--overhead-only]

Runs the code of this checkout against throwaway repositories.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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
                "PYTHONPATH": (str(ROOT)
                               + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))})
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


def _ack_watcher(repo: Path, acks: dict[int, float], stop: threading.Event) -> None:
    """Record when each session's ACK reaches the state (polled every 10 ms)."""
    sys.path.insert(0, str(ROOT))
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state.session_records import read_session
    from git_handoff.state.store import StateStore

    store = StateStore(Repo.discover(repo), session=0)
    seen = None
    while not stop.is_set():
        head = store.head()
        if head != seen and head is not None:
            seen = head
            snap = store.snapshot(head)
            count = int(snap.meta().get("session_count") or 0)
            for n in range(max(1, count - 1), count + 1):
                record = read_session(snap, n)
                if n not in acks and record and isinstance(record.get("ack"), dict):
                    acks[n] = time.time()
        time.sleep(0.01)


def overhead(base: Path, env: dict[str, str], sessions: int, agent: str, extra_env: dict[str, str] | None = None,
             hooks: str | None = None) -> dict[str, float]:
    """Medians over the session boundaries of one relay run, one task per session."""
    repo = project(base, env, sessions, 1)
    env = dict(env, **(extra_env or {}))
    if hooks:
        sh([*HANDOFF, "hooks", "install", "--agent", hooks], repo, env)
    times = base / f"times-{time.monotonic_ns()}"
    wrapped = (f"echo \"start $HANDOFF_SESSION $(date +%s.%N)\" >> {times}; {agent}; "
               f"echo \"exit $HANDOFF_SESSION $(date +%s.%N)\" >> {times}")
    acks: dict[int, float] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_ack_watcher, args=(repo, acks, stop), daemon=True)
    watcher.start()
    try:
        sh([*HANDOFF, "relay", "--agent", wrapped, "-q", "--ack-timeout", "120"], repo, env)
    finally:
        stop.set()
        watcher.join()
    starts: dict[int, float] = {}
    exits: dict[int, float] = {}
    for line in times.read_text().splitlines():
        kind, number, stamp = line.split()
        (starts if kind == "start" else exits)[int(number)] = float(stamp)
    total, own, startup = [], [], []
    for n in range(1, sessions):
        if n in exits and n + 1 in starts and n + 1 in acks:
            total.append(acks[n + 1] - exits[n])
            own.append(starts[n + 1] - exits[n])
            startup.append(acks[n + 1] - starts[n + 1])
    return {"boundaries": len(total), "exit_to_ack": statistics.median(total),
            "relay": statistics.median(own), "agent_startup": statistics.median(startup),
            "relay_max": max(own)}


def print_overhead(name: str, row: dict[str, float]) -> None:
    print(f"relay overhead, {name}: median over {row['boundaries']:.0f} session boundaries: agent exit -> next ACK "
          f"{row['exit_to_ack']:.2f}s = relay {row['relay']:.2f}s (max {row['relay_max']:.2f}s) + agent start-up "
          f"{row['agent_startup']:.2f}s (target: relay <= 2 s)")


def claude_overhead(base: Path, env: dict[str, str], sessions: int) -> dict[str, float] | None:
    if shutil.which("claude") is None:
        return None
    sys.path.insert(0, str(ROOT))
    from tests.support.claude_cli import claude_env
    from tests.support.stubs.anthropic import Lazy, StubServer

    home = base / "claude-home"
    home.mkdir(exist_ok=True)
    with StubServer(Lazy("echo done-{id} > {id}.txt"), lifetime=900) as stub:
        cenv = claude_env(home, stub.url)
        extra = {k: v for k, v in cenv.items() if os.environ.get(k) != v}  # what claude_env sets
        agent = 'claude -p --dangerously-skip-permissions "$(cat {prompt_file})"'
        return overhead(base, env, sessions, agent, extra, hooks="claude")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--per-session", type=int, default=10)
    parser.add_argument("--no-tmux", action="store_true")
    parser.add_argument("--overhead-only", action="store_true", help="only the overhead between sessions")
    parser.add_argument("--sessions", type=int, default=10, help="sessions of the overhead runs")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="handoff-bench-relay-"))
    try:
        env = hermetic(base / "home")
        print_overhead("scripted agent", overhead(base, env, args.sessions, f"{PY} -m git_handoff.agents.scripted"))
        claude = claude_overhead(base, env, args.sessions)
        if claude is not None:
            print_overhead("claude -p (loopback model stub)", claude)
        if args.overhead_only:
            return
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
