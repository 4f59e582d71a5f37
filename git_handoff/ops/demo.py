"""`git handoff demo`: the product shown end to end in a throwaway repository.

Real processes throughout: a bare remote and two clones, a plan with dependencies,
the post-commit hook, the relay running the built-in scripted agent through several
sessions, a failed attempt rolled back and restored, and a second clone taking over
the remaining work through `sync`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import git_handoff
from git_handoff.core.errors import HandoffError, UsageError

PLAN = """\
# The demo's plan: each task writes <id>.txt holding done-<id>; its check proves it.
[[task]]
id = "schema"
title = "Write the schema"
priority = "P0"
check = "grep -qx done-schema schema.txt"

[[task]]
id = "api"
title = "Serve the API"
depends_on = ["schema"]
check = "grep -qx done-api api.txt"

[[task]]
id = "cli"
title = "Command-line client"
depends_on = ["schema"]
check = "grep -qx done-cli cli.txt"

[[task]]
id = "docs"
title = "Document the API"
priority = "P2"
depends_on = ["api"]
check = "grep -qx done-docs docs.txt"

[[task]]
id = "tests"
title = "End-to-end tests"
depends_on = ["api", "cli"]
check = "grep -qx done-tests tests.txt"
"""


class DemoFailed(HandoffError):
    """A demo step did not do what it should (exit 1)."""

    exit_code = 1


def _prepare_root(keep: str | None) -> Path:
    if keep is None:
        return Path(tempfile.mkdtemp(prefix="git-handoff-demo-"))
    root = Path(keep).resolve()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise UsageError(f"--keep {keep}: the path exists and is not an empty directory")
    root.mkdir(parents=True, exist_ok=True)
    return root


def _environment(root: Path) -> dict[str, str]:
    """The demo's environment: `git handoff` (for the hook too) runs this very code."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HANDOFF_")
           and k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "HARNESS_WORKER_ID")}
    for key, value in (("GIT_AUTHOR_NAME", "Demo"), ("GIT_AUTHOR_EMAIL", "demo@example.com"),
                       ("GIT_COMMITTER_NAME", "Demo"), ("GIT_COMMITTER_EMAIL", "demo@example.com")):
        env.setdefault(key, value)
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("git-handoff", f"exec {shlex.quote(sys.executable)} -m git_handoff \"$@\""),
                       ("python", f"exec {shlex.quote(sys.executable)} \"$@\"")):
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{text}\n")
        shim.chmod(0o755)
    package_parent = str(Path(git_handoff.__file__).resolve().parent.parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = package_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class Demo:
    def __init__(self, root: Path, say: Callable[[str], None]) -> None:
        self.root = root
        self.say = say
        self.env = _environment(root)

    def section(self, title: str) -> None:
        self.say("")
        self.say(f"== {title}")

    def git(self, where: Path, *args: str) -> None:
        proc = subprocess.run(["git", *args], cwd=where, env=self.env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise DemoFailed(f"demo: git {' '.join(args)} failed: {proc.stderr.strip()}")

    def handoff(self, where: Path, *args: str, expect: int = 0, show: bool = True, limit: int = 40) -> str:
        """Run `git handoff ARGS` in `where`, show it, check its exit code."""
        if show:
            self.say(f"{where.name}$ git handoff {' '.join(shlex.quote(a) for a in args)}")
        proc = subprocess.run([sys.executable, "-m", "git_handoff", *args], cwd=where, env=self.env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        out = (proc.stdout + proc.stderr).rstrip("\n")
        if show and out:
            lines = out.splitlines()
            for line in lines[:limit]:
                self.say(f"  {line}")
            if len(lines) > limit:
                self.say(f"  ... ({len(lines) - limit} more lines)")
        if proc.returncode != expect:
            raise DemoFailed(f"demo: `git handoff {' '.join(args)}` exited {proc.returncode}, expected {expect}: "
                             f"{out.splitlines()[-1] if out else ''}")
        if show and expect != 0:
            self.say(f"  (exit {proc.returncode}, as expected)")
        return proc.stdout

    def run(self) -> None:
        root = self.root
        agent = "python -m git_handoff.agents.scripted --checkpoints"  # `python`: this interpreter (bin/)
        alice, bob, origin = root / "alice", root / "bob", root / "origin.git"

        self.section("1. A project, shared through a bare remote")
        self.git(root, "init", "-q", "--bare", "-b", "main", str(origin))
        self.git(root, "clone", "-q", str(origin), str(alice))
        (alice / "README").write_text("demo project\n")
        self.git(alice, "add", "README")
        self.git(alice, "commit", "-q", "-m", "initial")
        self.git(alice, "push", "-q", "origin", "main")
        self.say(f"remote {origin}, first clone {alice}")

        self.section("2. A plan with dependencies")
        (root / "plan.toml").write_text(PLAN)
        self.handoff(alice, "init", "--max-sessions", "2")
        self.handoff(alice, "import", str(root / "plan.toml"))
        self.handoff(alice, "graph")

        self.section("3. The post-commit hook hands a session off after 2 commits")
        self.git(alice, "config", "handoff.commitsPerSession", "2")
        self.handoff(alice, "hooks", "install")

        self.section("4. The relay runs the scripted agent, session after session")
        self.say("(its first attempt at `api` is wrong on purpose; max_sessions = 2 stops it with work left)")
        self.handoff(alice, "relay", "--agent", f"{agent} --fail-first api", "--ack-timeout", "30", expect=1, limit=80)
        self.handoff(alice, "log", "--type", "HANDOFF")

        self.section("5. The failed attempt was rolled back, and nothing was lost")
        self.handoff(alice, "log", "--task", "api")
        self.handoff(alice, "show", "api")
        self.handoff(alice, "attempts", "api")
        self.handoff(alice, "restore", "api", "1")
        self.say(f"alice$ cat api.txt\n  {(alice / 'api.txt').read_text().strip()}")
        self.git(alice, "reset", "-q", "--hard")
        self.git(alice, "clean", "-fdq")
        self.say("alice$ git reset --hard && git clean -fd   # back to where the rollback left it")

        self.section("6. Alice shares the work and the state; Bob's clone takes over")
        self.git(alice, "push", "-q", "origin", "main")
        self.handoff(alice, "sync")
        self.git(root, "clone", "-q", str(origin), str(bob))
        self.handoff(bob, "sync")
        self.say("(commands that arrived by fetch do not run until this clone trusts them)")
        self.handoff(bob, "trust", "--all")
        self.handoff(bob, "init", "--max-sessions", "10")
        self.git(bob, "config", "handoff.commitsPerSession", "2")
        self.handoff(bob, "hooks", "install")
        self.handoff(bob, "relay", "--agent", agent, "--ack-timeout", "30", limit=80)
        self.git(bob, "push", "-q", "origin", "main")
        self.handoff(bob, "sync")

        self.section("7. Back on Alice's clone: everything, from git")
        self.git(alice, "pull", "-q", "--ff-only", "origin", "main")
        self.handoff(alice, "sync")
        self.handoff(alice, "status")
        self.handoff(alice, "graph")
        self.handoff(alice, "log", "-n", "25")
        self.handoff(alice, "doc", "list")


def run_demo(keep: str | None, say: Callable[[str], None]) -> Path:
    """Run the demo; returns the directory it used (removed afterwards unless kept)."""
    root = _prepare_root(keep)
    started = time.monotonic()
    say(f"# git handoff demo in {root}")
    try:
        Demo(root, say).run()
        say("")
        say(f"# demo finished in {time.monotonic() - started:.1f}s")
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return root
