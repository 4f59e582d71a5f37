"""A handoff document as Markdown (`doc show`, the dashboard), every value of it one line
of data: `text` (git_handoff.core.display.line) and `short`, which the prompt
(git_handoff.ops.prompt) uses for the same values."""

from __future__ import annotations

from typing import Any

from git_handoff.core import display
from git_handoff.core.record_schemas import HandoffDoc
from git_handoff.ops.handoff import listed, listed_total


def short(oid: object) -> str:
    """A commit id as its 7-character start, one line of data; "-" when none."""
    return text(oid[:7]) if isinstance(oid, str) and oid else "-"


def text(value: object) -> str:
    """A value of the state (another clone's, perhaps) as one line of data: display.line."""
    return display.line(value if isinstance(value, str) else str(value))


def render_markdown(doc: HandoffDoc, mark: str = "") -> str:
    """`doc` as Markdown, every value of it one line of data (display.line); `mark` (the
    caller's own text: who wrote it, when not approved here) ends the heading."""
    lines = [
        f"# Handoff document: session {text(doc.get('session'))}{mark}",
        "",
        f"- spec: {text(doc.get('spec_ref') or '-')}",
        f"- session: {text(doc.get('session'))} (worker {text(doc.get('worker') or '-')})",
        f"- base: {short(doc.get('base'))}  head: {short(doc.get('head'))}",
        f"- written: {text(doc.get('written_at'))} (trigger: {text(doc.get('trigger'))})",
    ]
    if doc.get("archived"):
        lines.append(f"- archived: accepted by session {text(doc.get('accepted_by'))} at {text(doc.get('accepted_at'))}"
                     if doc.get("accepted_by") else f"- archived at {text(doc.get('accepted_at'))}")
    for r in doc.get("rejections") or []:
        lines.append(f"- rejected by session {text(r.get('session'))}: {text(r.get('reason'))}")
    lines += _md_tasks(doc)
    lines += ["", "## Decisions"]
    lines += [f"- {text(d['what'])} - why: {text(d['why'])}" for d in doc.get("decisions", [])] or ["- none recorded"]
    lines += ["", "## Blockers"]
    lines += [f"- {text(b)}" for b in doc.get("blockers", [])] or ["- none recorded"]
    lines += ["", f"## Files changed ({listed_total(doc, 'files_changed')}, from git: base..head plus uncommitted)"]
    lines += [f"- {text(p)}" for p in doc.get("files_changed", [])] or ["- none"]
    lines += _unlisted(doc, "files_changed")
    return "\n".join(lines) + "\n"


def _md_tasks(doc: HandoffDoc) -> list[str]:
    """The document's task sections: completed, in progress, pending, failed for good (when any)."""
    status = doc.get("status", {})
    completed = status.get("completed", [])
    lines = ["", f"## Completed ({listed_total(doc, 'status.completed')}; "
                 f"{len(doc.get('completed_this_session', []))} this session)"]
    for c in completed:
        here = " (this session)" if c.get("this_session") else ""
        lines.append(f"- [{text(c['id'])}] {text(c['title'])} - check {display.code(str(c.get('check')))} passed at "
                     f"{text(c.get('completed_at'))}{here}")
    lines += _unlisted(doc, "status.completed")
    lines += ["", f"## In progress ({listed_total(doc, 'status.in_progress')})"]
    for t in status.get("in_progress", []):
        lines.append(f"- [{text(t['id'])}] {text(t['title'])} (claimed by {text(t.get('claimed_by') or '-')})")
        lines += [f"  - step {text(cp.get('step'))}/{text(cp.get('total'))}: {text(cp.get('description'))} "
                  f"({text(cp.get('timestamp'))})" for cp in t.get("checkpoints", [])]
    lines += _unlisted(doc, "status.in_progress")
    lines += ["", f"## Pending ({listed_total(doc, 'status.pending')})"]
    lines += [f"- {_pending_line(t)}" for t in status.get("pending", [])]
    lines += _unlisted(doc, "status.pending")
    if doc.get("failed"):
        lines += ["", f"## Failed for good ({listed_total(doc, 'failed')})"]
        lines += [f"- [{text(t['id'])}] {text(t['title'])} ({text(t['attempts'])}/{text(t['max_attempts'])}): "
                  f"{text(t.get('last_error'))}" for t in doc["failed"]]
        lines += _unlisted(doc, "failed")
    return lines


def _pending_line(t: dict[str, Any]) -> str:
    line = f"[{text(t['id'])}] {text(t['title'])} ({text(t.get('priority'))})"
    if t.get("status") == "failed":
        line += f" failed {text(t.get('attempts'))}/{text(t.get('max_attempts'))}: {text(t.get('last_error'))}"
    if t.get("blocked"):
        line += " [blocked]"
    return line


def _unlisted(doc: HandoffDoc, name: str) -> list[str]:
    """The line for what list `name` counted but could not hold (a record stays under 1 MiB)."""
    more = listed_total(doc, name) - len(listed(doc, name))
    return [f"- ... and {more} more, not listed (the document holds what fits in a record)"] if more > 0 else []
