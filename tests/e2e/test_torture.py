"""Hostile runs of the real executable: SIGKILL at random moments, stale locks,
concurrent writers while `git gc` repacks underneath.

After every kill: `git fsck` is clean, the state is readable, every command that
exited 0 is in the state, and the next command succeeds within 10 s.
Bounded for CI (a few dozen short processes); bench/ runs the long versions.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from git_handoff.ops.payloads import TaskView
from tests.support.remotes import published
from tests.support.repo import git, make_repo

pytestmark = pytest.mark.slow  # real processes killed, gc underneath: the slow layer

KILL_TRIALS = int(os.environ.get("HANDOFF_TORTURE_TRIALS", "32"))
RECOVERY_SECONDS = 10.0
ROOT = Path(__file__).resolve().parents[2]


def handoff_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "git_handoff", *args]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def handoff(repo: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(handoff_argv(*args), cwd=repo, capture_output=True, text=True, env=child_env(),
                          timeout=timeout)


def background_gc_finished(repo: Path, limit: float = 120.0) -> None:
    """Wait for the repack a command started in the background (gitrepo.gc_in_background)
    to finish: `repack -d` deletes loose objects it has packed, and an fsck listing them
    meanwhile reports "unable to mmap" for objects that are safe in a pack. A marker left
    by a command killed before it started the repack is ignored once no repack runs here."""
    common = (repo / git("rev-parse", "--git-common-dir", cwd=repo)).resolve()
    marker = common / "handoff" / "gc.running"
    deadline = time.monotonic() + limit
    while marker.exists() and _repack_running_in(common):
        assert time.monotonic() < deadline, f"the background repack in {common} ran over {limit:.0f} s"
        time.sleep(0.05)


def _repack_running_in(common: Path) -> bool:
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                started_by_us = b"handoff-gc" in f.read()
            if started_by_us and Path(os.readlink(f"/proc/{pid}/cwd")) == common:
                return True
        except OSError:
            continue
    return False


def fsck_clean(repo: Path) -> None:
    background_gc_finished(repo)
    proc = subprocess.run(["git", "fsck", "--no-progress", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    noisy = [line for line in (proc.stdout + proc.stderr).splitlines()
             if line.strip() and not line.startswith("notice: HEAD points to an unborn branch")]
    assert not noisy, noisy


def state_tasks(repo: Path) -> dict[str, TaskView]:
    r = handoff(repo, "list", "--json")
    assert r.returncode == 0, r.stderr
    return {t["id"]: t for t in json.loads(r.stdout)}


LAST_OUTPUT: list[str] = [""]
LAST_DURATION: list[float] = [0.0]  # how long the last run that finished took (s)


def kill_at_random(repo: Path, argv: list[str], delay: float) -> int | None:
    """Start `git handoff ARGV`, SIGKILL it after `delay` s; its exit code when it finished
    first (its stdout is then in LAST_OUTPUT[0])."""
    proc = subprocess.Popen(handoff_argv(*argv), cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=child_env(), text=True)
    started = time.monotonic()
    deadline = started + delay
    LAST_OUTPUT[0] = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            LAST_OUTPUT[0] = proc.stdout.read() if proc.stdout else ""
            LAST_DURATION[0] = time.monotonic() - started
            return proc.returncode
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return None


def recovers(repo: Path, argv: list[str]) -> None:
    """The next command after a kill succeeds, within RECOVERY_SECONDS."""
    start = time.monotonic()
    r = handoff(repo, *argv, timeout=RECOVERY_SECONDS + 20)
    elapsed = time.monotonic() - start
    assert r.returncode == 0, f"{argv}: exit {r.returncode}: {r.stderr}"
    assert elapsed < RECOVERY_SECONDS, f"{argv} took {elapsed:.1f} s after a kill"


def typical_seconds(repo: Path, argv: list[str]) -> float:
    start = time.monotonic()
    r = handoff(repo, *argv)
    assert r.returncode == 0, r.stderr
    return time.monotonic() - start


@pytest.fixture
def state(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "torture")
    assert handoff(repo, "init", "--mode", "concurrent").returncode == 0
    return repo


def torture(repo: Path, make_argv: Callable[[int], list[str]], after: Callable[[int, int | None], None],
            trials: int, seed: int) -> dict[str, int]:
    """Kill `trials` runs of a command at uniformly random moments of its life."""
    rng = random.Random(seed)
    span = typical_seconds(repo, make_argv(-1)) * 1.3
    outcome = {"finished": 0, "killed": 0}
    for n in range(trials):
        rc = kill_at_random(repo, make_argv(n), rng.uniform(0.0, span))
        outcome["finished" if rc is not None else "killed"] += 1
        if rc is not None:
            # the one timed run may have been slow (a first run, a loaded machine): a run
            # seen finishing sooner bounds the span, so later kills land inside a lifetime
            span = min(span, LAST_DURATION[0] * 1.3)
        fsck_clean(repo)
        after(n, rc)
    assert outcome["killed"] > 0, outcome
    return outcome


def test_sigkill_add(state: Path) -> None:
    exited_ok: list[str] = []

    def argv(n: int) -> list[str]:
        return ["add", f"killed add {n}", "--id", f"k{n + 1}"]

    def after(n: int, rc: int | None) -> None:
        if rc == 0:
            exited_ok.append(f"k{n + 1}")
        tasks = state_tasks(state)
        assert all(t in tasks for t in exited_ok)
        recovers(state, ["add", f"after kill {n}", "--id", f"after{n}"])

    outcome = torture(state, argv, after, KILL_TRIALS, seed=7)
    assert outcome["killed"] > 0
    tasks = state_tasks(state)
    assert {f"after{n}" for n in range(KILL_TRIALS)} <= set(tasks)


def test_sigkill_import_is_all_or_nothing(state: Path, tmp_path: Path) -> None:
    def argv(n: int) -> list[str]:
        plan = tmp_path / f"plan{n}.toml"
        plan.write_text("".join(f'[[task]]\nid = "p{n}-{k}"\ntitle = "planned {k}"\n\n' for k in range(20)))
        return ["import", str(plan)]

    def after(n: int, rc: int | None) -> None:
        tasks = state_tasks(state)
        got = [k for k in range(20) if f"p{n}-{k}" in tasks]
        assert got in ([], list(range(20))), f"partial import: {got}"
        if rc == 0:
            assert len(got) == 20

    torture(state, argv, after, max(8, KILL_TRIALS // 4), seed=11)
    recovers(state, ["add", "after imports"])


def test_stale_ref_lock_left_by_killed_process_is_recovered(state: Path) -> None:
    # A process killed between creating refs/harness/state.lock and renaming it leaves
    # a 0-byte lock with a fresh mtime: the next writer must still get through.
    lock = state / ".git" / "refs" / "harness" / "state.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_bytes(b"")
    recovers(state, ["add", "after a stale lock", "--id", "after-lock"])
    assert not lock.exists()
    assert "after-lock" in state_tasks(state)
    fsck_clean(state)


def remote_and_two_clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote, and two fresh repositories with it as origin."""
    remote = tmp_path / "remote.git"
    remote.mkdir()
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    a, b = make_repo(tmp_path / "a"), make_repo(tmp_path / "b")
    for clone in (a, b):
        git("remote", "add", "origin", str(remote), cwd=clone)
    return remote, a, b


