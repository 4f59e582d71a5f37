"""Shared helpers for the benchmarks: hermetic temp repositories, timing with
repeats and medians, a fast way to build a state with N tasks, and object/disk
accounting.

Every benchmark runs the code of the checkout this file lives in (PYTHONPATH is
set to it for child processes), against throwaway repositories under a temp dir.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PY = sys.executable
HANDOFF = [PY, "-m", "git_handoff"]  # what the `git-handoff` console script runs
IMPORT_PYGIT2 = [PY, "-c", "import pygit2"]

_WORK: Path | None = None


def workdir() -> Path:
    """One temp directory per benchmark process (removed at exit)."""
    global _WORK
    if _WORK is None:
        _WORK = Path(tempfile.mkdtemp(prefix="handoff-bench-"))
        import atexit

        atexit.register(shutil.rmtree, _WORK, True)
        setup_env(_WORK / "home")
        compile_package()
    return _WORK


def compile_package() -> None:
    """Byte-compile the checkout's package, as `pip install` does for an installed one.

    An editable checkout under PYTHONDONTWRITEBYTECODE=1 (set on this machine) has no
    `__pycache__`, so every `git handoff` process would compile ~30 modules again (tens of
    ms) while pygit2 and click, installed, load their bytecode: that measures the
    checkout, not the command a user runs. Python reads existing bytecode whatever the
    variable says, and checks it against the source, so a stale file is never used.
    """
    import compileall

    compileall.compile_dir(str(ROOT / "git_handoff"), quiet=2)


def setup_env(home: Path) -> None:
    """Hermetic git for this process and its children: no user/system config."""
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    for var in list(os.environ):
        if var.startswith(("GIT_", "HANDOFF_")):
            del os.environ[var]
    os.environ.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Bench",
            "GIT_AUTHOR_EMAIL": "bench@example.com",
            "GIT_COMMITTER_NAME": "Bench",
            "GIT_COMMITTER_EMAIL": "bench@example.com",
            "GIT_TERMINAL_PROMPT": "0",
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
    )
    import pygit2

    for level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG, pygit2.enums.ConfigLevel.SYSTEM):
        pygit2.settings.search_path[level] = str(home)


def git(*args: str, cwd: Path, check: bool = True, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, input=input)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode(errors="replace").strip()


def make_repo(path: Path) -> Path:
    workdir()
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main", str(path), cwd=path)
    (path / "README").write_text("bench\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "initial", cwd=path)
    return path


def fresh_dir(name: str) -> Path:
    base = workdir()
    path = base / name
    n = 1
    while path.exists():
        n += 1
        path = base / f"{name}-{n}"
    return path


# -- states --------------------------------------------------------------------------

_TEMPLATES: dict[tuple[int, bool, str], Path] = {}


def store_for(path: Path, session: int = 0) -> Any:
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state.store import StateStore

    return StateStore(Repo.discover(path), session=session)


def task_id(n: int) -> str:
    return f"t{n:05d}"


def build_state(path: Path, n_tasks: int, *, check: str = "true", mode: str = "concurrent") -> Path:
    """A repository at `path` whose state holds `n_tasks` pending tasks (ids t00000…),
    written in one transaction through the store API (seconds, not minutes)."""
    from git_handoff.core.model import Task, now_iso
    from git_handoff.ops import tasks as ops

    make_repo(path)
    store = store_for(path)
    ops.init(store, mode=mode)
    stamp = now_iso()

    def apply(tx: Any) -> None:
        for n in range(n_tasks):
            tx.put_task(Task(id=task_id(n), title=f"Task number {n}", check=check, created_at=stamp, order=n + 1))
        tx.log("INIT", f"Imported {n_tasks} task(s) from bench")

    store.transact(apply)
    from git_handoff.state import trust

    trust.remember(store.repo, [(trust.place(task_id(n), "validation"), check) for n in range(n_tasks)])
    return path


def state_copy(name: str, n_tasks: int, *, packed: bool = True, check: str = "true") -> Path:
    """A private copy of a state with `n_tasks` tasks. Templates are built once per
    process; `packed` runs `git gc` first, as the store's background gc would have."""
    key = (n_tasks, packed, check)
    if key not in _TEMPLATES:
        tpl = build_state(fresh_dir(f"tpl-{n_tasks}"), n_tasks, check=check)
        if packed:
            git("gc", "-q", cwd=tpl)
        _TEMPLATES[key] = tpl
    dest = fresh_dir(name)
    copy_repo(_TEMPLATES[key], dest)
    return dest


