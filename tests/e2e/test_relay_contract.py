"""Small relay contracts: a refused relay changes nothing; with --tmux the agent gets the
relay's environment; a relay killed with SIGKILL and started again adopts what it left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from git_handoff.agent_cli import agent_process
from git_handoff.infra import procs
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import handoff
from git_handoff.state import this_clone
from git_handoff.state.store import StateStore
from tests.support.processes import processes_with, sigkill_once, wait_for
from tests.support.remotes import clones, ok, remote_url  # noqa: F401
from tests.support.repo import git, run, state_head

AGENT = f"{sys.executable} -m git_handoff.agents.scripted"


def test_a_relay_refused_for_an_untrusted_fetched_init_command_writes_nothing(
        clones: Callable[[str], Path]) -> None:  # noqa: F811
    """Exit 2 means nothing was changed: a refused relay commits no `LOCK relay
    started` nor `LOCK relay stopped: interrupted` to the state."""
    a = clones("a")
    ok("init", "--init-command", "echo ready", cwd=a)
    ok("add", "x", "--id", "t", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    before = state_head(b)
    refs = git("for-each-ref", cwd=b)
    r = run("relay", "--agent", AGENT, cwd=b)
    assert r.rc == 2, r
    assert len(r.err.splitlines()) == 1 and "init command" in r.err and "trust" in r.err, r.err
    assert state_head(b) == before
    assert git("for-each-ref", cwd=b) == refs
    assert "relay" not in run("log", "--type", "LOCK", cwd=b).out


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
def test_relay_tmux_gives_the_agent_its_own_environment_on_a_server_already_running(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tmux server already running on the socket (--tmux-socket, or one left behind)
    starts new sessions with its own environment: the agent lacked what the relay was
    given (ANTHROPIC_BASE_URL, API keys, PATH) and had what the server had."""
    assert run("init").rc == 0
    assert run("add", "Write a.txt", "--id", "a", "--check", "test -f a.txt").rc == 0
    socket_name = f"handoff-env-{os.getpid()}"
    server_env = {"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"],
                  "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/server", "SERVER_ONLY": "from-the-server"}
    subprocess.run(["tmux", "-L", socket_name, "new-session", "-d", "-s", "other", "sleep 600"],
                   env=server_env, check=True)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/relay")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-relay 'quoted' $not-expanded")
    monkeypatch.setenv("PATH", f"{tmp_path / 'relay-bin'}:{os.environ['PATH']}")
    seen = tmp_path / "seen.json"
    agent = (f"{sys.executable} -c 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], \"w\"))' "
             f"{seen} && {AGENT}")
    try:
        res = run("relay", "--tmux", "--tmux-socket", socket_name, "--agent", agent, "--ack-timeout", "60")
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert res.rc == 0, res.out + res.err
    env = json.loads(seen.read_text())
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/relay"
    assert env["ANTHROPIC_API_KEY"] == "sk-relay 'quoted' $not-expanded"
    assert env["PATH"] == os.environ["PATH"]
    assert "SERVER_ONLY" not in env
    assert env.get("TMUX")  # tmux's own, for the pane
    assert not list((repo / ".git" / "handoff" / "relay").glob("*.env"))  # the keys are not left on disk



def _agent_for_a_restart(repo: Path, marker: str, *, works_on: bool) -> str:
    """Session 1: acknowledge, claim, leave a child in the background, then work on (or
    exit without finishing). Later sessions finish the task."""
    foreground = f"exec sleep {marker}" if works_on else "sleep 1; exit 0"
    script = repo / "agent.sh"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$HANDOFF_SESSION" = 1 ]; then\n'
        "  git handoff ack >/dev/null && git handoff claim a >/dev/null || exit 9\n"
        f"  sleep {marker} &\n"
        f"  {foreground}\n"
        "fi\n"
        "git handoff ack && git handoff claim a && touch a.txt && git handoff done a\n"
    )
    script.chmod(0o755)
    (repo / ".gitignore").write_text("agent.sh\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore the agent", cwd=repo)
    return "./agent.sh"


