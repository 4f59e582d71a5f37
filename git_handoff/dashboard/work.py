"""Where each finished task's work is, as the dashboard's pages show it: the states of
core/selection.work_state, in the words `status` uses, counted on the overview, marked on
the task lists and said in full on a task's page."""

from __future__ import annotations

import html

from git_handoff.core import display, selection
from git_handoff.core.model import Task

CSS = """.work{font-size:12px;padding:0 4px}.w-landed{color:#2e7d32}.w-waiting{color:#1565c0}
.w-withheld,.w-sent_back{color:#c62828;font-weight:600}
"""

WORDS = {selection.LANDED: "landed", selection.WAITING: "waiting to land", selection.WITHHELD: "withheld",
         selection.SENT_BACK: "sent back"}


def _escape(text: str) -> str:
    # as pages.escape: one line of data, its control and bidi characters shown, HTML-escaped
    return html.escape(display.line(text))


def counts_html(tasks: dict[str, Task]) -> str:
    """The tasks' work counted by where it is, as `status` counts it ("" when no task has any)."""
    counts = dict.fromkeys(selection.WORK_STATES, 0)
    for t in tasks.values():
        found = selection.work_state(t)
        if found is not None:
            counts[found[0]] += 1
    if not any(counts.values()):
        return ""
    cells = "".join(f'<td class="w-{w}">{WORDS[w]} <b data-work-count="{w}">{n}</b></td>' for w, n in counts.items())
    return f"<table data-work><tr><th>work</th>{cells}</tr></table>"


def mark(task: Task) -> str:
    """A task's work on the task lists: where it is, with its short commit or its work ref
    ("" for a task with nothing to say)."""
    found = selection.work_state(task)
    if found is None:
        return ""
    state, detail = found
    said = {selection.LANDED: f"landed {str(detail)[:12]}", selection.WAITING: f"waiting to land ({detail})",
            selection.WITHHELD: "withheld: a secret in its commits",
            selection.SENT_BACK: "sent back by the integration queue"}[state]
    return f' <span class="work w-{state}" data-work="{state}">{_escape(said)}</span>'


def row(task: Task) -> str:
    """Where the task's work is, said in full for its page (as `show` says it), or ""."""
    found = selection.work_state(task)
    if found is None:
        return ""
    state, detail = found
    if state == selection.LANDED:
        ref = task.get("work_ref")
        return f"landed on the target as {detail}" + (f" (its work: {ref})" if isinstance(ref, str) else "")
    if state == selection.WAITING:
        return f"{detail}, not on the target yet (`git handoff integrate` lands it)"
    if state == selection.WITHHELD:
        return str(task.get("work_withheld"))
    return "sent back by the integration queue: the error log says why, its attempt holds the work"