def copy_repo(src: Path, dest: Path) -> None:
    """A copy of the repository `src` (a work tree or a bare one) once the background
    packing its last command started is done: copied while it ran, a loose-object
    directory it removed was gone before the copy reached it ("No such file or directory"
    in bench/run.py's dependency-cycle scenario)."""
    wait_for_gc(src / ".git" if (src / ".git").is_dir() else src)
    shutil.copytree(src, dest, symlinks=True)


def copy_world(remote: Path, clone: Path, base: Path) -> tuple[Path, Path]:
    """Copies of a bare `remote` and of a `clone` of it under `base`, the copied clone's
    origin the copied remote (so every timed run starts alike)."""
    copy_repo(remote, base / "remote.git")
    copy_repo(clone, base / "c")
    git("remote", "set-url", "origin", str(base / "remote.git"), cwd=base / "c")
    return base / "remote.git", base / "c"


def state_head(path: Path) -> str:
    return git("rev-parse", "refs/harness/state", cwd=path)


def handoff_ok(args: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Run `git handoff ARGS` in `cwd`; its wall time. A failure stops the benchmark."""
    run = run_proc([*HANDOFF, *args], cwd, env=env)
    if run.rc != 0:
        raise RuntimeError(f"git handoff {' '.join(args)}: exit {run.rc}: {run.err.decode(errors='replace')[-300:]}")
    return run.seconds


def fleet_remote(base: Path) -> tuple[Path, Path]:
    """Under `base` (made here): a bare remote and clone `a`, its first publisher
    (initialized, one task `seed`, synced)."""
    base.mkdir(parents=True)
    remote = base / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=base)
    a = make_repo(base / "a")
    git("remote", "add", "origin", str(remote), cwd=a)
    git("push", "-q", "origin", "main", cwd=a)
    handoff_ok(["init", "--mode", "concurrent"], a)
    handoff_ok(["add", "seed", "--id", "seed"], a)
    handoff_ok(["sync"], a)
    return remote, a


def fleet_world(base: Path) -> tuple[Path, Path, Path]:
    """`fleet_remote`, and clone `c` (base/c) that synced once."""
    remote, a = fleet_remote(base)
    c = base / "c"
    git("clone", "-q", str(remote), str(c), cwd=base)
    handoff_ok(["sync"], c)
    return remote, a, c


# -- timing --------------------------------------------------------------------------


@dataclass
class ProcRun:
    seconds: float
    rc: int
    max_rss_kb: int
    out: bytes
    err: bytes


def run_proc(argv: Sequence[str], cwd: Path, *, env: dict[str, str] | None = None,
             input: bytes | None = None, timeout: float = 300) -> ProcRun:
    """Run one process; wall time and its own peak RSS (wait4)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), cwd=cwd, env=full_env, stdout=out, stderr=err,
                                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        if input is not None:
            assert proc.stdin is not None
            proc.stdin.write(input)
            proc.stdin.close()
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.0005)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return ProcRun(elapsed, proc.returncode, usage.ru_maxrss, out.read(), err.read())


def time_proc(argv: Sequence[str], cwd: Path, repeats: int, *, expect_rc: int | None = 0,
              warmup: int = 1, env: dict[str, str] | None = None) -> list[ProcRun]:
    for _ in range(warmup):
        run_proc(argv, cwd, env=env)
    runs = []
    for _ in range(repeats):
        r = run_proc(argv, cwd, env=env)
        if expect_rc is not None and r.rc != expect_rc:
            raise RuntimeError(f"{' '.join(argv[-3:])} exited {r.rc}: {r.err.decode(errors='replace').strip()[-300:]}")
        runs.append(r)
    return runs


