"""The OpenCode adapter of the agent-hook event core (`ops/hook_decisions.py`).

OpenCode (checked against opencode-ai 1.18.33) has no command hooks: it loads JavaScript
plugins from a project's `.opencode/plugins/`, and a plugin's functions are awaited at
moments of its session loop. `hooks install --agent opencode` writes one plugin of ours
there (hooks-templates/opencode-plugin.js, CONFIG), which runs `git handoff hook opencode-…`
with a payload it builds itself (`session_id`, `cwd`, `transcript_path`, `source`,
`stop_hook_active`, `trigger`) and reads our answer, `{"context" | "block" | "warning": text}`:

- session start: its `experimental.chat.system.transform`, before a session's first model
  request (the title's or the turn's), once per session; the context joins the system
  prompt of every request of the session;
- stop: its `experimental.text.complete`, when a reply's text ends with no tool call in the
  reply (OpenCode has no stop event its loop waits for; `session.idle` comes after the loop,
  when `opencode run` is already leaving). A block goes back as a user message that starts
  no reply of its own (`promptAsync` with `noReply`): the loop sees a user message newer than
  its reply and goes on, in `opencode run` too. A turn that ends with no text is not seen;
- compaction: its `experimental.session.compacting`, before the summary is asked for, with
  no event the loop waits for after: the core's `compacting` (the document now).

It never runs a session end: the relay ends the session when `opencode run` exits. The rest
of what git handoff knows of OpenCode (the `AgentCli` protocol, agent_cli/protocol.py): its MCP
configuration (`opencode.json`, `mcp.handoff` in its own shape), the texts of its limits and
outages, its screens that wait for a person.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from git_handoff.agent_cli import hook_data
from git_handoff.agent_cli.hook_data import DETACHED as DETACHED
from git_handoff.agent_cli.hook_data import NAMED_HANDLERS as NAMED_HANDLERS
from git_handoff.agent_cli.hook_data import TRUSTED_HOOKS as TRUSTED_HOOKS
from git_handoff.agent_cli.hook_data import UNATTENDED as UNATTENDED
from git_handoff.agent_cli.hook_data import plain_words
from git_handoff.core.patterns import lazy

if TYPE_CHECKING:
    from git_handoff.agent_cli.protocol import LimitRule
    from git_handoff.agent_cli.usage import Usage

NAME = "opencode"
LABEL = "OpenCode"
PROGRAMS = ("opencode",)
PACKAGE = "opencode-ai"
VERSION = "1.18.33"  # the suite proves it (.ci/run installs it): raise both on purpose
CONFIG = ".opencode/plugins/git-handoff.js"  # a plugin file of our own among the project's
PLUGIN: str | None = "opencode-plugin.js"  # hooks-templates/: what CONFIG holds
COMMAND_PREFIX = "git handoff hook opencode-"
TIMEOUTS: tuple[tuple[str, int], ...] = ()  # the plugin waits for each hook as long as it runs
# the project's config file, where OpenCode keeps its MCP servers: `"mcp": {"handoff": {"type": "local",
# "command": [...], "enabled": true}}`
MCP_CONFIG = "opencode.json"
MCP_KEY = "mcp"
MCP_TOML = False
MCP_EXTRA: tuple[tuple[str, Any], ...] = (("type", "local"), ("enabled", True))
MCP_COMMAND_LIST = True

# hook name -> (the plugin function that runs it, matcher, core event kind)
HOOKS: dict[str, tuple[str, str | None, str]] = {
    "opencode-session-start": ("experimental.chat.system.transform", None, "session_start"),
    "opencode-stop": ("experimental.text.complete", None, "stop"),
    "opencode-compacting": ("experimental.session.compacting", None, "compacting"),
}


def config_entries() -> dict[str, tuple[str | None, str]]:
    """The plugin's moments and the command each runs (the plugin file holds them; plugin_file.py)."""
    return hook_data.entries(HOOKS)


def event(hook: str, payload: dict[str, Any]) -> hook_data.Event:
    return hook_data.payload_event(HOOKS[hook][2], payload)


def render(hook: str, outcome: hook_data.Outcome) -> str:
    """The plugin's JSON for the outcome ("" when there is nothing to say)."""
    _, _, kind = HOOKS[hook]
    out: dict[str, str] = {}
    if kind == "session_start" and outcome.context is not None:
        out["context"] = outcome.context
    if kind == "stop" and outcome.block:
        out["block"] = outcome.block
    if outcome.warning and not outcome.block:
        out["warning"] = outcome.warning
    return json.dumps(out) if out else ""


def usage(transcript: str) -> Usage | None:
    """Its use as the transcript our plugin writes for it tells it (agent_cli/usage.py reads the form)."""
    from git_handoff.agent_cli import usage as reader  # not imported by the hooks themselves

    return reader.opencode_messages(transcript)


own_words = plain_words  # its limits are plain text, 'Error: …' on stderr (docs/agent-limits.md)


def setup_notes(status: Mapping[str, object]) -> Sequence[str]:
    return ["OpenCode loads the plugin from .opencode/plugins/ at its start (a running opencode needs a restart); "
            "unattended, run it as `opencode run --auto …` so that no permission it asks for is refused; it runs "
            "no session end, so the relay ends the session when opencode exits"]


# -- what it prints (docs/agent-limits.md has the table) ------------------------------------------

# OpenCode 1.18.33 (`opencode run` against an OpenAI-compatible provider: "Error: <the API's message>"
# on stderr once its retries are spent, exit 1)
LIMITS: tuple[LimitRule, ...] = (
    (hook_data.USAGE_LIMIT,
     lazy(r"(?i)insufficient_quota|exceeded your current quota|usage_limit_reached|usage limit (?:has been )?reached"),
     None),
    (hook_data.RATE_LIMIT,
     lazy(r"(?i)\b429\b|rate limit (?:reached|exceeded)|Too Many Requests|rate_limit_exceeded"), "seconds"),
    # its 5xx lines carry no status code: the API's own message
    (hook_data.OUTAGE,
     lazy(r"(?i)server is overloaded|server had an error|server_error|Internal Server Error|Service Unavailable"
          r"|\b(?:500|502|503|504|529)\b.{0,40}(?:error|overloaded|unavailable)"), None),
)

# its TUI's working line was not measured: none known
BUSY: str | None = None


def person_prompt(screen: str) -> str | None:
    """None: `opencode run` 1.18.33 shows no screen that waits for a person. With no provider of
    yours configured it does not ask: it runs its own hosted model (`> build · big-pickle`), which
    needs the network; a permission it would ask a person for is refused unless `--auto`
    (docs/agent-limits.md)."""
    return None
