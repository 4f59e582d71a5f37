"""`hooks install --agent claude` registers `git handoff mcp` in the project's .mcp.json,
keeping every entry of the user's; uninstall removes only ours; status reports it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from git_handoff.agent_cli import mcp_config
from tests.support.repo import Result, run


def handoff(*args: str, rc: int = 0) -> Result:
    result = run(*args)
    assert result.rc == rc, f"git handoff {' '.join(args)}: rc={result.rc} err={result.err}"
    return result


def handoff_json(*args: str, rc: int = 0) -> dict[str, Any]:
    """`handoff(*args)` of a command given --json: its answer parsed (the hooks commands
    answer a dict of their own, with no TypedDict in the package)."""
    answer: dict[str, Any] = handoff(*args, rc=rc).json()
    return answer


def mcp_json(repo: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((repo / ".mcp.json").read_text())
    return config


def test_install_registers_the_installed_executable_and_status_reports_it(repo: Path) -> None:
    result = handoff_json("hooks", "install", "--agent", "claude", "--json")
    entry = mcp_json(repo)["mcpServers"]["handoff"]
    exe = Path(sys.executable).parent / "git-handoff"
    assert exe.exists()  # the console script of this very installation
    assert entry == {"command": str(exe), "args": ["mcp"]}
    assert result["mcp"]["registered"] is True and result["mcp"]["added"] is True
    status = handoff_json("hooks", "status", "--agent", "claude", "--json")
    assert status["mcp"] == {"mcp_json": str(repo / ".mcp.json"), "registered": True, "server": entry}
    text = run("hooks", "status", "--agent", "claude").out
    assert "mcp server 'handoff': registered" in text

    before = (repo / ".mcp.json").read_bytes()
    again = handoff_json("hooks", "install", "--agent", "claude", "--json")
    assert again["mcp"]["added"] is False and (repo / ".mcp.json").read_bytes() == before


def test_every_user_entry_is_kept_and_uninstall_removes_only_ours(repo: Path) -> None:
    mine: dict[str, Any] = {"mcpServers": {"db": {"command": "db-mcp", "args": ["--ro"], "env": {"X": "1"}}},
            "someOtherKey": [1, 2, 3]}
    (repo / ".mcp.json").write_text(json.dumps(mine, indent=4))
    handoff("hooks", "install", "--agent", "claude")
    merged = mcp_json(repo)
    assert merged["mcpServers"]["db"] == mine["mcpServers"]["db"] and merged["someOtherKey"] == [1, 2, 3]
    assert list(merged["mcpServers"]) == ["db", "handoff"]

    out = handoff_json("hooks", "uninstall", "--agent", "claude", "--json")
    assert out["mcp"]["removed"] is True and out["mcp"]["registered"] is False
    assert mcp_json(repo) == {**mine}
    assert not (repo / ".claude" / "settings.json").exists() or "handoff" not in (
        repo / ".claude" / "settings.json").read_text()


def test_a_file_install_created_goes_with_uninstall(repo: Path) -> None:
    handoff("hooks", "install", "--agent", "claude")
    assert (repo / ".mcp.json").exists()
    handoff("hooks", "uninstall", "--agent", "claude")
    assert not (repo / ".mcp.json").exists()


def test_a_users_own_server_named_handoff_is_never_overwritten(repo: Path) -> None:
    theirs = {"mcpServers": {"handoff": {"command": "their-tool", "args": []}}}
    (repo / ".mcp.json").write_text(json.dumps(theirs))
    result = run("hooks", "install", "--agent", "claude", "--json")
    assert result.rc == 0
    assert mcp_json(repo) == theirs
    assert "not git handoff's" in result.json()["mcp"]["problem"]
    assert "warning:" in run("hooks", "install", "--agent", "claude").err
    handoff("hooks", "uninstall", "--agent", "claude")
    assert mcp_json(repo) == theirs


def test_no_mcp_leaves_the_file_alone(repo: Path) -> None:
    handoff("hooks", "install", "--agent", "claude", "--no-mcp")
    assert (repo / ".claude" / "settings.json").exists() and not (repo / ".mcp.json").exists()
    handoff("hooks", "install", "--agent", "claude")
    handoff("hooks", "uninstall", "--agent", "claude", "--no-mcp")
    assert "handoff" in mcp_json(repo)["mcpServers"]


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"mcpServers": []}'])
def test_an_unreadable_mcp_json_refuses_before_anything_changes(repo: Path, content: str) -> None:
    (repo / ".mcp.json").write_text(content)
    result = run("hooks", "install", "--agent", "claude")
    assert result.rc == 2 and result.err.startswith("error: ") and ".mcp.json" in result.err
    assert (repo / ".mcp.json").read_text() == content
    assert not (repo / ".claude").exists()


def test_without_an_installed_executable_the_entry_is_git_handoff_mcp(repo: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_config, "executable", lambda: None)
    handoff("hooks", "install", "--agent", "claude")
    assert mcp_json(repo)["mcpServers"]["handoff"] == {"command": "git", "args": ["handoff", "mcp"]}
    assert handoff_json("hooks", "status", "--agent", "claude", "--json")["mcp"]["registered"] is True
