"""Fixtures shared by the sync tests (import them into a test module to use them): a shared
remote (bare on disk, or a real git daemon) and clones of it."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.repo import git, make_repo, run
from tests.support.templates import Templates

if TYPE_CHECKING:
    from git_handoff.ops.payloads import TaskView


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _git_daemon() -> str:
    """git-daemon itself: `git daemon` runs it as a child that a kill of `git` would orphan."""
    return str(Path(git("--exec-path", cwd=Path.cwd())) / "git-daemon")


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the test process dies (Linux)."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# Every test of a shared remote runs against both; the one through `git daemon` starts a
# real server process per test, so it is in the slow layer (the fast layer keeps the bare
# repository on disk, the same protocol code on our side).
@pytest.fixture(params=["bare", pytest.param("daemon", marks=pytest.mark.slow)])
def remote_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty shared remote: a bare repository on disk, or served by git daemon."""
    base = tmp_path / "served"
    base.mkdir()
    bare = base / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=base)
    if request.param == "bare":
        yield str(bare)
        return
    port = _free_port()
    # A bounded lifetime of its own (coreutils `timeout`), and it ends with the test
    # process (parent-death signal), so a killed or timed-out run leaves no daemon.
    proc = subprocess.Popen(
        ["timeout", "--kill-after=5", "900", _git_daemon(), "--reuseaddr", f"--base-path={base}", "--export-all",
         "--enable=receive-pack",
         "--listen=127.0.0.1", f"--port={port}", "--informative-errors", str(base)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("git daemon did not start") from None
                time.sleep(0.05)
        yield f"git://127.0.0.1:{port}/remote.git"
    finally:
        proc.terminate()  # `timeout` passes it on to git-daemon
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Clones:
    """clones(name): a clone of the shared remote (the first one seeds it with a commit),
    at tmp_path/name."""

    def __init__(self, tmp_path: Path, remote_url: str, templates: Templates | None) -> None:
        self.tmp_path = tmp_path
        self.remote_url = remote_url
        self.templates = templates
        self.made: list[Path] = []
        self.copied_from: Path | None = None  # the world shared_pair copied, if it did

    def __call__(self, name: str) -> Path:
        path = self.tmp_path / name
        bare = self.bare()
        if not self.made and self.templates is not None and bare is not None:
            # the seeded remote and its first clone, built once per test process (below)
            seeded = self.templates.built("seeded-remote", lambda where: Clones(where, str(where / "remote.git"), None)
                                          .seed(where / "remote.git", "clone"))
            shutil.rmtree(bare)
            shutil.copytree(seeded / "remote.git", bare, symlinks=True)
            shutil.copytree(seeded / "clone", path, symlinks=True)
            git("config", "remote.origin.url", self.remote_url, cwd=path)
        elif not self.made:
            make_repo(path)
            git("remote", "add", "origin", self.remote_url, cwd=path)
            git("push", "-q", "origin", "main", cwd=path)
        else:
            git("clone", "-q", self.remote_url, str(path), cwd=self.tmp_path)
        self.made.append(path)
        return path

    def seed(self, bare: Path, name: str) -> None:
        """Make the bare remote at `bare` and its first clone `name` (a template's build)."""
        git("init", "-q", "--bare", str(bare), cwd=self.tmp_path)
        self(name)

    def bare(self) -> Path | None:
        """The remote's directory when it is a bare repository on disk (not served)."""
        path = Path(self.remote_url)
        return path if "://" not in self.remote_url and path.is_dir() else None


@pytest.fixture
def clones(tmp_path: Path, remote_url: str, templates: Templates) -> Clones:
    return Clones(tmp_path, remote_url, templates)


def ok(*args: str, cwd: Path) -> Any:
    """Run `git handoff ARGS`, which must succeed: its `--json` answer parsed when asked for
    one (any JSON value: its shape is the command's, git_handoff/ops/payloads.py), else its
    standard output."""
    r = run(*args, cwd=cwd)
    assert r.rc == 0, f"{args}: rc={r.rc} err={r.err} out={r.out}"
    return r.json() if "--json" in args else r.out


# The pair's world (the remote, a, b) holds no path of its own but the remote's URL in
# each clone's config; these commands leave no other (a claim records its worktree).
_COPYABLE = {"init", "add"}


def shared_pair(clones: Callable[[str], Path], *commands: tuple[str, ...]) -> tuple[Path, Path]:
    """Clone a inits, runs `commands`, syncs; then clone b adopts that state by syncing.

    On a bare remote the world this makes is built once per test process and copied
    (tests/support/templates.py): the same remote, clones and state, made by the same
    commands, with the remote's URL set to this test's. A served remote (git daemon)
    and commands that record a path are run each time."""
    if isinstance(clones, Clones):
        bare = clones.bare()
        if (clones.templates is not None and bare is not None and not clones.made
                and all(command[0] in _COPYABLE for command in commands)):
            return _copied_pair(clones, bare, commands)
    return _make_pair(clones, commands)


def _make_pair(clones: Callable[[str], Path], commands: tuple[tuple[str, ...], ...]) -> tuple[Path, Path]:
    a = clones("a")
    ok("init", cwd=a)
    for command in commands:
        ok(*command, cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    return a, b


def _copied_pair(clones: Clones, bare: Path, commands: tuple[tuple[str, ...], ...]) -> tuple[Path, Path]:
    assert clones.templates is not None
    # what the world depends on besides the commands: the pinned clock, our variables
    env = sorted((k, v) for k, v in os.environ.items() if k == "GIT_HANDOFF_NOW" or k.startswith("HANDOFF_"))
    key = "pair-" + hashlib.sha1(repr((commands, env)).encode()).hexdigest()[:16]

    def build(where: Path) -> None:
        git("init", "-q", "--bare", str(where / "remote.git"), cwd=where)
        _make_pair(Clones(where, str(where / "remote.git"), None), commands)

    source = clones.copied_from = clones.templates.built(key, build)
    shutil.rmtree(bare)  # the empty remote the fixture made: the world's instead
    shutil.copytree(source / "remote.git", bare, symlinks=True)
    for name in ("a", "b"):
        shutil.copytree(source / name, clones.tmp_path / name, symlinks=True)
        git("config", "remote.origin.url", clones.remote_url, cwd=clones.tmp_path / name)
        clones.made.append(clones.tmp_path / name)
    return clones.tmp_path / "a", clones.tmp_path / "b"


def published(path: Path) -> str:
    """The ref on the remote where the clone at `path` publishes its state (each clone
    its own: refs/harness/clones/<clone id>/state)."""
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state.identity import clone_id

    return f"refs/harness/clones/{clone_id(Repo.discover(path))}/state"


def remote_state(path: Path, remote: str = "origin") -> str:
    """What the remote holds at the clone's own state ref (ls-remote: asks the remote)."""
    ref = published(path)
    out = git("ls-remote", remote, ref, cwd=path).split()
    return out[0] if out else ""


def tree(path: Path) -> str:
    return git("rev-parse", "refs/harness/state^{tree}", cwd=path)


def task(path: Path, tid: str) -> TaskView:
    """The task as `show --json` gives it."""
    view: TaskView = ok("show", tid, "--json", cwd=path)
    return view
