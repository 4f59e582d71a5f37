"""The facts-only handoff document and the ACK (the prompt is ops/prompt.py).

A document holds what happened, never what to do next: the spec reference, task
status (from recorded validations), decisions and blockers the session recorded,
and the files changed as git reports them (session base -> HEAD, plus uncommitted
changes). It is stored in the state as docs/<session>.json, so it syncs, and is
rendered as Markdown. There is deliberately no next-steps field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import cast

from git_handoff.core import selection
from git_handoff.core.errors import Negative, UsageError
from git_handoff.core.field_checks import one_line
from git_handoff.core.model import Task, now_iso
from git_handoff.core.record_schemas import HandoffDoc, WrittenDoc
from git_handoff.infra import worktree
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops.payloads import AckAnswer, AckEntry, DocRow, ShownDoc
from git_handoff.state import writers
from git_handoff.state.session_records import (
    completed_ids,
    current_number,
    doc_numbers,
    doc_path,
    doc_paths,
    pending_doc_at,
    put_record,
    read_doc_at,
    read_session,
    session_path,
)
from git_handoff.state.snapshot import StateReader
from git_handoff.state.store import StateStore, Tx, format_log_line
from git_handoff.state.this_clone import tasks_per_session

TRIGGERS = ("manual", "commits", "tasks", "pre-compact", "stop", "relay", "session-end")
# A document stays well under a record's 1 MiB (model.MAX_RECORD_BYTES), which every
# reader enforces: at 10,000 pending tasks it was 2.6 MB, and the prompt, `doc show` and
# every other clone's sync refused the state. What it cannot list, it counts (`omitted`).
DOC_BYTES = 768 << 10
LISTS = ("status.completed", "status.in_progress", "status.pending", "failed", "files_changed")


# -- building the document -----------------------------------------------------------


def last_error(task: Task) -> str | None:
    return task.error_log[-1] if task.error_log else None


def spec_ref_of(source: StateReader, tasks: dict[str, Task], *, use_config: bool = True) -> str | None:
    configured = source.config().spec_ref if use_config else None
    if configured:
        return str(configured)
    for t in tasks.values():
        if t.spec_ref and t.status != "completed":
            return t.spec_ref
    for t in tasks.values():
        if t.spec_ref:
            return t.spec_ref
    return None


def build(source: StateReader, repo: Repo, number: int, trigger: str) -> HandoffDoc:
    """The document for session `number` from a Snapshot or Tx (facts only)."""
    tasks = source.tasks()
    record = read_session(source, number) if number > 0 else None
    done_here = set(completed_ids(source, number))
    blocked = selection.blocked_ids(tasks)
    completed, in_progress, pending, failed = [], [], [], []
    for t in tasks.values():
        if t.status == "completed":
            completed.append({"id": t.id, "title": t.title, "check": t.check, "completed_at": t.completed_at,
                              "this_session": t.id in done_here})
        elif t.status == "in_progress":
            in_progress.append({"id": t.id, "title": t.title, "claimed_by": t.claimed_by,
                                "started_at_commit": t.started_at_commit,
                                "checkpoints": [dict(c) for c in t.checkpoints]})
        elif t.status == "pending" or (t.status == "failed" and not t.failed_for_good):
            pending.append({"id": t.id, "title": t.title, "priority": t.priority, "status": t.status,
                            "depends_on": list(t.depends_on), "attempts": t.attempts,
                            "max_attempts": t.max_attempts, "blocked": t.id in blocked,
                            "last_error": last_error(t)})
        else:
            failed.append({"id": t.id, "title": t.title, "attempts": t.attempts,
                           "max_attempts": t.max_attempts, "last_error": last_error(t)})
    base = record.get("base") if record else None
    return {
        "session": number,
        "worker": record.get("worker") if record else None,
        "base": base,
        "head": repo.head(),
        "written_at": now_iso(),
        "trigger": trigger,
        "spec_ref": spec_ref_of(source, tasks),
        "status": {"completed": completed, "in_progress": in_progress, "pending": pending},
        "completed_this_session": [str(c["id"]) for c in completed if c["this_session"]],
        "failed": failed,
        "decisions": [{"what": d.get("what"), "why": d.get("why")} for d in (record or {}).get("decisions", [])],
        "blockers": [b.get("text") if isinstance(b, dict) else str(b) for b in (record or {}).get("blockers", [])],
        "files_changed": worktree.files_changed(repo, base),
        "archived": False,
        "accepted_by": None,
        "accepted_at": None,
        "rejections": [],
    }


def listed(doc: Mapping[str, object], name: str) -> list[object]:
    """List `name` of a document ("status.pending", "files_changed"); [] when it has none."""
    where: object = doc
    for part in name.split("."):
        where = where.get(part) if isinstance(where, Mapping) else None
    return where if isinstance(where, list) else []


def listed_total(doc: Mapping[str, object], name: str) -> int:
    """How many entries list `name` of `doc` ("status.pending", "files_changed", ...) had:
    the ones it holds and the ones it counted in `omitted` for want of room."""
    omitted = doc.get("omitted")
    more = omitted.get(name) if isinstance(omitted, dict) else None
    return len(listed(doc, name)) + (more if type(more) is int and more > 0 else 0)


def _size(doc: HandoffDoc) -> int:
    return len(json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True).encode())


def bounded(doc: HandoffDoc, limit: int = DOC_BYTES) -> HandoffDoc:
    """`doc` within `limit` bytes as stored: while it is larger, the longest of its LISTS
    keeps its first half (completed this session first, pending by priority: what the
    next session reads first) and `omitted` counts what went."""
    if _size(doc) <= limit:
        return doc
    status = doc["status"]
    status["completed"].sort(key=lambda c: not c.get("this_session"))
    status["pending"].sort(key=lambda t: str(t.get("priority")))
    omitted: dict[str, int] = {}
    while _size(doc) > limit:
        name = max(LISTS, key=lambda n: len(json.dumps(listed(doc, n))))
        items = listed(doc, name)
        if not items:
            break  # nothing left to cut: the fixed fields alone (bounded by their own limits)
        keep = len(items) // 2
        omitted[name] = omitted.get(name, 0) + len(items) - keep
        del items[keep:]
    doc["omitted"] = omitted
    return doc


def write_doc(store: StateStore, trigger: str = "manual") -> WrittenDoc:
    """Write the current session's handoff document.

    `manual` (and `relay`) always (re)write it; an automatic trigger writes it at most
    once per session: when one exists, it is returned with `written: False`.
    """
    if trigger not in TRIGGERS:
        raise UsageError(f"invalid trigger {trigger!r}: use one of {', '.join(TRIGGERS)}")
    number = current_number(store)
    repo = store.repo
    automatic = trigger not in ("manual", "relay")

    def apply(tx: Tx) -> WrittenDoc:
        existing = tx.read_json(doc_path(tx, number))
        if automatic and isinstance(existing, dict):
            return cast(WrittenDoc, {**existing, "written": False})
        doc = bounded(build(tx, repo, number, trigger))
        put_record(tx, doc_path(tx, number), doc)
        record = read_session(tx, number)
        if record is not None:
            record["handoff"] = {"written_at": doc["written_at"], "trigger": trigger}
            put_record(tx, session_path(tx, number), record)
        tx.lines.append(format_log_line(
            number, "HANDOFF",
            f"Document written for session {number} (trigger={trigger}, "
            f"completed={listed_total(doc, 'status.completed')}, "
            f"in_progress={listed_total(doc, 'status.in_progress')}, pending={listed_total(doc, 'status.pending')}, "
            f"files_changed={listed_total(doc, 'files_changed')})"))
        return {**doc, "written": True}

    return store.transact(apply)


def after_done(store: StateStore) -> WrittenDoc | None:
    """The `done` trigger: write the document once handoff.tasksPerSession tasks were
    completed in the session. `done` runs it after its commit, best-effort (Tx.after_commit)."""
    number = current_number(store)
    limit = tasks_per_session(store.repo)
    if number <= 0 or limit is None:
        return None
    if len(completed_ids(store.snapshot(), number)) < limit:
        return None
    return write_doc(store, trigger="tasks")


def list_docs(store: StateStore) -> list[DocRow]:
    snap = store.snapshot()
    unapproved = writers.unapproved_records(snap.repo, snap.commit)
    out = []
    for n, path in doc_paths(snap):
        doc = snap.read_json(path) or {}
        clone = path[:-5].partition("@")[2] or None
        row = DocRow({
            "session": n, "clone": clone, "written_at": doc.get("written_at"), "trigger": doc.get("trigger"),
            "archived": bool(doc.get("archived")), "accepted_by": doc.get("accepted_by"),
            "completed": listed_total(doc, "status.completed"),
            "files_changed": listed_total(doc, "files_changed"),
        })
        if path in unapproved:
            row["unapproved_writer"] = unapproved[path]
        out.append(row)
    return out


def show_doc(store: StateStore, number: int | None = None) -> ShownDoc:
    """The handoff document of session `number` (default: the latest), with
    `unapproved_writer` when a writer not approved here wrote it last."""
    snap = store.snapshot()
    numbers = doc_numbers(snap)
    if number is None:
        if not numbers:
            raise Negative("no handoff document yet (`git handoff doc write`)")
        number = numbers[-1]
    found = read_doc_at(snap, number)
    if found is None:
        raise UsageError(f"no handoff document for session {number} (see `git handoff doc list`)")
    path, doc = found
    out = cast(ShownDoc, dict(doc))
    who = writers.unapproved_records(snap.repo, snap.commit).get(path)
    if who is not None:
        out["unapproved_writer"] = who
    return out


def handed_off(store: StateStore, number: int) -> bool:
    """Has session `number` written its handoff document?"""
    head = store.head()
    if head is None:
        return False
    snap = store.snapshot(head)
    return isinstance(snap.read_json(doc_path(snap, number)), dict)


def ack_status(store: StateStore, number: int) -> AckEntry | None:
    """The ACK session `number` recorded ({status: accepted|failed, ...}), or None."""
    head = store.head()
    if head is None:
        return None
    record = read_session(store.snapshot(head), number)
    ack = record.get("ack") if record else None
    return cast(AckEntry, ack) if isinstance(ack, dict) else None  # written by ack() below


def acknowledged(store: StateStore, number: int) -> bool:
    """Has session `number` accepted its prompt (and the pending handoff)?"""
    ack = ack_status(store, number)
    return bool(ack and ack.get("status") == "accepted")


def ack(store: StateStore, failed: str | None = None) -> AckAnswer:
    """The first act of a started session: accept (or reject, with a reason) the prompt and
    the pending handoff document. An accepted document is archived."""
    store.snapshot()  # NotInitialized first
    number = current_number(store)
    if number <= 0:
        raise UsageError("no open session in this worktree: `git handoff session start` first")
    if failed is not None:
        failed = one_line(failed, "--failed's reason", empty="--failed needs a reason")
    stamp = now_iso()

    def apply(tx: Tx) -> AckAnswer:
        record = read_session(tx, number)
        if record is None:
            raise UsageError(f"session {number} is not in the state (`git handoff session start`)")
        given = record.get("ack")
        if failed is None and isinstance(given, dict) and given.get("status") == "accepted":
            # acknowledged already (the SessionStart hook acks, and the prompt's first step
            # asks the agent to): the same answer again is no new event for the log. Its
            # time is kept, as the ACK of the agent launched last (a relay's launch after a
            # limit waits for an ACK newer than the one before it).
            again = cast(AckEntry, {**given, "at": stamp})
            record["ack"] = again
            put_record(tx, session_path(tx, number), record)
            return {"session": number, **again}
        # the document the prompt showed: never one an unapproved writer wrote last (writers.for_prompt)
        found = pending_doc_at(tx, before=number,
                               skip=writers.unapproved_records(tx.store.repo, tx.base.commit if tx.base else None))
        of_path, doc = found if found else (None, None)
        of = doc["session"] if doc else None
        entry: AckEntry = {"status": "failed" if failed else "accepted", "at": stamp, "reason": failed, "handoff": of}
        record["ack"] = entry
        put_record(tx, session_path(tx, number), record)
        if failed:
            if doc is not None and of_path is not None:
                doc.setdefault("rejections", []).append({"session": number, "reason": failed, "at": stamp})
                put_record(tx, of_path, doc)
            text = (f"Session {number} rejected " + (f"the handoff of session {of}" if doc else "its prompt")
                    + f": {failed}")
        else:
            for n, path in doc_paths(tx):
                if n >= number:
                    continue
                old = tx.read_json(path)
                if isinstance(old, dict) and not old.get("archived"):
                    old["archived"] = True
                    old["accepted_by"] = number if path == of_path else None
                    old["accepted_at"] = stamp
                    put_record(tx, path, old)
            text = f"Session {number} accepted " + (f"the handoff of session {of}" if doc
                                                    else "its prompt (no pending handoff)")
        tx.log("ACK", text, session=number)
        return {"session": number, **entry}

    return store.transact(apply)
