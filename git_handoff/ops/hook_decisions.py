"""The agent-hook event core, shared by every agent CLI.

An agent's adapter (Claude Code: `agent_cli/claude.py`) turns the CLI's hook payload into an
`Event` and renders the `Outcome` back in the CLI's own format; everything the hooks
decide is decided here, once:

- session_start: open (or keep, on resume/compaction) this worktree's session, ACK it,
  give the agent the prompt (or the reason it must not work: a limit, a damaged state);
- stop: keep the agent working while eligible work remains and its limits allow,
  whatever triggered a handoff document, unless a relay is waiting to start the next
  session; at the session's end the turn ends whatever another hook of the CLI says
  (`Outcome.end`: Claude Code's /goal); a safety valve lets an agent that completes
  nothing go after SAFETY_VALVE blocks, and says so;
- subagent_stop: hold a subagent only on in-progress work its worker owns, and never
  twice in a row;
- pre_compact / session_start(source=compact): the document is written once the agent
  really compacted (a `/compact` with nothing to compact writes none);
- session_end: the session closes with its document.

Nothing here raises to the caller: the adapter's entry point never fails the agent.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from git_handoff.agent_cli.hook_data import Event, Outcome
from git_handoff.core import display
from git_handoff.core.errors import HandoffError, Negative, NotARepository, NotInitialized
from git_handoff.core.model import Task, now_iso
from git_handoff.infra.fileio import atomic_write
from git_handoff.ops import handoff, prompt, stop_cap, usage
from git_handoff.ops.open_state import Opened, open_state
from git_handoff.state import claim_index, session_records, status_index, this_clone, writers
from git_handoff.state.store import StateStore

SAFETY_VALVE = 8  # consecutive blocks without a completed task, then the stop is allowed
VALVE_FILE = "stop-hook.json"
SESSION_OVER = "git handoff: this session is over (its handoff document is written); the next session goes on from it"
COMPACT_FILE = "pre-compact.json"  # a compaction announced by PreCompact, confirmed by SessionStart
COMPACTION_SECONDS = 900  # how long a summarizer may take: meanwhile no subagent is held

KINDS = ("session_start", "stop", "subagent_stop", "pre_compact", "compacting", "session_end")


# -- where -----------------------------------------------------------------------------


def find_state(event: Event) -> Opened | None:
    """The initialized state of the repository the agent works in, opened through the one
    door (ops/open_state.py), else None (a no-op). An error of the opening itself (an
    interrupted rollback that cannot be finished) is raised."""
    start = event.cwd if event.cwd and Path(event.cwd).is_dir() else None
    try:
        return open_state(start, initialized=True)
    except (NotARepository, NotInitialized):
        return None


def handle(event: Event) -> Outcome:
    """Decide one event. A non-initialized repository (or none): no output at all."""
    try:
        opened = find_state(event)
    except HandoffError as exc:
        return damaged(event, exc.message)
    if opened is None:
        return Outcome()
    return with_warnings(_decide(opened.store, event), opened.warnings)


def with_warnings(outcome: Outcome, warnings: list[str]) -> Outcome:
    """The outcome with what opening the state had to say (a notice for this clone, a
    rollback finished) before its own warning. The notices were taken from the queue, so
    the agent must read them too: they go first in the text the model reads, the reason
    of a block or the context of a session start (a warning is only shown to the person
    watching, and the agent CLIs drop it beside a block)."""
    said = [f"git handoff: {display.line(w)}" for w in warnings]
    if not said:
        return outcome
    changes = {"warning": "; ".join([*said, *([outcome.warning] if outcome.warning else [])])}
    if outcome.block:
        changes["block"] = "\n".join([*said, "", outcome.block])
    elif outcome.context is not None:
        changes["context"] = "\n".join([*said, "", outcome.context])
    return dataclasses.replace(outcome, **changes)


def _decide(store: StateStore, event: Event) -> Outcome:
    try:
        snap = store.snapshot()
        snap.config()
        snap.meta()
        status_index.summary(snap)  # every task parsed once per tree: a damaged one is found here
    except HandoffError as exc:
        return damaged(event, f"the state cannot be read ({exc.message})")
    try:
        usage.note(store, event)  # before session_end closes the session, after session_start opens it
        outcome = _dispatch(store, event)
        if event.kind == "session_start":
            usage.note(store, event)
        return outcome
    except HandoffError as exc:
        return damaged(event, exc.message)


def _dispatch(store: StateStore, event: Event) -> Outcome:
    if event.kind == "session_start":
        return session_start(store, event)
    if event.kind == "stop":
        return stop(store, event)
    if event.kind == "subagent_stop":
        return subagent_stop(store, event)
    if event.kind == "pre_compact":
        return pre_compact(store, event)
    if event.kind == "compacting":
        return compacting(store, event)
    if event.kind == "session_end":
        return session_end(store, event)
    return Outcome()


def damaged(event: Event, problem: str) -> Outcome:
    """A state the hooks cannot work with: the agent is told (blocked once at a stop), not
    left guessing from a silent hook."""
    what = (f"git handoff: {display.line(problem)}. Do not claim or complete tasks until it is repaired: "
            "run `git handoff status` to see the problem.")
    if event.kind == "session_start":
        return Outcome(context=what, warning=what)
    if event.kind == "stop" and not event.stop_hook_active:
        return Outcome(block=what, warning=what)
    return Outcome(warning=what)


# -- private per-worktree files --------------------------------------------------------------


def _private(store: StateStore, name: str) -> Path:
    return store.repo.git_dir / "handoff" / name


def _read_private(store: StateStore, name: str) -> dict[str, object]:
    try:
        data = json.loads(_private(store, name).read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_private(store: StateStore, name: str, data: dict[str, object] | None) -> None:
    path = _private(store, name)
    if data is None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data) + "\n")


# -- session start -----------------------------------------------------------------------


def relay_session() -> int | None:
    """The session a relay started this agent for (the relay sets HANDOFF_SESSION)."""
    pinned = os.environ.get("HANDOFF_SESSION", "").strip()
    return int(pinned) if pinned.isdigit() and int(pinned) > 0 else None


def session_start(store: StateStore, event: Event) -> Outcome:
    note = ""
    warning = None
    opened = this_clone.open_session(store.repo)
    record = session_records.read_session(store.snapshot(), int(opened["session"])) if opened else None
    pinned = relay_session()
    # resume and compact continue the open session. An open session nobody acknowledged
    # yet was started for this agent (by `session start` or the relay): adopt it.
    # Otherwise startup and clear begin a new session, with recovery.
    if pinned is not None:
        store.session = pinned
    elif opened is not None and (event.source in ("resume", "compact")
                                 or (record is not None and not record.get("ack"))):
        store.session = int(opened["session"])
    else:
        # imported here, as `sessions` below: the recovery matrix brings the whole write
        # side of the work cycle, which the Stop hook (every turn of the agent) never uses
        from git_handoff.ops import session_start as session_start_op  # noqa: PLC0415

        try:
            session_start_op.start(store)
        except Negative as exc:
            note = f"git handoff: {display.line(exc.message)}. Do not start new work: stop here.\n\n"
            warning = note.strip()
    if event.source == "compact":
        compacted(store)
    if store.session > 0 and not note:
        try:
            handoff.ack(store)
        except HandoffError as exc:
            note = f"git handoff: ack failed: {display.line(exc.message)}\n\n"
            warning = note.strip()
    return Outcome(context=note + prompt.render_prompt(store), warning=warning)


def compacted(store: StateStore) -> None:
    """The compaction PreCompact announced happened: write the session's document."""
    announced = _read_private(store, COMPACT_FILE)
    _write_private(store, COMPACT_FILE, None)
    if announced and announced.get("session") == session_records.current_number(store) and store.session > 0:
        handoff.write_doc(store, trigger="pre-compact")


