"""The Gemini CLI adapter of the agent-hook event core (`ops/hook_decisions.py`).

Gemini CLI (checked against @google/gemini-cli 0.61.0) runs the command hooks of
`.gemini/settings.json` (`hooks`: event -> groups -> handlers, like Claude Code) with
a JSON payload on stdin: `session_id`, `transcript_path`, `cwd`, `hook_event_name`,
`timestamp`, plus `source` for SessionStart, `stop_hook_active` for AfterAgent,
`trigger` for PreCompress and `reason` for SessionEnd. Its events map onto the core:

- SessionStart -> session_start; `hookSpecificOutput.additionalContext` is prepended
  to the prompt (headless) or becomes the first turn (interactive);
- AfterAgent (the end of the agent's turn) -> stop; `{"decision": "deny", "reason"}`
  sends the reason back as a new prompt. `stop_hook_active` stays false on those
  retries, so the core's valve (which counts blocks per agent session without a
  completed task) is what ends a loop, not that flag;
- PreCompress -> the document, but only when the CLI really compresses: 0.61.0 fires
  PreCompress at every compression *check* (each turn), before it compares the last
  prompt's token count with `model.compressionThreshold` x the model's token limit,
  and no event follows a compression. So the adapter makes the same comparison from
  the session transcript (the last model message's `tokens.input`) and the settings;
  when it cannot tell, it writes nothing;
- SessionEnd -> session_end.

It also holds the rest of what git handoff knows of Gemini CLI (the `AgentCli` protocol,
agent_cli/protocol.py): its MCP configuration, the texts of its limits and outages, its
screens that wait for a person, what its hooks still need once installed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from git_handoff.agent_cli.hook_data import (
    OUTAGE,
    RATE_LIMIT,
    USAGE_LIMIT,
    Event,
    Outcome,
    entries,
    payload_event,
    payload_text,
)
from git_handoff.core.patterns import lazy

if TYPE_CHECKING:
    from git_handoff.agent_cli.protocol import LimitRule
    from git_handoff.agent_cli.usage import Usage

NAME = "gemini"
LABEL = "Gemini CLI"
PROGRAMS = ("gemini",)
PACKAGE = "@google/gemini-cli"
VERSION = "0.61.0"  # the suite proves it (.ci/run installs it): raise both on purpose
CONFIG = ".gemini/settings.json"
COMMAND_PREFIX = "git handoff hook gemini-"
NAMED_HANDLERS = True  # its /hooks enable|disable name them
TIMEOUTS: tuple[tuple[str, int], ...] = ()
TRUSTED_HOOKS = False
DETACHED: tuple[str, ...] = ()
UNATTENDED = False
# beside the hooks. Gemini waits `timeout` ms for a server to connect in `gemini mcp list` (5 s
# when unset: our server's start-up can take longer on a loaded machine) and for each tool call
# (600,000 when unset): the value keeps the tool-call default and gives the connection the same
MCP_CONFIG = ".gemini/settings.json"
MCP_KEY = "mcpServers"
MCP_TOML = False
MCP_EXTRA: tuple[tuple[str, Any], ...] = (("timeout", 600_000),)
MCP_COMMAND_LIST = False
PLUGIN: str | None = None

# hook name -> (Gemini CLI event, matcher, core event kind)
HOOKS: dict[str, tuple[str, str | None, str]] = {
    "gemini-session-start": ("SessionStart", None, "session_start"),
    "gemini-after-agent": ("AfterAgent", None, "stop"),
    "gemini-pre-compress": ("PreCompress", None, "compacting"),
    "gemini-session-end": ("SessionEnd", None, "session_end"),
}

DEFAULT_THRESHOLD = 0.5  # model.compressionThreshold when no settings file sets it
TOKEN_LIMIT = 1_048_576  # every Gemini model's context window in 0.61.0's table ...
SMALL_LIMITS = {"gemma-4-31b-it": 256_000, "gemma-4-26b-a4b-it": 256_000}  # ... but these
TRANSCRIPT_TAIL = 1 << 20  # bytes read from the end of a transcript


def config_entries() -> dict[str, tuple[str | None, str]]:
    """What `hooks install --agent gemini` merges into .gemini/settings.json."""
    return entries(HOOKS)


def event(hook: str, payload: dict[str, Any]) -> Event:
    _, _, kind = HOOKS[hook]
    cwd = payload_text(payload, "cwd") or os.environ.get("GEMINI_PROJECT_DIR") or None
    if kind == "compacting" and not will_compress(payload, cwd):
        kind = "none"  # a compression check that will not compress: nothing to do
    return payload_event(kind, payload, cwd=cwd)


def render(hook: str, outcome: Outcome) -> str:
    """Gemini CLI's JSON for the outcome ("" when there is nothing to say)."""
    name, _, kind = HOOKS[hook]
    out: dict[str, Any] = {}
    if kind == "session_start" and outcome.context is not None:
        out["hookSpecificOutput"] = {"hookEventName": name, "additionalContext": outcome.context}
    if kind == "stop" and outcome.block:
        out["decision"] = "deny"
        out["reason"] = outcome.block
    if outcome.warning and not outcome.block:
        out["systemMessage"] = outcome.warning
    return json.dumps(out) if out else ""


# -- will this PreCompress compress? ------------------------------------------------------


