"""`hooks install --agent codex|gemini` registers `git handoff mcp` in that agent's MCP
configuration too (Codex: [mcp_servers.handoff] in the project's .codex/config.toml;
Gemini: mcpServers.handoff in .gemini/settings.json), by the same rules as .mcp.json for
Claude: every user entry kept, uninstall removes only ours, status reports it, a file
that cannot be merged into refuses with exit 2 and nothing changed."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.support.repo import Result, run

EXE = str(Path(sys.executable).parent / "git-handoff")
OURS = {"command": EXE, "args": ["mcp"]}
# Gemini's entry also sets the connection timeout (mcp_config.LOCATIONS): `gemini mcp list`
# waits 5 s for a server without one
OURS_GEMINI = {**OURS, "timeout": 600_000}
USER_TOML = """# my Codex settings for this project
model = "o-mini"  # keep this comment

[mcp_servers.db]
command = "db-mcp"
args = ["--ro"]  # read-only
"""


@pytest.fixture(autouse=True)
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "codex-home"
    path.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(path))
    return path


def ok(*args: str) -> Result:
    result = run(*args)
    assert result.rc == 0, f"git handoff {' '.join(args)}: rc={result.rc} err={result.err}"
    return result


def ok_json(*args: str) -> dict[str, Any]:
    """`ok(*args)` of a command given --json: its answer parsed (the hooks commands answer a
    dict of their own, with no TypedDict in the package)."""
    answer: dict[str, Any] = ok(*args).json()
    return answer


def codex_toml(repo: Path) -> dict[str, Any]:
    return tomllib.loads((repo / ".codex" / "config.toml").read_text())


def gemini_json(repo: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((repo / ".gemini" / "settings.json").read_text())
    return config


def test_codex_install_keeps_the_users_toml_and_its_comments(repo: Path) -> None:
    (repo / ".codex").mkdir()
    (repo / ".codex" / "config.toml").write_text(USER_TOML)
    result = ok_json("hooks", "install", "--agent", "codex", "--json")
    config = repo / ".codex" / "config.toml"
    assert result["mcp"] == {"config": str(config), "registered": True, "server": OURS, "added": True}
    text = config.read_text()
    assert text.startswith(USER_TOML)  # comments, order and layout untouched; ours appended
    assert codex_toml(repo)["mcp_servers"] == {"db": {"command": "db-mcp", "args": ["--ro"]}, "handoff": OURS}

    status = ok_json("hooks", "status", "--agent", "codex", "--json")
    assert status["mcp"] == {"config": str(config), "registered": True, "server": OURS}
    assert "mcp server 'handoff': registered" in ok("hooks", "status", "--agent", "codex").out
    assert "mcp server 'handoff' (.codex/config.toml): registered" in ok("hooks", "status").out
    assert ok_json("hooks", "install", "--agent", "codex", "--json")["mcp"]["added"] is False
    assert config.read_text() == text  # a second install changes nothing

    out = ok_json("hooks", "uninstall", "--agent", "codex", "--json")
    assert out["mcp"]["removed"] is True and out["mcp"]["registered"] is False
    assert config.read_text() == USER_TOML
    assert "not registered" in ok("hooks", "status", "--agent", "codex").out


def test_codex_a_file_install_created_goes_with_uninstall(repo: Path) -> None:
    out = ok("hooks", "install", "--agent", "codex")
    assert f"MCP server 'handoff' in {repo / '.codex' / 'config.toml'}: {EXE} mcp" in out.out
    assert "Commit .codex/hooks.json and .codex/config.toml" in out.out
    assert codex_toml(repo) == {"mcp_servers": {"handoff": OURS}}
    ok("hooks", "uninstall", "--agent", "codex")
    assert not (repo / ".codex").exists()


def test_gemini_shares_settings_json_with_the_hooks_and_keeps_user_entries(repo: Path) -> None:
    mine: dict[str, Any] = {"mcpServers": {"db": {"command": "db-mcp", "env": {"X": "1"}}}, "theme": "dark",
            "hooks": {"BeforeTool": [{"hooks": [{"type": "command", "command": "my-check"}]}]}}
    (repo / ".gemini").mkdir()
    (repo / ".gemini" / "settings.json").write_text(json.dumps(mine, indent=4))
    result = ok_json("hooks", "install", "--agent", "gemini", "--json")
    assert result["installed"] is True and result["mcp"]["registered"] is True
    merged = gemini_json(repo)
    assert merged["mcpServers"] == {**mine["mcpServers"], "handoff": OURS_GEMINI}
    assert merged["theme"] == "dark" and merged["hooks"]["BeforeTool"] == mine["hooks"]["BeforeTool"]
    assert ok_json("hooks", "status", "--agent", "gemini", "--json")["mcp"]["registered"] is True

    ok("hooks", "uninstall", "--agent", "gemini")
    assert gemini_json(repo) == mine


def test_gemini_a_file_install_created_goes_with_uninstall(repo: Path) -> None:
    out = ok("hooks", "install", "--agent", "gemini").out
    assert "Commit .gemini/settings.json (git add .gemini/settings.json; git commit)" in out
    assert "these hooks and the MCP server" in out
    assert gemini_json(repo)["mcpServers"] == {"handoff": OURS_GEMINI}
    ok("hooks", "uninstall", "--agent", "gemini")
    assert not (repo / ".gemini").exists()


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_no_mcp_leaves_the_mcp_configuration_alone(repo: Path, agent: str) -> None:
    out = ok("hooks", "install", "--agent", agent, "--no-mcp")
    assert "MCP server" not in out.out and "Commit " in out.out
    if agent == "codex":
        assert not (repo / ".codex" / "config.toml").exists()
    else:
        assert "mcpServers" not in gemini_json(repo)
    ok("hooks", "install", "--agent", agent)
    ok("hooks", "uninstall", "--agent", agent, "--no-mcp")
    assert ok_json("hooks", "status", "--agent", agent, "--json")["mcp"]["registered"] is True


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_a_users_own_server_named_handoff_is_never_overwritten(repo: Path, agent: str) -> None:
    if agent == "codex":
        path, content = repo / ".codex" / "config.toml", '[mcp_servers.handoff]\ncommand = "their-tool"\n'
    else:
        path, content = repo / ".gemini" / "settings.json", '{"mcpServers": {"handoff": {"command": "their-tool"}}}'
    path.parent.mkdir()
    path.write_text(content)
    result = run("hooks", "install", "--agent", agent, "--json")
    assert result.rc == 0 and "not git handoff's" in result.json()["mcp"]["problem"]
    assert "warning:" in run("hooks", "install", "--agent", agent).err
    ok("hooks", "uninstall", "--agent", agent)
    if agent == "codex":
        assert path.read_text() == content
    else:
        assert json.loads(path.read_text()) == json.loads(content)


@pytest.mark.parametrize(("agent", "content"), [
    ("codex", "[mcp_servers\nbroken"),
    ("codex", 'mcp_servers = "not a table"\n'),
    ("codex", 'mcp_servers = { handoff = 3 }\n'),
    ("gemini", "{not json"),
    ("gemini", '{"mcpServers": []}'),
])
def test_a_broken_mcp_configuration_refuses_before_anything_changes(repo: Path, agent: str,
                                                                    content: str, codex_home: Path) -> None:
    path = repo / (".codex/config.toml" if agent == "codex" else ".gemini/settings.json")
    path.parent.mkdir()
    path.write_text(content)
    before = sorted(p.name for p in path.parent.iterdir())
    result = run("hooks", "install", "--agent", agent)
    assert result.rc == 2 and result.err.startswith("error: ") and str(path) in result.err
    assert result.err.count("\n") == 1
    assert path.read_text() == content and sorted(p.name for p in path.parent.iterdir()) == before
    assert not (codex_home / "config.toml").exists()  # no hook trust recorded either
    result = run("hooks", "uninstall", "--agent", agent)
    assert result.rc == 2 and path.read_text() == content
    status = run("hooks", "status", "--agent", agent, "--json")
    assert status.rc == 0 and status.json()["mcp"]["registered"] is False and status.json()["mcp"]["problem"]
