"""The Claude Code adapter of the agent-hook event core (`ops/hook_decisions.py`).

Claude Code runs `git handoff hook claude-<event>` with a JSON payload on stdin and reads
the hook's stdout as JSON (checked against its schema: the CLI's `--debug-file` logs
"Successfully parsed and validated hook JSON output" or why not). This module only
translates: the payload into an `Event`, the `Outcome` into Claude Code's JSON. It also
holds the rest of what git handoff knows of Claude Code (the `AgentCli` protocol,
agent_cli/protocol.py): its MCP configuration, the texts of its limits and outages, its
screens that wait for a person.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
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
    payload_text,
)
from git_handoff.core.patterns import lazy

if TYPE_CHECKING:
    from git_handoff.agent_cli.protocol import LimitRule
    from git_handoff.agent_cli.usage import Usage

NAME = "claude"
LABEL = "Claude Code"
PROGRAMS = ("claude",)
PACKAGE = "@anthropic-ai/claude-code"
VERSION = "2.1.332"  # the suite proves it (.ci/run installs it): raise both on purpose
CONFIG = ".claude/settings.json"
COMMAND_PREFIX = "git handoff hook claude-"
NAMED_HANDLERS = False
TRUSTED_HOOKS = False
DETACHED: tuple[str, ...] = ()
UNATTENDED = True  # agent_cli/unattended.py
MCP_CONFIG = ".mcp.json"
MCP_KEY = "mcpServers"
MCP_TOML = False
MCP_EXTRA: tuple[tuple[str, Any], ...] = ()
MCP_COMMAND_LIST = False
PLUGIN: str | None = None

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
TIMEOUTS = (("SessionEnd", 30),)


def settings_entries() -> dict[str, tuple[str | None, dict[str, Any]]]:
    """What `hooks install --agent claude` merges into .claude/settings.json:
    event -> (matcher, the hook entry)."""
    out: dict[str, tuple[str | None, dict[str, Any]]] = {}
    timeouts = dict(TIMEOUTS)
    for hook, (event, matcher, _) in HOOKS.items():
        entry: dict[str, Any] = {"type": "command", "command": f"git handoff hook {hook}"}
        if event in timeouts:
            entry["timeout"] = timeouts[event]
        out[event] = (matcher, entry)
    return out


def config_entries() -> dict[str, tuple[str | None, str]]:
    """The same, as `agent_config.Spec` takes it: event -> (matcher, command)."""
    return entries(HOOKS)


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
    found = payload_event(HOOKS[hook][2], payload, project_env="CLAUDE_PROJECT_DIR")
    if found.kind != "stop":
        return found
    return dataclasses.replace(found, block_cap=stop_block_cap(), transcript=payload_text(payload, "transcript_path"))


STOP_BLOCK_CAP = 8  # 2.1.332: `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP ?? 8`; a block beyond that many in a row ends the turn


def stop_block_cap() -> int | None:
    """The Stop-hook blocks in a row Claude Code allows in one turn (None: no cap)."""
    raw = os.environ.get("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", "").strip()
    cap = int(raw) if raw.lstrip("-").isdigit() and len(raw) < 10 else STOP_BLOCK_CAP
    return cap if cap > 0 else None


def render(hook: str, outcome: Outcome) -> str:
    """Claude Code's JSON for the outcome ("" when there is nothing to say). The session's end
    says `continue: false`: Claude Code then ends the turn even when another Stop hook blocks,
    such as the one `/goal` adds (2.1.332: the goal pauses, "a hook ended the turn"); a stop
    with no output would let that hook send the agent back (docs/agent-clis.md)."""
    name, _, kind = HOOKS[hook]
    return claude_shaped_output(name, kind, outcome, ends=True)


def usage(transcript: str) -> Usage | None:
    """Its use as its transcript tells it (agent_cli/usage.py reads the form)."""
    from git_handoff.agent_cli import usage as reader  # not imported by the hooks themselves

    return reader.claude_transcript(transcript)


def setup_notes(status: Mapping[str, object]) -> Sequence[str]:
    return ()


# -- what it prints (docs/agent-limits.md has the table) ------------------------------------------

# Claude Code 2.1.332 (`claude -p`: on stdout, exit 1)
LIMITS: tuple[LimitRule, ...] = (
    # subscription plan limits: "You've hit your 5-hour limit · resets 3:03pm (Europe/Berlin)",
    # "You've hit your weekly limit · resets Dec 5, 5:53pm (America/New_York)", "... session limit · resets 8pm"
    (USAGE_LIMIT, lazy(r"(?i)\bhit your (?:[\w-]+ )*limit\b.*?\bresets?\b"), "clock"),
    (USAGE_LIMIT, lazy(r"(?i)usage limit reached\|(\d{9,11})"), "epoch"),  # older CLIs
    (USAGE_LIMIT, lazy(r"(?i)(?:\bhit your (?:[\w-]+ )*limit\b|usage limit reached|out of (?:extra )?usage"
                       r"|usage credits)"), None),
    # "API Error: Request rejected (429) · This request would exceed the rate limit ..."; logged in
    # with a plan: "API Error: Server is temporarily limiting requests (not your usage limit) · ..."
    (RATE_LIMIT, lazy(r"(?i)API Error: (?:Request rejected \(429\)|429\b|Server is temporarily limiting requests)"
                      r"|rate_limit_error"), None),
    # "API Error: 529 Overloaded. This is a server-side issue ...", "API Error: 500 Internal server error. ...",
    # "API Error: 503 Service unavailable. ..."
    (OUTAGE, lazy(r"(?i)API Error: (?:Request rejected \()?(?:5\d\d)\b|overloaded_error"
                  r"|API Error: (?:Connection error|Request timed out)"), None),
)



def own_words(line: str) -> str | None:
    """What of one line of its output is its own words for a limit (agent_output reads them).

    With `-p --output-format json` (and `stream-json`) its error is only inside the result
    line: `{"type": "result", "is_error": true, "terminal_reason": "api_error",
    "api_error_status": 429, "result": "You've hit your 5-hour limit · resets 3pm ...", ...}`
    (2.1.332). That line is its own; its `result` text is what counts, read like a printed
    line (so a task's title it holds is still a foreign text). Any other JSON object it
    prints is an event of its stream (the model's text, a tool's output): never its error.
    A line of plain text is itself.
    """
    text = line.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return line
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return line  # not JSON after all: plain text
    if not isinstance(record, dict):
        return line
    said = record.get("result")
    if (record.get("type") == "result" and record.get("is_error") is True and isinstance(said, str)
            and (record.get("terminal_reason") == "api_error" or "api_error_status" in record)):
        return said
    return None


# its status line while a turn runs: "✻ Churning… (12s · esc to interrupt)"
BUSY = r"\besc to interrupt\b"

_WORKSPACE = lazy(r"Accessing workspace:\s*\n\s*(/[^\n]*)")
_MCP_SERVER = lazy(r"New MCP servers? found in this project:\s*([A-Za-z0-9_.-]{1,64})")
_KEY_TAIL = lazy(r"ANTHROPIC_API_KEY:\s*\S*\.\.\.(\S{1,20})")


def person_prompt(screen: str) -> str | None:
    """Claude Code 2.1.332's screens on a fresh HOME (docs/agent-limits.md)."""
    text = " ".join(screen.split())
    if "Unable to connect to Anthropic services" in text or "Failed to connect to api.anthropic.com" in text:
        return ('claude stopped on its first-run screens, which need api.anthropic.com: set "hasCompletedOnboarding": '
                'true in ~/.claude.json (see docs/agent-clis.md)')
    if "Choose the text style" in text:
        return 'claude is on its first-run theme screen: set "hasCompletedOnboarding": true in ~/.claude.json'
    if "Accessing workspace:" in text or "Yes, I trust this folder" in text:
        found = _WORKSPACE.search(screen)
        folder = json_string(found.group(1)) if found else '"<this directory>"'
        return (f'claude is asking whether to trust this folder: set "projects": {{{folder}: '
                '{"hasTrustDialogAccepted": true}} in ~/.claude.json')
    if "Do you want to use this API key" in text or "Detected a custom API key" in text:
        tail = _KEY_TAIL.search(text)
        key = json_string(tail.group(1)) if tail else "<the key's last 20 characters>"
        return (f'claude is asking whether to use ANTHROPIC_API_KEY: set "customApiKeyResponses": {{"approved": '
                f'[{key}]}} in ~/.claude.json (the key\'s last 20 characters)')
    if "New MCP server found in this project" in text or "New MCP servers found in this project" in text:
        found = _MCP_SERVER.search(text)
        name = json_string(found.group(1)) if found else '"handoff"'
        return (f"claude is asking whether to use the project's MCP server {name}: set \"enabledMcpjsonServers\": "
                f"[{name}] in .claude/settings.local.json (`git handoff hooks install --agent claude --unattended` "
                'writes it), or "enableAllProjectMcpServers": true there')
    if "Bypass Permissions mode" in text and ("Yes, I accept" in text or "No, exit" in text):
        return ('claude is asking to accept Bypass Permissions mode: set "bypassPermissionsModeAccepted": true in '
                '~/.claude.json, or "skipDangerousModePermissionPrompt": true in .claude/settings.local.json '
                '(`git handoff hooks install --agent claude --unattended` writes it)')
    if "Select login method" in text or "Not logged in" in text and "/login" in text:
        return ("claude is not logged in: set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`) "
                "in the relay's environment")
    return None
