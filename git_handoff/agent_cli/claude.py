"""The Claude Code adapter of the agent-hook event core (`ops/hook_decisions.py`).

Claude Code runs `git handoff hook claude-<event>` with a JSON payload on stdin and reads
the hook's stdout as JSON (checked against its schema: the CLI's `--debug-file` logs
"Successfully parsed and validated hook JSON output" or why not). This module only
translates: the payload into an `Event`, the `Outcome` into Claude Code's JSON. Another
agent CLI gets a file like this one and a line in `ops/hook_entry.py`.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from git_handoff.agent_cli.hook_data import Event, Outcome, claude_shaped_output, payload_event

NAME = "claude"
SETTINGS = ".claude/settings.json"
COMMAND_PREFIX = "git handoff hook claude-"

# hook name -> (Claude Code event, matcher, core event kind)
HOOKS: dict[str, tuple[str, str | None, str]] = {
    "claude-session-start": ("SessionStart", "startup|resume|compact|clear", "session_start"),
    "claude-stop": ("Stop", None, "stop"),
    "claude-subagent-stop": ("SubagentStop", None, "subagent_stop"),
    "claude-pre-compact": ("PreCompact", None, "pre_compact"),
    "claude-session-end": ("SessionEnd", None, "session_end"),
}


# Claude Code gives SessionEnd hooks a short time budget unless a hook asks for more; the
# document and the session's end are two state transactions, so ask (seconds).
TIMEOUTS = {"SessionEnd": 30}


def settings_entries() -> dict[str, tuple[str | None, dict[str, Any]]]:
    """What `hooks install --agent claude` merges into .claude/settings.json:
    event -> (matcher, the hook entry)."""
    out: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for hook, (event, matcher, _) in HOOKS.items():
        entry: dict[str, Any] = {"type": "command", "command": f"git handoff hook {hook}"}
        if event in TIMEOUTS:
            entry["timeout"] = TIMEOUTS[event]
        out[event] = (matcher, entry)
    return out


def config_entries() -> dict[str, tuple[str | None, str]]:
    """The same, as `agent_config.Spec` takes it: event -> (matcher, command)."""
    return {event: (matcher, f"git handoff hook {hook}") for hook, (event, matcher, _) in HOOKS.items()}


def fast_entries(client: Sequence[str], client_file: str) -> dict[str, tuple[str | None, str]]:
    """`config_entries()` through the command server's fast client: `client` is its argv
    before the arguments (an absolute interpreter started without `site`, see
    cmdclient.fast_command), `client_file` the file it loads. Each command runs the client
    while both are there and is the plain command otherwise (another machine sharing the
    settings, the interpreter or package gone); it ends with that plain command, which is
    how install and uninstall know it for ours."""
    guard = f"[ -x {shlex.quote(client[0])} ] && [ -f {shlex.quote(client_file)} ]"
    out = {}
    for event, (matcher, command) in config_entries().items():
        fast = " ".join(shlex.quote(a) for a in (*client, *command.split()[2:]))
        out[event] = (matcher, f"{guard} && exec {fast}; exec {command}")
    return out


def event(hook: str, payload: dict[str, Any]) -> Event:
    return payload_event(HOOKS[hook][2], payload, project_env="CLAUDE_PROJECT_DIR")


def render(hook: str, outcome: Outcome) -> str:
    """Claude Code's JSON for the outcome ("" when there is nothing to say)."""
    name, _, kind = HOOKS[hook]
    return claude_shaped_output(name, kind, outcome)
