"""The real Codex CLI and Gemini CLI see the MCP server `hooks install --agent codex|gemini`
registered in the project (each in a hermetic home of its own), and stop seeing it
after uninstall."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.agent_clis import codex_env, gemini_env, require_codex, require_gemini
from tests.support.repo import run

pytestmark = pytest.mark.slow  # real agent CLIs (node startup, a real MCP handshake)

EXE = str(Path(sys.executable).parent / "git-handoff")
DEAD_PORT = 9  # the model's address: nothing listens there, and `mcp list` never asks it


def _ok(*args: str) -> None:
    result = run(*args)
    assert result.rc == 0, result.err


def test_codex_mcp_list_shows_the_server_of_the_projects_config(repo: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    exe = require_codex()
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    _ok("hooks", "install", "--agent", "codex")
    with (home / "config.toml").open("a") as f:  # the project trusted, as the user would when Codex asks
        f.write(f'\n[projects."{repo.resolve()}"]\ntrust_level = "trusted"\n')

    def listed() -> dict[str, dict]:
        proc = subprocess.run([exe, "mcp", "list", "--json"], cwd=repo, env=codex_env(home), capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        return {server["name"]: server for server in json.loads(proc.stdout)}

    servers = listed()
    assert "handoff" in servers and servers["handoff"]["enabled"] is True
    assert servers["handoff"]["transport"]["command"] == EXE
    assert servers["handoff"]["transport"]["args"] == ["mcp"]
    _ok("hooks", "uninstall", "--agent", "codex")
    assert "handoff" not in listed()


def test_gemini_mcp_list_connects_to_the_server_of_the_projects_settings(repo: Path, tmp_path: Path) -> None:
    exe = require_gemini()
    home = tmp_path / "gemini-home"
    home.mkdir()
    assert run("init").rc == 0
    _ok("hooks", "install", "--agent", "gemini")

    def listed() -> str:
        proc = subprocess.run([exe, "mcp", "list"], cwd=repo, env=gemini_env(home, DEAD_PORT), capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout + proc.stderr

    text = listed()
    line = next((ln for ln in text.splitlines() if "handoff" in ln), None)
    assert line is not None, text
    assert f"{EXE} mcp" in line and "Connected" in line, line  # Gemini started our server and it answered
    _ok("hooks", "uninstall", "--agent", "gemini")
    assert "handoff" not in listed()
