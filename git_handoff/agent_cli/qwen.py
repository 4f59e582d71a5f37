"""The Qwen Code adapter of the agent-hook event core (`ops/hook_decisions.py`).

Qwen Code (checked against @qwen-code/qwen-code 0.24.4, a Gemini CLI fork) runs the
command hooks of `.qwen/settings.json` (`hooks`: event -> matcher groups -> handlers, as
Claude Code) with Claude Code's payload on stdin (`session_id`, `transcript_path`, `cwd`,
`hook_event_name`, plus `source` for SessionStart, `stop_hook_active` for Stop, `trigger`
for PreCompact, `reason` for SessionEnd) and reads Claude Code's output: context as
`hookSpecificOutput.additionalContext`, `{"decision": "block", "reason"}` to keep a turn
going (the reason comes back as the next prompt), `systemMessage` for the person. Its
PreCompact fires only when it really compacts ("before conversation compaction begins")
and no event says when it is done: the core's `compacting` (the document now, while the
context is whole).

Two differences matter to the relay: headless (`qwen -p`) it never runs SessionEnd (only
its interactive UI does, on exit), so the relay ends the session when the agent exits;
and it ends a turn by itself at the 8th Stop block of one prompt, tasks completed in
between or not (`QWEN_CODE_STOP_HOOK_BLOCK_CAP`, settings `stopHookBlockingCap`), printing
"Stop hook blocked continuation 8 consecutive times; overriding and ending the turn."

It also holds the rest of what git handoff knows of Qwen Code (the `AgentCli` protocol,
agent_cli/protocol.py): its MCP configuration, the texts of its limits and outages, its
screens that wait for a person.
"""

from __future__ import annotations

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
    claude_shaped_output,
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

NAME = "qwen"
LABEL = "Qwen Code"
PROGRAMS = ("qwen",)
PACKAGE = "@qwen-code/qwen-code"
VERSION = "0.24.4"  # the suite proves it (.ci/run installs it): raise both on purpose
CONFIG = ".qwen/settings.json"
COMMAND_PREFIX = "git handoff hook qwen-"
# beside the hooks, as Gemini CLI keeps them
MCP_CONFIG = ".qwen/settings.json"
MCP_KEY = "mcpServers"

# hook name -> (Qwen Code event, matcher, core event kind)
HOOKS: dict[str, tuple[str, str | None, str]] = {
    "qwen-session-start": ("SessionStart", None, "session_start"),
    "qwen-stop": ("Stop", None, "stop"),
    "qwen-subagent-stop": ("SubagentStop", None, "subagent_stop"),
    "qwen-pre-compact": ("PreCompact", None, "compacting"),
    "qwen-session-end": ("SessionEnd", None, "session_end"),
}

# the document and the session's end are two state transactions: room for both (seconds)
TIMEOUTS = (("SessionEnd", 30),)

# its own cap on a prompt's Stop blocks (0.24.4's default; the block reaching it is overridden)
# and where the user sets another
STOP_BLOCK_CAP = 8
STOP_BLOCK_CAP_ENV = "QWEN_CODE_STOP_HOOK_BLOCK_CAP"


def config_entries() -> dict[str, tuple[str | None, str]]:
    """What `hooks install --agent qwen` merges into .qwen/settings.json."""
    return entries(HOOKS)


def event(hook: str, payload: dict[str, Any]) -> Event:
    return payload_event(HOOKS[hook][2], payload, project_env="QWEN_CODE_PROJECT_DIR")


def render(hook: str, outcome: Outcome) -> str:
    """Qwen Code's JSON for the outcome ("" when there is nothing to say): Claude Code's shapes."""
    name, _, kind = HOOKS[hook]
    return claude_shaped_output(name, kind, outcome)


def usage(transcript: str) -> Usage | None:
    """Its use as its transcript tells it (agent_cli/usage.py reads the form)."""
    from git_handoff.agent_cli import usage as reader  # not imported by the hooks themselves

    return reader.qwen_chat(transcript)


own_words = plain_words  # its limits are plain text (docs/agent-limits.md)


def setup_notes(status: Mapping[str, object]) -> Sequence[str]:
    return ["Qwen Code runs a project's hooks only in a trusted folder when its folder trust is on "
            '(security.folderTrust.enabled): trust this one, or leave folder trust off; headless (`qwen -p`) '
            "it runs no SessionEnd hook, so the relay ends the session when qwen exits"]


# -- what it prints (docs/agent-limits.md has the table) ------------------------------------------

# Qwen Code 0.24.4 (`qwen -p` against an OpenAI-compatible endpoint: on stderr, exit 1)
LIMITS: tuple[LimitRule, ...] = (
    # the API key's plan: 429 insufficient_quota / a ChatGPT-style usage_limit_reached
    (USAGE_LIMIT, lazy(r"(?i)insufficient_quota|exceeded your current quota|usage_limit_reached"
                       r"|usage limit (?:has been )?reached|Free allocated quota exceeded"), None),
    # 429 after its own retries: "[API Error: 429 Rate limit reached for requests ... Please try again in 2s.]"
    (RATE_LIMIT, lazy(r"(?i)\b429\b|rate limit (?:reached|exceeded)|Too Many Requests|rate_limit_exceeded"),
     "seconds"),
    # 5xx after its retries: "[API Error: 503 The server is overloaded or not ready yet.]"
    (OUTAGE, lazy(r"(?i)API Error: (?:5\d\d)\b|\b(?:500|502|503|504|529)\b.{0,40}(?:error|overloaded|unavailable)"
                  r"|server is overloaded|server_error|Connection error"), None),
)

# its status line while a turn runs: "(esc to cancel, 5s)", as Gemini CLI's
BUSY = r"\besc to cancel\b"


def person_prompt(screen: str) -> str | None:
    """What Qwen Code 0.24.4 says when it waits for a person (docs/agent-limits.md): headless
    with no auth type it exits 1 with the line below."""
    text = " ".join(screen.split())
    if "No auth type is selected" in text:
        return ("qwen has no auth type: run it with --auth-type openai (OPENAI_API_KEY, OPENAI_BASE_URL and "
                'OPENAI_MODEL in the relay\'s environment), or set "security": {"auth": {"selectedType": "openai"}} '
                "in ~/.qwen/settings.json")
    return None
