"""The facts-only handoff document, the next session's prompt, and the ACK.

A document holds what happened, never what to do next: the spec reference, task
status (from recorded validations), decisions and blockers the session recorded,
and the files changed as git reports them (session base -> HEAD, plus uncommitted
changes). It is stored in the state as docs/<session>.json, so it syncs, and is
rendered as Markdown. There is deliberately no next-steps field.
"""

from __future__ import annotations

from typing import Any

from git_handoff import schedule
from git_handoff.errors import HandoffError, Negative, UsageError
from git_handoff.gitrepo import Repo
from git_handoff.model import Task, now_iso
from git_handoff.ops import sessions
from git_handoff.store import StateStore, Tx, format_log_line

DOCS_DIR = "docs"
TRIGGERS = ("manual", "commits", "tasks", "pre-compact", "stop", "relay", "session-end")
PROMPT_LIMIT = 10_000  # bytes; SPEC §6 says under 10 KB


def doc_path(number: int) -> str:
    return f"{DOCS_DIR}/{number}.json"


# -- facts from git ------------------------------------------------------------------


def _z_paths(raw: bytes) -> list[str]:
    return [p.decode(errors="surrogateescape") for p in raw.split(b"\0") if p]


def files_changed(repo: Repo, base: str | None) -> list[str]:
    """Paths changed since `base` in commits, plus staged, unstaged and untracked changes."""
    if repo.workdir is None:
        return []
    paths: set[str] = set()
    head = repo.head()
    if base and head and base != head and repo.has_object(base):
        proc = repo.git("diff", "--name-only", "-z", "--no-renames", base, head, check=False)
        if proc.returncode == 0:
            paths.update(_z_paths(proc.stdout))
    proc = repo.git("status", "--porcelain", "-z", "--untracked-files=all", "--no-renames", check=False)
    if proc.returncode == 0:
        for item in _z_paths(proc.stdout):
            if len(item) > 3 and item[2] == " ":
                paths.add(item[3:])
    return sorted(paths)


# -- building the document -----------------------------------------------------------


def _last_error(task: Task) -> str | None:
    return task.error_log[-1] if task.error_log else None


def spec_ref_of(source: Any, tasks: dict[str, Task]) -> str | None:
    configured = source.config().spec_ref
    if configured:
        return str(configured)
    for t in tasks.values():
        if t.spec_ref and t.status != "completed":
            return t.spec_ref
    for t in tasks.values():
        if t.spec_ref:
            return t.spec_ref
    return None


def build(source: Any, repo: Repo, number: int, trigger: str) -> dict[str, Any]:
    """The document for session `number` from a Snapshot or Tx (facts only)."""
    tasks = source.tasks()
    record = sessions.read_session(source, number) if number > 0 else None
    done_here = set(sessions.completed_ids(source, number))
    blocked = schedule.blocked_ids(tasks)
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
                            "last_error": _last_error(t)})
        else:
            failed.append({"id": t.id, "title": t.title, "attempts": t.attempts,
                           "max_attempts": t.max_attempts, "last_error": _last_error(t)})
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
        "completed_this_session": [c["id"] for c in completed if c["this_session"]],
        "failed": failed,
        "decisions": [{"what": d.get("what"), "why": d.get("why")} for d in (record or {}).get("decisions", [])],
        "blockers": [b.get("text") if isinstance(b, dict) else str(b) for b in (record or {}).get("blockers", [])],
        "files_changed": files_changed(repo, base),
        "archived": False,
        "accepted_by": None,
        "accepted_at": None,
        "rejections": [],
    }


