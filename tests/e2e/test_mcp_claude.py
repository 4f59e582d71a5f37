"""The MCP server through a real client: the real Claude Code CLI, configured by
`hooks install --agent claude`, whose (loopback, scripted) model works through six
tasks with the `mcp__handoff__*` tools only: claim, write a file, checkpoint, done.
Not one shell call: the state changes because the CLI called our MCP server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.claude_cli import run_claude
from tests.support.repo import git, run
from tests.support.stubs.anthropic import Reply, Request, StubServer, say, tool

pytestmark = pytest.mark.slow

TASKS = [f"m{n}" for n in range(1, 7)]


def first_json(text: str) -> Any:
    """The JSON document a tool result starts with (our tools answer `--json` output first)."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


class McpOnly:
    """A model that works only through the handoff MCP tools (plus the CLI's own Write
    tool for the work itself): claim -> Write -> checkpoint -> done, until `claim`
    answers that nothing is eligible."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.results: list[tuple[str, str]] = []  # (tool name, the result text the CLI sent back)

    def _use(self, name: str, arguments: dict[str, Any]) -> Reply:
        self.calls.append((name, arguments))
        return tool(name, arguments)

    def _last_result(self, req: Request) -> tuple[str, dict[str, Any], str] | None:
        """(tool name, its input, the result text) of the tool result ending the conversation."""
        # The CLI may append its own "system" messages (deferred tools loaded, hook output).
        turns = [m for m in req.messages if m.get("role") in ("user", "assistant")]
        if not turns or turns[-1].get("role") != "user" or not isinstance(turns[-1].get("content"), list):
            return None
        uses = {b.get("id"): b for m in turns if m.get("role") == "assistant"
                and isinstance(m.get("content"), list) for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "tool_use"}
        for block in turns[-1]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id") in uses:
                use = uses[block["tool_use_id"]]
                return str(use.get("name")), dict(use.get("input") or {}), Request._text_of(block.get("content"))
        return None

    def __call__(self, req: Request) -> Reply:
        if not req.tool_names:
            return say("summary: nothing to add")
        last = self._last_result(req)
        if last is None:  # the first turn, or the Stop hook sent the agent back to work
            return self._use("mcp__handoff__claim", {})
        name, used, text = last
        self.results.append((name, text))
        answer = first_json(text)
        if name == "mcp__handoff__claim":
            if not isinstance(answer, dict) or "id" not in answer:
                return say("Nothing is eligible any more: all done.")
            task = answer["id"]
            return self._use("Write", {"file_path": str(self.repo / "notes" / f"{task}.md"),
                                       "content": f"# {task}\n\nWritten by the agent.\n"})
        if name == "Write":
            task = Path(str(used.get("file_path"))).stem
            return self._use("mcp__handoff__checkpoint", {"id": task, "message": "notes written", "step": 1, "of": 1})
        if name == "mcp__handoff__checkpoint":
            return self._use("mcp__handoff__done", {"id": used["id"]})
        return self._use("mcp__handoff__claim", {})


def test_claude_code_completes_six_tasks_through_the_mcp_server_alone(repo: Path, tmp_path: Path) -> None:
    (repo / ".gitignore").write_text("notes/\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore notes", cwd=repo)
    assert run("init").rc == 0
    for task in TASKS:
        assert run("add", f"Write the notes of {task}", "--id", task, "--check", f"test -s notes/{task}.md").rc == 0
    assert run("session", "start").rc == 0
    installed = run("hooks", "install", "--agent", "claude", "--json")
    assert installed.rc == 0 and installed.json()["mcp"]["registered"] is True
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["handoff"]["args"] == ["mcp"]

    policy = McpOnly(repo)
    with StubServer(policy, lifetime=400) as stub:
        # Non-interactively, Claude Code 2.1.332 starts the servers of the project's
        # .mcp.json by itself; the tools need permission: --allowedTools mcp__handoff
        # (every tool of the server) and Write for the work.
        result = run_claude(repo, stub.url, "Work through the tasks of this project.", home=tmp_path / "home",
                            permission="none", extra_args=["--allowedTools", "mcp__handoff", "Write"],
                            timeout=360)
        assert not stub.errors, stub.errors
    assert result.rc == 0, (result.stderr[-2000:], result.debug[-4000:])
    assert 'MCP server "handoff": Successfully connected' in result.debug

    names = [name for name, _ in policy.calls]
    assert "Bash" not in names  # no shell at all, so no `git handoff` through one
    claims = [first_json(text) for name, text in policy.results if name == "mcp__handoff__claim"]
    # six tasks, then "nothing eligible" (on a loaded machine the model's first turn can
    # come before the server is connected: the CLI answers such a call itself, not us)
    assert [c["id"] for c in claims if isinstance(c, dict) and "id" in c] == TASKS
    assert names.count("mcp__handoff__checkpoint") == 6 and names.count("mcp__handoff__done") == 6
    for name, text in policy.results:  # every MCP answer reached the model as our JSON
        if name.startswith("mcp__handoff__"):
            assert first_json(text) is not None, (name, text)
    done_answers = [first_json(text) for name, text in policy.results if name == "mcp__handoff__done"]
    assert [a["status"] for a in done_answers] == ["completed"] * 6
    last_claim = claims[-1]
    assert last_claim["exit_code"] == 1 and last_claim["error"].startswith("nothing eligible")

    state = run("list", "--json").json()
    assert {t["id"]: t["status"] for t in state} == {t: "completed" for t in TASKS}
    assert all(t["checkpoints"][-1]["description"] == "notes written" for t in state)
    checkpoints = run("log", "--type", "CHECKPOINT", "--json").json()
    assert sorted(e["task"] for e in checkpoints) == TASKS
    session = run("session", "show", "--json").json()
    assert sorted(session["completed"]) == TASKS
