"""`hooks install --agent NAME` turns the command server on for the repository
(ops/hook_server.py, docs/command-server.md): where nobody set `handoff.commandServer`,
never over a value the user set, not with --no-command-server; uninstall takes it back
only when install set it and no agent's hooks remain; install, uninstall and status say
whether it is on and how to turn it off."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.support.repo import git, run

TURN_OFF = "git config handoff.commandServer false"


@pytest.fixture(autouse=True)
def config_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config's answers, not this environment's: the suite's second way
    (HANDOFF_COMMAND_SERVER=1, tests/conftest.py) would add its variable to each."""
    monkeypatch.delenv("HANDOFF_COMMAND_SERVER", raising=False)


def local_value(repo: Path) -> str | None:
    return git("config", "--local", "--get", "handoff.commandServer", cwd=repo, check=False) or None


def stop_command(repo: Path) -> str:
    data = json.loads((repo / ".claude" / "settings.json").read_text())
    return str(data["hooks"]["Stop"][0]["hooks"][0]["command"])


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_installing_an_agents_hooks_turns_the_server_on_and_says_how_to_turn_it_off(repo: Path, agent: str) -> None:
    r = run("hooks", "install", "--agent", agent, "--no-mcp", "--json")
    assert r.rc == 0, r.err
    server = r.json()["command_server"]
    assert server == {"on": True, "value": "true", "set_by_install": True, "changed": "set",
                      "turn_off": TURN_OFF, "turn_on": "git config handoff.commandServer true"}
    assert local_value(repo) == "true"
    text = run("hooks", "install", "--agent", agent, "--no-mcp")
    assert text.rc == 0
    assert f"command server: on for this repository (handoff.commandServer true, set by hooks install); " \
           f"turn it off: {TURN_OFF}" in text.out
    status = run("hooks", "status", "--json").json()["command_server"]
    assert status["on"] is True and status["set_by_install"] is True and status["turn_off"] == TURN_OFF
    assert f"turn it off: {TURN_OFF}" in run("hooks", "status").out
    assert f"turn it off: {TURN_OFF}" in run("hooks", "status", "--agent", agent).out


def test_claude_code_hooks_take_the_fast_client_on_a_fresh_repository(repo: Path) -> None:
    """The server is turned on before the hooks are written, so the first install writes
    the fast client's form (docs/command-server.md); --no-command-server the plain one."""
    r = run("hooks", "install", "--agent", "claude", "--no-mcp")
    assert r.rc == 0 and "command server: on for this repository (turned on now" in r.out
    command = stop_command(repo)
    assert shlex.split(command)[:2] == ["[", "-x"] and command.endswith("; exec git handoff hook claude-stop")
    assert run("hooks", "uninstall", "--agent", "claude").rc == 0
    assert local_value(repo) is None
    r = run("hooks", "install", "--agent", "claude", "--no-mcp", "--no-command-server")
    assert r.rc == 0
    assert stop_command(repo) == "git handoff hook claude-stop"
    assert local_value(repo) is None
    assert "command server: off (handoff.commandServer unset, as --no-command-server asked); " \
           "turn it on: git config handoff.commandServer true" in r.out


@pytest.mark.parametrize("where", ["local", "global"])
@pytest.mark.parametrize("value", ["false", "true", "no"])
def test_a_value_the_user_set_is_kept_and_never_taken_back(repo: Path, where: str, value: str) -> None:
    git("config", f"--{where}", "handoff.commandServer", value, cwd=repo)
    r = run("hooks", "install", "--agent", "claude", "--no-mcp", "--json")
    assert r.rc == 0
    server = r.json()["command_server"]
    on = value == "true"
    assert server["changed"] == "kept" and server["on"] is on and server["set_by_install"] is False
    assert server["value"] == ("true" if on else "false")
    assert git("config", f"--{where}", "--get", "handoff.commandServer", cwd=repo) == value
    if where == "global":
        assert local_value(repo) is None
    assert (stop_command(repo) == "git handoff hook claude-stop") is not on
    text = run("hooks", "status").out
    assert ("as you set it); turn it off" if on else "as you set it); turn it on") in text
    assert run("hooks", "uninstall", "--agent", "claude").rc == 0
    assert git("config", f"--{where}", "--get", "handoff.commandServer", cwd=repo) == value