def write_doc(store: StateStore, trigger: str = "manual") -> dict[str, Any]:
    """Write the current session's handoff document.

    `manual` (and `relay`) always (re)write it; an automatic trigger writes it at most
    once per session: when one exists, it is returned with `written: False`.
    """
    if trigger not in TRIGGERS:
        raise UsageError(f"invalid trigger {trigger!r}: use one of {', '.join(TRIGGERS)}")
    number = sessions.current_number(store)
    repo = store.repo
    automatic = trigger not in ("manual", "relay")

    def apply(tx: Tx) -> dict[str, Any]:
        existing = tx.read_json(doc_path(number))
        if automatic and isinstance(existing, dict):
            return {**existing, "written": False}
        doc = build(tx, repo, number, trigger)
        sessions.put_record(tx, doc_path(number), doc)
        record = sessions.read_session(tx, number)
        if record is not None:
            record["handoff"] = {"written_at": doc["written_at"], "trigger": trigger}
            sessions.put_record(tx, sessions.session_path(number), record)
        c = doc["status"]
        tx.lines.append(format_log_line(
            number, "HANDOFF",
            f"Document written for session {number} (trigger={trigger}, completed={len(c['completed'])}, "
            f"in_progress={len(c['in_progress'])}, pending={len(c['pending'])}, "
            f"files_changed={len(doc['files_changed'])})"))
        return {**doc, "written": True}

    return store.transact(apply)


def after_done(store: StateStore) -> dict[str, Any] | None:
    """The `done` trigger: write the document once handoff.tasksPerSession tasks were
    completed in the session. Never fails the `done` that called it."""
    try:
        number = sessions.current_number(store)
        limit = sessions.tasks_per_session(store.repo)
        if number <= 0 or limit is None:
            return None
        if len(sessions.completed_ids(store.snapshot(), number)) < limit:
            return None
        return write_doc(store, trigger="tasks")
    except HandoffError:
        return None


def _doc_numbers(source: Any) -> list[int]:
    out = []
    for name in source.listdir(DOCS_DIR):
        stem = name[:-5] if name.endswith(".json") else ""
        if stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def list_docs(store: StateStore) -> list[dict[str, Any]]:
    snap = store.snapshot()
    out = []
    for n in _doc_numbers(snap):
        doc = snap.read_json(doc_path(n)) or {}
        out.append({
            "session": n, "written_at": doc.get("written_at"), "trigger": doc.get("trigger"),
            "archived": bool(doc.get("archived")), "accepted_by": doc.get("accepted_by"),
            "completed": len(doc.get("status", {}).get("completed", [])),
            "files_changed": len(doc.get("files_changed", [])),
        })
    return out


def show_doc(store: StateStore, number: int | None = None) -> dict[str, Any]:
    snap = store.snapshot()
    numbers = _doc_numbers(snap)
    if number is None:
        if not numbers:
            raise Negative("no handoff document yet (`git handoff doc write`)")
        number = numbers[-1]
    doc = snap.read_json(doc_path(number))
    if not isinstance(doc, dict):
        raise UsageError(f"no handoff document for session {number} (see `git handoff doc list`)")
    return doc


def pending_doc(source: Any, before: int | None = None) -> dict[str, Any] | None:
    """The latest document not yet archived, from a session before `before`."""
    for n in reversed(_doc_numbers(source)):
        if before is not None and n >= before:
            continue
        doc = source.read_json(doc_path(n))
        if isinstance(doc, dict) and not doc.get("archived"):
            return doc
    return None


def handed_off(store: StateStore, number: int) -> bool:
    """Has session `number` written its handoff document?"""
    head = store.head()
    if head is None:
        return False
    return isinstance(store.snapshot(head).read_json(doc_path(number)), dict)


def ack_status(store: StateStore, number: int) -> dict[str, Any] | None:
    """The ACK session `number` recorded ({status: accepted|failed, ...}), or None."""
    head = store.head()
    if head is None:
        return None
    record = sessions.read_session(store.snapshot(head), number)
    ack = record.get("ack") if record else None
    return ack if isinstance(ack, dict) else None


def acknowledged(store: StateStore, number: int) -> bool:
    """Has session `number` accepted its prompt (and the pending handoff)?"""
    ack = ack_status(store, number)
    return bool(ack and ack.get("status") == "accepted")


