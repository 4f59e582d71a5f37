"""A fleet on one remote, for the bench (`bench/bench_fleet.py`) and the tests: a bare
remote seeded with N independent tasks, K clones of it, and the work loop each clone
runs as separate processes - `claim --remote` -> write a file -> `git commit` ->
`done` -> `sync` - until `claim` says nothing is eligible (exit 1).

What the loop sees is recorded per clone (`CloneReport`): claims, completions, exit-3
answers per verb, pushes inside each claim (counted from `GIT_TRACE`, so without any
help from the code under test), `retries` of each `sync --json`, errors. The remote
counts its own ref updates (a reference-transaction hook appends one line per ref
moved) and its objects are listed before and after, so ref updates and bytes stored
per task are measured on the server side whatever the layout of the refs.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REMOTE_NAME = "remote.git"
REF_LOG = "ref-updates.log"  # in the bare repository, written by its hook

_HOOK = """#!/bin/sh
# one line per ref moved by a push: "<old> <new> <ref>" (counted by the fleet bench)
[ "$1" = committed ] || exit 0
# git 2.39 also runs this hook when `gc --auto` (which receive-pack starts) packs the refs:
# that moves nothing, so it is not counted
case "$(tr '\\0' ' ' < /proc/$PPID/cmdline 2>/dev/null)" in
  *pack-refs*|*" gc "*|*" gc") cat > /dev/null; exit 0 ;;
esac
cat >> ref-updates.log
"""
_HELD = re.compile(r"already holds task (\S+?)[\s(:]")


def handoff_argv(*args: str) -> list[str]:
    """The real program, as its console script runs it (`python -m git_handoff`)."""
    return [sys.executable, "-m", "git_handoff", *args]


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("HANDOFF_SESSION", None)
    env.update(extra)
    return env


def sh(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, env=env or child_env())
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} (in {cwd}) exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def handoff(path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(handoff_argv(*args), cwd=path, capture_output=True, text=True, env=child_env(),
                          timeout=timeout)


# -- the remote and its clones ----------------------------------------------------------


def prepare_remote(served: Path, n_tasks: int, *, check: str = "true") -> Path:
    """A bare repository `served/remote.git` whose state (concurrent mode) holds
    `n_tasks` independent pending tasks t0000…, each checked by `check`. The bare repo
    accepts pushes over smart HTTP, logs every ref update and counts them in REF_LOG."""
    served.mkdir(parents=True, exist_ok=True)
    bare = served / REMOTE_NAME
    sh("git", "init", "-q", "--bare", str(bare), cwd=served)
    for key, value in (("core.logAllRefUpdates", "always"), ("http.receivepack", "true")):
        sh("git", "config", key, value, cwd=bare)
    hook = bare / "hooks" / "reference-transaction"
    hook.write_text(_HOOK)
    hook.chmod(0o755)
    seed = served.parent / "seed"
    seed.mkdir()
    sh("git", "init", "-q", "-b", "main", cwd=seed)
    (seed / "README").write_text("fleet\n")
    sh("git", "add", "README", cwd=seed)
    sh("git", "commit", "-q", "-m", "initial", cwd=seed)
    sh("git", "remote", "add", "origin", str(bare), cwd=seed)
    sh("git", "push", "-q", "origin", "main", cwd=seed)
    sh(*handoff_argv("init", "--mode", "concurrent"), cwd=seed)
    plan = seed.parent / "plan.toml"
    plan.write_text("".join(f'[[task]]\nid = "{task_id(n)}"\ntitle = "Task {n}"\ncheck = "{check}"\n\n'
                            for n in range(n_tasks)))
    sh(*handoff_argv("import", str(plan)), cwd=seed)
    sh(*handoff_argv("sync", "origin"), cwd=seed)
    return bare


def task_id(n: int) -> str:
    return f"t{n:04d}"


def make_clones(work: Path, url: str, k: int, *, parallel: int = 4,
                config: Callable[[int], list[str]] | None = None) -> list[Path]:
    """K clones of `url` (each `git clone`, its own worktree), each with the state
    fetched and the fetched checks trusted, as a user sets a machine up. `config(i)`:
    `key=value` settings of clone i, in place before its first fetch (`git clone -c`:
    a machine's key, credentials, handoff.cloneId)."""
    paths = [work / f"clone{i:02d}" for i in range(k)]

    def one(path: Path) -> Path:
        settings = config(paths.index(path)) if config else []
        sh("git", "clone", "-q", *(a for kv in settings for a in ("-c", kv)), url, str(path), cwd=work)
        sh(*handoff_argv("sync", "origin"), cwd=path)
        sh(*handoff_argv("trust", "--all"), cwd=path)
        return path

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(one, paths))