def time_call(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def import_pygit2_seconds(repeats: int) -> float:
    """The yardstick: a bare `python -c "import pygit2"`, median wall time."""
    return median([r.seconds for r in time_proc(IMPORT_PYGIT2, workdir(), repeats)])


# -- objects and disk ----------------------------------------------------------------


def new_objects(path: Path, old: str | None, new: str) -> tuple[int, int, int]:
    """(count, content bytes, on-disk bytes) of the objects reachable from `new` but not from `old`."""
    args = ["rev-list", "--objects", new] + ([f"^{old}"] if old else [])
    oids = [line.split()[0] for line in git(*args, cwd=path).splitlines() if line.strip()]
    if not oids:
        return 0, 0, 0
    sizes = git("cat-file", "--batch-check=%(objectsize) %(objectsize:disk)", cwd=path,
                input=("\n".join(oids) + "\n").encode())
    content = disk = 0
    for line in sizes.splitlines():
        a, b = line.split()
        content += int(a)
        disk += int(b)
    return len(oids), content, disk


def loose_objects(git_dir: Path) -> int:
    objects = git_dir / "objects"
    count = 0
    for sub in objects.iterdir():
        if len(sub.name) == 2:
            try:  # a background repack removes emptied directories while this lists them
                count += len(os.listdir(sub))
            except (FileNotFoundError, NotADirectoryError):
                pass
    return count


def disk_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def wait_for_gc(git_dir: Path, timeout: float = 120) -> None:
    """Wait until the store's background packing (handoff/gc.running) and any `git gc`
    (gc.pid) in this repository are done: both run detached from the process that started them."""
    deadline = time.monotonic() + timeout
    markers = (git_dir / "handoff" / "gc.running", git_dir / "gc.pid")
    while any(m.exists() for m in markers) and time.monotonic() < deadline:
        time.sleep(0.05)


@contextlib.contextmanager
def chdir(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


# -- results -------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the benchmark table."""

    scenario: str
    figure: str
    baseline: str = "-"
    ratio: float | None = None
    target: str = "-"
    ok: bool | None = None  # None: informational, no target

    @property
    def verdict(self) -> str:
        return "-" if self.ok is None else ("pass" if self.ok else "FAIL")


def not_built(scenario: str, target: str = "-") -> Row:
    return Row(scenario, "n/a (not built)", target=target)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


def kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"


def paired(a: Sequence[str], b: Sequence[str], cwd: Path, repeats: int,
           expect_a: int | None = 0) -> tuple[list[ProcRun], list[ProcRun]]:
    """Run two commands alternately (so machine noise hits both alike)."""
    run_proc(a, cwd)
    run_proc(b, cwd)
    ra, rb = [], []
    for _ in range(repeats):
        x = run_proc(a, cwd)
        if expect_a is not None and x.rc != expect_a:
            raise RuntimeError(f"{' '.join(a[-3:])} exited {x.rc}: {x.err.decode(errors='replace').strip()[-300:]}")
        ra.append(x)
        rb.append(run_proc(b, cwd))
    return ra, rb


_RSS_WRAPPER = (
    "import os,sys\n"
    "pid=os.posix_spawnp(sys.argv[1],sys.argv[1:],os.environ)\n"
    "_,st,ru=os.wait4(pid,0)\n"
    "sys.stderr.write('maxrss_kb=%d\\n'%ru.ru_maxrss)\n"
    "sys.exit(os.waitstatus_to_exitcode(st))\n"
)


def peak_rss_kb(argv: Sequence[str], cwd: Path) -> int:
    """Peak RSS of one run of `argv`, in KiB. Measured through a small launcher: a
    child forked from this (large) process would report our RSS as its own."""
    if Path("/usr/bin/time").exists():
        r = run_proc(["/usr/bin/time", "-f", "maxrss_kb=%M", *argv], cwd)
    else:
        r = run_proc([PY, "-S", "-c", _RSS_WRAPPER, *argv], cwd)
    if r.rc != 0:
        raise RuntimeError(f"{' '.join(argv[-3:])} exited {r.rc}")
    for line in r.err.decode(errors="replace").splitlines()[::-1]:
        if line.startswith("maxrss_kb="):
            return int(line.split("=", 1)[1])
    raise RuntimeError("no maxrss reported")


def feature_built(cli_module: str) -> bool:
    """Whether the branch providing `git_handoff/cli/<cli_module>.py` has landed here."""
    return (ROOT / "git_handoff" / "cli" / f"{cli_module}.py").exists()