def ack(store: StateStore, failed: str | None = None) -> dict[str, Any]:
    """The first act of a started session: accept (or reject, with a reason) the prompt and
    the pending handoff document. An accepted document is archived."""
    store.snapshot()  # NotInitialized first
    number = sessions.current_number(store)
    if number <= 0:
        raise UsageError("no open session in this worktree: `git handoff session start` first")
    if failed is not None:
        failed = " ".join(failed.split())
        if not failed:
            raise UsageError("--failed needs a reason")
    stamp = now_iso()

    def apply(tx: Tx) -> dict[str, Any]:
        record = sessions.read_session(tx, number)
        if record is None:
            raise UsageError(f"session {number} is not in the state (`git handoff session start`)")
        doc = pending_doc(tx, before=number)
        of = doc["session"] if doc else None
        entry = {"status": "failed" if failed else "accepted", "at": stamp, "reason": failed, "handoff": of}
        record["ack"] = entry
        sessions.put_record(tx, sessions.session_path(number), record)
        if failed:
            if doc is not None:
                doc.setdefault("rejections", []).append({"session": number, "reason": failed, "at": stamp})
                sessions.put_record(tx, doc_path(int(doc["session"])), doc)
            text = f"Session {number} rejected " + (f"the handoff of session {of}" if doc else "its prompt") + f": {failed}"
        else:
            for n in _doc_numbers(tx):
                if n >= number:
                    continue
                old = tx.read_json(doc_path(n))
                if isinstance(old, dict) and not old.get("archived"):
                    old["archived"] = True
                    old["accepted_by"] = number if n == of else None
                    old["accepted_at"] = stamp
                    sessions.put_record(tx, doc_path(n), old)
            text = f"Session {number} accepted " + (f"the handoff of session {of}" if doc else "its prompt (no pending handoff)")
        tx.lines.append(format_log_line(number, "ACK", text))
        return {"session": number, **entry}

    return store.transact(apply)


# -- rendering -------------------------------------------------------------------------


def _short(oid: str | None) -> str:
    return oid[:7] if oid else "-"


def render_markdown(doc: dict[str, Any]) -> str:
    status = doc.get("status", {})
    lines = [
        f"# Handoff document: session {doc.get('session')}",
        "",
        f"- spec: {doc.get('spec_ref') or '-'}",
        f"- session: {doc.get('session')} (worker {doc.get('worker') or '-'})",
        f"- base: {_short(doc.get('base'))}  head: {_short(doc.get('head'))}",
        f"- written: {doc.get('written_at')} (trigger: {doc.get('trigger')})",
    ]
    if doc.get("archived"):
        lines.append(f"- archived: accepted by session {doc.get('accepted_by')} at {doc.get('accepted_at')}"
                     if doc.get("accepted_by") else f"- archived at {doc.get('accepted_at')}")
    for r in doc.get("rejections") or []:
        lines.append(f"- rejected by session {r.get('session')}: {r.get('reason')}")
    completed = status.get("completed", [])
    lines += ["", f"## Completed ({len(completed)}; {len(doc.get('completed_this_session', []))} this session)"]
    for c in completed:
        mark = " (this session)" if c.get("this_session") else ""
        lines.append(f"- [{c['id']}] {c['title']} - check `{c.get('check')}` passed at {c.get('completed_at')}{mark}")
    lines += ["", f"## In progress ({len(status.get('in_progress', []))})"]
    for t in status.get("in_progress", []):
        lines.append(f"- [{t['id']}] {t['title']} (claimed by {t.get('claimed_by') or '-'})")
        for cp in t.get("checkpoints", []):
            lines.append(f"  - step {cp.get('step')}/{cp.get('total')}: {cp.get('description')} ({cp.get('timestamp')})")
    lines += ["", f"## Pending ({len(status.get('pending', []))})"]
    for t in status.get("pending", []):
        lines.append(f"- {_pending_line(t)}")
    if doc.get("failed"):
        lines += ["", f"## Failed for good ({len(doc['failed'])})"]
        for t in doc["failed"]:
            lines.append(f"- [{t['id']}] {t['title']} ({t['attempts']}/{t['max_attempts']}): {t.get('last_error')}")
    lines += ["", "## Decisions"]
    lines += [f"- {d['what']} - why: {d['why']}" for d in doc.get("decisions", [])] or ["- none recorded"]
    lines += ["", "## Blockers"]
    lines += [f"- {b}" for b in doc.get("blockers", [])] or ["- none recorded"]
    lines += ["", f"## Files changed ({len(doc.get('files_changed', []))}, from git: base..head plus uncommitted)"]
    lines += [f"- {p}" for p in doc.get("files_changed", [])] or ["- none"]
    return "\n".join(lines) + "\n"