def test_fresh_ref_lock_left_by_killed_sync_does_not_stop_the_next_sync(tmp_path: Path) -> None:
    # sync merges in a loop without pausing: it used up its tries in milliseconds on the
    # fresh refs/harness/state.lock of a process killed a moment before (exit 3).
    _, a, b = remote_and_two_clones(tmp_path)
    assert handoff(a, "init").returncode == 0
    assert handoff(a, "sync").returncode == 0
    assert handoff(b, "sync").returncode == 0
    assert handoff(a, "add", "from a", "--id", "from-a").returncode == 0
    assert handoff(a, "sync").returncode == 0
    assert handoff(b, "add", "from b", "--id", "from-b").returncode == 0
    lock = b / ".git" / "refs" / "harness" / "state.lock"
    lock.write_bytes(b"")
    recovers(b, ["sync"])
    assert not lock.exists()
    assert {"from-a", "from-b"} <= set(state_tasks(b))
    fsck_clean(b)


def test_state_filelock_of_killed_holder_is_recovered(state: Path) -> None:
    # A holder of our own state lock killed mid-transaction must not block anyone.
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from git_handoff.infra.gitrepo import Repo\n"
         "from git_handoff.state.store import StateStore\n"
         "lock = StateStore(Repo.discover('.'), session=0).lock()\n"
         "lock.__enter__()\n"
         "print('held', flush=True)\n"
         "time.sleep(600)\n"],
        cwd=state, stdout=subprocess.PIPE, text=True, env=child_env())
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    recovers(state, ["add", "after a killed lock holder", "--id", "after-holder"])


