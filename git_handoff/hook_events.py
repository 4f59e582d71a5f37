"""The agent-neutral terms of a hook call: what happened (`Event`) and what the agent is
told (`Outcome`). Plain data, shared by the event core (ops/agent_events.py) and every
agent CLI's adapter (ops/claude.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """One hook call, in the agent-neutral terms the core decides on."""

    kind: str
    source: str = "startup"  # session_start: startup | resume | compact | clear
    cwd: str | None = None  # where the agent works (payload first, then the project dir)
    stop_hook_active: bool = False  # the agent is continuing because a stop hook blocked
    agent_session: str | None = None  # the agent's own conversation id
    trigger: str | None = None  # pre_compact: manual | auto; session_end: the reason


@dataclass(frozen=True)
class Outcome:
    """What the agent is told: context to inject, a reason to keep working, a warning."""

    context: str | None = None
    block: str | None = None
    warning: str | None = None
