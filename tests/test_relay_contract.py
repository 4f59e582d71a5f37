"""Small relay contracts: a refused relay changes nothing; with --tmux the agent gets the
relay's environment; a relay killed with SIGKILL and started again adopts what it left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.remotes import clones, ok, remote_url  # noqa: F401
from tests.support.repo import git, run, state_head

AGENT = f"{sys.executable} -m git_handoff.agents.scripted"


def test_a_relay_refused_for_an_untrusted_fetched_init_command_writes_nothing(
        clones: Callable[[str], Path]) -> None:  # noqa: F811
    """Exit 2 means nothing was changed (SPEC §4): the relay used to commit `LOCK relay
    started` and `LOCK relay stopped: interrupted` to the state before refusing."""
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
