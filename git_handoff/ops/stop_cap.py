"""The agent CLI's own cap on Stop-hook blocks, and the Stop hook that never runs into it.

Claude Code ends a turn itself once its Stop hook blocked it more than
`CLAUDE_CODE_STOP_HOOK_BLOCK_CAP` times in a row (8 in 2.1.332 when unset; 0 or less: no
cap), and tells nobody but its own screen. Its adapter (agent_cli/claude.py) puts the cap
in the Stop event (`Event.block_cap`); the Stop hook (ops/hook_decisions.py) counts its
blocks of one turn (a stop with `stop_hook_active` continues the chain, any other starts
a new one) and, with the cap reached, lets the turn end itself: a warning on the screen,
a blocker in the session (so the handoff document says the cap ended the turn, not the
work), and, in a relay's session, the document at once.
"""

from __future__ import annotations

from git_handoff.agent_cli.hook_data import Event
from git_handoff.core.errors import HandoffError
from git_handoff.state import this_clone
from git_handoff.state.store import StateStore


def chain(valve: dict[str, object], event: Event) -> int:
    """The blocks in a row of this turn so far, as the CLI counts them."""
    count = valve.get("chain")
    same = event.stop_hook_active and valve.get("agent_session") == event.agent_session
    return count if same and isinstance(count, int) and count >= 0 else 0


def reached(valve: dict[str, object], event: Event) -> bool:
    """Would one more block of this turn be overridden by the CLI's own cap?"""
    return event.block_cap is not None and chain(valve, event) >= event.block_cap


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
