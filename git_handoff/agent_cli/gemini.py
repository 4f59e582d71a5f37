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
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from git_handoff.agent_cli.hook_data import Event, Outcome, payload_event, payload_text

NAME = "gemini"
CONFIG = ".gemini/settings.json"
COMMAND_PREFIX = "git handoff hook gemini-"

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
    return {event: (matcher, f"git handoff hook {hook}") for hook, (event, matcher, _) in HOOKS.items()}


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