def _relay_killed_while_session_1_works(repo: Path, agent: str, marker: str) -> None:
    first = subprocess.Popen([sys.executable, "-m", "git_handoff", "relay", "--agent", agent], cwd=repo,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    sigkill_once(first, lambda: wait_for(lambda: bool(processes_with(marker)), 60, "the agent's background child"))


@pytest.mark.slow
@pytest.mark.parametrize("works_on", [True, False], ids=["agent-still-working", "agent-gone-child-left"])
def test_a_relay_killed_with_sigkill_and_started_again_adopts_what_it_left(repo: Path, works_on: bool) -> None:
    """SIGKILL the relay while its agent works with a child in the background. The relay
    started again takes the session over: it ends the agent's whole tree (an agent still
    working once its session is over, here at --session-timeout; one already gone at
    once: the child it left too), closes the session with its
    document, and the next session recovers the claim and completes the task."""
    assert run("init").rc == 0
    assert run("add", "Write a.txt", "--id", "a", "--check", "test -f a.txt").rc == 0
    marker = f"{6000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9}"
    agent = _agent_for_a_restart(repo, marker, works_on=works_on)
    _relay_killed_while_session_1_works(repo, agent, marker)
    status_file = repo / ".git" / "handoff" / "relay" / "session-1.status"
    if not works_on:
        wait_for(status_file.exists, 30, "the agent to exit")
    assert len(processes_with(marker)) == (2 if works_on else 1)  # orphaned, still running
    res = run("relay", "--agent", agent, "--session-timeout", "8")
    assert res.rc == 0, res.out + res.err
    assert "taking over session 1" in res.out
    wait_for(lambda: not processes_with(marker), 5, "the agent's whole tree to end")
    store = StateStore(Repo.discover(repo), session=0)
    assert this_clone.open_session(store.repo) is None
    assert handoff.handed_off(store, 1) and handoff.handed_off(store, 2)
    recovered = [line for line in run("log", "--type", "RECOVERY").out.splitlines() if "[a]" in line]
    assert recovered and all("[SESSION-2]" in line for line in recovered), run("log").out
    task = store.snapshot().task("a")
    assert task is not None and task.status == "completed"
    assert int(store.snapshot().meta().get("session_count") or 0) == 2


@pytest.mark.slow
def test_a_restarted_relay_never_waits_on_or_signals_a_process_that_only_has_its_agents_number(
        repo: Path) -> None:
    """After a reboot the dead relay's record names a pid that another process now has: the
    relay started again must not wait for it, nor end it."""
    assert run("init").rc == 0
    assert run("add", "Write a.txt", "--id", "a", "--check", "test -f a.txt").rc == 0
    marker = f"{6000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9}"
    agent = _agent_for_a_restart(repo, marker, works_on=True)
    _relay_killed_while_session_1_works(repo, agent, marker)
    relay_dir = repo / ".git" / "handoff" / "relay"
    launched = agent_process.remembered(relay_dir, 1)
    assert launched is not None and launched.token
    procs.kill_tree(launched.pid, launched.token)  # the machine went down...
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)  # ...and this got the number
    try:
        # (what the relay's own record of its agent looks like once the pid was reused)
        agent_process.remember(relay_dir, 1, agent_process.Agent(pid=bystander.pid, status_file=launched.status_file,
                                                       token=launched.token))
        res = run("relay", "--agent", agent, "--session-timeout", "30")
        assert res.rc == 0, res.out + res.err
        assert "taking over session 1" in res.out and "still running" not in res.out
        assert bystander.poll() is None  # not signalled
    finally:
        bystander.kill()
        bystander.wait()
    store = StateStore(Repo.discover(repo), session=0)
    task = store.snapshot().task("a")
    assert task is not None and task.status == "completed"