ADDER = """
import subprocess, sys
for n in range(15):
    p = subprocess.run([sys.executable, "-m", "git_handoff", "add", f"task {sys.argv[1]}-{n}"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
        sys.exit(1)
"""


def test_eight_adders_while_gc_repacks(state: Path) -> None:
    """8 processes x 15 adds at once while `git gc` keeps repacking: 120 tasks, fsck clean."""
    procs = [subprocess.Popen([sys.executable, "-c", ADDER, str(n)], cwd=state, stderr=subprocess.PIPE, text=True,
                              env=child_env())
             for n in range(8)]
    gc_runs = 0
    while any(p.poll() is None for p in procs):
        subprocess.run(["git", "-c", "gc.autoDetach=false", "gc", "--quiet"], cwd=state, capture_output=True)
        gc_runs += 1
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert gc_runs > 1
    tasks = state_tasks(state)
    assert len(tasks) == 120
    fsck_clean(state)
    assert len(git("rev-list", "refs/harness/state", cwd=state).split()) == 121


def test_transactions_survive_gc_repacking_underneath(state: Path) -> None:
    """libgit2 writes loose objects while `git repack -d` + `prune-packed` run: prune-packed
    removes empty objects/xx/ dirs between libgit2's mkdir and rename. No transaction may fail."""
    import threading

    from git_handoff.infra.gitrepo import Repo
    from git_handoff.ops import tasks as ops
    from git_handoff.state.store import StateStore

    store = StateStore(Repo.discover(state), session=0)
    for n in range(20):
        ops.add(store, title=f"task {n}", task_id=f"g{n}")
    stop = threading.Event()
    packs = [0]

    def repack_loop() -> None:
        while not stop.is_set():
            subprocess.run(["git", "repack", "-d", "-l", "-q"], cwd=state, capture_output=True)
            subprocess.run(["git", "prune-packed"], cwd=state, capture_output=True)
            packs[0] += 1

    thread = threading.Thread(target=repack_loop)
    thread.start()
    try:
        for i in range(600):
            ops.edit(store, f"g{i % 20}", title=f"edited {i}")
    finally:
        stop.set()
        thread.join()
    assert packs[0] > 5
    assert state_tasks(state)["g19"]["title"] == "edited 599"
    fsck_clean(state)


# -- the work cycle and sync ---------------------------------------------------------------------

