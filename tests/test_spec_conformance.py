"""SPEC §4 conformance: every verb's spelling, exit codes and the --json / error-line contract."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run


def test_hooks_status_accepts_agent_claude(repo: Path) -> None:
    assert run("init").rc == 0
    before = run("hooks", "status", "--agent", "claude", "--json")
    assert before.rc == 0, before.err
    assert json.loads(before.out)["installed"] is False
    assert run("hooks", "install", "--agent", "claude").rc == 0
    after = run("hooks", "status", "--agent", "claude", "--json")
    assert after.rc == 0 and json.loads(after.out)["installed"] is True
    human = run("hooks", "status", "--agent", "claude")
    assert human.rc == 0 and "installed" in human.out
