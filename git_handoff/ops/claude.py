"""Entry points the hooks call: `git handoff hook EVENT`.

Claude Code reads a hook's stdout (JSON) and its exit code; exit 2 from a Stop hook
would block the stop with stderr as the reason. So every entry point here returns
text to print and never raises: where the repository is not initialized, or the
payload is empty or malformed, it is a silent no-op.
"""

from __future__ import annotations

import json
import os
from typing import Any

from git_handoff import local, schedule, state_files
from git_handoff.errors import HandoffError, Negative
from git_handoff.gitrepo import Repo
from git_handoff.model import Task, now_iso
from git_handoff.ops import handoff, prompt, recovery
from git_handoff.store import StateStore

EVENTS = ("post-commit", "claude-session-start", "claude-stop", "claude-subagent-stop", "claude-pre-compact")
SAFETY_VALVE = 8  # consecutive blocks without state progress, then the stop is allowed
VALVE_FILE = "stop-hook.json"


def parse_payload(text: str | None) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _store() -> StateStore | None:
    try:
        store = StateStore(Repo.discover())
    except HandoffError:
        return None
    return store if store.is_initialized() else None


def run(event: str, stdin_text: str | None) -> str:
    """Handle one hook event; returns what to print on stdout (maybe nothing)."""
    payload = parse_payload(stdin_text)
    store = _store()
    if store is None:
        return ""
    if event == "post-commit":
        post_commit(store)
        return ""
    if event == "claude-session-start":
        return json.dumps(session_start(store, payload))
    if event in ("claude-stop", "claude-subagent-stop"):
        decision = stop(store, payload, event)
        return json.dumps(decision) if decision else ""
    if event == "claude-pre-compact":
        pre_compact(store)
        return ""
    return ""


# -- git post-commit -----------------------------------------------------------------


def post_commit(store: StateStore) -> dict[str, Any] | None:
    """The hook's slow side, run once the session's commit threshold is reached."""
    repo = store.repo
    opened = local.open_session(repo)
    local.clear_hook_state(repo)
    if opened is None:
        return None
    threshold = local.commits_per_session(repo)
    base = opened.get("base")
    if threshold is None or not base:
        return None
    proc = repo.git("rev-list", "--count", f"{base}..HEAD", check=False)
    count = int(proc.stdout.decode().strip() or 0) if proc.returncode == 0 else 0
    if count < threshold:
        local.write_hook_state(repo, base, count)
        return None
    return handoff.write_doc(store, trigger="commits")


# -- Claude Code -----------------------------------------------------------------------


def _next_task(store: StateStore) -> Task | None:
    return schedule.next_eligible(store.snapshot().tasks(), now_iso())


def session_start(store: StateStore, payload: dict[str, Any]) -> dict[str, Any]:
    """SessionStart: open (or keep, on resume) this worktree's session, ACK, inject the prompt."""
    source = payload.get("source") if isinstance(payload.get("source"), str) else "startup"
    note = ""
    opened = local.open_session(store.repo)
    # resume and compact continue the open session (its pre-compact document stays pending
    # for the next one). An open session nobody acknowledged yet was started for this agent
    # (by `session start` or the relay): adopt it. Otherwise startup and clear begin a new
    # session, with recovery.
    pinned = os.environ.get("HANDOFF_SESSION", "").strip()
    record = state_files.read_session(store.snapshot(), int(opened["session"])) if opened else None
    if pinned.isdigit() and int(pinned) > 0:
        store.session = int(pinned)
    elif opened is not None and (source in ("resume", "compact") or (record is not None and not record.get("ack"))):
        store.session = int(opened["session"])
    else:
        try:
            recovery.start(store)
        except Negative as exc:
            note = f"git handoff: {exc.message}. Do not start new work: stop here.\n\n"
    if store.session > 0 and not note:
        try:
            handoff.ack(store)
        except HandoffError as exc:
            note = f"git handoff: ack failed: {exc.message}\n\n"
    context = note + prompt.render_prompt(store)
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


def _valve(store: StateStore) -> dict[str, Any]:
    try:
        data = json.loads((store.repo.git_dir / "handoff" / VALVE_FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_valve(store: StateStore, blocks: int, state: str | None) -> None:
    path = store.repo.worktree_dir / VALVE_FILE
    path.write_text(json.dumps({"blocks": blocks, "state": state}) + "\n")


def stop_reason(store: StateStore) -> str | None:
    """Why this session must go on (the next task), or None when it may stop."""
    repo = store.repo
    snap = store.snapshot()
    number = state_files.current_number(store)
    if number > 0:
        store.session = number
        if handoff.handed_off(store, number):
            return None
        done = len(state_files.completed_ids(snap, number))
        per_session = local.tasks_per_session(repo)
        if state_files.limit_reached(snap, number) or (per_session is not None and done >= per_session):
            handoff.write_doc(store, trigger="stop")
            return None
    worker = local.worker_identity(repo)
    mine = [t for t in snap.tasks().values() if t.status == "in_progress" and t.claimed_by == worker]
    if mine:
        t = mine[0]
        return (f"git handoff: task [{t.id}] {t.title} is in progress. Finish it: make its check pass and run "
                f"`git handoff done {t.id}`, or give up with `git handoff fail {t.id} --reason \"...\"`.")
    if snap.config().mode == "exclusive" and any(t.status == "in_progress" for t in snap.tasks().values()):
        return None  # another worker holds the one claim exclusive mode allows
    task = _next_task(store)
    if task is None:
        return None
    retry = (f" (retry: attempt {task.attempts + 1}/{task.max_attempts}; last error: {task.error_log[-1]})"
             if task.status == "failed" and task.error_log else "")
    check = f" Its check: `{task.check}`." if task.check else ""
    return (f"git handoff: eligible work remains. Next task: [{task.id}] {task.title}{retry}.{check} "
            f"Run `git handoff claim {task.id}`, checkpoint as you go, then `git handoff done {task.id}`.")


def stop(store: StateStore, payload: dict[str, Any], event: str = "claude-stop") -> dict[str, Any] | None:
    """Stop / SubagentStop: block while eligible work remains (with a safety valve)."""
    reason = stop_reason(store)
    head = store.head()
    if reason is None:
        _save_valve(store, 0, head)
        return None
    valve = _valve(store)
    blocks = int(valve.get("blocks") or 0) if isinstance(valve.get("blocks"), int) else 0
    if payload.get("stop_hook_active") is not True or valve.get("state") != head:
        blocks = 0
    if blocks >= SAFETY_VALVE:
        _save_valve(store, 0, head)
        return None
    _save_valve(store, blocks + 1, head)
    return {"decision": "block", "reason": reason}


def pre_compact(store: StateStore) -> dict[str, Any]:
    """PreCompact: write the session's handoff document while the context is still whole."""
    return handoff.write_doc(store, trigger="pre-compact")