# -- the work loop -----------------------------------------------------------------------


@dataclass
class CloneReport:
    clone: str
    claimed: list[str] = field(default_factory=list)  # ids of claims that exited 0
    completed: list[str] = field(default_factory=list)  # ids whose `done` exited 0
    exit3: Counter[str] = field(default_factory=Counter)  # verb -> exit-3 answers
    claim_pushes: list[int] = field(default_factory=list)  # `git push` runs inside each claim process
    claim_seconds: list[float] = field(default_factory=list)  # wall time of each claim that exited 0
    sync_retries: list[int] = field(default_factory=list)  # `retries` of each sync --json that exited 0
    killed: Counter[str] = field(default_factory=Counter)  # verb -> processes SIGKILLed
    resumed: list[str] = field(default_factory=list)  # tasks this worktree found it held after a kill
    errors: list[str] = field(default_factory=list)
    finished: bool = False  # claim said nothing is eligible
    runs: Counter[str] = field(default_factory=Counter)  # verb -> git handoff processes started


@dataclass
class _Ran:
    rc: int | None  # None: killed
    out: str
    err: str
    seconds: float
    pushes: int


def _run(path: Path, args: Sequence[str], kill_after: float | None, timeout: float,
         client: Sequence[str] | None = None) -> _Ran:
    fd, trace = tempfile.mkstemp(prefix="trace-", suffix=".log")
    os.close(fd)
    try:
        env = child_env(GIT_TRACE=trace)
        started = time.monotonic()
        argv = [*client, *args] if client is not None else handoff_argv(*args)
        proc = subprocess.Popen(argv, cwd=path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, start_new_session=kill_after is not None)
        try:
            out, err = proc.communicate(timeout=kill_after if kill_after is not None else timeout)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            if kill_after is None:
                proc.kill()
                proc.communicate()
                return _Ran(-9, "", f"timed out after {timeout} s", time.monotonic() - started, 0)
            # SIGKILL the command and every git it started, as a machine dying would
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            rc = None
        seconds = time.monotonic() - started
        with open(trace, errors="replace") as f:
            pushes = sum(1 for line in f if "built-in: git push" in line)
        return _Ran(rc, out, err, seconds, pushes)
    finally:
        os.unlink(trace)


