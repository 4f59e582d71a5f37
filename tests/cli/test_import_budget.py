"""The hot commands import only what they use: the set of modules `next`, `status`, `claim`
and the Stop hook load (from `python -X importtime`), not their time. A read-only command
or a hook that pulls in the write side, the remote transport or the merge pays tens of
milliseconds on every call an agent makes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.repo import run

# What no read-only command and no Stop hook may import.
WRITE_SIDE = {
    "git_handoff.ops.tasks", "git_handoff.ops.work", "git_handoff.ops.attempts", "git_handoff.ops.claim",
    "git_handoff.ops.sessions", "git_handoff.ops.session_start", "git_handoff.ops.sync", "git_handoff.ops.sync_merge",
    "git_handoff.ops.sync_fold", "git_handoff.ops.history", "git_handoff.ops.relay", "git_handoff.core.merge",
    "git_handoff.core.field_merge",
    "git_handoff.infra.task_commands", "git_handoff.state.claim_journal", "git_handoff.state.notes",
    "tomlkit", "filelock",
}
# What no local command at all imports: the remote side, the other adapters.
ELSEWHERE = {
    "git_handoff.ops.sync", "git_handoff.ops.sync_merge", "git_handoff.ops.sync_fold", "git_handoff.core.merge",
    "git_handoff.core.field_merge", "git_handoff.dashboard", "git_handoff.mcp", "git_handoff.ops.relay", "git_handoff.ops.dispatch",
}


def imported(args: list[str], cwd: Path, stdin: str = "") -> set[str]:
    """The modules one `git handoff ARGS` imports, as `-X importtime` lists them."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "git_handoff", *args], cwd=cwd,
                          input=stdin.encode(), capture_output=True, env=os.environ.copy(), timeout=120)
    assert proc.returncode in (0, 1), proc.stderr.decode(errors="replace")[-500:]
    names = set()
    for line in proc.stderr.decode(errors="replace").splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    assert "git_handoff.state.store" in names  # the listing was read: the store is always there
    return names


def remote_modules(names: set[str]) -> set[str]:
    return {n for n in names if n.startswith("git_handoff.remote")}


@pytest.fixture
def worked(repo: Path) -> Path:
    assert run("init").rc == 0
    for i in range(3):
        assert run("add", f"T{i}", "--id", f"t{i}", "--check", "true").rc == 0
    return repo


@pytest.mark.parametrize("args", [["next", "--json"], ["status", "--json"], ["list", "--json"], ["show", "t1"]])
def test_read_only_commands_import_no_write_side(worked: Path, args: list[str]) -> None:
    names = imported(args, worked)
    assert not names & WRITE_SIDE, sorted(names & WRITE_SIDE)
    assert not remote_modules(names)
    assert not {n for n in names if n.split(".")[:2] == ["git_handoff", "agent_cli"]}


def test_the_stop_hook_imports_no_write_side(worked: Path) -> None:
    assert run("claim").rc == 0
    names = imported(["hook", "claude-stop"], worked, '{"session_id": "s", "stop_hook_active": false}')
    assert "git_handoff.ops.hook_decisions" in names
    assert not names & WRITE_SIDE, sorted(names & WRITE_SIDE)
    assert not remote_modules(names)


def test_claim_imports_no_remote_side(worked: Path) -> None:
    names = imported(["claim", "--json"], worked)
    assert "git_handoff.ops.claim" in names
    assert not names & ELSEWHERE, sorted(names & ELSEWHERE)
    assert not remote_modules(names)
    assert not names & {"tomlkit", "filelock", "git_handoff.ops.session_start", "git_handoff.ops.tasks"}


def test_no_regular_expression_is_compiled_at_import() -> None:
    """Importing the modules of the hot paths compiles no pattern of ours: each is compiled
    on first use (git_handoff.core.patterns)."""
    probe = (
        "import re, sys\n"
        "seen = []\n"
        "real = re.compile\n"
        "def spy(p, flags=0):\n"
        "    caller = sys._getframe(1).f_globals.get('__name__', '')\n"
        "    if caller.startswith('git_handoff'):\n"
        "        seen.append(caller)\n"
        "    return real(p, flags)\n"
        "re.compile = spy\n"
        "import git_handoff.cli, git_handoff.cli.tasks, git_handoff.cli.work, git_handoff.ops.hook_entry\n"
        "import git_handoff.ops.views, git_handoff.state.store, git_handoff.core.state_tree\n"
        "import git_handoff.core.attempt_record, git_handoff.core.decoding, git_handoff.core.field_checks\n"
        "print(sorted(set(seen)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ.copy(),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert proc.stdout.strip() == "[]"
