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

It also holds the rest of what git handoff knows of Codex (the `AgentCli` protocol,
agent_cli/protocol.py): its MCP configuration, the texts of its limits and outages, its
screens that wait for a person, what its hooks still need once installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from git_handoff.agent_cli.hook_data import (
    OUTAGE,
    RATE_LIMIT,
    USAGE_LIMIT,
    Event,
    Outcome,
    claude_shaped_output,
    entries,
    json_string,
    payload_event,
)
from git_handoff.core.patterns import lazy

if TYPE_CHECKING:
    from git_handoff.agent_cli.protocol import LimitRule
    from git_handoff.agent_cli.usage import Usage

NAME = "codex"
LABEL = "Codex CLI"
PROGRAMS = ("codex",)
PACKAGE = "@openai/codex"
VERSION = "0.171.0"  # the suite proves it (.ci/run installs it): raise both on purpose
CONFIG = ".codex/hooks.json"
COMMAND_PREFIX = "git handoff hook codex-"
NAMED_HANDLERS = False
# `codex exec` silently skips a hook nobody approved: install records our handlers' trust in
# $CODEX_HOME/config.toml (agent_config.codex_trust)
TRUSTED_HOOKS = True
# 0.171.0 gives a SessionEnd handler 1 s at most (then kills it): cli/hooks.py runs it detached
DETACHED = ("codex-session-end",)
UNATTENDED = False
# the project's .codex/config.toml, which 0.171.0 reads, mcp_servers included, once the project is trusted
MCP_CONFIG = ".codex/config.toml"
MCP_KEY = "mcp_servers"
MCP_TOML = True
MCP_EXTRA: tuple[tuple[str, Any], ...] = ()
MCP_COMMAND_LIST = False
PLUGIN: str | None = None

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
    return entries(HOOKS)


def event(hook: str, payload: dict[str, Any]) -> Event:
    return payload_event(HOOKS[hook][2], payload)


def render(hook: str, outcome: Outcome) -> str:
    """Codex's JSON for the outcome ("" when there is nothing to say): Claude Code's shapes."""
    name, _, kind = HOOKS[hook]
    return claude_shaped_output(name, kind, outcome)


def usage(transcript: str) -> Usage | None:
    """Its use as its transcript tells it (agent_cli/usage.py reads the form)."""
    from git_handoff.agent_cli import usage as reader  # not imported by the hooks themselves

    return reader.codex_rollout(transcript)


def setup_notes(status: Mapping[str, object]) -> Sequence[str]:
    notes = []
    if status.get("hooks_feature") is False:
        notes.append(f"hooks are switched off in {status['codex_config']} ([features] hooks = false): "
                     "Codex runs none until you turn them back on")
    if not status.get("project_trusted"):
        notes.append("Codex loads .codex/ only in a trusted project: trust this one when Codex asks, "
                     "or run `codex exec --trust ...` here once")
    return notes


# -- what it prints (docs/agent-limits.md has the table) ------------------------------------------

# Codex 0.171.0 (`codex exec`: on stderr as "ERROR: ...", exit 1)
LIMITS: tuple[LimitRule, ...] = (
    # ChatGPT plans: "You've hit your usage limit. Upgrade to Pro (...) or try again at 12:40 PM."
    # (or "... at Dec 5th, 2026 11:01 PM."); the apostrophe is U+2019
    (USAGE_LIMIT, lazy(r"(?i)hit your usage limit\b.*?\btry again at\b"), "clock"),
    (USAGE_LIMIT, lazy(r"(?i)hit your usage limit|usage limit reached|Quota exceeded\. Check your plan"
                       r"|out of credits|workspace credit limit"), None),
    # "exceeded retry limit, last status: 429 Too Many Requests, request id: ..."
    (RATE_LIMIT, lazy(r"(?i)last status: 429\b|unexpected status 429\b|rate limit reached"), "seconds"),
    # 500: "We're currently experiencing high demand, which may cause temporary errors."
    # 503: "unexpected status 503 Service Unavailable: The server is overloaded or not ready yet., url: ..."
    (OUTAGE, lazy(r"(?i)experiencing high demand|(?:last|unexpected) status 5\d\d\b"
                  r"|Codex is currently experiencing high load|stream disconnected before completion"), None),
)

# its status line while a turn runs: "Working (5s • Esc to interrupt)"
BUSY = r"\besc to interrupt\b"

_FOLDER = lazy(r"Folder access\s*\n\s*(/[^\n]*)")


def person_prompt(screen: str) -> str | None:
    """Codex 0.171.0's screens (docs/agent-limits.md)."""
    text = " ".join(screen.split())
    if "Trust this folder?" in text or "Trust and continue" in text:
        found = _FOLDER.search(screen)
        folder = json_string(found.group(1)) if found else '"<this directory>"'
        return (f"codex is asking whether to trust this folder: add [projects.{folder}] trust_level = \"trusted\" "
                "to $CODEX_HOME/config.toml (~/.codex/config.toml), or run `codex exec --trust` here once")
    if "Sign in with ChatGPT" in text or "Choose how you want to use Codex" in text:
        return ("codex wants a login: run `printenv OPENAI_API_KEY | codex login --with-api-key` once, or give it a "
                "[model_providers.<id>] entry with env_key in $CODEX_HOME/config.toml")
    return None