WORK_TRIALS = max(6, KILL_TRIALS // 4)


@pytest.fixture
def work_state(state: Path) -> Path:
    plan = state / ".." / "work-plan.toml"
    plan.write_text("".join(f'[[task]]\nid = "w{n}"\ntitle = "work {n}"\ncheck = "true"\n\n' for n in range(40)))
    r = handoff(state, "import", str(plan.resolve()))
    assert r.returncode == 0, r.stderr
    return state


def claim(repo: Path) -> str:
    r = handoff(repo, "claim", "--force", "--json")
    assert r.returncode == 0, r.stderr
    return str(json.loads(r.stdout)["id"])


def test_sigkill_claim(work_state: Path) -> None:
    claimed: list[str] = []

    def after(n: int, rc: int | None) -> None:
        if rc == 0:
            claimed.append(json.loads(LAST_OUTPUT[0])["id"])
        tasks = state_tasks(work_state)
        for tid in claimed:
            assert tasks[tid]["status"] == "in_progress", tasks[tid]
        recovers(work_state, ["claim", "--force", "--json"])

    torture(work_state, lambda n: ["claim", "--force", "--json"], after, WORK_TRIALS, seed=21)
    starting = [line for line in git("log", "--format=%B", "refs/harness/state", cwd=work_state).splitlines()
                if "] Starting [" in line]
    ids = [line.split("] Starting [", 1)[1].split("]", 1)[0] for line in starting]
    assert len(ids) == len(set(ids)), "a task was claimed twice"


def test_sigkill_done(work_state: Path) -> None:
    finished: list[str] = []
    current = [claim(work_state)]

    def argv(n: int) -> list[str]:
        return ["done", current[0]]

    def after(n: int, rc: int | None) -> None:
        tasks = state_tasks(work_state)
        if rc == 0:
            finished.append(current[0])
        for tid in finished:
            assert tasks[tid]["status"] == "completed", tasks[tid]
        if tasks[current[0]]["status"] == "in_progress":
            recovers(work_state, ["done", current[0]])
        current[0] = claim(work_state)

    torture(work_state, argv, after, WORK_TRIALS, seed=31)


def test_sigkill_fail(work_state: Path) -> None:
    failed: dict[str, int] = {}
    current = [claim(work_state)]

    def argv(n: int) -> list[str]:
        (work_state / f"scratch-{n}.txt").write_text("work in progress\n")
        return ["fail", current[0], "--reason", f"killed fail {n}"]

    def after(n: int, rc: int | None) -> None:
        tasks = state_tasks(work_state)
        if rc == 0:
            failed[current[0]] = 1
        for tid in failed:
            assert tasks[tid]["status"] == "failed" and tasks[tid]["attempts"] >= 1, tasks[tid]
            assert git("for-each-ref", f"refs/harness/attempts/{tid}/", cwd=work_state), f"attempt of {tid} lost"
        if tasks[current[0]]["status"] == "in_progress":
            recovers(work_state, ["fail", current[0], "--reason", "after a kill"])
        current[0] = claim(work_state)

    torture(work_state, argv, after, WORK_TRIALS, seed=41)


def _before_the_claim(repo: Path, base: str) -> None:
    """The tree a user had when claiming: untracked notes and agent settings, a staged
    change with a further edit on top, an ignored file."""
    git("reset", "-q", "--hard", base, cwd=repo)
    git("clean", "-fdq", cwd=repo)
    (repo / "plan.toml").write_text("[[task]]\ntitle = 'mine'\n")
    (repo / ".claude").mkdir(exist_ok=True)
    (repo / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    (repo / "notes.md").write_text("before the claim\n")
    (repo / "README").write_text("staged\n")
    git("add", "README", cwd=repo)
    (repo / "README").write_text("staged, then edited\n")
    (repo / "build.log").write_text("ignored\n")


def _the_attempt(repo: Path, n: int) -> None:
    (repo / "committed.txt").write_text(f"attempt {n}\n")
    git("add", "committed.txt", cwd=repo)
    git("commit", "-q", "-m", f"attempt {n}", "--", "committed.txt", cwd=repo)
    (repo / "notes.md").write_text(f"changed by attempt {n}\n")
    (repo / "new.txt").write_text("new\n")
    (repo / "staged-new.txt").write_text("staged v1\n")
    git("add", "staged-new.txt", cwd=repo)
    (repo / "staged-new.txt").write_text("staged v1, edited\n")


def test_sigkill_fail_leaves_the_attempt_whole_or_nothing_changed(work_state: Path) -> None:
    """SIGKILL at random moments of `fail` on a tree that was not clean at the claim:
    afterwards (once the next command has run) either nothing changed, or the attempt is
    saved whole and the worktree is exactly as at the claim; never half restored."""
    from tests.ops.test_rollback import picture

    repo = work_state
    (repo / ".gitignore").write_text("*.log\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore logs", cwd=repo)
    base = git("rev-parse", "HEAD", cwd=repo)
    rng = random.Random(51)
    journal = repo / ".git" / "handoff" / "rollback.json"
    span = 0.0
    outcome = {"nothing changed": 0, "rolled back": 0, "finished by the next command": 0}
    for n in range(WORK_TRIALS + 1):
        tid = f"w{n}"
        _before_the_claim(repo, base)
        at_claim = picture(repo)
        r = handoff(repo, "claim", tid, "--force")
        assert r.returncode == 0, r.stderr
        _the_attempt(repo, n)
        attempt = picture(repo)
        if n == 0:  # an untimed run to learn how long a fail takes
            span = typical_seconds(repo, ["fail", tid, "--reason", "timed"]) * 1.3
            assert picture(repo) == at_claim
            continue
        rc = kill_at_random(repo, ["fail", tid, "--reason", f"killed {n}"], rng.uniform(0.0, span))
        raw = picture(repo)
        pending = journal.exists()
        assert raw in (attempt, at_claim) or pending, f"trial {n}: a half-restored tree and no journal to finish it"
        fsck_clean(repo)
        task = state_tasks(repo)[tid]  # the next command: finishes a journalled rollback
        after = picture(repo)
        assert not journal.exists()
        if task["status"] == "in_progress":
            assert rc is None and after == attempt, f"trial {n}: the claim stands but the tree changed"
            outcome["nothing changed"] += 1
            recovers(repo, ["fail", tid, "--reason", "after a kill"])
            assert picture(repo) == at_claim
            continue
        assert task["status"] == "failed" and after == at_claim, f"trial {n}: failed, but not back at the claim"
        outcome["finished by the next command" if raw != at_claim else "rolled back"] += 1
        ref = task["last_attempt_ref"]
        assert git("show", f"{ref}:notes.md", cwd=repo) == f"changed by attempt {n}"
        assert git("show", f"{ref}:committed.txt", cwd=repo) == f"attempt {n}"
        assert git("show", f"{ref}:staged-new.txt", cwd=repo) == "staged v1, edited"
        assert git("show", f"{ref}^2:staged-new.txt", cwd=repo) == "staged v1"  # the index
        assert git("show", f"{ref}^2:README", cwd=repo) == "staged"
    assert outcome["nothing changed"] + outcome["finished by the next command"] > 0, outcome


def wait_for_server(remote: Path) -> None:
    """Let the remote finish serving a killed client. A receive-pack that already had the
    whole push completes it (as any server would), and `git fsck` run while objects and a
    ref are being written reports the new objects as missing."""
    deadline = time.monotonic() + 30
    while True:
        out = subprocess.run(["ps", "-A", "-o", "stat=,args="], capture_output=True, text=True).stdout
        serving = [line for line in out.splitlines() if str(remote) in line and not line.startswith("Z")]
        if not serving:
            return
        assert time.monotonic() < deadline, serving
        time.sleep(0.02)


@pytest.mark.needs("ps")
def test_sigkill_sync(tmp_path: Path) -> None:
    remote, a, b = remote_and_two_clones(tmp_path)
    assert handoff(a, "init").returncode == 0
    for n in range(10):
        assert handoff(a, "add", f"shared {n}", "--id", f"s{n}").returncode == 0
    assert handoff(a, "sync").returncode == 0
    assert handoff(b, "sync").returncode == 0
    pushed: list[str] = []

    def argv(n: int) -> list[str]:
        assert handoff(a, "edit", f"s{n % 10}", "--title", f"from a {n}").returncode == 0
        assert handoff(a, "sync").returncode == 0
        assert handoff(b, "add", f"from b {n}", "--id", f"b{n}").returncode == 0
        return ["sync"]

    def after(n: int, rc: int | None) -> None:
        if rc == 0:
            pushed.append(f"b{n}")
        wait_for_server(remote)
        fsck_clean(remote)
        recovers(b, ["sync"])
        tasks = state_tasks(b)
        assert f"b{n}" in tasks and tasks[f"s{n % 10}"]["title"] == f"from a {n}"
        remote_state = git("rev-parse", published(b), cwd=remote)
        assert remote_state == git("rev-parse", "refs/harness/state", cwd=b)

    torture(b, argv, after, WORK_TRIALS, seed=51)
    assert handoff(a, "sync").returncode == 0
    assert {f"b{n}" for n in range(WORK_TRIALS)} <= set(state_tasks(a))


def test_background_packing_keeps_loose_objects_bounded(state: Path) -> None:
    """libgit2 never packs: the store's own background repack must (a short long haul)."""
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.ops import tasks as ops
    from git_handoff.state.store import GC_LOOSE_OBJECTS, StateStore

    store = StateStore(Repo.discover(state), session=0)
    for n in range(10):
        ops.add(store, title=f"task {n}", task_id=f"h{n}")
    objects = state / ".git" / "objects"

    def loose() -> int:
        return sum(len(list(d.iterdir())) for d in objects.iterdir() if len(d.name) == 2)

    for i in range(500):  # ~3,000 new objects
        ops.edit(store, f"h{i % 10}", title=f"edited {i}")
    marker = state / ".git" / "handoff" / "gc.running"
    deadline = time.monotonic() + 60
    while marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not marker.exists()
    assert list((objects / "pack").glob("*.pack"))
    assert loose() < GC_LOOSE_OBJECTS * 4
    fsck_clean(state)


def group_processes(pgid: int) -> list[str]:
    """Command lines of the live processes in process group `pgid`."""
    out = subprocess.run(["ps", "-A", "-o", "pgid=,stat=,args="], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == str(pgid) and not parts[1].startswith("Z"):
            found.append(parts[2])
    return found


@pytest.mark.needs("ps")
def test_killed_sync_leaves_no_git_fetch_behind(tmp_path: Path) -> None:
    """A SIGKILLed sync must take its `git fetch` with it: left running, the fetch went on
    writing objects and moving refs/remotes/*/harness/* after the command was gone, so the
    `git fsck` after a kill saw half-fetched objects as missing (test_sigkill_sync's flake)
    and the next sync's fetch could find the ref locked."""
    remote, a, b = remote_and_two_clones(tmp_path)
    assert handoff(a, "init").returncode == 0
    assert handoff(a, "sync").returncode == 0
    # the remote answers b's fetch only after a few seconds: the sync is killed meanwhile
    git("config", "remote.origin.uploadpack", "sleep 4; git-upload-pack", cwd=b)
    proc = subprocess.Popen(handoff_argv("sync"), cwd=b, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=child_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not any(p.startswith("git fetch") for p in group_processes(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, "sync never started its fetch"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 2  # well before the remote answers
        while any(p.startswith("git fetch") for p in group_processes(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not [p for p in group_processes(proc.pid) if p.startswith("git ")], "git outlived the killed sync"
        deadline = time.monotonic() + 30  # the remote side (sleep, upload-pack) ends on its own
        while group_processes(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert git("for-each-ref", "refs/remotes/", cwd=b) == "", "a ref moved after the sync was killed"
        fsck_clean(b)
    finally:
        if group_processes(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