def _pending_line(t: dict[str, Any]) -> str:
    text = f"[{t['id']}] {t['title']} ({t.get('priority')})"
    if t.get("status") == "failed":
        text += f" failed {t.get('attempts')}/{t.get('max_attempts')}: {t.get('last_error')}"
    if t.get("blocked"):
        text += " [blocked]"
    return text


PROTOCOL = """\
## Protocol
1. `git handoff ack` first (`git handoff ack --failed "REASON"` if these facts do not match the repository).
2. `git handoff claim` takes the next eligible task (exit 1: nothing eligible or the session limit is reached: stop).
3. `git handoff checkpoint ID "what was done" --step M --of N` after each significant step.
4. `git handoff done ID` runs the task's check and completes it; `git handoff fail ID --reason "..."` gives up
   (the attempt is saved and the tree rolled back).
5. Record facts for the next session: `git handoff decide WHAT --why WHY`, `git handoff blocker TEXT`.
"""


def _cap(items: list[str], limit: int, more: str) -> list[str]:
    if len(items) <= limit:
        return items
    return items[:limit] + [f"- ... and {len(items) - limit} more ({more})"]


def _doc_section(doc: dict[str, Any] | None, cap: int) -> list[str]:
    if doc is None:
        return ["## Handoff document", "No handoff document yet: this is the first session, or none was written.", ""]
    status = doc.get("status", {})
    state = "pending your ack" if not doc.get("archived") else f"accepted by session {doc.get('accepted_by')}"
    lines = [
        f"## Handoff document of session {doc.get('session')} ({state})",
        f"base {_short(doc.get('base'))}, head {_short(doc.get('head'))}, written {doc.get('written_at')} "
        f"(trigger: {doc.get('trigger')}); full text: `git handoff doc show {doc.get('session')}`",
        f"Completed overall: {len(status.get('completed', []))}; in session {doc.get('session')}:",
    ]
    here = [f"- [{c['id']}] {c['title']}" for c in status.get("completed", []) if c.get("this_session")]
    lines += _cap(here, cap, "`git handoff doc show`") or ["- none"]
    lines.append("In progress:")
    prog = []
    for t in status.get("in_progress", []):
        last = t.get("checkpoints", [])[-1:] or [None]
        cp = last[0]
        suffix = f" - last checkpoint {cp.get('step')}/{cp.get('total')}: {cp.get('description')}" if cp else ""
        prog.append(f"- [{t['id']}] {t['title']}{suffix}")
    lines += _cap(prog, cap, "`git handoff doc show`") or ["- none"]
    lines.append("Decisions:")
    lines += _cap([f"- {d['what']} - why: {d['why']}" for d in doc.get("decisions", [])], cap,
                  "`git handoff doc show`") or ["- none"]
    lines.append("Blockers:")
    lines += _cap([f"- {b}" for b in doc.get("blockers", [])], cap, "`git handoff doc show`") or ["- none"]
    lines.append(f"Files changed ({len(doc.get('files_changed', []))}):")
    lines += _cap([f"- {p}" for p in doc.get("files_changed", [])], cap * 2, "`git handoff doc show`") or ["- none"]
    lines.append("")
    return lines


def _task_line(t: Task, detail: bool, blocked: set[str]) -> str:
    if not detail:
        return f"- [{t.id}] {t.title}"
    bits = [f"- [{t.id}] {t.title}"]
    bits.append(f"check: `{t.check}`" if t.check else "check: none (`done` will refuse)")
    if t.depends_on:
        bits.append("after: " + ", ".join(t.depends_on))
    if t.status == "in_progress":
        bits.append(f"in progress ({t.claimed_by or '-'})")
    if t.status == "failed":
        bits.append(f"failed {t.attempts}/{t.max_attempts}: {_last_error(t)}")
    if t.id in blocked:
        bits.append("blocked")
    return " | ".join(bits)


