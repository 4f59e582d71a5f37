"""Ctrl-C, SIGTERM and SIGHUP to a relay (and a foreground `dispatch run`), as users send
them: to the terminal's whole foreground process group, again and again, with the relay
run directly (`git-handoff relay`) and through git (`git handoff relay`, where git
forwards each signal to its child a second time while the child cleans up).

Whatever the signal and however often it comes, the agent's whole process tree ends
(what it left in the background included), its session is closed with a handoff
document, the relay lock is released, and the exit status is 128 + the signal's number.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from filelock import FileLock

from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import handoff
from git_handoff.state import this_clone
from git_handoff.state.store import StateStore
from tests.support.processes import ended_afterwards, processes_with, wait_for
from tests.support.repo import dispatch_record, git, run

pytestmark = pytest.mark.slow  # real relays, real agents, real signals

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
WAYS = {"direct": ["git-handoff"], "through-git": ["git", "handoff"]}


def _marker() -> str:
    """A number `sleep` accepts that names this test's processes in the process table."""
    return f"{5000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9}"



def _agent(repo: Path, marker: str) -> str:
    """An agent as a person writes one: it acknowledges, claims, leaves a child in the
    background and works in the foreground; like an agent CLI it takes a moment to exit
    when told to (so the signals that follow the first one land during the cleanup)."""
    script = repo / "agent.sh"
    script.write_text(
        "#!/bin/sh\n"
        "git handoff ack >/dev/null && git handoff claim >/dev/null || exit 9\n"
        "trap 'sleep 1; exit 143' TERM\n"
        f"sleep {marker} &\n"
        f"sleep {marker}\n"
    )
    script.chmod(0o755)
    (repo / ".gitignore").write_text("agent.sh\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore the agent", cwd=repo)
    return "./agent.sh"


def _default_signals() -> None:
    """A shell starts a foreground job with these signals at their default action, whatever
    the test runner inherited (under `nohup`, SIGHUP is ignored, and an ignored signal stays
    ignored across exec: the relay then rightly keeps it ignored)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def _start(way: str, repo: Path, *args: str, ignored: tuple[int, ...] = ()) -> subprocess.Popen[str]:
    """Started as a terminal starts a foreground job: the leader of its own process group,
    the terminal's signals at their default action, except `ignored` (as `nohup` does)."""

    def dispositions() -> None:
        _default_signals()
        for sig in ignored:
            signal.signal(sig, signal.SIG_IGN)

    return subprocess.Popen([*WAYS[way], *args], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=dispositions)


