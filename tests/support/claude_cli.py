"""Run the real Claude Code CLI hermetically against the loopback model stub.

`run_claude(repo, stub, prompt)` runs `claude -p` in `repo` with a private HOME, the
stub as its API, no nonessential traffic, a debug log and the stream-json event
stream (hook events included), under a timeout. The result gives the exit code, the
events, the debug log and helpers to read what the CLI made of each hook's output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

PINNED_VERSION = "2.1.332"  # the version .ci/run installs; raise both on purpose
# two forms in 2.1.332's debug log: "Hooks: Stop [cmd] finished with status 0" and
# "PreCompact:manual [cmd] completed with status 0" (PreCompact, SessionEnd)
# A message holding a quote or a newline (the fast client's command, as `hooks install` writes
# it with the command server on) is logged JSON-quoted: `[DEBUG] "Hooks: Stop [...] finished ..."`.
HOOK_RUN = re.compile(r'\[DEBUG\] "?(?:Hooks: )?([A-Za-z]+(?::[a-z_]+)?) \[(.*?)\] (?:finished|completed) with status '
                      r'(-?\d+)')


def claude_path() -> str | None:
    return shutil.which("claude")


def require_claude() -> str:
    """The `claude` executable, or skip the test with the reason (CI installs it)."""
    found = claude_path()
    if found is None:
        pytest.skip("the Claude Code CLI is not installed (`npm install -g @anthropic-ai/claude-code@"
                    f"{PINNED_VERSION}`; .ci/run does it)")
    return found


def claude_env(home: Path, stub_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "HANDOFF_"))
           or k.startswith("HANDOFF_COMMAND_SERVER")}  # the suite's way through the command server (conftest)
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "ANTHROPIC_BASE_URL": stub_url,
        "ANTHROPIC_API_KEY": "sk-stub-not-a-real-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        # how long Claude Code waits for an MCP server to start (its default ~30 s): on 2
        # shared cores under the suite's own load, the server's start (Python, pygit2, the
        # SDK) once took longer, and its tools were "No such tool available"
        "MCP_TIMEOUT": "60000",
        # the hooks run `git handoff`: this interpreter's scripts first on PATH
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
    })
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"  # root may use --dangerously-skip-permissions only in a sandbox
    if extra:
        env.update(extra)
    return env


@dataclass
class ClaudeRun:
    rc: int
    stdout: str
    stderr: str
    debug: str
    events: list[dict[str, Any]] = field(default_factory=list)

    def hook_responses(self, event: str | None = None) -> list[dict[str, Any]]:
        """The stream's `hook_response` events (each hook's output and outcome)."""
        out = []
        for e in self.events:
            if e.get("type") == "system" and e.get("subtype") == "hook_response":
                if event is None or e.get("hook_event") == event or e.get("hook_name", "").startswith(event):
                    out.append(e)
        return out

    def hooks_run(self) -> list[tuple[str, str, int]]:
        """(hook name, command, exit status) of every hook the CLI ran, from its debug log
        (the stream leaves out some, e.g. SessionEnd). Names: `SessionStart:compact`, `Stop`..."""
        return [(m.group(1), m.group(2), int(m.group(3))) for m in HOOK_RUN.finditer(self.debug)]

    def ran(self, event: str) -> list[str]:
        """The names of the hooks of `event` that ran (`PreCompact:manual`, ...)."""
        return [name for name, _, _ in self.hooks_run() if name.split(":")[0] == event]

    def hook_json_problems(self) -> list[str]:
        """Debug-log lines where the CLI rejected a hook's JSON output."""
        return [line for line in self.debug.splitlines()
                if "Hook JSON output validation failed" in line or "Failed to parse hook" in line]

    def accepted_hook_json(self) -> int:
        """How many hook outputs the CLI parsed and validated as JSON (its debug log)."""
        return self.debug.count("Successfully parsed and validated hook JSON output")

    def assert_hooks_accepted(self) -> None:
        """Every hook that printed something printed JSON the CLI accepted, and none failed."""
        assert not self.hook_json_problems(), self.hook_json_problems()
        said = [e for e in self.hook_responses() if (e.get("stdout") or "").strip()]
        for e in self.hook_responses():
            assert e.get("outcome") == "success" and e.get("exit_code") == 0, e
        assert self.accepted_hook_json() >= len(said), (self.accepted_hook_json(), len(said))
        assert all(status == 0 for _, _, status in self.hooks_run()), self.hooks_run()

    def blocks(self, event: str = "Stop") -> list[str]:
        """The reasons of the `decision: block` outputs of `event` hooks, in order."""
        out = []
        for e in self.hook_responses(event):
            text = (e.get("stdout") or "").strip()
            if text.startswith("{"):
                data = json.loads(text)
                if data.get("decision") == "block":
                    out.append(str(data.get("reason")))
        return out

    def result(self) -> dict[str, Any] | None:
        e: dict[str, Any]  # mypy types reversed() of a list of dict[str, Any] as Any
        for e in reversed(self.events):
            if e.get("type") == "result":
                return e
        return None

    @property
    def session_id(self) -> str | None:
        for e in self.events:
            if e.get("session_id"):
                return str(e["session_id"])
        return None


def run_claude(cwd: Path, stub_url: str, prompt: str, *, home: Path, extra_args: list[str] | None = None,
               env: dict[str, str] | None = None, timeout: float = 120, permission: str = "skip") -> ClaudeRun:
    """`claude -p PROMPT` in `cwd`; `permission` "skip" (--dangerously-skip-permissions) or
    "bash" (--allowedTools Bash, given after the prompt: the flag is variadic)."""
    exe = require_claude()
    home.mkdir(parents=True, exist_ok=True)
    debug_file = home / f"claude-debug-{len(list(home.glob('claude-debug-*')))}.log"
    args = [exe, "-p", prompt, "--output-format", "stream-json", "--verbose", "--include-hook-events",
            "--debug-file", str(debug_file)]
    if permission == "skip":
        args.append("--dangerously-skip-permissions")
    elif permission == "bash":
        args += ["--allowedTools", "Bash"]
    args += extra_args or []
    proc = subprocess.run(args, cwd=cwd, env=claude_env(home, stub_url, env), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    events = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                pass
    debug = debug_file.read_text(errors="replace") if debug_file.exists() else ""
    return ClaudeRun(proc.returncode, proc.stdout, proc.stderr, debug, events)
