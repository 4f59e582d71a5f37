"""The work travels, end to end (SPEC §10): four clones of one remote served by `git daemon`
(and once by gitolite over sshd, each machine with its own key and the rights of
docs/server-rights.md), each running `git handoff relay` with the scripted agent, on a 30-task graph whose checks
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
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import gitolite
from tests.support.remotes import Clones, clones, remote_url  # noqa: F401  (fixtures)
from tests.support.repo import git, make_repo, run

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


def setup_fleet(clone: Callable[[str], Path]) -> list[Path]:
    """K clones made by `clone(name)` (the first one holds the remote's main), the plan
    imported on the first, each set up as a machine of the fleet."""
    first = clone("c0")
    ok(first, "init", "--mode", "concurrent", "--max-tasks-per-session", "3")
    (first / "plan.toml").write_text(plan())
    ok(first, "import", "plan.toml")
    (first / "plan.toml").unlink()
    ok(first, "sync")
    made = [first, *(clone(f"c{i}") for i in range(1, K))]
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
    # ... and the target's own line agrees: no task's work arrived by two commits
    arrived = Counter(line.split()[-1] for line in git(
        "log", "--first-parent", "--format=%H %P", tip, cwd=where).splitlines()
        if len(line.split()) == 3)  # a merge's second parent: the work it brought
    assert all(n == 1 for n in arrived.values()), arrived
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


def run_and_audit(made: list[Path], bare: Path) -> None:
    """Every clone's relay until the work is done, then the audit (module docstring)."""
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


@pytest.mark.parametrize("remote_url", ["daemon"], indirect=True)
def test_four_clones_through_git_daemon_land_30_dependent_tasks_on_one_green_branch(
        clones: Clones, remote_url: str, tmp_path: Path) -> None:  # noqa: F811
    bare = tmp_path / "served" / "remote.git"
    git("config", "core.logAllRefUpdates", "always", cwd=bare)
    run_and_audit(setup_fleet(clones), bare)


def gitolite_conf(machines: list[str]) -> str:
    """docs/server-rights.md's gitolite rules for `machines`, machine i's clone refs under
    its prefix c<i>; `RW refs/heads/`: the target moves only by fast-forward."""
    own = "".join(f"    RW+ refs/harness/clones/c{i}[0-9a-f]{{{16 - len(f'c{i}')}}}/ = {name}\n"
                  for i, name in enumerate(machines))
    return (f"@fleet = {' '.join(machines)}\nrepo gitolite-admin\n    RW+ = admin\nrepo remote\n    RW+ = admin\n"
            f"{own}    RW+ refs/harness/claims/ = @fleet\n    RW  refs/harness/attempts/ = @fleet\n"
            "    RW  refs/harness/work/ = @fleet\n    RW+ refs/harness/locks/relay$ = @fleet\n"
            "    RW  refs/heads/ = @fleet\n    R   = @fleet\n")


def test_four_machines_under_gitolite_with_their_own_keys_land_the_same_graph(tmp_path: Path) -> None:
    """The same fleet on gitolite over sshd, each machine its own key and the rights of
    docs/server-rights.md: members create work refs, and the target takes fast-forwards
    only (gitolite's RW)."""
    why = gitolite.missing()
    if why:
        pytest.skip(why)
    server = gitolite.Gitolite(tmp_path / "gitolite")
    server.setup()
    bare = server.repositories / "remote.git"
    git("init", "-q", "--bare", "-b", "main", str(bare), cwd=tmp_path)
    git("config", "core.logAllRefUpdates", "always", cwd=bare)
    seed = make_repo(tmp_path / "seed")
    git("push", "-q", str(bare), "main", cwd=seed)
    machines = [f"machine{i}" for i in range(K)]
    server.configure(gitolite_conf(machines), machines)
    with server.serving():
        def clone(name: str) -> Path:
            i = int(name[1:])
            git("clone", "-q", "-c", f"core.sshCommand={server.ssh_command(machines[i])}", "-c",
                f"handoff.cloneId=c{i}", server.url("remote"), str(tmp_path / name), cwd=tmp_path)
            return tmp_path / name

        run_and_audit(setup_fleet(clone), bare)