def _compacting(store: StateStore) -> bool:
    """Between PreCompact and SessionStart(source=compact) of this session: a compaction is
    under way (an announcement older than COMPACTION_SECONDS is one that never happened,
    a `/compact` with nothing to compact)."""
    announced = _read_private(store, COMPACT_FILE)
    if not announced or announced.get("session") != session_records.current_number(store):
        return False
    try:
        age = time.time() - _private(store, COMPACT_FILE).stat().st_mtime
    except OSError:
        return False
    return age < COMPACTION_SECONDS


def pre_compact(store: StateStore, event: Event) -> Outcome:
    """Announce the compaction; its document is written when the agent comes back from it
    (SessionStart source=compact), so a `/compact` that had nothing to compact writes none."""
    number = session_records.current_number(store)
    if number > 0:
        _write_private(store, COMPACT_FILE, {"session": number, "trigger": event.trigger, "at": now_iso()})
    return Outcome()


def compacting(store: StateStore, event: Event) -> Outcome:
    """An agent that is about to compact and will not say when it did (Gemini CLI has no
    event after a compression): the document is written now, while the context is whole."""
    number = session_records.current_number(store)
    if number > 0:
        store.session = number
        handoff.write_doc(store, trigger="pre-compact")
    return Outcome()


def session_end(store: StateStore, event: Event) -> Outcome:
    """The agent's session ends: its document (from git facts when it wrote none), then the
    session closes. Under a relay only the document: the relay closes the session itself."""
    number = session_records.current_number(store)
    if number <= 0:
        return Outcome()
    store.session = number
    if not handoff.handed_off(store, number):
        handoff.write_doc(store, trigger="session-end")
    if relay_session() is None and this_clone.open_session(store.repo) is not None:
        from git_handoff.ops import sessions  # noqa: PLC0415 - import cost, see session_start

        sessions.end(store)
    _write_private(store, VALVE_FILE, None)
    return Outcome()


