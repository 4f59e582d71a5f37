"""The GitHub Copilot CLI adapter of the agent-hook event core (`ops/hook_decisions.py`).

Copilot CLI (checked against @github/copilot 1.0.102) loads a repository's hooks from
`.github/hooks/*.json` (`hooks`: event -> groups, in Claude Code's shape, which it takes
beside its own flat one) once the folder is trusted (in prompt mode: `--trust-folder`, or
COPILOT_ALLOW_ALL=true). Its events are camelCase and so is part of its payload:
`sessionId`, `cwd`, `timestamp`, plus `source` ("new" | "resume" | …) and `initialPrompt`
for sessionStart, `transcriptPath` (its session's events.jsonl: its use), `stopReason` and
`stop_hook_active` for agentStop, `reason` for
sessionEnd. It reads `{"additionalContext": …}` from a sessionStart hook (sent to the
model as a user message before the prompt) and `{"decision": "block", "reason": …}`
from agentStop (the reason comes back as the next prompt); its preCompact (`trigger`
auto | manual) runs "before context compaction begins" and cannot block it, with no event
after: the core's `compacting` (the document now, while the context is whole).

It also holds the rest of what git handoff knows of Copilot CLI (the `AgentCli` protocol,
agent_cli/protocol.py): its MCP configuration, the texts of its limits and outages, its
screens that wait for a person.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from git_handoff.agent_cli.hook_data import DETACHED as DETACHED
from git_handoff.agent_cli.hook_data import MCP_COMMAND_LIST as MCP_COMMAND_LIST
from git_handoff.agent_cli.hook_data import MCP_EXTRA as MCP_EXTRA
from git_handoff.agent_cli.hook_data import MCP_TOML as MCP_TOML
from git_handoff.agent_cli.hook_data import NAMED_HANDLERS as NAMED_HANDLERS
from git_handoff.agent_cli.hook_data import (
    OUTAGE,
    RATE_LIMIT,
    USAGE_LIMIT,
    Event,
    Outcome,
    entries,
    payload_event,
    plain_words,
)
from git_handoff.agent_cli.hook_data import PLUGIN as PLUGIN
from git_handoff.agent_cli.hook_data import TRUSTED_HOOKS as TRUSTED_HOOKS
from git_handoff.agent_cli.hook_data import UNATTENDED as UNATTENDED
from git_handoff.core.patterns import lazy

if TYPE_CHECKING:
    from git_handoff.agent_cli.protocol import LimitRule
    from git_handoff.agent_cli.usage import Usage

NAME = "copilot"
LABEL = "Copilot CLI"
PROGRAMS = ("copilot",)
PACKAGE = "@github/copilot"
VERSION = "1.0.102"  # the suite proves it (.ci/run installs it): raise both on purpose
CONFIG = ".github/hooks/handoff.json"  # a file of our own among the repository's hook files
COMMAND_PREFIX = "git handoff hook copilot-"
# the workspace's MCP servers (`copilot mcp --help`: ".mcp.json or .github/mcp.json"); not
# .mcp.json, which is Claude Code's
MCP_CONFIG = ".github/mcp.json"
MCP_KEY = "mcpServers"

# hook name -> (Copilot CLI event, matcher, core event kind)
HOOKS: dict[str, tuple[str, str | None, str]] = {
    "copilot-session-start": ("sessionStart", None, "session_start"),
    "copilot-agent-stop": ("agentStop", None, "stop"),
    "copilot-subagent-stop": ("subagentStop", None, "subagent_stop"),
    "copilot-pre-compact": ("preCompact", None, "compacting"),
    "copilot-session-end": ("sessionEnd", None, "session_end"),
}

# the document and the session's end are two state transactions: room for both (seconds)
TIMEOUTS = (("sessionEnd", 30),)

_SOURCES = {"new": "startup", "startup": "startup", "resume": "resume", "clear": "clear", "compact": "compact"}


def config_entries() -> dict[str, tuple[str | None, str]]:
    """What `hooks install --agent copilot` merges into .github/hooks/handoff.json."""
    return entries(HOOKS)


def event(hook: str, payload: dict[str, Any]) -> Event:
    """Its camelCase fields read as the snake_case ones the other CLIs send."""
    plain = dict(payload)
    if "session_id" not in plain and "sessionId" in plain:
        plain["session_id"] = plain["sessionId"]
    if "transcript_path" not in plain and "transcriptPath" in plain:  # agentStop's: its session's events.jsonl
        plain["transcript_path"] = plain["transcriptPath"]
    source = plain.get("source")
    if isinstance(source, str):
        plain["source"] = _SOURCES.get(source, source)
    return payload_event(HOOKS[hook][2], plain)


def render(hook: str, outcome: Outcome) -> str:
    """Copilot CLI's JSON for the outcome ("" when there is nothing to say)."""
    _, _, kind = HOOKS[hook]
    out: dict[str, Any] = {}
    if kind == "session_start" and outcome.context is not None:
        out["additionalContext"] = outcome.context
    if kind in ("stop", "subagent_stop") and outcome.block:
        out["decision"] = "block"
        out["reason"] = outcome.block
    if outcome.warning and not outcome.block:
        out["systemMessage"] = outcome.warning
    return json.dumps(out) if out else ""


def usage(transcript: str) -> Usage | None:
    """Its use as its transcript tells it (agent_cli/usage.py reads the form)."""
    from git_handoff.agent_cli import usage as reader  # not imported by the hooks themselves

    return reader.copilot_events(transcript)


own_words = plain_words  # its limits are plain text (docs/agent-limits.md)


def setup_notes(status: Mapping[str, object]) -> Sequence[str]:
    return ["Copilot CLI runs a repository's hooks only in a trusted folder: trust it when Copilot asks, or in "
            "prompt mode pass --trust-folder (COPILOT_ALLOW_ALL=true trusts it too)"]


# -- what it prints (docs/agent-limits.md has the table) ------------------------------------------

# Copilot CLI 1.0.102 (`copilot -p` against a BYOK OpenAI-compatible provider: on stderr, exit 1)
LIMITS: tuple[LimitRule, ...] = (
    (USAGE_LIMIT, lazy(r"(?i)insufficient_quota|exceeded your current quota|usage_limit_reached"
                       r"|usage limit (?:has been )?reached|monthly (?:premium request )?limit|quota exceeded"), None),
    (RATE_LIMIT, lazy(r"(?i)\b429\b|rate limit|Too Many Requests|rate_limit_exceeded"), "seconds"),
    (OUTAGE, lazy(r"(?i)\b(?:500|502|503|504|529)\b|server is overloaded|server_error|Service Unavailable"
                  r"|Internal Server Error"), None),
)

# its status line while a turn runs: "∙ Thinking (Esc to cancel)"
BUSY = r"\besc to cancel\b"


def person_prompt(screen: str) -> str | None:
    """What Copilot CLI 1.0.102 says when it waits for a person (docs/agent-limits.md):
    its folder-trust question, and with no login and no provider of your own (exit 1)
    "Error: No authentication information found." """
    text = " ".join(screen.split())
    if "Do you trust the files in this folder?" in text or "Confirm folder trust" in text:
        return ("copilot is asking whether to trust this folder: pass --trust-folder in prompt mode, or set "
                "COPILOT_ALLOW_ALL=true in the relay's environment")
    if "No authentication information found" in text:
        return ("copilot is not logged in: set COPILOT_GITHUB_TOKEN in the relay's environment, or point it at a "
                "provider of your own with COPILOT_PROVIDER_BASE_URL (and COPILOT_PROVIDER_API_KEY)")
    return None
