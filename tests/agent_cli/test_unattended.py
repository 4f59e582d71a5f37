"""`hooks install|uninstall|status --agent claude --unattended`: the one answer to Claude
Code's first-run screens a project may give itself (tests/e2e/test_claude_unattended.py
shows it passing the real CLI's bypass warning)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.repo import run

LOCAL = Path(".claude") / "settings.local.json"


def _porcelain(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True,
                          text=True).stdout


def test_install_sets_the_local_setting_keeps_the_users_and_hides_the_file_from_git(repo: Path) -> None:
    (repo / ".claude").mkdir()
    (repo / LOCAL).write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}}))
    r = run("hooks", "install", "--agent", "claude", "--unattended", "--no-mcp", "--json")
    assert r.rc == 0, r.err
    assert r.json()["unattended"]["set"] == ["skipDangerousModePermissionPrompt"]
    assert json.loads((repo / LOCAL).read_text()) == {"permissions": {"allow": ["Bash(ls)"]},
                                                      "skipDangerousModePermissionPrompt": True}
    assert "settings.local.json" not in _porcelain(repo) and ".claude/settings.json" in _porcelain(repo)
    # the shared settings never get it: Claude Code would ignore it there
    assert "skipDangerousModePermissionPrompt" not in (repo / ".claude" / "settings.json").read_text()
    again = run("hooks", "install", "--agent", "claude", "--unattended", "--no-mcp", "--json")
    assert again.rc == 0 and again.json()["unattended"]["set"] == []
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count("/.claude/settings.local.json") == 1
    status = run("hooks", "status", "--agent", "claude", "--json")
    assert status.rc == 0 and status.json()["unattended"] is True
    human = run("hooks", "status", "--agent", "claude")
    assert "unattended" in human.out and "yes" in human.out


def test_the_human_output_says_what_only_the_user_config_can_hold(repo: Path) -> None:
    r = run("hooks", "install", "--agent", "claude", "--unattended", "--no-mcp")
    assert r.rc == 0, r.err
    for key in ("skipDangerousModePermissionPrompt", "hasCompletedOnboarding", "hasTrustDialogAccepted",
                "customApiKeyResponses", "~/.claude.json"):
        assert key in r.out, r.out
    help_text = run("hooks", "install", "--help").out
    assert "--unattended" in help_text and "~/.claude.json" in help_text


def test_uninstall_unattended_removes_only_that_setting(repo: Path) -> None:
    assert run("hooks", "install", "--agent", "claude", "--unattended", "--no-mcp").rc == 0
    assert run("hooks", "uninstall", "--agent", "claude", "--unattended", "--no-mcp").rc == 0
    assert not (repo / LOCAL).exists()
    (repo / LOCAL).write_text(json.dumps({"skipDangerousModePermissionPrompt": True, "model": "x"}))
    assert run("hooks", "uninstall", "--agent", "claude", "--unattended", "--no-mcp").rc == 0
    assert json.loads((repo / LOCAL).read_text()) == {"model": "x"}
    assert run("hooks", "status", "--agent", "claude", "--json").json()["unattended"] is False


@pytest.mark.parametrize("content", ["{not json", "[1, 2]"])
def test_unreadable_local_settings_refuse_and_change_nothing(repo: Path, content: str) -> None:
    (repo / ".claude").mkdir()
    (repo / LOCAL).write_text(content)
    before = _porcelain(repo)
    r = run("hooks", "install", "--agent", "claude", "--unattended")
    assert r.rc == 2 and r.err.startswith("error: ") and len(r.err.strip().splitlines()) == 1
    assert "settings.local.json" in r.err
    assert (repo / LOCAL).read_text() == content
    assert not (repo / ".claude" / "settings.json").exists() and not (repo / ".mcp.json").exists()
    assert _porcelain(repo) == before


@pytest.mark.parametrize("agent", [[], ["--agent", "codex"], ["--agent", "gemini"]])
def test_unattended_is_for_claude_only(repo: Path, agent: list[str]) -> None:
    before = _porcelain(repo)
    r = run("hooks", "install", *agent, "--unattended")
    assert r.rc == 2 and r.err.startswith("error: --unattended is for --agent claude")
    assert _porcelain(repo) == before and not (repo / ".git" / "hooks" / "post-commit").exists()


def test_install_approves_the_mcp_server_it_registers_keeping_the_users_list(repo: Path) -> None:
    """interactive claude asks "New MCP server found in this project: handoff" before anything
    else (the relay waited out three ACK timeouts on it); --unattended answers it where the
    project may, beside the bypass answer, unless --no-mcp."""
    (repo / ".claude").mkdir()
    (repo / LOCAL).write_text(json.dumps({"enabledMcpjsonServers": ["docs"], "model": "x"}))
    r = run("hooks", "install", "--agent", "claude", "--unattended", "--json")
    assert r.rc == 0, r.err
    assert r.json()["unattended"]["set"] == ["skipDangerousModePermissionPrompt", "enabledMcpjsonServers"]
    assert json.loads((repo / LOCAL).read_text()) == {"enabledMcpjsonServers": ["docs", "handoff"], "model": "x",
                                                      "skipDangerousModePermissionPrompt": True}
    again = run("hooks", "install", "--agent", "claude", "--unattended", "--json")
    assert again.rc == 0 and again.json()["unattended"]["set"] == []
    human = run("hooks", "install", "--agent", "claude")
    assert "git add .claude/settings.json .mcp.json" in human.out, human.out  # what to commit, both files
    r = run("hooks", "uninstall", "--agent", "claude", "--unattended", "--json")
    assert r.rc == 0 and r.json()["unattended"]["removed"] == ["skipDangerousModePermissionPrompt",
                                                                "enabledMcpjsonServers"]
    assert json.loads((repo / LOCAL).read_text()) == {"enabledMcpjsonServers": ["docs"], "model": "x"}


def test_no_mcp_leaves_the_mcp_approval_alone(repo: Path) -> None:
    r = run("hooks", "install", "--agent", "claude", "--unattended", "--no-mcp", "--json")
    assert r.rc == 0 and "enabledMcpjsonServers" not in json.loads((repo / LOCAL).read_text())
    assert "git add .claude/settings.json;" in run("hooks", "install", "--agent", "claude", "--no-mcp").out
