"""The Claude Code adapter of the agent-hook event core (`ops/agent_events.py`).

Claude Code runs `git handoff hook claude-<event>` with a JSON payload on stdin and reads
the hook's stdout as JSON (checked against its schema: the CLI's `--debug-file` logs
"Successfully parsed and validated hook JSON output" or why not). This module only
translates: the payload into an `Event`, the `Outcome` into Claude Code's JSON. Another
agent CLI gets a file like this one and a line in `ops/hook_entry.py`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from git_handoff.ops.agent_events import Event, Outcome

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


def settings_entries() -> dict[str, tuple[str | None, str]]:
    """What `hooks install --agent claude` merges into .claude/settings.json."""
    return {event: (matcher, f"git handoff hook {hook}") for hook, (event, matcher, _) in HOOKS.items()}


def _text(payload: dict[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) and value else None


def event(hook: str, payload: dict[str, Any]) -> Event:
    _, _, kind = HOOKS[hook]
    cwd = _text(payload, "cwd") or os.environ.get("CLAUDE_PROJECT_DIR") or None
    source = _text(payload, "source") or "startup"
    trigger = _text(payload, "trigger") or _text(payload, "reason")
    return Event(kind=kind, source=source, cwd=cwd, stop_hook_active=payload.get("stop_hook_active") is True,
                 agent_session=_text(payload, "session_id"), trigger=trigger)


def render(hook: str, outcome: Outcome) -> str:
    """Claude Code's JSON for the outcome ("" when there is nothing to say)."""
    name, _, kind = HOOKS[hook]
    out: dict[str, Any] = {}
    if kind == "session_start" and outcome.context is not None:
        out["hookSpecificOutput"] = {"hookEventName": name, "additionalContext": outcome.context}
    if kind in ("stop", "subagent_stop") and outcome.block:
        out["decision"] = "block"
        out["reason"] = outcome.block
    if outcome.warning and not outcome.block:
        out["systemMessage"] = outcome.warning  # shown to the person watching the session
    return json.dumps(out) if out else ""