def work_loop(path: Path, *, remote: str = "origin", lease: str | None = None,
              kill: Callable[[str], float | None] | None = None, deadline: float | None = None,
              command_timeout: float = 300, stop_after: int | None = None,
              observe: Callable[[str, float], None] | None = None,
              client: Sequence[str] | None = None) -> CloneReport:
    """One clone's loop until `claim` exits 1 (or `stop_after` tasks are done).
    `kill(verb)`, when given, returns after how many seconds to SIGKILL that run of
    `verb` (None: let it finish); `observe(verb, seconds)` hears how long each run that
    finished took. `client`: the program each command runs through (a launcher written
    by `git handoff launcher`); the console script's `python -m git_handoff` otherwise."""
    report = CloneReport(path.name)

    def run(*args: str) -> _Ran:
        delay = kill(args[0]) if kill else None
        report.runs[args[0]] += 1
        ran = _run(path, args, delay, command_timeout, client)
        if ran.rc is None:
            report.killed[args[0]] += 1
        elif observe:
            observe(args[0], ran.seconds)
        elif ran.rc == 3:
            report.exit3[args[0]] += 1
        return ran

    n = 0
    while True:
        if deadline is not None and time.monotonic() > deadline:
            report.errors.append("deadline passed")
            return report
        if len(report.errors) > 5 or (stop_after is not None and len(report.completed) >= stop_after):
            return report
        claim_args = ["claim", "--remote", remote, "--json"] + (["--lease", lease] if lease else [])
        ran = run(*claim_args)
        if ran.rc is None or ran.rc == 3:
            continue
        if ran.rc == 1:
            report.finished = True
            return report
        held = _HELD.search(ran.err + ran.out)
        if ran.rc == 2 and held:
            tid = held.group(1)  # a killed claim that had reached the remote: finish that task
            report.resumed.append(tid)
        elif ran.rc == 0:
            tid = json.loads(ran.out)["id"]
            report.claimed.append(tid)
            report.claim_pushes.append(ran.pushes)
            report.claim_seconds.append(ran.seconds)
        else:
            report.errors.append(f"claim exit {ran.rc}: {(ran.err or ran.out).strip()[:300]}")
            continue
        n += 1
        (path / f"work-{report.clone}-{n}.txt").write_text(f"{tid} by {report.clone}\n")
        sh("git", "add", "-A", cwd=path)
        sh("git", "commit", "-q", "-m", f"work on {tid}", cwd=path)
        for _ in range(5):
            done = run("done", tid, "--json")
            if done.rc != 3:
                break
        if done.rc == 0:
            report.completed.append(tid)
        else:
            report.errors.append(f"done {tid} exit {done.rc}: {(done.err or done.out).strip()[:300]}")
        synced = run("sync", remote, "--json")
        if synced.rc == 0:
            report.sync_retries.append(int(json.loads(synced.out).get("retries", 0)))
        elif synced.rc not in (None, 3):
            report.errors.append(f"sync exit {synced.rc}: {synced.err.strip()[:300]}")


@dataclass
class FleetRun:
    reports: list[CloneReport]
    seconds: float  # wall time of the loops
    cpu_seconds: float  # user+sys of every process the loops started (and their gits)
    orphans_reaped: int = 0  # processes the commands left running, ended and counted after the loops


def python_start_cpu(runs: int = 10) -> tuple[float, float]:
    """CPU seconds of starting this Python and doing nothing, with its site-packages' .pth
    files (as every `git handoff` process starts) and without (`-S`): what a machine's
    Python costs each process before any code of git handoff runs."""
    def each(*flags: str) -> float:
        before = children_cpu()
        for _ in range(runs):
            subprocess.run([sys.executable, *flags, "-c", "pass"], check=True)
        return (children_cpu() - before) / runs

    return each(), each("-S")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def become_subreaper() -> None:
    """Make this process the reaper of its orphaned descendants (Linux): a command server
    or a background repack a loop's command started outlives it, and its CPU reaches this
    process's RUSAGE_CHILDREN only once this process reaps it (`reap_orphans`)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap_orphans(wait: float = 30.0) -> int:
    """End the command servers among this process's adopted children (SIGTERM: each ends
    after its workers), then reap every adopted child that has ended (servers, a
    background `git repack`); the number reaped. Children this process started itself
    (the git daemon, the web server) are not touched: they are not servers and still run."""
    me, reaped, deadline = os.getpid(), 0, time.monotonic() + wait
    while True:
        waiting = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[1]) != me:
                continue
            if fields[0] == "Z":
                os.waitpid(int(entry), 0)
                reaped += 1
            elif b"command_server" in cmdline:
                os.kill(int(entry), signal.SIGTERM)
                waiting += 1
            elif b"repack" in cmdline or b"gc" in cmdline.split(b"\0"):
                waiting += 1
        if not waiting or time.monotonic() > deadline:
            return reaped
        time.sleep(0.1)


def run_fleet(clones: Sequence[Path], *, orphans: bool = False, **loop: Any) -> FleetRun:
    """Every clone's `work_loop` at once (one thread each; the work is in processes).
    `orphans`: count the CPU of the processes the loops' commands leave running (command
    servers, background repacks) too: this process adopts them and, once the loops are
    over, ends the servers and reaps them all before reading the CPU."""
    reports: list[CloneReport | None] = [None] * len(clones)
    if orphans:
        become_subreaper()

    def one(i: int) -> None:
        try:
            reports[i] = work_loop(clones[i], **loop)
        except Exception as exc:  # noqa: BLE001 - reported, not lost in a thread
            reports[i] = CloneReport(clones[i].name, errors=[f"{type(exc).__name__}: {exc}"])

    cpu0, t0 = children_cpu(), time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(clones))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reaped = reap_orphans() if orphans else 0
    return FleetRun([r for r in reports if r is not None], time.monotonic() - t0, children_cpu() - cpu0, reaped)


# -- afterwards ------------------------------------------------------------------------


def sync_all(clones: Sequence[Path], remote: str = "origin", passes: int = 2) -> list[str]:
    """Every clone syncs, one after another, `passes` times; the failures."""
    failures = []
    for _ in range(passes):
        for path in clones:
            r = handoff(path, "sync", remote)
            if r.returncode != 0:
                failures.append(f"{path.name}: sync exit {r.returncode}: {r.stderr.strip()[:200]}")
    return failures


def task_list(path: Path) -> list[dict[str, Any]]:
    r = handoff(path, "list", "--json")
    if r.returncode != 0:
        raise RuntimeError(f"list in {path}: {r.stderr}")
    return list(json.loads(r.stdout))


def state_tree(path: Path) -> str:
    return sh("git", "rev-parse", "refs/harness/state^{tree}", cwd=path).strip()


def completions(path: Path) -> Counter[str]:
    """Task -> number of `Completed` lines in the state's history (a log line per commit)."""
    r = handoff(path, "log", "--type", "Completed", "--json")
    if r.returncode != 0:
        raise RuntimeError(f"log in {path}: {r.stderr}")
    return Counter(str(e.get("task")) for e in json.loads(r.stdout))


