"""The agent CLI's own cap on Stop-hook blocks, and the Stop hook that never runs into it.

Claude Code ends a turn itself once its Stop hook blocked it more than
`CLAUDE_CODE_STOP_HOOK_BLOCK_CAP` times in a row (8 in 2.1.332 when unset; 0 or less: no
cap), and tells nobody but its own screen. "In a row" is its count of blocks with no tool
call between them: a tool call after a block (other than its goal tools) starts the count
over, so a turn that works between stops is never ended by it. Its adapter
(agent_cli/claude.py) puts the cap and the transcript's path in the Stop event; the Stop
hook (ops/hook_decisions.py) counts its blocks the same way — a stop with
`stop_hook_active` continues the chain unless the transcript shows a tool call after the
last block (read from the size it had then), any other stop starts a new one; without a
transcript to read, every block of the turn counts, so the hook lets go early rather than
late — and, with the cap reached, lets the turn end itself: a warning on the screen, a
blocker in the session (so the handoff document says the cap ended the turn, not the
work), and, in a relay's session, the document at once.
"""

from __future__ import annotations

import json
import os

from git_handoff.agent_cli.hook_data import Event
from git_handoff.core.errors import HandoffError
from git_handoff.state import this_clone
from git_handoff.state.store import StateStore

# 2.1.332: tool calls after which its count goes on (the goal's own tools); any other starts it over
GOAL_TOOLS = frozenset({"SetGoal", "ProposeGoal", "PauseGoal", "GetGoal"})
READ_AT_MOST = 8 << 20  # bytes of the transcript read after the last block


def chain(valve: dict[str, object], event: Event) -> int:
    """The blocks in a row of this turn so far, as the CLI counts them."""
    count = valve.get("chain")
    same = event.stop_hook_active and valve.get("agent_session") == event.agent_session
    if not (same and isinstance(count, int) and count >= 0):
        return 0
    at = valve.get("transcript_at")
    return 0 if isinstance(at, int) and _tool_call_since(event.transcript, at) else count


def reached(chain: int, event: Event) -> bool:
    """Would one more block of this turn be overridden by the CLI's own cap?"""
    return event.block_cap is not None and chain >= event.block_cap


def transcript_size(event: Event) -> int | None:
    """The transcript's size now (at a block), else None."""
    if not event.transcript:
        return None
    try:
        return os.stat(event.transcript).st_size
    except OSError:
        return None


def _tool_call_since(transcript: str | None, at: int) -> bool:
    """Did the agent call a tool (not a goal tool) in what the transcript gained after `at`?
    False when that cannot be read (the count goes on: the hook lets go early)."""
    if not transcript:
        return False
    try:
        with open(transcript, "rb") as f:
            if os.fstat(f.fileno()).st_size < at:
                return False  # not the file it was
            f.seek(at)
            data = f.read(READ_AT_MOST)
    except OSError:
        return False
    for line in data.splitlines():
        if b'"tool_use"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "assistant" else None
        content = message.get("content") if isinstance(message, dict) else None
        for item in content if isinstance(content, list) else ():
            if isinstance(item, dict) and item.get("type") == "tool_use" and item.get("name") not in GOAL_TOOLS:
                return True
    return False


def note(event: Event) -> str:
    return (f"git handoff: the turn ended at the agent CLI's Stop-hook block cap (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP="
            f"{event.block_cap}) with work left; the next turn or session goes on from here")


def record(store: StateStore, text: str) -> None:
    """The cap as a blocker of this worktree's open session (best effort: a hook never fails)."""
    from git_handoff.ops import sessions  # noqa: PLC0415  (only when the cap is reached: no import cost per hook)

    opened = this_clone.open_session(store.repo)
    if opened is None:
        return
    try:
        sessions.blocker(StateStore(store.repo, session=int(opened["session"])), text)
    except HandoffError:
        pass
