"""The real Codex CLI and Gemini CLI see the MCP server `hooks install --agent codex|gemini`
registered in the project (each in a hermetic home of its own), and stop seeing it
after uninstall; and each works whole tasks through that server: its loopback model
calls the handoff tools claim -> checkpoint -> done, never `git handoff` in a shell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_clis import (
    codex_env,
    codex_home,
    gemini_env,
    require_codex,
    require_gemini,
    run_codex,
    run_gemini,
)
from tests.support.repo import git, run
from tests.support.stubs.gemini import GeminiStub
from tests.support.stubs.loopback import Call, Exchange, Run, Say, Turn
from tests.support.stubs.openai_responses import ResponsesStub, offered_tools

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

    def listed() -> dict[str, dict[str, Any]]:  # `codex mcp list --json`: Codex's own JSON
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


# -- whole tasks over MCP --------------------------------------------------------------------

TASKS = ["m1", "m2", "m3"]


def json_in(text: str) -> Any:
    """The first of our JSON answers inside a tool output as the CLI passed it back to the
    model: our JSON text, possibly wrapped in the CLI's own JSON (a content list, an
    ``output`` field) and escaped once more in a string."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char not in "{[":
            continue
        try:
            value = decoder.raw_decode(text[start:])[0]
        except ValueError:
            continue
        found = _ours(value)
        if found is not None:
            return found
    return None


def _ours(value: Any) -> Any:
    if isinstance(value, dict):
        if {"id", "status"} <= value.keys() or {"error", "exit_code"} <= value.keys():
            return value  # a task, or an error answer (not the CLI's own `_meta` wrapper)
        children: list[Any] = list(value.values())
    elif isinstance(value, list):
        children = value
    elif isinstance(value, str):
        return json_in(value) if ("{" in value or "[" in value) else None
    else:
        return None
    for child in children:
        found = _ours(child)
        if found is not None:
            return found
    return None


class McpWorker:
    """A model that works through the handoff MCP tools: claim -> (its shell writes the
    task's file) -> checkpoint -> done, until claim answers that nothing is eligible.
    The only shell command it ever runs writes one file."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.answers: list[tuple[str, Any]] = []  # (MCP tool, our JSON as the model got it back)
        self.task: str | None = None
        self.waits = 0
        self.raw: list[str] = []  # each tool output as the CLI passed it back

    def __call__(self, ex: Exchange) -> Turn:
        turn = self._next(ex)
        self.turns.append(turn)
        return turn

    def _next(self, ex: Exchange) -> Turn:
        last = self.turns[-1] if self.turns else None
        if not isinstance(last, Call | Run) or not ex.last_was_tool_output:
            # a new turn: the first, or the stop hook sent the agent back to work
            if not ex.offers("claim"):
                self.waits += 1  # the CLI asked before its MCP server connected: end the turn
                return Say("The handoff tools are not connected yet.")
            return Call("claim")
        if isinstance(last, Run):
            return Call("checkpoint", {"id": self.task, "message": "notes written", "step": 1, "of": 1})
        answer = json_in(ex.latest())
        self.answers.append((last.tool, answer))
        self.raw.append(ex.latest())
        if last.tool == "claim":
            if not isinstance(answer, dict) or "id" not in answer:
                return Say("Nothing is eligible any more: all done.")
            self.task = str(answer["id"])
            return Run(f"mkdir -p notes && echo 'notes of {self.task}' > notes/{self.task}.md")
        if last.tool == "checkpoint":
            return Call("done", {"id": self.task})
        return Call("claim")

    def shell_commands(self) -> list[str]:
        return [t.command for t in self.turns if isinstance(t, Run)]


def _plan_for_mcp(repo: Path) -> None:
    (repo / ".gitignore").write_text("notes/\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore notes", cwd=repo)
    assert run("init").rc == 0
    for task in TASKS:
        assert run("add", f"Write the notes of {task}", "--id", task, "--check", f"test -s notes/{task}.md").rc == 0


def _assert_worked_over_mcp(policy: McpWorker) -> None:
    assert all("git handoff" not in cmd and "git-handoff" not in cmd for cmd in policy.shell_commands())
    assert len(policy.shell_commands()) == len(TASKS)  # one file written per task, nothing else
    by_tool: dict[str, list[Any]] = {}
    for tool, answer in policy.answers:
        by_tool.setdefault(tool, []).append(answer)
    claims = by_tool["claim"]
    assert [c["id"] for c in claims if isinstance(c, dict) and "id" in c] == TASKS
    assert claims[-1].get("exit_code") == 1 and str(claims[-1].get("error")).startswith("nothing eligible"), \
        policy.raw[-1]
    assert [a["status"] for a in by_tool["checkpoint"]] == ["in_progress"] * len(TASKS)
    assert [a["status"] for a in by_tool["done"]] == ["completed"] * len(TASKS)
    state = run("list", "--json").json()
    assert {t["id"]: t["status"] for t in state} == dict.fromkeys(TASKS, "completed")
    assert all(t["checkpoints"][-1]["description"] == "notes written" for t in state)
    assert sorted(e["task"] for e in run("log", "--type", "CHECKPOINT", "--json").json()) == TASKS


def test_codex_works_whole_tasks_through_the_mcp_server(repo: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    require_codex()
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    _plan_for_mcp(repo)
    installed = run("hooks", "install", "--agent", "codex", "--json")
    assert installed.rc == 0, installed.err
    policy = McpWorker()
    with ResponsesStub(policy, lifetime=400) as stub:
        codex_home(home, stub.port)
        result = run_codex(repo, home, "Work through the tasks of this project.", timeout=360)
        offered = {name for r in stub.model_requests() for name in offered_tools(r.body)}
    assert result.rc == 0, result.stderr[-3000:]
    assert "mcp__handoff__claim" in offered, offered  # Codex's namespace for the server's tools
    _assert_worked_over_mcp(policy)


def test_gemini_works_whole_tasks_through_the_mcp_server(repo: Path, tmp_path: Path) -> None:
    require_gemini()
    home = tmp_path / "gemini-home"
    home.mkdir()
    _plan_for_mcp(repo)
    installed = run("hooks", "install", "--agent", "gemini", "--json")
    assert installed.rc == 0, installed.err
    policy = McpWorker()
    with GeminiStub(policy, lifetime=400) as stub:
        result = run_gemini(repo, home, stub.port, "Work through the tasks of this project.", timeout=360)
    assert result.rc == 0, (result.stdout[-2000:], result.stderr[-3000:])
    _assert_worked_over_mcp(policy)
