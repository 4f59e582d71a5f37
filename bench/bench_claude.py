"""The harness skill's 100-task end-to-end shape through the real Claude Code CLI: the
relay starts `claude -p` session after session (max_tasks_per_session per session),
the CLI's hooks (SessionStart, Stop, SessionEnd) keep it working, and a loopback stub of
the Messages API plays a lazy agent that only works when a Stop hook names the next
task. Beside it, in the same run, the same flow with the built-in scripted agent.

    python bench/bench_claude.py [--tasks 100] [--per-session 10]

Needs `claude` on PATH (.ci/run installs the pinned version); runs against throwaway
repositories; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_relay import HANDOFF, PY, hermetic, project, sh
from tests.support.claude_cli import PINNED_VERSION, claude_env
from tests.support.stubs.anthropic import Lazy, StubServer

CLAUDE_AGENT = 'claude -p --dangerously-skip-permissions "$(cat {prompt_file})"'


def run_flow(base: Path, env: dict[str, str], tasks: int, per_session: int, agent: str,
             hooks: bool) -> tuple[float, int, int]:
    repo = project(base, env, tasks, per_session)
    if hooks:
        sh([*HANDOFF, "hooks", "install", "--agent", "claude"], repo, env)
    started = time.monotonic()
    sh([*HANDOFF, "relay", "--agent", agent, "--ack-timeout", "120", "-q"], repo, env)
    elapsed = time.monotonic() - started
    status = json.loads(sh([*HANDOFF, "status", "--json"], repo, env).stdout)
    return elapsed, int(status["counts"]["completed"]), int(status["session_count"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--per-session", type=int, default=10)
    args = parser.parse_args()
    if shutil.which("claude") is None:
        raise SystemExit(f"claude is not installed (npm install -g @anthropic-ai/claude-code@{PINNED_VERSION})")
    base = Path(tempfile.mkdtemp(prefix="handoff-bench-claude-"))
    try:
        env = hermetic(base / "home")
        scripted = run_flow(base, env, args.tasks, args.per_session, f"{PY} -m git_handoff.agents.scripted", False)
        lazy = Lazy("echo done-{id} > {id}.txt")
        with StubServer(lazy, lifetime=3600) as stub:
            cenv = {**claude_env(base / "home", stub.url), **{k: v for k, v in env.items() if k.startswith("GIT_")},
                    "PYTHONPATH": env["PYTHONPATH"]}
            real = run_flow(base, cenv, args.tasks, args.per_session, CLAUDE_AGENT, True)
            requests = len(stub.requests)
        for name, (elapsed, done, sessions) in (("scripted agent", scripted),
                                                (f"claude {PINNED_VERSION} + stub", real)):
            print(f"{name}: {done}/{args.tasks} completed in {sessions} sessions, {elapsed:.1f}s "
                  f"({elapsed / args.tasks * 1000:.0f} ms/task)")
        print(f"ratio claude/scripted: {real[0] / scripted[0]:.1f}x; model requests served by the stub: {requests}")
        if real[1] != args.tasks or scripted[1] != args.tasks:
            raise SystemExit("not every task was completed")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
