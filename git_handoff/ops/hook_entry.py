"""`git handoff hook EVENT`: the one entry point every installed hook calls.

It finds the adapter that owns EVENT (`claude-*`: Claude Code), lets the event core
decide, and returns (stdout, stderr) for the caller to print. It never raises for bad
input: an empty, malformed or non-object payload is read as `{}`, and a repository that
is not initialized (or no repository) gives no output at all.
"""

from __future__ import annotations

import json
from typing import Any

from git_handoff.ops import agent_events, claude

ADAPTERS = (claude,)
EVENTS: tuple[str, ...] = ("post-commit", *(hook for adapter in ADAPTERS for hook in adapter.HOOKS))


def parse_payload(text: str | None) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def run(hook: str, stdin_text: str | None) -> tuple[str, str]:
    """Handle one hook call; (what to print on stdout, a warning for stderr)."""
    if hook == "post-commit":
        store = agent_events.find_store(agent_events.Event(kind="post-commit"))
        if store is not None:
            agent_events.post_commit(store)
        return "", ""
    for adapter in ADAPTERS:
        if hook in adapter.HOOKS:
            outcome = agent_events.handle(adapter.event(hook, parse_payload(stdin_text)))
            return adapter.render(hook, outcome), outcome.warning or ""
    return "", ""
