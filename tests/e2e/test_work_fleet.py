"""The work travels, end to end (SPEC §10): four clones of one remote served by `git daemon`,
each running `git handoff relay` with the scripted agent, on a 30-task graph whose checks
read their dependencies' files, with three pairs of tasks that conflict when built from
one base (both append a line to one new file). Every relay lands finished work between
sessions (`--integrate`) and waits while its clone has nothing to claim.

At the end: every task integrated exactly once; every task's check passes at the target's
tip (run there, all of them); every task's commits reachable from the target; the server's
reflog of the target only fast-forwards; every attempt the queue or a check saved is
restorable; no work is lost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.remotes import Clones, clones, remote_url  # noqa: F401  (fixtures)
from tests.support.repo import git, run

pytestmark = pytest.mark.slow

TASKS = 30
K = 4
PAIRS = ((5, 6), (12, 13), (20, 21))  # each pair appends to one new file: a conflict when built together
AGENT = f"{sys.executable} -m git_handoff.agents.scripted --subprocess"


def tid(i: int) -> str:
    return f"t{i:02d}"


def dependencies(i: int) -> list[int]:
    """A layered graph: most tasks read one or two earlier tasks' files."""
    if i < 4:
        return []
    if any(i in pair for pair in PAIRS):
        return [i - 4 if i % 2 else i - 3]
    return sorted({i - 3, i - 4} if i % 3 == 0 else {i - 2 if i % 2 else i - 3})


def plan() -> str:
    lines = ["# the work travels: 30 tasks, 3 conflicting pairs\n"]
    for i in range(TASKS):
        deps = [tid(d) for d in dependencies(i)]
        pair = next((p for p in PAIRS if i in p), None)
        title = f"task {i}" + (f" append:shared-{pair[0]}.txt" if pair else "")
        check = " && ".join([f'test "$(cat {t}.txt)" = done-{t}' for t in [tid(i), *deps]]
                            + ([f"grep -qx {tid(i)} shared-{pair[0]}.txt"] if pair else []))
        lines.append(f'[[task]]\nid = "{tid(i)}"\ntitle = "{title}"\npriority = "{"P0" if pair else "P1"}"\n'
                     f"depends_on = {json.dumps(deps)}\ncheck = '{check}'\n")
    return "\n".join(lines)


def handoff_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("HANDOFF_SESSION", None)
    return env


def ok(where: Path, *args: str) -> str:
    got = run(*args, cwd=where)
    assert got.rc == 0, (args, got.err)
    return got.out


def setup_fleet(clones: Clones) -> list[Path]:  # noqa: F811
    first = clones("c0")
    ok(first, "init", "--mode", "concurrent", "--max-tasks-per-session", "3")
    (first / "plan.toml").write_text(plan())
    ok(first, "import", "plan.toml")
    (first / "plan.toml").unlink()
    ok(first, "sync")
    made = [first, *(clones(f"c{i}") for i in range(1, K))]
    for i, path in enumerate(made):
        git("config", "handoff.target", "main", cwd=path)
        git("config", "handoff.syncClaims", "true", cwd=path)
        git("config", "handoff.worker", f"machine-{i}", cwd=path)
        ok(path, "sync")
        ok(path, "trust", "--all")
    return made