# -- stop ----------------------------------------------------------------------------------


def _next_task(store: StateStore) -> Task | None:
    snap = store.snapshot()
    return claim_index.next_eligible(snap, now_iso(), skip=writers.unapproved(store.repo, snap.commit))


def _in_progress(store: StateStore) -> list[status_index.Row]:
    """The status index's rows of the tasks in progress, in creation order."""
    summary = status_index.summary(store.snapshot())
    if summary is None:
        return []
    found = [r for r in summary.rows.values() if r[status_index.STATUS] == "in_progress"]
    return sorted(found, key=status_index.creation_key)


def _read(store: StateStore, tid: str) -> Task:
    return status_index.read_task(store.snapshot(), tid)


def _mine_in_progress(store: StateStore) -> list[Task]:
    worker = this_clone.worker_identity(store.repo)
    return [_read(store, r[status_index.ID]) for r in _in_progress(store) if r[status_index.CLAIMED_BY] == worker]


def _finish_line(t: Task) -> str:
    return (f"git handoff: task [{t.id}] {display.line(t.title)} is in progress. Finish it: make its check pass and "
            f"run `git handoff done {t.id}`, or give up with `git handoff fail {t.id} --reason \"...\"`.")


def stop_reason(store: StateStore) -> str | None:
    """Why this agent must go on (the next task), or None when it may stop."""
    return None if _session_over(store) else _work_left(store)


def _work_left(store: StateStore) -> str | None:
    mine = _mine_in_progress(store)
    if mine:
        return _finish_line(mine[0])
    if store.snapshot().config().mode == "exclusive":
        held = _exclusive_hold(store)
        if held is not None:
            return held or None
    task = _next_task(store)
    return None if task is None else _next_line(store, task)


def _session_over(store: StateStore) -> bool:
    """May the agent stop whatever work is left? Its relay waits for the next session, its
    session reached a limit (the document is written now), or max_sessions is reached."""
    snap = store.snapshot()
    number = session_records.current_number(store)
    if number <= 0:
        # max_sessions reached: SessionStart told the agent to stop; so does this
        return (session_records.sessions_started(snap.meta()) >= snap.config().max_sessions
                and session_records.sessions_started(snap.meta(), snap) >= snap.config().max_sessions)
    store.session = number
    if relay_session() == number and handoff.handed_off(store, number):
        return True  # the relay is waiting to start the next session
    done = len(session_records.completed_ids(snap, number))
    per_session = this_clone.tasks_per_session(store.repo)
    if session_records.limit_reached(snap, number) or (per_session is not None and done >= per_session):
        handoff.write_doc(store, trigger="stop")
        return True
    return False


def _exclusive_hold(store: StateStore) -> str | None:
    """In exclusive mode: the line for a task in progress with no owner, "" when another
    worker holds the one claim the mode allows (the agent may stop), None when none is held."""
    in_progress = _in_progress(store)
    unowned = [r[status_index.ID] for r in in_progress if not r[status_index.CLAIMED_BY]]
    if unowned:
        t = _read(store, unowned[0])
        return (f"git handoff: task [{t.id}] {display.line(t.title)} is in progress with no owner. Take it over with "
                f"`git handoff session start` (recovery decides), or finish it and run "
                f"`git handoff done {t.id}`.")
    return "" if in_progress else None


