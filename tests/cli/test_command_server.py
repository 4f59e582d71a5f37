"""The command server (git_handoff/cli/command_server.py) and its client (git_handoff/cmdclient.py),
as real processes: `git handoff` and `git-handoff` served by a forked worker give what the
in-process path gives (output, exit codes, signals), and the client uses no server it
should not trust."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypedDict, Unpack

import pytest

from git_handoff import cmdclient, cmdproto
from tests.support.cmdserver import (
    another_interpreter,
    blocked_reading_stdin,
    client_env,
    console_script,
    log_lines,
    run_cmd,
    served,
    server_dir,
    server_pids,
    stop_servers,
    wait_for,
    wait_until_serving,
)
from tests.support.repo import git, make_repo, run

pytestmark = pytest.mark.slow

STOP = json.dumps({"session_id": "abc", "hook_event_name": "Stop", "stop_hook_active": False})
START = json.dumps({"source": "startup", "session_id": "s"})
VIA = {"git handoff": ["git", "handoff"], "git-handoff": ["git-handoff"]}


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    console_script(path)
    return path


@pytest.fixture
def project(repo: Path, bin_dir: Path) -> Iterator[Path]:
    """An initialized repository with three tasks, a session open and one task claimed;
    every server started in it is stopped at the end."""
    (repo / "plan.toml").write_text("".join(
        f'[[task]]\nid = "t{n}"\ntitle = "Task {n}"\ncheck = "true"\n\n' for n in range(1, 4)))
    assert run("init").rc == 0
    assert run("import", "plan.toml").rc == 0
    git("add", "plan.toml", cwd=repo)
    git("commit", "-q", "-m", "plan", cwd=repo)
    assert run("session", "start").rc == 0
    assert run("claim", "t1").rc == 0
    try:
        yield repo
    finally:
        stop_servers(repo)


class ClientOptions(TypedDict, total=False):
    """The keywords of client_env that start_server passes on."""

    idle: float
    pythonpath: Path


def start_server(repo: Path, bin_dir: Path, **kw: Unpack[ClientOptions]) -> tuple[dict[str, str], int]:
    env = client_env(bin_dir, server="1", **kw)
    first = run_cmd(["git-handoff", "status"], repo, env)  # in-process, and starts the server
    assert first.returncode == 0, first.stderr
    return env, wait_until_serving(repo)


READ_ONLY = [["next"], ["next", "--json"], ["status"], ["status", "--json"], ["list"], ["ls", "--json"],
             ["show", "t2"], ["show", "nope"], ["show", "nope", "--json"], ["log", "-n", "3"], ["attempts", "t1"],
             ["nope"], ["--debug", "next"], ["next", "--bogus"]]


@pytest.mark.parametrize("via", VIA)
def test_served_commands_answer_as_the_in_process_path(project: Path, bin_dir: Path, via: str) -> None:
    env, _ = start_server(project, bin_dir)
    plain = client_env(bin_dir, server="0")
    for args in READ_ONLY:
        want = run_cmd([*VIA[via], *args], project, plain)
        got = run_cmd([*VIA[via], *args], project, env)
        assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr), args
    # every one of them ran in a worker (the log names argv's first two words), except
    # "nope" (no such command: never handed over)
    assert served(project) == [" ".join(args[:2]) for args in READ_ONLY if args[0] != "nope"]


@pytest.mark.parametrize("via", VIA)
def test_hooks_and_writes_served_equal_the_in_process_path(repo: Path, bin_dir: Path, tmp_path: Path,
                                                          via: str) -> None:
    """The same sequence (hooks with payloads on stdin, claim, checkpoint, done, a negative
    answer) in two copies of one repository, one served, one in-process."""
    (repo / "plan.toml").write_text('[[task]]\nid = "a"\ntitle = "A"\ncheck = "true"\n\n'
                                    '[[task]]\nid = "b"\ntitle = "B"\ncheck = "false"\n')
    assert run("init").rc == 0 and run("import", "plan.toml").rc == 0
    git("add", "plan.toml", cwd=repo)
    git("commit", "-q", "-m", "plan", cwd=repo)
    twin = tmp_path / "twin"
    shutil.copytree(repo, twin, symlinks=True)
    steps: list[tuple[list[str], str | None]] = [
        (["hook", "claude-session-start"], START), (["hook", "claude-stop"], STOP), (["claim", "--json"], None),
        (["checkpoint", "a", "step one"], None), (["hook", "claude-stop"], STOP), (["done", "a"], None),
        (["claim", "b"], None), (["done", "b"], None), (["claim"], None), (["next", "--json"], None),
        (["hook", "claude-stop"], "{not json"), (["hook", "no-such-event"], ""),
    ]
    env = client_env(bin_dir, server="1")
    plain = client_env(bin_dir, server="0")
    try:
        run_cmd([*VIA[via], "status"], repo, env)
        wait_until_serving(repo)
        for args, stdin in steps:
            got = run_cmd([*VIA[via], *args], repo, env, stdin=stdin)
            want = run_cmd([*VIA[via], *args], twin, plain, stdin=stdin)
            assert got.returncode == want.returncode, (args, got.stderr, want.stderr)
            assert _same(got.stdout, repo) == _same(want.stdout, twin), args
            assert _same(got.stderr, repo) == _same(want.stderr, twin), args
        assert len(served(repo)) == len(steps)
        assert not server_pids(twin)
        # the same state, commit for commit
        log = ["log", "--format=%s", "refs/harness/state"]
        assert _same(git(*log, cwd=repo), repo) == _same(git(*log, cwd=twin), twin)
    finally:
        stop_servers(repo)


def _same(text: str, where: Path) -> str:
    """`text` without what differs between two runs a few seconds apart: the repository's
    path, times, clocks, commit and clone ids."""
    text = text.replace(str(where), "<repo>")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", "<time>", text)
    text = re.sub(r"\b\d{10,}(\.\d+)*(\.[0-9a-f]+)?\b", "<clock>", text)
    return re.sub(r"\b[0-9a-f]{12,40}\b", "<id>", text)


SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM), (signal.SIGHUP, -signal.SIGHUP)]


@pytest.mark.parametrize("via", VIA)
@pytest.mark.parametrize(("sig", "direct"), SIGNALS, ids=[s.name for s, _ in SIGNALS])
def test_signals_reach_the_worker_and_its_status_comes_back(project: Path, bin_dir: Path, via: str,
                                                           sig: signal.Signals, direct: int) -> None:
    """A hook blocked reading its payload, signalled: the same exit status as in-process
    (130 for Ctrl-C; death by SIGTERM or SIGHUP), directly and through git."""
    env, _ = start_server(project, bin_dir)
    plain = client_env(bin_dir, server="0")
    statuses = []
    for mode_env in (plain, env):
        before = len(served(project))
        proc = subprocess.Popen([*VIA[via], "hook", "claude-stop"], cwd=project, env=mode_env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            reader = _reader(proc.pid, project, before if mode_env is env else None)
            wait_for(lambda reader=reader: reader() is not None and blocked_reading_stdin(reader()), "the stdin read")
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        statuses.append(proc.returncode)
        if mode_env is env:
            assert len(served(project)) == before + 1
    assert statuses[0] == statuses[1]
    if via == "git-handoff":
        assert statuses[0] == direct


def _reader(client: int, repo: Path, served_before: int | None) -> Callable[[], int | None]:
    """The process that will read the payload: the worker (served) or the Python process
    (in-process: the client, or git's child)."""
    def find() -> int | None:
        if served_before is not None:
            workers = [line.split()[1].rstrip(":") for line in log_lines(repo) if line.startswith("worker ")]
            return int(workers[-1]) if len(served(repo)) > served_before else None
        children = [int(p) for p in Path(f"/proc/{client}/task/{client}/children").read_text().split()]
        return children[0] if children else client
    return find


def test_a_client_killed_outright_takes_its_worker_along(project: Path, bin_dir: Path) -> None:
    env, _ = start_server(project, bin_dir)
    proc = subprocess.Popen(["git-handoff", "hook", "claude-stop"], cwd=project, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: "hook claude-stop" in served(project), "the worker")
    worker = int(next(line for line in log_lines(project) if line.endswith("hook claude-stop")).split()[1][:-1])
    wait_for(lambda: blocked_reading_stdin(worker), "the worker to read its payload")
    proc.kill()
    proc.wait()
    wait_for(lambda: any(line == f"worker {worker}: signal 9" for line in log_lines(project)), "the worker's end")


def test_two_clients_at_once(project: Path, bin_dir: Path) -> None:
    env, _ = start_server(project, bin_dir)
    plain = client_env(bin_dir, server="0")
    want = run_cmd(["git-handoff", "hook", "claude-stop"], project, plain, stdin=STOP)
    procs = [subprocess.Popen(["git-handoff", "hook", "claude-stop"], cwd=project, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        wait_for(lambda: served(project).count("hook claude-stop") == 2, "two workers")
        workers = [int(line.split()[1][:-1]) for line in log_lines(project) if line.endswith(": hook claude-stop")]
        assert len(set(workers)) == 2 and all(Path(f"/proc/{w}").exists() for w in workers)  # both at once
        outs = [p.communicate(STOP, timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [want.returncode] * 2
    assert [o for o, _ in outs] == [want.stdout] * 2


def test_the_worker_takes_on_the_clients_environment_cwd_umask_and_fds(project: Path, bin_dir: Path,
                                                                       tmp_path: Path) -> None:
    """The check of `done` runs in the worker's environment: the client's variables, none
    of the server's own, the client's umask; the worker works from the client's directory."""
    report = tmp_path / "report"
    assert run("add", "probe", "--id", "probe", "--check",
               f'env > "{report}.env"; pwd > "{report}.pwd"; umask > "{report}.umask"').rc == 0
    env, _ = start_server(project, bin_dir)
    stop_servers(project)  # start again, with a variable only the server has
    server_env = {**env, "ONLY_THE_SERVER_HAS_THIS": "1"}
    subprocess.run(["git-handoff", "status"], cwd=project, env=server_env, capture_output=True, check=True)
    wait_until_serving(project)
    sub = project / "sub"
    sub.mkdir()
    client = {**env, "ONLY_THE_CLIENT_HAS_THIS": "yes"}
    assert run_cmd(["git-handoff", "done", "t1"], project, client).returncode == 0
    got = subprocess.run(["sh", "-c", "umask 027; exec git-handoff claim probe"], cwd=sub, env=client,
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    # a relative GIT_DIR is taken from the client's directory, not the server's (the repository root)
    relative = run_cmd(["git-handoff", "show", "probe", "--json"], sub, {**client, "GIT_DIR": "../.git"})
    assert relative.returncode == 0 and json.loads(relative.stdout)["id"] == "probe", relative.stderr
    got = subprocess.run(["sh", "-c", "umask 027; exec git-handoff done probe"], cwd=sub, env=client,
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    assert served(project)[-3:] == ["claim probe", "show probe", "done probe"]
    seen = dict(line.split("=", 1) for line in Path(f"{report}.env").read_text().splitlines() if "=" in line)
    assert seen.get("ONLY_THE_CLIENT_HAS_THIS") == "yes"
    assert "ONLY_THE_SERVER_HAS_THIS" not in seen
    assert Path(f"{report}.umask").read_text().strip() == "0027"


def test_a_server_of_changed_code_is_not_used(repo: Path, bin_dir: Path, tmp_path: Path) -> None:
    """A copy of the package: a server started on it, then a file of it changed (or the
    version): the next command runs in-process, the old server exits, the one after that
    starts a fresh server, which serves."""
    copy = tmp_path / "pkg"
    shutil.copytree(Path(__file__).resolve().parents[2] / "git_handoff", copy / "git_handoff",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert run("init").rc == 0 and run("add", "one").rc == 0
    env = client_env(bin_dir, server="1", pythonpath=copy)
    try:
        run_cmd(["git-handoff", "next"], repo, env)
        first = wait_until_serving(repo)
        assert run_cmd(["git-handoff", "next"], repo, env).returncode == 0
        assert served(repo) == ["next"]
        model = copy / "git_handoff" / "core" / "model.py"
        os.utime(model, ns=(time.time_ns(), model.stat().st_mtime_ns + 1_000_000_000))
        got = run_cmd(["git-handoff", "next"], repo, env)
        assert got.returncode == 0 and "one" in got.stdout
        assert served(repo) == ["next"]  # not served: in-process
        assert "stale: the code or the git config changed since the start" in log_lines(repo)
        wait_for(lambda: first not in server_pids(repo), "the stale server to exit")
        if not server_pids(repo):  # the stale one's client may have started it already
            run_cmd(["git-handoff", "next"], repo, env)
        second = wait_until_serving(repo)
        assert second != first
        before = len(served(repo))
        assert run_cmd(["git-handoff", "next"], repo, env).returncode == 0
        assert len(served(repo)) == before + 1  # the fresh server serves
        init = copy / "git_handoff" / "__init__.py"
        init.write_text(init.read_text().replace('__version__ = "0.1.0"', '__version__ = "0.1.1"'))
        assert run_cmd(["git-handoff", "next"], repo, env).returncode == 0
        assert len(served(repo)) == before + 1
        assert log_lines(repo).count("stale: the code or the git config changed since the start") == 2
        wait_for(lambda: second not in server_pids(repo), "the server of the old version to exit")
    finally:
        stop_servers(repo)


def test_a_working_directory_on_the_python_path_keeps_its_server_until_a_module_appears(
        project: Path, bin_dir: Path) -> None:
    """`PYTHONPATH=lib:` puts the working directory on `sys.path` (the empty element). The
    files an agent writes there leave the server in service; a new module there (which
    an import could now find) makes it stale."""
    env = client_env(bin_dir, server="1")
    env["PYTHONPATH"] += os.pathsep  # the empty element: the working directory
    try:
        run_cmd(["git-handoff", "status"], project, env)
        first = wait_until_serving(project)
        for n in range(3):
            (project / f"work-{n}.txt").write_text("work\n")
            assert run_cmd(["git-handoff", "status"], project, env).returncode == 0
        assert served(project) == ["status"] * 3
        assert server_pids(project) == [first]
        (project / "helpers.py").write_text("")
        assert run_cmd(["git-handoff", "status"], project, env).returncode == 0
        assert served(project) == ["status"] * 3  # in-process: that server is stale
        assert "stale: the code or the git config changed since the start" in log_lines(project)
    finally:
        stop_servers(project)


def test_another_interpreter_setting_is_refused_and_the_server_stays(project: Path, bin_dir: Path) -> None:
    env, pid = start_server(project, bin_dir)
    got = run_cmd([sys.executable, "-X", "importtime", "-m", "git_handoff", "next"], project, env)
    assert got.returncode == 0 and "import time:" in got.stderr  # ran here, importing everything
    assert not served(project)
    assert server_pids(project) == [pid]


@pytest.mark.parametrize("spoil",
                         ["socket 0666", "directory 0755", "socket of another uid", "directory of another uid"])
def test_a_socket_not_private_to_this_user_is_refused(project: Path, bin_dir: Path, spoil: str) -> None:
    env, _ = start_server(project, bin_dir)
    assert run_cmd(["git-handoff", "next"], project, env).returncode == 0
    assert served(project) == ["next"]
    where = server_dir(project)
    target = where / "sock" if spoil.startswith("socket") else where
    if "uid" in spoil:
        if os.geteuid() != 0:
            pytest.skip("changing a file's owner needs root")
        os.chown(target, 65534, -1, follow_symlinks=False)
    else:
        os.chmod(target, int(spoil.split()[-1], 8))
    got = run_cmd(["git-handoff", "next"], project, env)
    want = run_cmd(["git-handoff", "next"], project, client_env(bin_dir, server="0"))
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout)
    assert served(project) == ["next"]  # the client did not talk to it


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another uid needs root")
def test_the_server_refuses_a_peer_of_another_uid(bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its socket opened to everyone (and a path another user may walk): a peer of another
    uid is closed without an answer."""
    outer = Path(tempfile.mkdtemp(prefix="handoff-peer-", dir="/tmp"))
    try:
        outer.chmod(0o711)
        project = make_repo(outer / "repo")
        monkeypatch.chdir(project)
        assert run("init").rc == 0
        _refused_peer(project, bin_dir)
    finally:
        stop_servers(outer / "repo")
        shutil.rmtree(outer, ignore_errors=True)


def _refused_peer(project: Path, bin_dir: Path) -> None:
    start_server(project, bin_dir)
    where = server_dir(project)
    os.chmod(where, 0o711)
    os.chmod(where / "sock", 0o666)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(10)
                s.connect(str(where / "sock"))
                answer = s.recv(100)  # the server closes before any request
            os.write(write, b"answer:" + answer)
        except BaseException as exc:  # noqa: BLE001
            os.write(write, f"error:{exc}".encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as f:
        result = f.read()
    assert result == b"answer:"  # closed without a word
    assert any(line == "refused a peer of uid 65534" for line in log_lines(project))
    assert not served(project)


def test_an_idle_server_exits_and_removes_its_socket(project: Path, bin_dir: Path) -> None:
    env, pid = start_server(project, bin_dir, idle=1)
    assert run_cmd(["git-handoff", "next"], project, env).returncode == 0
    assert served(project) == ["next"]
    wait_for(lambda: pid not in server_pids(project), "the idle exit", limit=15)
    assert "idle exit" in log_lines(project)
    assert not (server_dir(project) / "sock").exists()


def test_off_unless_asked(project: Path, bin_dir: Path) -> None:
    """No variable and no config: nothing starts. The config turns it on; the variable at 0
    wins over the config."""
    env = client_env(bin_dir, server=None)
    assert run_cmd(["git-handoff", "next"], project, env).returncode == 0
    time.sleep(0.5)
    assert not server_dir(project).exists() and not server_pids(project)
    off = client_env(bin_dir, server="0")
    git("config", "handoff.commandServer", "true", cwd=project)
    assert run_cmd(["git-handoff", "next"], project, off).returncode == 0
    time.sleep(0.5)
    assert not server_pids(project)
    assert run_cmd(["git", "handoff", "next"], project, env).returncode == 0
    wait_until_serving(project)
    assert run_cmd(["git", "handoff", "next"], project, env).returncode == 0
    assert served(project) == ["next"]
    git("config", "handoff.commandServer", "false", cwd=project)  # the config changed: that server is stale
    assert run_cmd(["git-handoff", "next"], project, env).returncode == 0
    assert served(project) == ["next"]
    wait_for(lambda: not server_pids(project), "the server to exit once switched off")


def test_a_config_change_that_leaves_it_on_keeps_the_server_and_its_workers_read_it(
        project: Path, bin_dir: Path) -> None:
    """A fleet's clone writes its git config on its first sync and its first note: the
    server stays (one process, no fresh start), re-reads whether it is on and its idle
    time, and the next worker sees the new config."""
    env = client_env(bin_dir, server=None)
    git("config", "handoff.commandServer", "true", cwd=project)
    try:
        run_cmd(["git-handoff", "next"], project, env)
        first = wait_until_serving(project)
        before = len(served(project))
        git("config", "handoff.allowedSigners", str(project / "no-such-file"), cwd=project)
        got = run_cmd(["git-handoff", "status", "--json"], project, env)
        assert got.returncode == 0
        assert any("not a readable file" in note for note in json.loads(got.stdout)["notes"])
        assert len(served(project)) == before + 1  # served, by the same server
        assert server_pids(project) == [first]
        assert "stale: the code or the git config changed since the start" not in log_lines(project)
        assert any(line.startswith("the git config changed; still on, idle ") for line in log_lines(project))
        git("config", "handoff.commandServer", "false", cwd=project)  # off: that server is stale
        assert run_cmd(["git-handoff", "next"], project, env).returncode == 0
        assert len(served(project)) == before + 1
        wait_for(lambda: not server_pids(project), "the server to exit once switched off")
    finally:
        stop_servers(project)


def test_the_server_keeps_no_trace_target_of_the_command_that_started_it(project: Path, bin_dir: Path,
                                                                          tmp_path: Path) -> None:
    """GIT_TRACE=FILE on the command that starts the server traces that command (and the
    worker of each client that asks), not the server's own git runs after it: a trace file
    the caller removed stayed removed."""
    env = client_env(bin_dir, server=None)
    git("config", "handoff.commandServer", "true", cwd=project)
    trace = tmp_path / "trace.log"
    try:
        assert run_cmd(["git-handoff", "next"], project, {**env, "GIT_TRACE": str(trace)}).returncode == 0
        wait_until_serving(project)
        assert "git config" in trace.read_text()  # the starting command's own git runs
        trace.unlink()
        git("config", "handoff.commandServerIdle", "29", cwd=project)  # the server reads its config again
        assert run_cmd(["git-handoff", "next"], project, env).returncode == 0
        assert any(line.startswith("the git config changed; still on") for line in log_lines(project))
        asked = tmp_path / "asked.log"
        got = run_cmd(["git-handoff", "done", "t1"], project, {**env, "GIT_TRACE": str(asked)})
        assert got.returncode == 0, got.stderr
        assert "git status" in asked.read_text()  # a served client's trace: its worker's git runs
        assert not trace.exists()
    finally:
        stop_servers(project)


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED", "buffered"])
def test_stdout_and_stderr_on_one_pipe_keep_their_order(project: Path, bin_dir: Path, unbuffered: bool) -> None:
    """The worker's streams are made as Python makes them (buffered or not, line-buffered
    stderr), so output and warnings interleave on one pipe as they do in-process."""
    def environ(server: str) -> dict[str, str]:
        env = client_env(bin_dir, server=server)
        env.pop("PYTHONUNBUFFERED", None)
        return {**env, "PYTHONUNBUFFERED": "1"} if unbuffered else env

    served_env = environ("1")
    run_cmd(["git-handoff", "status"], project, served_env)
    wait_until_serving(project)
    for args, stdin in ((["hook", "claude-stop"], "{not json"), (["show", "t1"], None), (["next", "--bogus"], None)):
        outs = [subprocess.run(["git-handoff", *args], cwd=project, env=env, input=stdin, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for env in (environ("0"), served_env)]
        assert outs[0].stdout == outs[1].stdout and outs[0].returncode == outs[1].returncode, args
    assert len(served(project)) == 3


# A console script whose socket loses the connection after the worker's "ok <pid>" line:
# the client's read of the exit status fails with ConnectionResetError, at once (the worker
# still runs) or once the status came and was lost (the worker has ended).
RESET_AFTER_OK = """#!{python}
import sys
import _socket

class ResetAfterOk(_socket.socket):
    started = False

    def recv(self, size, *flags):
        if self.started:
            if {late}:
                super().recv(size, *flags)
            raise ConnectionResetError(104, "Connection reset by peer")
        data = super().recv(size, *flags)
        if data.startswith(b"ok "):
            self.started = True
            data = data[:data.index(b"\\n") + 1]
        return data

_socket.socket = ResetAfterOk
import git_handoff  # the client runs here, on import
_socket.socket = ResetAfterOk.__base__  # the socket module subclasses the original
from git_handoff.cli import main
if __name__ == '__main__':
    sys.exit(main())
"""


@pytest.mark.parametrize("late", [False, True], ids=["while-the-worker-runs", "after-the-worker-ended"])
def test_a_connection_lost_after_the_worker_started_runs_the_command_once(repo: Path, bin_dir: Path,
                                                                          tmp_path: Path, late: bool) -> None:
    """Once the worker answered "ok", the command is its: a failing read of its status
    must not send the client back to the in-process path (`add` would make two tasks),
    nor leave while the worker runs (the server kills the worker of a client gone). The
    client waits for the worker, says so in one line and ends with 2."""
    assert run("init").rc == 0
    env = client_env(bin_dir, server="1")
    flaky = tmp_path / "flaky" / "git-handoff"
    flaky.parent.mkdir()
    flaky.write_text(RESET_AFTER_OK.format(python=sys.executable, late=late))
    flaky.chmod(0o755)
    try:
        run_cmd(["git-handoff", "next"], repo, env)
        wait_until_serving(repo)
        got = run_cmd([str(flaky), "add", "Once"], repo, env)
        assert served(repo)[-1] == "add Once"
        tasks = run("list", "--json").json()
        assert [t["title"] for t in tasks] == ["Once"], tasks
        assert (got.returncode, got.stderr) == (2, "git handoff: the command server ended before the command did\n")
        worker = next(line.split(":")[0] for line in log_lines(repo) if line.endswith(": add Once"))
        wait_for(lambda: f"{worker}: exit 0" in log_lines(repo), "the worker's end")  # it ran to its end
    finally:
        stop_servers(repo)


def test_a_stopping_server_leaves_no_client_waiting_while_its_worker_runs(repo: Path, bin_dir: Path) -> None:
    """The git config turns the server off while a served command still runs (a check of
    8 s): the next client is told "stale" and the server stops taking commands. A client
    after that must not wait on a socket nobody accepts on until the worker ends: it runs
    at once."""
    assert run("init").rc == 0 and run("add", "slow", "--id", "s", "--check", "sleep 8").rc == 0
    git("config", "handoff.commandServer", "true", cwd=repo)
    env = client_env(bin_dir, server=None)
    try:
        run_cmd(["git-handoff", "next"], repo, env)
        wait_until_serving(repo)
        assert run_cmd(["git-handoff", "claim", "s"], repo, env).returncode == 0
        slow = subprocess.Popen(["git-handoff", "verify", "s"], cwd=repo, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "verify s" in served(repo), "verify to be served")
        git("config", "handoff.commandServer", "false", cwd=repo)
        assert run_cmd(["git-handoff", "status"], repo, env).returncode == 0  # told "stale": in-process
        started = time.monotonic()
        got = run_cmd(["git-handoff", "list"], repo, env, timeout=30)
        took = time.monotonic() - started
        assert got.returncode == 0 and "slow" in got.stdout
        assert took < 6, f"the client waited {took:.1f} s for the stopping server"
        assert slow.poll() is None, "the worker ended before the check: the test proves nothing"
        slow.communicate(timeout=30)
    finally:
        stop_servers(repo)


# -- the fast client (python -I -S, what an installed hook runs when the server is on) -----

def fast(args: list[str], python: str = sys.executable) -> list[str]:
    return [python, *cmdclient.fast_command(args)[1:]]


def test_the_fast_client_is_served_and_answers_as_the_in_process_path(project: Path, bin_dir: Path) -> None:
    env, pid = start_server(project, bin_dir)
    plain = client_env(bin_dir, server="0")
    for args in READ_ONLY:
        want = run_cmd(["git-handoff", *args], project, plain)
        got = run_cmd(fast(args), project, env)
        assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr), args
    # every one served by the same server, "nope" (not a served command) run in full, in-process
    assert served(project) == [" ".join(args[:2]) for args in READ_ONLY if args[0] != "nope"]
    assert server_pids(project) == [pid]
    got = run_cmd(fast(["hook", "claude-stop"]), project, env, stdin=STOP)
    assert got.returncode == 0 and json.loads(got.stdout)["decision"] == "block" and "t1" in got.stdout
    assert served(project)[-1] == "hook claude-stop"


def test_the_fast_client_without_a_server_runs_the_full_program_which_starts_one(project: Path,
                                                                                bin_dir: Path) -> None:
    env = client_env(bin_dir, server="1")
    want = run_cmd(["git-handoff", "next", "--json"], project, client_env(bin_dir, server="0"))
    got = run_cmd(fast(["next", "--json"]), project, env)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
    wait_until_serving(project)
    assert not served(project)  # ran in-process, in the exec'd full program
    assert run_cmd(fast(["next", "--json"]), project, env).stdout == want.stdout
    assert served(project) == ["next --json"]


def test_the_fast_client_of_another_interpreter_or_switched_off_is_not_served(project: Path, bin_dir: Path,
                                                                              tmp_path: Path) -> None:
    """The profile names the server's executable: another one (here a venv's, importing
    what this interpreter imports) runs the full program, which the server refuses too;
    HANDOFF_COMMAND_SERVER=0 runs it in-process at once."""
    env, pid = start_server(project, bin_dir)
    want = run_cmd(["git-handoff", "status"], project, client_env(bin_dir, server="0"))
    other = another_interpreter(tmp_path / "other", packages=True)
    got = run_cmd(fast(["status"], str(other)), project, env)
    assert (got.returncode, got.stdout) == (0, want.stdout)
    got = run_cmd(fast(["status"]), project, {**env, "HANDOFF_COMMAND_SERVER": "0"})
    assert (got.returncode, got.stdout) == (0, want.stdout)
    assert not served(project)
    assert server_pids(project) == [pid]
    assert "refused a client of another interpreter, code or environment" in log_lines(project)


def test_the_fast_client_without_its_package_runs_git_handoff(project: Path, bin_dir: Path, tmp_path: Path) -> None:
    env = client_env(bin_dir, server="0")
    want = run_cmd(["git-handoff", "next", "--json"], project, env)
    argv = cmdclient.fast_command(["next", "--json"])
    argv[argv.index(str(Path(cmdclient.PACKAGE_DIR).parent))] = str(tmp_path)  # no git_handoff there
    got = run_cmd(argv, project, env)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)


def test_the_fast_client_of_an_interpreter_without_the_dependencies_runs_git_handoff(project: Path, bin_dir: Path,
                                                                                    tmp_path: Path) -> None:
    """A hook or launcher names an interpreter that finds the package (by its path) but not
    its dependencies (a venv's base interpreter, another Python): the command is the plain
    `git handoff`, here served by the server as the console script's run is."""
    env, pid = start_server(project, bin_dir)
    want = run_cmd(["git-handoff", "status"], project, client_env(bin_dir, server="0"))
    bare = another_interpreter(tmp_path / "bare", packages=False)
    got = run_cmd(fast(["status"], str(bare)), project, env)
    assert (got.returncode, got.stdout, got.stderr) == (0, want.stdout, want.stderr)
    assert served(project) == ["status"]
    assert server_pids(project) == [pid]
    no_git = {**env, "PATH": str(tmp_path / "nowhere")}
    got = run_cmd(fast(["status"], str(bare)), project, no_git)
    assert got.returncode == 127 and got.stdout == ""
    assert got.stderr == f"git handoff: {bare} cannot import pygit2, and git cannot be run: No such file or directory\n"


def test_the_fast_client_trusts_no_profile_another_may_write(project: Path, bin_dir: Path) -> None:
    env, _ = start_server(project, bin_dir)
    profile = server_dir(project) / "profile"
    assert profile.stat().st_mode & 0o777 == 0o600
    profile.chmod(0o620)
    assert run_cmd(fast(["next"]), project, env).returncode == 0
    assert served(project) == ["next"]  # by the full program's client, not the fast one's
    profile.write_bytes(b"not a profile")
    profile.chmod(0o600)
    assert run_cmd(fast(["next"]), project, env).returncode == 0
    assert served(project) == ["next", "next"]


def test_the_installed_claude_hooks_run_through_the_fast_client(project: Path, bin_dir: Path) -> None:
    """With handoff.commandServer on, `hooks install --agent claude` writes commands that
    start the fast client; run as Claude Code runs them (sh -c, payload on stdin) they are
    served and answer as the plain hook; where the client is not there they are the plain
    command."""
    git("config", "handoff.commandServer", "true", cwd=project)
    env = client_env(bin_dir, server=None)
    assert run_cmd(["git-handoff", "hooks", "install", "--agent", "claude", "--no-mcp"], project, env).returncode == 0
    # the first note written sets notes.rewriteRef: set before, so that no server goes stale
    # on that change of the config
    git("config", "--add", "notes.rewriteRef", "refs/notes/harness", cwd=project)
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert " -I -S -c " in command and command.endswith("; exec git handoff hook claude-stop")
    start = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]

    def context(proc: subprocess.CompletedProcess[str]) -> str:
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)["hookSpecificOutput"]
        assert out["hookEventName"] == "SessionStart"
        return str(out["additionalContext"])

    first = run_cmd(["sh", "-c", start], project, env, stdin=START)  # no server yet: the full program starts one
    assert "Next eligible task" in context(first)
    wait_until_serving(project)
    assert not served(project)
    got = run_cmd(["sh", "-c", start], project, env, stdin=START)
    assert "Next eligible task" in context(got)
    assert served(project) == ["hook claude-session-start"], log_lines(project)
    gone = command.replace(str(Path(cmdclient.PACKAGE_DIR) / "cmdclient.py"), "/nonexistent/cmdclient.py")
    got = run_cmd(["sh", "-c", gone], project, env, stdin=STOP)
    assert got.returncode == 0 and json.loads(got.stdout)["decision"] == "block"
    # `git handoff hook claude-stop`, served by its own client
    assert served(project)[-1] == "hook claude-stop", log_lines(project)


def _with_terminal(tty: int) -> None:
    import fcntl
    import termios

    os.setsid()
    fcntl.ioctl(tty, termios.TIOCSCTTY, 0)


def test_sync_is_served_only_to_a_client_without_a_terminal(project: Path, bin_dir: Path, tmp_path: Path) -> None:
    """`sync` fetches and pushes; git may prompt for a password on the client's terminal,
    which a worker has not: a client with a controlling terminal syncs in-process, one
    without (a fleet's loop, an agent) is served, with the same effect on the remote."""
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=project)
    git("push", "-q", "origin", "HEAD", cwd=project)
    env, _ = start_server(project, bin_dir)
    import pty

    leader, follower = pty.openpty()
    try:
        at_terminal = subprocess.run(["git-handoff", "sync", "origin", "--json"], cwd=project, env=env,
                                     capture_output=True, text=True, timeout=60,
                                     preexec_fn=lambda: _with_terminal(follower))
    finally:
        os.close(leader)
        os.close(follower)
    assert at_terminal.returncode == 0, at_terminal.stderr
    assert "sync origin" not in served(project)
    (project / "more.toml").write_text('[[task]]\nid = "t9"\ntitle = "Task 9"\ncheck = "true"\n')
    assert run_cmd(["git-handoff", "import", "more.toml"], project, env).returncode == 0
    # that first sync added its refspecs to the git config: the server it found has gone
    # stale, and the next served command starts a fresh one
    assert run_cmd(["git-handoff", "status"], project, env).returncode == 0
    wait_until_serving(project)
    detached = subprocess.run(["git-handoff", "sync", "origin", "--json"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=60, start_new_session=True)
    assert detached.returncode == 0, detached.stderr
    assert json.loads(detached.stdout)["remote"] == "origin"
    assert served(project)[-1] == "sync origin"
    # what it published is this clone's state, as an in-process sync publishes it
    heads = git("for-each-ref", "--format=%(objectname)", "refs/harness/clones/", cwd=bare).split()
    assert git("rev-parse", "refs/harness/state", cwd=project).strip() in heads


# -- peers that hold the server, and clients confined otherwise ------------------------------

HUNG = 20.0  # seconds a served status may take before the test calls it hung


def _served_seconds(repo: Path, env: dict[str, str], timeout: float = HUNG) -> float:
    """The wall time of one served `status` (asserted served), or the timeout when it hung."""
    before = len(served(repo))
    start = time.monotonic()
    try:
        got = run_cmd(["git-handoff", "status"], repo, env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return timeout
    took = time.monotonic() - start
    assert got.returncode == 0, got.stderr
    assert len(served(repo)) == before + 1, "not served"
    return took


def _median_served_seconds(repo: Path, env: dict[str, str], runs: int = 3) -> float:
    return sorted(_served_seconds(repo, env) for _ in range(runs))[runs // 2]


class _Peers:
    """Two connections that never send and one that sends a byte a second, to the
    repository's server (through its directory's fd: a test's path may pass the 107 bytes
    a socket address holds)."""

    def __init__(self, repo: Path) -> None:
        self.dir_fd = os.open(server_dir(repo), os.O_RDONLY | os.O_DIRECTORY)
        self.socks: list[socket.socket] = []
        self.stop = threading.Event()
        address = f"/proc/self/fd/{self.dir_fd}/sock"
        for _ in range(3):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(address)
            self.socks.append(s)
        self.slow = threading.Thread(target=self._trickle, args=(self.socks[2],), daemon=True)
        self.slow.start()

    def _trickle(self, s: socket.socket) -> None:
        request = cmdproto.frame([b"x" * 64] * 8)
        for byte in request:
            if self.stop.wait(1.0):
                return
            try:
                s.send(bytes([byte]))
            except OSError:
                return  # dropped by the server

    def close(self) -> None:
        self.stop.set()
        self.slow.join()
        for s in self.socks:
            s.close()
        os.close(self.dir_fd)


def test_silent_and_slow_peers_do_not_delay_a_served_command(project: Path, bin_dir: Path) -> None:
    """Two local connections that never send and one that sends a byte a second hold no
    served command: each served `status` with them connected takes at most its own time
    (measured here, without them) plus 0.5 s. Medians of three; measured again once if the
    machine stalled."""
    env, _ = start_server(project, bin_dir)
    for _attempt in range(2):
        alone = _median_served_seconds(project, env)
        peers = _Peers(project)
        try:
            held = _median_served_seconds(project, env)
        finally:
            peers.close()
        if held <= alone + 0.5 or held >= HUNG:
            break  # within bounds, or hung: no stall of the machine explains that
    print(f"served status: {alone:.2f} s alone, {held:.2f} s with two silent peers and a slow sender")
    assert held <= alone + 0.5, f"a served status took {held:.2f} s with silent and slow peers, {alone:.2f} s alone"


# An allow-all seccomp filter, then exec: the process's Seccomp mode becomes 2 (filter) as
# under an agent CLI's sandbox, and nothing is forbidden. Unprivileged, a filter needs
# no_new_privs first; as root it does not, so the filter is then the only difference.
SECCOMP_ALLOW_ALL = """
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
if os.geteuid() != 0 and libc.prctl(38, 1, 0, 0, 0):  # PR_SET_NO_NEW_PRIVS
    sys.exit("no_new_privs: " + os.strerror(ctypes.get_errno()))
allow = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0x7FFF0000))  # BPF_RET|BPF_K: ALLOW
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
if libc.prctl(22, 2, ctypes.byref(Prog(1, ctypes.addressof(allow))), 0, 0):  # PR_SET_SECCOMP, FILTER
    sys.exit("seccomp: " + os.strerror(ctypes.get_errno()))
os.execvp(sys.argv[1], sys.argv[1:])
"""
ROOT = os.geteuid() == 0
# confinement -> (the command that applies it, what the server names as differing, the
# line the task's check sees in its own /proc/self/status, or "mnt" for its namespace)
CONFINED = {
    "no_new_privs": (["setpriv", "--no-new-privs"], "NoNewPrivs", "NoNewPrivs:\t1"),
    "mount-namespace": (["unshare", "--mount"] if ROOT else ["unshare", "--user", "--map-root-user", "--mount"],
                        "ns/mnt", "mnt"),
    "seccomp-filter": ([sys.executable, "-c", SECCOMP_ALLOW_ALL], "Seccomp", "Seccomp:\t2"),
}


def _confine(name: str) -> list[str]:
    wrapper = CONFINED[name][0]
    probe = subprocess.run([*wrapper, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"{name} cannot be applied here: {probe.stderr.strip()}")
    return wrapper


@pytest.mark.needs("setpriv")
@pytest.mark.needs("unshare")
@pytest.mark.parametrize("name", CONFINED)
def test_a_client_confined_otherwise_runs_in_its_own_process_inside_its_confinement(
        project: Path, bin_dir: Path, tmp_path: Path, name: str) -> None:
    """An agent CLI's sandbox around the client (no_new_privs, another mount namespace, a
    seccomp filter): the server refuses it, and the command runs in the client's own
    process, with the output and exit code of the in-process path; `done` runs the task's
    check inside the sandbox (its /proc/self says so), not in the server's worker."""
    wrapper = _confine(name)
    _, differs, seen = CONFINED[name]
    report = tmp_path / "report"
    assert run("done", "t1").rc == 0
    assert run("add", "probe", "--id", "probe", "--check",
               f'cat /proc/self/status > "{report}"; readlink /proc/self/ns/mnt >> "{report}"').rc == 0
    env, server = start_server(project, bin_dir)
    plain = client_env(bin_dir, server="0")
    assert run_cmd(["git-handoff", "status"], project, env).returncode == 0
    assert served(project) == ["status"]  # unconfined: served
    want = run_cmd(["git-handoff", "status"], project, plain)
    for argv in (["git-handoff", "status"], ["git", "handoff", "status"], fast(["status"])):
        got = run_cmd([*wrapper, *argv], project, env)
        assert (got.returncode, got.stdout) == (want.returncode, want.stdout), (argv, got.stderr)
    assert run_cmd([*wrapper, "git-handoff", "claim", "probe"], project, env).returncode == 0
    got = run_cmd([*wrapper, "git-handoff", "done", "probe"], project, env)
    assert got.returncode == 0, got.stderr
    assert served(project) == ["status"]  # none of the confined ones
    refusals = [line for line in log_lines(project) if line.startswith("refused a client confined otherwise")]
    assert len(refusals) == 5 and all(differs in line for line in refusals), refusals
    checked = report.read_text()
    if seen == "mnt":
        assert checked.splitlines()[-1] != os.readlink(f"/proc/{server}/ns/mnt")
    else:
        assert seen in checked.splitlines()
    assert server_pids(project) == [server]  # the server stays for its equals
    assert run_cmd(["git-handoff", "status"], project, env).returncode == 0
    assert served(project) == ["status", "status"]


def test_a_server_that_does_not_answer_is_given_up_and_the_command_runs_here(project: Path, bin_dir: Path) -> None:
    """A socket that accepts nothing (a server stopped, or stuck): the client, full or
    fast, waits `cmdproto.ANSWER_SECONDS` for an answer, then runs the command itself, with
    the in-process path's output, starting no other server; the fast one asks only once."""
    env = client_env(bin_dir, server="1")
    where = server_dir(project)
    where.mkdir(parents=True, mode=0o700)
    dir_fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            listener.bind(f"/proc/self/fd/{dir_fd}/sock")
        finally:
            os.umask(old)
        listener.listen(8)
        want = run_cmd(["git-handoff", "status"], project, client_env(bin_dir, server="0"))
        for argv in (["git-handoff", "status"], fast(["status"])):
            start = time.monotonic()
            got = run_cmd(argv, project, env, timeout=60)
            took = time.monotonic() - start
            assert (got.returncode, got.stdout) == (want.returncode, want.stdout), got.stderr
            assert cmdproto.ANSWER_SECONDS <= took < cmdproto.ANSWER_SECONDS + 20, took
        listener.setblocking(False)
        asked = 0
        while True:
            try:
                listener.accept()[0].close()
            except BlockingIOError:
                break
            asked += 1
        assert asked == 2  # one connection each
        assert not server_pids(project)
    finally:
        listener.close()
        os.close(dir_fd)


def test_a_client_that_gives_up_after_the_worker_started_has_nothing_run(project: Path, bin_dir: Path) -> None:
    """The worker answers `ok`, then waits for the client's go before it runs anything: a
    client that gave up (and runs the command itself) never sends it, so the command is
    not run twice. Here a raw client sends `done t1` and hangs up on the `ok`."""
    env, _ = start_server(project, bin_dir)
    git_dir = str((project / ".git").resolve())
    dir_fd = os.open(server_dir(project), os.O_RDONLY | os.O_DIRECTORY)
    try:
        profile = cmdproto.read_profile(dir_fd)
        assert profile is not None
        who = cmdproto.identity(env, profile[0]) + b"\0\0" + cmdproto.config_stamp(git_dir)
        argv = [str(bin_dir / "git-handoff"), "done", "t1"]
        fields = [who, str(project).encode(), b"18", b"", str(len(argv)).encode(), *(a.encode() for a in argv),
                  *(f"{k}={v}".encode() for k, v in env.items())]
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(f"/proc/self/fd/{dir_fd}/sock")
            s.sendall(cmdproto.frame(fields))
            answer = s.recv(100)  # and no go (nor the fds that come with it)
        assert answer.startswith(b"ok "), answer
        worker = int(answer.split()[1])
        wait_for(lambda: any(line.startswith(f"worker {worker}: ")
                             and line.split(": ", 1)[1].startswith(("exit", "signal"))
                             for line in log_lines(project)), "the worker's end")
    finally:
        os.close(dir_fd)
    assert served(project) == ["done t1"]
    shown = json.loads(run("show", "t1", "--json").out)
    assert shown["status"] != "done", shown  # not run
    assert run("done", "t1").rc == 0  # still the claim's to end