def _barrage(pgid: int, sig: int, *, seconds: float = 1.5, every: float = 0.1) -> None:
    """The signal to the whole group, then again and again (a person pressing Ctrl-C
    repeatedly, a terminal's hang-up reaching every process)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(every)


def _relay_record(repo: Path) -> dict[str, object]:
    loaded = json.loads(git("show", "refs/harness/state:relay.json", cwd=repo))
    assert isinstance(loaded, dict)
    return loaded


def _expected_status(way: str, sig: int, returncode: int) -> bool:
    # git ends itself by the same signal once its child exited (a shell shows 128 + n)
    return returncode == 128 + sig or (way == "through-git" and returncode == -sig)


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_signals_to_the_relays_process_group_end_the_agent_and_close_the_session(repo: Path, way: str,
                                                                                 sig: int) -> None:
    assert run("init").rc == 0
    assert run("add", "Write a.txt", "--id", "a", "--check", "test -f a.txt").rc == 0
    marker = _marker()
    relay = _start(way, repo, "relay", "--agent", _agent(repo, marker))
    with ended_afterwards(relay, marker):
        wait_for(lambda: len(processes_with(marker)) == 2, 60, "the agent and its background child")
        _barrage(relay.pid, sig)
        out, err = relay.communicate(timeout=60)
        assert _expected_status(way, sig, relay.returncode), (relay.returncode, err)
        assert err.strip().splitlines()[-1].startswith("error: interrupted"), err
        assert "Traceback" not in err
        wait_for(lambda: not processes_with(marker), 5, "the agent's whole tree to end")
    git_repo = Repo.discover(repo)
    assert this_clone.open_session(git_repo) is None  # closed
    assert handoff.handed_off(StateStore(git_repo, session=0), 1)  # with its document
    record = _relay_record(repo)
    assert record["state"] == "stopped" and str(record["reason"]).startswith("interrupted"), record
    assert "relay stopped: interrupted" in run("log", "--type", "LOCK").out
    lock = FileLock(str(repo / ".git" / "handoff" / "relay.lock"), timeout=0)
    lock.acquire()  # released: a new relay could start now
    lock.release()


@pytest.mark.parametrize("way", list(WAYS))
def test_a_relay_started_under_nohup_outlives_the_hang_up(repo: Path, way: str) -> None:
    """`nohup git handoff relay &` asks the relay to outlive its terminal: SIGHUP is ignored
    when it starts, and the terminal's hang-up (to the whole group, repeated) neither ends
    the relay nor its agent. A SIGTERM afterwards still ends both cleanly."""
    assert run("init").rc == 0
    assert run("add", "Write a.txt", "--id", "a", "--check", "test -f a.txt").rc == 0
    marker = _marker()
    relay = _start(way, repo, "relay", "--agent", _agent(repo, marker), ignored=(signal.SIGHUP,))
    with ended_afterwards(relay, marker):
        wait_for(lambda: len(processes_with(marker)) == 2, 60, "the agent and its background child")
        _barrage(relay.pid, signal.SIGHUP)
        time.sleep(1)
        assert relay.poll() is None, relay.communicate(timeout=30)
        assert len(processes_with(marker)) == 2  # the agent works on
        _barrage(relay.pid, signal.SIGTERM)
        out, err = relay.communicate(timeout=60)
        assert _expected_status(way, signal.SIGTERM, relay.returncode), (relay.returncode, err)
        wait_for(lambda: not processes_with(marker), 5, "the agent's whole tree to end")
    record = _relay_record(repo)
    assert record["state"] == "stopped" and record["reason"] == "interrupted by SIGTERM", record


@pytest.mark.needs("pgrep")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: signal.Signals(s).name)
def test_a_signal_to_the_relay_alone_through_git_is_its_exit_status(repo: Path, sig: int) -> None:
    """`kill -TERM <relay>` (a service manager, `timeout`): git passes on the relay's own
    exit status, 128 + the signal's number, not Ctrl-C's 130."""
    assert run("init").rc == 0
    assert run("add", "Write a.txt", "--id", "a", "--check", "test -f a.txt").rc == 0
    marker = _marker()
    relay = _start("through-git", repo, "relay", "--agent", _agent(repo, marker))
    with ended_afterwards(relay, marker):
        wait_for(lambda: len(processes_with(marker)) == 2, 60, "the agent and its background child")
        children = subprocess.run(["pgrep", "-P", str(relay.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 1, children
        os.kill(int(children[0]), sig)
        out, err = relay.communicate(timeout=60)
        assert relay.returncode == 128 + sig, err
        assert err.strip() == f"error: interrupted by {signal.Signals(sig).name}"
        wait_for(lambda: not processes_with(marker), 5, "the agent's whole tree to end")
    assert this_clone.open_session(Repo.discover(repo)) is None


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_signals_to_a_foreground_dispatch_run_end_its_backend_tree_and_record_it(repo: Path, way: str,
                                                                               sig: int) -> None:
    marker = _marker()
    script = repo / "backend.sh"  # a backend that leaves a child behind and takes a moment to exit
    script.write_text(f"#!/bin/sh\nsleep {marker} &\ntrap 'sleep 1; exit 143' TERM\nsleep {marker}\n")
    script.chmod(0o755)
    git("config", "handoff.backend.slow.command", "./backend.sh", cwd=repo)
    assert run("init").rc == 0
    run_id = run("dispatch", "new", "--backend", "slow", "--slug", "slow-errand", stdin="do it\n").out.strip()
    proc = _start(way, repo, "dispatch", "run", run_id)
    with ended_afterwards(proc, marker):
        wait_for(lambda: len(processes_with(marker)) == 2, 60, "the backend and its background child")
        _barrage(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
        assert _expected_status(way, sig, proc.returncode), (proc.returncode, err)
        assert "Traceback" not in err
        wait_for(lambda: not processes_with(marker), 5, "the backend's whole tree to end")
    record = json.loads(dispatch_record(run_id, cwd=repo))
    assert record["status"] == "failed" and record["error"].startswith("interrupted"), record
    assert record["exit_status"] == 128 + sig


def test_the_interrupted_exit_status_names_the_signal() -> None:
    """The mapping in one place: Ctrl-C 130, SIGTERM 143, SIGHUP 129, a bare KeyboardInterrupt 130."""
    from git_handoff.core.errors import Signalled, interrupt_exit_code

    assert [interrupt_exit_code(Signalled(s)) for s in SIGNALS] == [130, 143, 129]
    assert interrupt_exit_code(KeyboardInterrupt()) == 130


@pytest.mark.parametrize("way", list(WAYS))
def test_a_closed_terminal_ends_the_relay_cleanly(repo: Path, way: str) -> None:
    """The relay on a real terminal (a pty as its controlling terminal) whose window is
    closed: the kernel sends SIGHUP and the terminal takes no more output. The cleanup
    must not stop at the first line it can no longer print (the exit status was 1)."""
    import fcntl
    import pty
    import select
    import termios

    assert run("init").rc == 0
    assert run("add", "Write a.txt", "--id", "a", "--check", "test -f a.txt").rc == 0
    marker = _marker()
    agent = _agent(repo, marker)
    master, slave = pty.openpty()

    def controlling_terminal() -> None:
        _default_signals()
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    relay = subprocess.Popen([*WAYS[way], "relay", "--agent", agent], cwd=repo, stdin=slave, stdout=slave,
                             stderr=slave, preexec_fn=controlling_terminal)
    os.close(slave)
    try:
        deadline = time.monotonic() + 60
        while len(processes_with(marker)) < 2:  # read what it prints meanwhile, as a terminal does
            assert time.monotonic() < deadline, "the agent never started"
            if select.select([master], [], [], 0.1)[0]:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        os.close(master)  # the window closes
        relay.wait(timeout=60)
    finally:
        if relay.poll() is None:
            relay.kill()
            relay.wait()
    assert _expected_status(way, signal.SIGHUP, relay.returncode), relay.returncode
    wait_for(lambda: not processes_with(marker), 5, "the agent's whole tree to end")
    assert this_clone.open_session(Repo.discover(repo)) is None
    record = _relay_record(repo)
    assert record["state"] == "stopped" and record["reason"] == "interrupted by SIGHUP", record