def relay_all(made: list[Path], timeout: float = 900) -> list[subprocess.CompletedProcess[str]]:
    procs = [subprocess.Popen(["git", "handoff", "relay", "--agent", AGENT, "--integrate", "--wait-patience", "240",
                               "--max-idle-sessions", "6", "--ack-timeout", "60"],
                              cwd=path, env=handoff_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for path in made]
    deadline = time.monotonic() + timeout
    out = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        out.append(subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    return out


def audit(made: list[Path], bare_main_log: list[tuple[str, str]] | None) -> None:
    for path in made:
        ok(path, "sync")
    where = made[0]
    tasks = {t["id"]: t for t in json.loads(ok(where, "list", "--json"))}
    assert len(tasks) == TASKS
    shown = {t: json.loads(ok(where, "show", t, "--json")) for t in tasks}
    assert all(s["status"] == "completed" and s.get("integrated_commit") for s in shown.values()), {
        t: (s["status"], s.get("integrated_commit")) for t, s in shown.items() if not s.get("integrated_commit")}
    log = json.loads(ok(where, "log", "--json", "--type", "INTEGRATE", "-n", "100000"))
    landings = Counter(line["task"] for line in log if "was on the target already" not in line["line"])
    assert landings == Counter(dict.fromkeys(tasks, 1)), landings  # each task's work landed exactly once
    tip = git("ls-remote", "origin", "refs/heads/main", cwd=where).split()[0]
    git("fetch", "-q", "origin", "main", cwd=where)
    # every task's check at the tip, all of them, in a checkout of exactly the tip
    final = where.parent / "tip"
    git("worktree", "add", "-q", "--detach", str(final), tip, cwd=where)
    for t, s in shown.items():
        check = s["validation"]["command"]
        proc = subprocess.run(["sh", "-c", check], cwd=final, capture_output=True, text=True)
        assert proc.returncode == 0, (t, check, proc.stderr)
        assert git("merge-base", "--is-ancestor", s["completed_commit"], tip, cwd=where, check=False) == ""
    # every attempt saved on the way is restorable: its record reads and its commit is here
    for t in tasks:
        for attempt in json.loads(ok(where, "attempts", t, "--json")):
            assert attempt["unreadable"] is None and attempt["commit"], (t, attempt)
    if bare_main_log is not None:
        for old, new in bare_main_log:
            if set(old) != {"0"}:
                assert git("merge-base", "--is-ancestor", old, new, cwd=where, check=False) == "", (old, new)
    # no work lost: every published work ref is on the target or kept as an attempt
    kept = {a["head"] for t in tasks for a in json.loads(ok(where, "attempts", t, "--json"))}
    for line in git("ls-remote", "origin", "refs/harness/work/*", cwd=where).splitlines():
        oid = line.split()[0]
        on_target = git("merge-base", "--is-ancestor", oid, tip, cwd=where, check=False) == ""
        assert on_target or oid in kept, line


def server_reflog(bare: Path) -> list[tuple[str, str]]:
    text = (bare / "logs" / "refs" / "heads" / "main").read_text()
    return [(line.split()[0], line.split()[1]) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("remote_url", ["daemon"], indirect=True)
def test_four_clones_through_git_daemon_land_30_dependent_tasks_on_one_green_branch(
        clones: Clones, remote_url: str, tmp_path: Path) -> None:  # noqa: F811
    bare = tmp_path / "served" / "remote.git"
    git("config", "core.logAllRefUpdates", "always", cwd=bare)
    made = setup_fleet(clones)
    started = time.monotonic()
    ran = relay_all(made)
    took = time.monotonic() - started
    assert any(r.returncode == 0 for r in ran), [r.stderr[-2000:] for r in ran]
    for r in ran:
        assert r.returncode in (0, 1), r.stderr[-2000:]
        assert "Traceback" not in r.stderr and "unexpected" not in r.stderr, r.stderr[-2000:]
    try:
        audit(made, server_reflog(bare))
    except AssertionError as exc:  # what each relay said, to tell why
        said = "\n".join(f"--- relay {i}\n{r.stdout[-1500:]}{r.stderr[-1500:]}" for i, r in enumerate(ran))
        raise AssertionError(f"{exc}\n{said}") from None
    returned = json.loads(ok(made[0], "log", "--json", "--type", "ERROR", "-n", "100000"))
    conflicts = sum(1 for line in returned if "[CONFLICT]" in line["line"] or "merged onto" in line["line"])
    print(f"{TASKS} tasks on {K} clones in {took:.0f} s; {conflicts} integration(s) sent back")
