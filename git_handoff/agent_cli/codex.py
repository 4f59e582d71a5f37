"""The Codex CLI adapter of the agent-hook event core (`ops/hook_decisions.py`).

Codex (checked against codex-cli 0.171.0) runs the command hooks of
`.codex/hooks.json` (the same event -> matcher groups -> handlers shape as Claude
Code) with a JSON payload on stdin: `session_id`, `cwd`, `hook_event_name`, plus
`source` (startup | resume | clear | compact) for SessionStart, `stop_hook_active`
for Stop, `trigger` (manual | auto) for PreCompact and `reason` for SessionEnd. It
reads the same output as Claude Code: `hookSpecificOutput.additionalContext` (sent to
the model as a developer message before the user's), `{"decision": "block",
"reason": …}` to keep a turn going (the reason comes back as the next prompt), and
`systemMessage` for the person watching. After an auto-compaction it runs
SessionStart again with source=compact, so the core's "document once the agent
really compacted" rule applies unchanged.
"""

from __future__ import annotations

from typing import Any

from git_handoff.agent_cli.hook_data import Event, Outcome, claude_shaped_output, payload_event

NAME = "codex"
CONFIG = ".codex/hooks.json"
COMMAND_PREFIX = "git handoff hook codex-"

# hook name -> (Codex event, matcher, core event kind)
HOOKS: dict[str, tuple[str, str | None, str]] = {
    "codex-session-start": ("SessionStart", None, "session_start"),
    "codex-stop": ("Stop", None, "stop"),
    "codex-subagent-stop": ("SubagentStop", None, "subagent_stop"),
    "codex-pre-compact": ("PreCompact", None, "pre_compact"),
    "codex-session-end": ("SessionEnd", None, "session_end"),
}


# Codex 0.171.0 clamps a SessionEnd handler's timeout to 1 s and derives the handler's
# trusted identity from the clamped value (its app-server's hooks/list shows
# timeoutSec 1), so ours says 1 s outright: the identity, and the trust recorded for
# it, then stay the same whatever the clamp.
TIMEOUTS = (("SessionEnd", 1),)


def config_entries() -> dict[str, tuple[str | None, str]]:
    """What `hooks install --agent codex` merges into .codex/hooks.json."""
    return {event: (matcher, f"git handoff hook {hook}") for hook, (event, matcher, _) in HOOKS.items()}


def event(hook: str, payload: dict[str, Any]) -> Event:
    return payload_event(HOOKS[hook][2], payload)


def render(hook: str, outcome: Outcome) -> str:
    """Codex's JSON for the outcome ("" when there is nothing to say): Claude Code's shapes."""
    name, _, kind = HOOKS[hook]
    return claude_shaped_output(name, kind, outcome)