def test_uninstall_turns_it_off_only_once_no_agents_hooks_remain(repo: Path) -> None:
    assert run("hooks", "install", "--agent", "claude", "--no-mcp").rc == 0
    assert run("hooks", "install", "--agent", "codex", "--no-mcp").rc == 0
    r = run("hooks", "uninstall", "--agent", "claude", "--no-mcp", "--json")
    assert r.rc == 0 and r.json()["command_server"]["changed"] == "kept"
    assert local_value(repo) == "true"  # codex's hooks still fire at every turn
    r = run("hooks", "uninstall", "--agent", "codex", "--no-mcp")
    assert r.rc == 0 and "command server: off (handoff.commandServer unset: hooks install had turned it on)" in r.out
    assert local_value(repo) is None
    status = run("hooks", "status", "--json").json()["command_server"]
    assert status["on"] is False and status["set_by_install"] is False


def test_a_value_the_user_changed_after_install_is_theirs(repo: Path) -> None:
    assert run("hooks", "install", "--agent", "gemini", "--no-mcp").rc == 0
    git("config", "handoff.commandServer", "false", cwd=repo)
    status = run("hooks", "status", "--json").json()["command_server"]
    assert status["on"] is False and status["set_by_install"] is False
    r = run("hooks", "uninstall", "--agent", "gemini", "--no-mcp", "--json")
    assert r.rc == 0 and r.json()["command_server"]["changed"] == "kept"
    assert local_value(repo) == "false"
    # and the record is gone: a later install and uninstall of the user's own `true` keep it
    git("config", "handoff.commandServer", "true", cwd=repo)
    assert run("hooks", "install", "--agent", "gemini", "--no-mcp").rc == 0
    assert run("hooks", "uninstall", "--agent", "gemini", "--no-mcp").rc == 0
    assert local_value(repo) == "true"


def test_the_post_commit_hook_leaves_the_server_alone(repo: Path) -> None:
    assert run("hooks", "install").rc == 0
    assert local_value(repo) is None
    assert run("hooks", "uninstall").rc == 0
    assert local_value(repo) is None


def _snapshot(repo: Path) -> tuple[str, list[str]]:
    return ((repo / ".git" / "config").read_text(),
            sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if ".git/objects" not in str(p)))


@pytest.mark.parametrize("args", [
    ["hooks", "install", "--no-command-server"],  # the post-commit hook turns nothing on
    ["hooks", "install", "--agent", "codex", "--unattended", "--no-command-server"],
    ["hooks", "install", "--agent", "nope"],
    ["hooks", "uninstall", "--no-command-server"],  # not an option of uninstall
], ids=["post-commit", "unattended-codex", "unknown-agent", "uninstall"])
def test_bad_combinations_exit_2_and_change_nothing(repo: Path, args: list[str]) -> None:
    before = _snapshot(repo)
    r = run(*args)
    assert r.rc == 2 and r.err.startswith(("error:", "Usage:")), r.err
    assert _snapshot(repo) == before


def test_a_refused_install_leaves_the_config_as_it_was(repo: Path) -> None:
    """The server is turned on first (so the hooks take its form); a settings file the
    install cannot merge into takes it back: nothing changed."""
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{broken")
    before = _snapshot(repo)
    r = run("hooks", "install", "--agent", "claude")
    assert r.rc == 2 and r.err.startswith("error:")
    assert _snapshot(repo) == before and local_value(repo) is None


def test_status_says_when_this_environment_overrides_the_config(repo: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert run("hooks", "install", "--agent", "claude", "--no-mcp").rc == 0
    monkeypatch.setenv("HANDOFF_COMMAND_SERVER", "0")
    status = run("hooks", "status", "--json").json()["command_server"]
    assert status["on"] is True and status["environment"] == "HANDOFF_COMMAND_SERVER=0"
    assert "HANDOFF_COMMAND_SERVER=0 in this environment wins over it" in run("hooks", "status").out
