"""docs/many-agents.md's recipe for one machine with worktrees, run verbatim: three worker
worktrees, each a loop of sessions of the scripted agent, landing on one target, on a plan
whose tasks read each other's files and two of which conflict when built together."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import git, make_repo, run

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PLAN = [  # id, depends_on, shared file (a pair appends to one new file)
    ("A", [], None), ("B", ["A"], None), ("C", ["A"], None), ("D", ["B", "C"], None),
    ("E", [], None), ("F", ["E"], None), ("P", [], "shared.txt"), ("Q", [], "shared.txt"),
]


def recipe() -> str:
    text = (ROOT / "docs" / "many-agents.md").read_text()
    found = re.search(r"<!-- recipe: worktrees[^>]*-->\n```sh\n(.*?)```", text, re.S)
    assert found, "docs/many-agents.md lost its worktrees recipe"
    return found.group(1)


def check(task: str, deps: list[str], shared: str | None) -> str:
    parts = [f'test "$(cat {t}.txt)" = done-{t}' for t in [task, *deps]]
    return " && ".join(parts + ([f"grep -qx {task} {shared}"] if shared else []))


def test_the_worktrees_recipe_lands_every_task_on_main(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "project")
    script = recipe()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["AGENT"] = f"{sys.executable} -m git_handoff.agents.scripted --subprocess"
    # the recipe's first two lines, then the plan, then the rest as written
    head, _, rest = script.partition("git handoff init --mode concurrent\n")
    subprocess.run(["bash", "-c", head + "git handoff init --mode concurrent\n"], cwd=repo, env=env, check=True,
                   capture_output=True)
    for task, deps, shared in PLAN:
        args = ["add", f"task {task}" + (f" append:{shared}" if shared else ""), "--id", task,
                "--check", check(task, deps, shared)]
        for dep in deps:
            args += ["--after", dep]
        got = run(*args, cwd=repo)
        assert got.rc == 0, got.err
    proc = subprocess.run(["bash", "-c", rest], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = {task: json.loads(run("show", task, "--json", cwd=repo).out) for task, _, _ in PLAN}
    assert all(s["status"] == "completed" and s.get("integrated_commit") for s in shown.values()), {
        t: (s["status"], s.get("integrated_commit"), s["error_log"][-1:]) for t, s in shown.items()}
    tip = git("rev-parse", "main", cwd=repo).strip()
    assert git("status", "--porcelain", cwd=repo) == ""  # the main worktree followed its branch
    for task, deps, shared in PLAN:
        checked = subprocess.run(["sh", "-c", check(task, deps, shared)], cwd=repo, capture_output=True)
        assert checked.returncode == 0, (task, checked.stderr)
        assert git("merge-base", "--is-ancestor", shown[task]["completed_commit"], tip, cwd=repo, check=False) == ""
    assert sorted((repo / "shared.txt").read_text().split()) == ["P", "Q"]