def _tasks_section(remaining: list[Task], blocked: set[str], levels: dict[str, tuple[bool, int | None]]) -> list[str]:
    lines = [f"## Remaining tasks ({len(remaining)}), by priority"]
    for prio in ("P0", "P1", "P2"):
        group = [t for t in remaining if t.priority == prio]
        if not group:
            continue
        detail, limit = levels[prio]
        lines.append(f"### {prio} ({len(group)})")
        shown = group if limit is None else group[:limit]
        lines += [_task_line(t, detail, blocked) for t in shown]
        if len(shown) < len(group):
            lines.append(f"- ... and {len(group) - len(shown)} more {prio} tasks (`git handoff list`)")
    if not remaining:
        lines.append("None: every task is completed or failed for good.")
    lines.append("")
    return lines


# Progressively shorter renderings, tried in order until the prompt fits.
_LADDER: list[tuple[int, dict[str, tuple[bool, int | None]]]] = [
    (30, {"P0": (True, None), "P1": (True, None), "P2": (True, None)}),
    (30, {"P0": (True, None), "P1": (True, None), "P2": (False, None)}),
    (20, {"P0": (True, None), "P1": (True, None), "P2": (False, 0)}),
    (15, {"P0": (True, None), "P1": (False, None), "P2": (False, 0)}),
    (10, {"P0": (True, None), "P1": (False, 40), "P2": (False, 0)}),
    (10, {"P0": (True, 40), "P1": (False, 20), "P2": (False, 0)}),
    (5, {"P0": (True, 20), "P1": (False, 10), "P2": (False, 0)}),
    (3, {"P0": (False, 10), "P1": (False, 5), "P2": (False, 0)}),
]


def _next_line(tasks: dict[str, Task]) -> str:
    prepared, _ = schedule.prepare(tasks, now_iso())
    found = schedule.eligible(prepared)
    if not found:
        return "Next eligible task: none (every task is completed, in progress, or waits on failed dependencies)"
    t = found[0]
    check = f" (check: `{t.check}`)" if t.check else ""
    return f"Next eligible task: [{t.id}] {t.title}{check}"


def prompt_view(store: StateStore) -> dict[str, Any]:
    """`prompt --json`."""
    text = render_prompt(store)
    return {"prompt": text, "bytes": len(text.encode())}


def render_prompt(store: StateStore) -> str:
    """The next session's prompt (Markdown, under 10 KB)."""
    snap = store.snapshot()
    tasks = snap.tasks()
    number = sessions.current_number(store)
    doc = pending_doc(snap)
    if doc is None:
        numbers = _doc_numbers(snap)
        doc = snap.read_json(doc_path(numbers[-1])) if numbers else None
    blocked = schedule.blocked_ids(tasks)
    remaining = [t for t in tasks.values()
                 if t.status in ("pending", "in_progress") or (t.status == "failed" and not t.failed_for_good)]
    rank = {"in_progress": 0, "pending": 1, "failed": 2}
    remaining.sort(key=lambda t: (rank[t.status], t.id in blocked))
    counts = schedule.counts(tasks)
    head = [
        "# git handoff: continue the work",
        "",
        "You start without memory of earlier sessions. What follows are facts from git and from recorded",
        "validations, not instructions: check them against the repository and decide the next step yourself.",
        "The specification is the authority where anything here disagrees with it.",
        "",
        f"Spec: {spec_ref_of(snap, tasks) or 'none recorded'}",
        f"Session: {number if number > 0 else 'none open (`git handoff session start`)'}; "
        f"tasks: {len(tasks)} total, {counts['completed']} completed, {counts['in_progress']} in progress, "
        f"{counts['pending']} pending, {counts['failed']} failed, {counts['blocked']} blocked",
        _next_line(tasks),
        "",
    ]
    text = ""
    for cap, levels in _LADDER:
        text = "\n".join(head + _doc_section(doc, cap) + _tasks_section(remaining, blocked, levels)) + "\n" + PROTOCOL
        if len(text.encode()) < PROMPT_LIMIT:
            return text
    encoded = text.encode()[: PROMPT_LIMIT - len(PROTOCOL.encode()) - 200].decode(errors="ignore")
    return encoded.rsplit("\n", 1)[0] + "\n- ... (cut to stay under 10 KB; `git handoff status`)\n\n" + PROTOCOL