def _next_line(store: StateStore, task: Task) -> str:
    retry = (f" (retry: attempt {task.attempts + 1}/{task.max_attempts}; last error: "
             f"{display.line(task.error_log[-1])})" if task.status == "failed" and task.error_log else "")
    check = f" Its {prompt.check_text(task, prompt.approval(store))}." if task.check else ""
    if check and prompt.UNAPPROVED in check:
        check += f" {prompt.UNAPPROVED_NOTE}"
    return (f"git handoff: eligible work remains. Next task: [{task.id}] {display.line(task.title)}{retry}.{check} "
            f"Run `git handoff claim {task.id}`, checkpoint as you go, then `git handoff done {task.id}`.")


def _completed(store: StateStore) -> int:
    summary = status_index.summary(store.snapshot())
    return 0 if summary is None else summary.counts.get("completed", 0)


def stop(store: StateStore, event: Event) -> Outcome:
    """Block while work remains; after SAFETY_VALVE blocks in a row with no task completed
    (renewing a lease or checkpointing is not progress) the agent may go, with a warning."""
    over = _session_over(store)
    reason = None if over else _work_left(store)
    if reason is None:
        _write_private(store, VALVE_FILE, None)
        # the session is over (or its relay's turn ended): the turn ends even if the CLI's own
        # goal loop (Claude Code's /goal) would send the agent back (docs/agent-clis.md)
        return Outcome(end=SESSION_OVER) if turn_ended(store) or over else Outcome()
    valve = _read_private(store, VALVE_FILE)
    completed = _completed(store)
    blocks = valve.get("blocks") if isinstance(valve.get("blocks"), int) else 0
    assert isinstance(blocks, int)
    if valve.get("completed") != completed or valve.get("agent_session") != event.agent_session:
        blocks = 0
    if blocks >= SAFETY_VALVE:
        _write_private(store, VALVE_FILE, None)
        turn_ended(store)
        return Outcome(warning=(f"git handoff: safety valve opened: {blocks} stops blocked in a row without a "
                                "completed task; letting the agent stop with work left "
                                "(see `git handoff status`)"))
    chain = stop_cap.chain(valve, event)
    if stop_cap.reached(chain, event):  # the CLI would end the turn itself at this block: let it, and say so
        _write_private(store, VALVE_FILE, None)
        stop_cap.record(store, stop_cap.note(event))
        turn_ended(store)
        return Outcome(warning=stop_cap.note(event))
    _write_private(store, VALVE_FILE, {"blocks": blocks + 1, "completed": completed,
                                       "agent_session": event.agent_session,
                                       "chain": chain + 1, "transcript_at": stop_cap.transcript_size(event)})
    return Outcome(block=reason)


def turn_ended(store: StateStore) -> bool:
    """The agent a relay started may stop: its turn ends here, and an interactive CLI then
    waits at its prompt for a person who never comes. The session's document is written
    now, which is what tells the relay to end the pane and go on (the next session, or
    "all N task(s) completed"); outside a relay nothing happens (the agent's own
    SessionEnd writes the document when the person quits)."""
    number = relay_session()
    opened = this_clone.open_session(store.repo)
    if number is None or opened is None or int(opened["session"]) != number:
        return False  # no relay, or not the session it runs here now
    store.session = number
    handoff.write_doc(store, trigger="stop")
    return True


def subagent_stop(store: StateStore, event: Event) -> Outcome:
    """A subagent is held only on in-progress work its worker owns, and never when it is
    already continuing from such a block, nor while a compaction is under way (Claude
    Code's summarizer ends with a SubagentStop: held, it would answer the block instead
    of summarizing)."""
    if event.stop_hook_active or _compacting(store):
        return Outcome()
    mine = _mine_in_progress(store)
    return Outcome(block=_finish_line(mine[0])) if mine else Outcome()


# -- git post-commit -------------------------------------------------------------------


def post_commit(store: StateStore) -> None:
    """The post-commit hook's slow side, run once the session's commit threshold is reached."""
    repo = store.repo
    opened = this_clone.open_session(repo)
    this_clone.clear_hook_state(repo)
    if opened is None:
        return
    threshold = this_clone.commits_per_session(repo)
    base = opened.get("base")
    if threshold is None or not base:
        return
    proc = repo.git("rev-list", "--count", f"{base}..HEAD", check=False)
    count = int(proc.stdout.decode().strip() or 0) if proc.returncode == 0 else 0
    if count < threshold:
        this_clone.write_hook_state(repo, base, count)
        return
    handoff.write_doc(store, trigger="commits")
