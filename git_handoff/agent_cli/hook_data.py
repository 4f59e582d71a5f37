"""The agent-neutral terms of a hook call: what happened (`Event`) and what the agent is
told (`Outcome`). Plain data, shared by the event core (ops/hook_decisions.py) and every
agent CLI's module (agent_cli/claude.py, agent_cli/codex.py, agent_cli/gemini.py), with the
payload and output shapes the adapters have in common and the little else those modules
share at run time (the kinds of limit, the plain hook entries, a setting quoted in a
message): every agent hook imports this module, and a module more would cost each hook
the import of one more file."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from git_handoff.core import field_checks


@dataclass(frozen=True)
class Event:
    """One hook call, in the agent-neutral terms the core decides on."""

    kind: str
    source: str = "startup"  # session_start: startup | resume | compact | clear
    cwd: str | None = None  # where the agent works (payload first, then the project dir)
    stop_hook_active: bool = False  # the agent is continuing because a stop hook blocked
    agent_session: str | None = None  # the agent's own conversation id
    trigger: str | None = None  # pre_compact: manual | auto; session_end: the reason
    set_aside: tuple[str, ...] = ()  # payload fields dropped by the text rules (payload_text)
    # the agent's transcript file (JSON lines): its use (ops/usage.py), where a Stop block's count resets
    # (ops/stop_cap.py)
    transcript: str | None = None
    cli: str | None = None  # the agent CLI whose hook this is (its NAME; hook_entry sets it)
    block_cap: int | None = None  # stop: the CLI ends the turn itself after this many blocks in a row (ops/stop_cap.py)


@dataclass(frozen=True)
class Outcome:
    """What the agent is told: context to inject, a reason to keep working, a warning, and
    (stop) that the turn ends here whatever another hook of the CLI says (`end`, the reason:
    a CLI's own goal loop must not keep the agent past the session's end)."""

    context: str | None = None
    block: str | None = None
    warning: str | None = None
    end: str | None = None


# Lines are lines on hook payloads too: a text field is one line of at
# most this many characters (paths: field_checks.PATH_MAX). A field that breaks the rule is
# *sanitized* (handled as absent, and the hook warns on stderr) rather than refused: a
# hook never fails its caller, and refusing would stop the agent over a field the
# harness only reads. No payload text is written into the state.
PAYLOAD_TEXT_MAX = 200
PATH_FIELDS = ("cwd", "transcript_path")


def payload_text(payload: dict[str, Any], key: str) -> str | None:
    """A non-empty string field of a hook payload that is one line within its cap, else
    None (wrong types and broken text are absent)."""
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        return None
    limit = field_checks.PATH_MAX if key in PATH_FIELDS else PAYLOAD_TEXT_MAX
    return None if field_checks.line_problem(value, limit) else value


def set_aside(payload: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, ...]:
    """The fields among `keys` that are text but break the line rules (payload_text)."""
    return tuple(k for k in keys if isinstance(payload.get(k), str) and payload[k] and payload_text(payload, k) is None)


def payload_event(kind: str, payload: dict[str, Any], *, project_env: str | None = None,
                  cwd: str | None = None) -> Event:
    """The fields every agent CLI's payload spells alike (session_id, cwd, source,
    trigger or reason, stop_hook_active). `cwd`, when given, was already found by the
    adapter; otherwise the payload's, then the project directory in `project_env`."""
    if cwd is None:
        cwd = payload_text(payload, "cwd") or (os.environ.get(project_env) if project_env else None) or None
    return Event(kind=kind, source=payload_text(payload, "source") or "startup", cwd=cwd,
                 stop_hook_active=payload.get("stop_hook_active") is True,
                 agent_session=payload_text(payload, "session_id"),
                 trigger=payload_text(payload, "trigger") or payload_text(payload, "reason"),
                 transcript=payload_text(payload, "transcript_path"),
                 set_aside=set_aside(payload, ("cwd", "source", "session_id", "trigger", "reason",
                                               "transcript_path")))


def claude_shaped_output(event_name: str, kind: str, outcome: Outcome, *, ends: bool = False) -> str:
    """The hook JSON Claude Code reads, and Codex reads in the same shape: context as
    hookSpecificOutput.additionalContext, a block as decision/reason, a warning as
    systemMessage (shown to the person watching); with `ends` (a CLI that honours it), a stop
    that ends the turn as `continue: false` and its stopReason. "" when there is nothing to say."""
    out: dict[str, Any] = {}
    if kind == "session_start" and outcome.context is not None:
        out["hookSpecificOutput"] = {"hookEventName": event_name, "additionalContext": outcome.context}
    if kind in ("stop", "subagent_stop") and outcome.block:
        out["decision"] = "block"
        out["reason"] = outcome.block
    elif ends and kind == "stop" and outcome.end:
        out["continue"] = False
        out["stopReason"] = outcome.end
    if outcome.warning and not outcome.block:
        out["systemMessage"] = outcome.warning
    return json.dumps(out) if out else ""


# what a limit a CLI printed is (agent_output.Limit.kind; the first item of a LimitRule)
USAGE_LIMIT = "usage_limit"
RATE_LIMIT = "rate_limit"
OUTAGE = "outage"


# The settings of a CLI that needs none of what they switch on (handler names, hook trust,
# detached hooks, unattended settings, a TOML or list-shaped MCP entry, a plugin file):
# the modules of such CLIs re-export these (qwen.py, copilot.py, opencode.py) rather
# than spell each one again.
NAMED_HANDLERS = False
TRUSTED_HOOKS = False
DETACHED: tuple[str, ...] = ()
UNATTENDED = False
MCP_TOML = False
MCP_EXTRA: tuple[tuple[str, Any], ...] = ()
MCP_COMMAND_LIST = False
PLUGIN: str | None = None


def json_string(text: str) -> str:
    """`text` as a JSON string for a setting a message quotes (printable, at most 200 characters)."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else "?" for c in text.strip())[:200] + '"'


def entries(hooks: Mapping[str, tuple[str, str | None, str]]) -> dict[str, tuple[str | None, str]]:
    """The plain `config_entries()` of a HOOKS table: event -> (matcher, `git handoff hook HOOK`)."""
    return {event: (matcher, f"git handoff hook {hook}") for hook, (event, matcher, _) in hooks.items()}


def plain_words(line: str) -> str | None:
    """`own_words` (agent_cli/protocol.py) of a CLI whose limits are plain text: every line as it is."""
    return line