def _last_prompt(transcript: Path) -> tuple[int, str | None] | None:
    """(input tokens, model) of the last model message in a session transcript (JSON lines)."""
    try:
        with transcript.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - TRANSCRIPT_TAIL))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(record, dict) or record.get("type") != "gemini":
            continue
        tokens = record.get("tokens")
        count = tokens.get("input") if isinstance(tokens, dict) else None
        if isinstance(count, int) and not isinstance(count, bool):
            model = record.get("model")
            return count, model if isinstance(model, str) else None
    return None


def _threshold(cwd: str | None) -> float:
    """model.compressionThreshold: the project's settings win over the user's."""
    home = os.environ.get("GEMINI_CLI_HOME") or str(Path.home())
    places = [Path(cwd) / CONFIG] if cwd else []
    places.append(Path(home) / ".gemini" / "settings.json")
    for place in places:
        try:
            data = json.loads(place.read_text())
        except (OSError, ValueError, RecursionError):
            continue
        model = data.get("model") if isinstance(data, dict) else None
        value = model.get("compressionThreshold") if isinstance(model, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1:
            return float(value)
    return DEFAULT_THRESHOLD


def will_compress(payload: dict[str, Any], cwd: str | None) -> bool:
    if payload.get("trigger") == "manual":
        return True  # /compress always compresses
    transcript = payload_text(payload, "transcript_path")
    last = _last_prompt(Path(transcript)) if transcript else None
    if last is None:
        return False
    count, model = last
    limit = SMALL_LIMITS.get(model or "", TOKEN_LIMIT)
    return count >= _threshold(cwd) * limit


def usage(transcript: str) -> Usage | None:
    """Its use as its transcript tells it (agent_cli/usage.py reads the form)."""
    from git_handoff.agent_cli import usage as reader  # not imported by the hooks themselves

    return reader.gemini_chat(transcript)


def setup_notes(status: Mapping[str, object]) -> Sequence[str]:
    return ["Gemini CLI reads .gemini/settings.json only in a trusted folder: trust it when "
            "Gemini asks, or headless set GEMINI_CLI_TRUST_WORKSPACE=true (--skip-trust comes "
            "too late for the project's hooks)"]


# -- what it prints (docs/agent-limits.md has the table) ------------------------------------------

# Gemini CLI 0.61.0 (`gemini -p`: on stderr, exit 1, its error class then the API's error dumped)
LIMITS: tuple[LimitRule, ...] = (
    # a per-day quota: "TerminalQuotaError: You have exhausted your daily quota on this model."
    (USAGE_LIMIT, lazy(r"(?i)exhausted your daily quota|QUOTA_EXHAUSTED|INSUFFICIENT_G1_CREDITS"), None),
    # 503 after its retries: "RetryableQuotaError: The model is overloaded. Please try again later."
    (OUTAGE, lazy(r"(?i)QuotaError: The model is overloaded|MODEL_CAPACITY_EXHAUSTED"
                  r"|exhausted your capacity"), None),
    # a per-minute quota past its retries or longer than 300 s: "TerminalQuotaError: You exceeded your current
    # quota, ... Please retry in 400.0s." then "Suggested retry after 400s."
    (RATE_LIMIT, lazy(r"(?:Terminal|Retryable)QuotaError"), "seconds"),
    (RATE_LIMIT, lazy(r"(?i)RESOURCE_EXHAUSTED|exceeded your current quota|status 429\b"
                      r"|\b429 Too Many Requests"), "seconds"),
    # 500 after its retries: "_ApiError: {"error":{"code":500,"message":"An internal error has occurred. ..."
    (OUTAGE, lazy(r'ApiError: \{"error":\{"code":5\d\d\b'), None),
    (OUTAGE, lazy(r"(?i)model is overloaded|\b(?:status|code)\W{0,3}(?:500|502|503|504)\b"
                  r"|An internal error has occurred|\bUNAVAILABLE\b"), None),
)

# its status line while a turn runs: "(esc to cancel, 5s)"
BUSY = r"\besc to cancel\b"


def person_prompt(screen: str) -> str | None:
    """Gemini CLI 0.61.0's screens (docs/agent-limits.md)."""
    text = " ".join(screen.split())
    if "Do you trust the files in this folder?" in text or "Trust folder (" in text:
        return ("gemini is asking whether to trust this folder: set GEMINI_CLI_TRUST_WORKSPACE=true in the relay's "
                'environment, or add {"<this folder>": "TRUST_FOLDER"} to ~/.gemini/trustedFolders.json')
    if "Gemini CLI is not running in a trusted directory" in text:
        # headless (CI=true or GITHUB_ACTIONS=true in its environment, or no terminal) it asks
        # nobody: it exits 55 with this line
        return ("gemini refuses an untrusted folder when it runs headless (CI=true or GITHUB_ACTIONS=true, or no "
                "terminal): set GEMINI_CLI_TRUST_WORKSPACE=true in the relay's environment, or add "
                '{"<this folder>": "TRUST_FOLDER"} to ~/.gemini/trustedFolders.json')
    if "How would you like to authenticate" in text or "Get started" in text and "Use Gemini API Key" in text:
        return ('gemini is asking how to log in: set "security": {"auth": {"selectedType": "gemini-api-key"}} in '
                "~/.gemini/settings.json and GEMINI_API_KEY in the relay's environment")
    return None
