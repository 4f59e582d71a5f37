"""The README's short tour runs as written: its shell block, in a throwaway
clone of a bare remote, with the plan file the README shows beside it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from git_handoff.ops.payloads import TaskView
from tests.support.remotes import published
from tests.support.repo import git

README = Path(__file__).resolve().parents[2] / "README.md"


def tour_blocks() -> tuple[str, str]:
    text = README.read_text()
    tour = text[text.index("## A short tour"):]
    tour = tour[: tour.index("\n## ", 1)]
    shell = re.search(r"```sh\n(.*?)```", tour, re.S)
    plan = re.search(r"```toml\n(.*?)```", tour, re.S)
    assert shell and plan, "the tour lost its shell block or its plan file"
    return shell.group(1), plan.group(1)


@pytest.mark.slow  # the whole tour end to end, as the demo: ~25 real `git handoff` processes and a push
def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    shell, plan = tour_blocks()
    origin = tmp_path / "origin.git"
    git("init", "-q", "--bare", "-b", "main", str(origin), cwd=tmp_path)
    work = tmp_path / "work"
    git("clone", "-q", str(origin), str(work), cwd=tmp_path)
    (work / "README").write_text("a project\n")
    git("add", "README", cwd=work)
    git("commit", "-q", "-m", "initial", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    (work / "plan.toml").write_text(plan)

    env = dict(os.environ, GIT_PAGER="cat", PAGER="cat")
    proc = subprocess.run(["bash", "-e", "-x", "-c", shell], cwd=work, capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, f"the tour stopped:\n{proc.stderr[-3000:]}"

    def show(task: str) -> TaskView:
        view: TaskView = json.loads(subprocess.run(["git", "handoff", "show", task, "--json"], cwd=work,
                                                   capture_output=True, text=True, check=True).stdout)
        return view

    assert show("schema")["status"] == "completed"
    api = show("api")
    assert api["status"] == "failed" and api["attempts"] == 1 and api["error_log"] == ["[TASK_EXEC] wrong approach"]
    assert show("cli")["depends_on"] == ["api"]
    # what the comments promise: the plan file made before the claims is still there,
    # the failed attempt's file came back with restore, the state reached the remote
    assert (work / "plan.toml").read_text() == plan
    assert (work / "server.py").read_text() == "print('wrong')\n"
    assert "ERROR [api] [TASK_EXEC] wrong approach" in proc.stdout
    assert git("--git-dir", str(origin), "rev-parse", published(work), cwd=tmp_path) == \
        git("rev-parse", "refs/harness/state", cwd=work)
