"""Small relay contracts: a refused relay changes nothing; a relay killed with SIGKILL
and started again adopts what it left."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

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
