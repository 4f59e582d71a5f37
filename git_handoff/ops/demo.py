"""`git handoff demo`: the product shown end to end in a throwaway repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from git_handoff.errors import UsageError

PLAN = """\
# A small plan: the schema first, then two tasks that build on it.
[[task]]
id = "schema"
title = "Write the schema"
priority = "P0"
check = "test -f schema.sql"

[[task]]
id = "api"
title = "Serve the API"
depends_on = ["schema"]
check = "test -f api.py"

[[task]]
id = "docs"
title = "Document the API"
priority = "P2"
depends_on = ["api"]
check = "test -f API.md"
"""


def run_demo(keep: str | None, say: Callable[[str], None]) -> Path:
    """Run the demo; returns the repository it used (removed afterwards unless kept)."""
    if keep is not None:
        root = Path(keep).resolve()
        if root.exists() and any(root.iterdir()):
            raise UsageError(f"--keep {keep}: the directory exists and is not empty")
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="git-handoff-demo-"))
    repo = root / "project"
    repo.mkdir()
    env = dict(os.environ)
    env.setdefault("GIT_AUTHOR_NAME", "Demo")
    env.setdefault("GIT_AUTHOR_EMAIL", "demo@example.com")
    env.setdefault("GIT_COMMITTER_NAME", "Demo")
    env.setdefault("GIT_COMMITTER_EMAIL", "demo@example.com")
    env.pop("HANDOFF_SESSION", None)

    def sh(*args: str, show: bool = True) -> str:
        if show:
            shown = ["git", "handoff", *args[3:]] if list(args[:3]) == handoff else list(args)
            say(f"$ {' '.join(shown)}")
        proc = subprocess.run(list(args), cwd=repo, env=env, capture_output=True, text=True)
        out = (proc.stdout + proc.stderr).rstrip()
        if show and out:
            say(out)
        return out

    handoff = [sys.executable, "-m", "git_handoff"]
    try:
        sh("git", "init", "-q", "-b", "main", show=False)
        (repo / "README").write_text("demo project\n")
        sh("git", "add", "README", show=False)
        sh("git", "commit", "-q", "-m", "initial", show=False)
        say(f"# a throwaway repository: {repo}")
        (repo / "plan.toml").write_text(PLAN)
        sh(*handoff, "init")
        sh(*handoff, "import", "plan.toml")
        sh(*handoff, "status")
        sh(*handoff, "next")
        sh(*handoff, "graph")
        sh(*handoff, "log")
        sh("git", "log", "--oneline", "refs/harness/state")
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return repo