@dataclass
class Audit:
    tasks: int
    completed: int
    lost: list[str]  # not completed at the end
    double_done: list[str]  # `done` exited 0 for one task in two loops
    double_logged: list[str]  # two Completed lines for one task in the final history
    same_list: bool  # `list --json` equal on every clone
    same_tree: bool  # the state tree oid equal on every clone
    sync_failures: list[str]


def audit(clones: Sequence[Path], reports: Sequence[CloneReport], remote: str = "origin") -> Audit:
    failures = sync_all(clones, remote)
    lists = [task_list(p) for p in clones]
    trees = {state_tree(p) for p in clones}
    final = {t["id"]: t for t in lists[0]}
    done_by = Counter(tid for r in reports for tid in r.completed)
    logged = completions(clones[0])
    return Audit(
        tasks=len(final),
        completed=sum(1 for t in final.values() if t["status"] == "completed"),
        lost=sorted(tid for tid, t in final.items() if t["status"] != "completed"),
        double_done=sorted(tid for tid, n in done_by.items() if n > 1),
        double_logged=sorted(tid for tid, n in logged.items() if n > 1),
        same_list=all(lst == lists[0] for lst in lists),
        same_tree=len(trees) == 1,
        sync_failures=failures,
    )


# -- what the remote saw ---------------------------------------------------------------


def ref_updates(bare: Path) -> list[str]:
    """Every ref update the remote has committed so far: `<old> <new> <ref>` lines."""
    log = bare / REF_LOG
    return log.read_text().splitlines() if log.exists() else []


def objects_on_disk(bare: Path) -> dict[str, int]:
    """oid -> bytes it takes on the remote's disk (zlib-compressed loose, or packed)."""
    out = sh("git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objectsize:disk)", cwd=bare)
    return {oid: int(size) for oid, size in (line.split() for line in out.splitlines())}


def ref_kind(ref: str) -> str:
    for prefix, kind in (("refs/harness/state", "state"), ("refs/notes/", "notes"),
                         ("refs/harness/attempts", "attempts"), ("refs/harness/", "harness-other"),
                         ("refs/heads/", "branches")):
        if ref.startswith(prefix):
            return kind
    return "other"
