"""The dashboard's pages, rendered from one snapshot of the state per request.

Everything shown comes from refs/harness/state (and the attempt refs) as every other
command reads it; nothing is cached between requests, so the pages follow the
repository as it changes. Every string from the state is escaped: titles, reasons and
log lines may come from a remote.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from git_handoff.core import display, selection
from git_handoff.core.errors import UsageError
from git_handoff.core.model import SHOWN_STATUSES, Task, check_id
from git_handoff.core.record_schemas import RelayRecord
from git_handoff.core.serialization import task_to_json
from git_handoff.dashboard import work
from git_handoff.infra import graph_svg as svg
from git_handoff.ops import attempts as attempt_ops
from git_handoff.ops import doc_markdown
from git_handoff.ops.payloads import Attempt
from git_handoff.state import session_records, writers
from git_handoff.state.snapshot import Snapshot
from git_handoff.state.store import StateStore

PRIORITIES = ("P0", "P1", "P2")
LOG_TAIL = 20
INLINE_GRAPH_MAX = 300
GROUP_SHOWN = 200  # tasks of one status listed on the overview; the rest on /tasks/<status>


def escape(text: str) -> str:
    """Text of the state (another clone's, perhaps) as HTML: one line of data with its
    control and bidi characters shown as escapes (git_handoff.core.display), then HTML-escaped."""
    return html.escape(display.line(text))


def escape_block(text: str) -> str:
    """`escape` for each line of a text of several lines (a <pre>: a record, a document)."""
    return "\n".join(escape(line) for line in text.split("\n"))


def unapproved_mark(who: str) -> str:
    """The mark of a record an unapproved writer wrote last (handoff.allowedSigners), as
    `status` and `list` mark a task: shown, never offered to agents."""
    return (f' <span class="unapproved" data-unapproved-writer="{escape(who)}">[unapproved writer: {escape(who)}; '
            "not offered to agents]</span>")


def _by_session(left: dict[str, str], directory: str) -> dict[int, str]:
    """{session number: unapproved writer} of the records in `directory` (sessions, docs)."""
    out: dict[int, str] = {}
    for path, who in left.items():
        if path.startswith(directory + "/"):
            number = path[len(directory) + 1:].split("@", 1)[0].removesuffix(".json")
            if number.isdigit():
                out.setdefault(int(number), who)
    return out


_URL_SAFE = re.compile(r"[A-Za-z0-9._-]+")  # above this the overview links to /graph instead of drawing it
SESSIONS_SHOWN = 50

CSS = """
.unapproved{color:#b71c1c;font-weight:600}
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#263238;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:baseline}
header a{color:#cfd8dc;text-decoration:none}header h1{font-size:17px;margin:0}
main{padding:12px 16px}\
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin-bottom:12px}
h2{font-size:15px;margin:0 0 8px}table{border-collapse:collapse}\
td,th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
.s-completed{color:#2e7d32}.s-in_progress{color:#1565c0}.s-pending{color:#757575}.s-failed{color:#c62828}.s-blocked{color:#ef6c00}
.bar{display:flex;height:14px;border-radius:4px;overflow:hidden;background:#eee;margin:6px 0}
.bar span{display:block}.b-completed{background:#2e7d32}.b-in_progress{background:#1565c0}
.b-pending{background:#bdbdbd}.b-failed{background:#c62828}.b-blocked{background:#ef6c00}
pre{background:#f5f5f5;padding:8px;overflow:auto;font-size:12px;margin:0}
.timeline{display:flex;gap:6px;flex-wrap:wrap}\
.timeline a{display:block;border:1px solid #ccc;border-radius:4px;padding:4px 8px;
text-decoration:none;color:#222;min-width:140px}.muted{color:#777}.graph-wrap{overflow:auto;max-height:80vh}
ul.tasks{columns:3 320px;margin:0;padding-left:18px}
""" + work.CSS

# A few lines of plain JavaScript: on every change of the state the server announces
# (server-sent events), fetch the live fragments and swap them in. No reload.
LIVE_JS = """
(function(){
  window.dashboardLoadedAt = Date.now();
  window.dashboardUpdates = 0;
  function refresh(){
    fetch('/api/live').then(function(r){return r.json();}).then(function(data){
      Object.keys(data.html).forEach(function(id){
        var el = document.getElementById(id); if (el) { el.innerHTML = data.html[id]; }
      });
      window.dashboardUpdates += 1;
      document.body.setAttribute('data-state', data.commit || '');
      document.body.setAttribute('data-updates', String(window.dashboardUpdates));
    }).catch(function(){});
  }
  if (window.EventSource) {
    var es = new EventSource('/events');
    es.addEventListener('state', refresh);
  } else {
    setInterval(refresh, 2000);
  }
})();
"""


def task_url(task_id: str) -> str:
    # ids are [A-Za-z0-9._-] once parsed (model.check_id), so quoting is for anything else
    return "/task/" + (task_id if _URL_SAFE.fullmatch(task_id) else quote(task_id, safe=""))


def _status_of(task: Task, blocked: set[str]) -> str:
    return selection.shown_status(task.id, task.status, blocked)


def page(title: str, body: str, *, live: bool = False, state: str | None = None) -> str:
    script = f"<script>{LIVE_JS}</script>" if live else ""
    return (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)} · git handoff</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<style>{CSS}</style></head><body data-state=\"{escape(state or '')}\" data-updates=\"0\">"
        "<header><h1>git handoff</h1><a href=\"/\">overview</a><a href=\"/graph\">graph</a>"
        "<a href=\"/sessions\">sessions</a></header>"
        f"<main>{body}</main>{script}</body></html>"
    )


def not_initialized_page(message: str) -> str:
    return page("not initialized", f"<section><h2>Nothing to show yet</h2><p>{escape(message)}</p></section>")


# -- fragments that update live --------------------------------------------------------


def counts_html(tasks: dict[str, Task], blocked: set[str]) -> str:
    counts = selection.counts(tasks, blocked)
    total = len(tasks)
    done = counts.get("completed", 0)
    bar = "".join(
        f'<span class="b-{s}" style="width:{100 * counts.get(s, 0) / total:.2f}%" title="{s}: '
        f'{counts.get(s, 0)}"></span>'
        for s in SHOWN_STATUSES if total and counts.get(s, 0)
    )
    cells = "".join(f'<td class="s-{s}">{s} <b data-count="{s}">{counts.get(s, 0)}</b></td>' for s in SHOWN_STATUSES)
    by_prio: dict[tuple[str, str], int] = {}
    for t in tasks.values():
        key = (t.priority, _status_of(t, blocked))
        by_prio[key] = by_prio.get(key, 0) + 1
    rows = "".join(
        f"<tr><th>{p}</th>"
        + "".join(f'<td data-priority="{p}" data-status="{s}">{by_prio.get((p, s), 0)}</td>' for s in SHOWN_STATUSES)
        + f"<td><b>{sum(by_prio.get((p, s), 0) for s in SHOWN_STATUSES)}</b></td></tr>"
        for p in PRIORITIES
    )
    head = "<tr><th></th>" + "".join(f'<th class="s-{s}">{s}</th>' for s in SHOWN_STATUSES) + "<th>all</th></tr>"
    pct = f"{100 * done / total:.0f}%" if total else "-"
    return (
        f'<p><b data-count="total">{total}</b> tasks, {pct} completed</p><div class="bar">{bar}</div>'
        f"<table><tr>{cells}</tr></table>{work.counts_html(tasks)}<h2>By priority</h2><table>{head}{rows}</table>"
    )


def relay_html(snap: Snapshot) -> str:
    record = session_records.read_relay(snap)
    if not record:
        return '<p class="muted" data-relay="none">No relay has run in this repository.</p>'
    notes = session_records.relay_status_lines(snap)
    state = str(record.get("state") or "-")
    table = "".join(f"<tr><th>{escape(k)}</th><td data-relay-field=\"{escape(k)}\">{escape(v)}</td></tr>"
                    for k, v in _relay_rows(snap, record, state))
    note = f'<p>{escape(notes[0])}</p>' if notes else ""
    return f'<div data-relay="{escape(state)}">{note}<table>{table}</table>{_relay_failures(record)}</div>'


def _relay_rows(snap: Snapshot, record: RelayRecord, state: str) -> list[tuple[str, str]]:
    """The relay's fields: its state, its session and that session's ACK, what it waits for
    while it runs, when and why it stopped."""
    session = record.get("session")
    ack = None
    if isinstance(session, int):
        srec = session_records.read_session(snap, session)
        ack = srec.get("ack") if srec else None
    rows = [
        ("state", state),
        ("session", str(session) if session is not None else "-"),
        ("agent",
         (f"{record.get('agent_name')}: " if record.get("agent_name") else "") + str(record.get("agent") or "-")),
        ("ACK", (ack.get("status") if isinstance(ack, dict) else None) or "waiting" if session else "-"),
        ("started", str(record.get("started_at") or "-")),
    ]
    waiting = session_records.waiting_lines(record) if state == "running" else []
    if waiting:  # a limit or outage the relay waits out
        rows.append(("waiting", waiting[0].removeprefix("relay: waiting for ")))
    for line in session_records.switch_lines(record):  # another agent on a long limit (ops/relay_agents.py)
        key = "switched" if line.startswith("relay: agent ") else "limited"
        rows.append((key, line.removeprefix("relay: limited agents: ").removeprefix("relay: agent ")))
    if record.get("stopped_at"):
        rows.append(("stopped", f"{record.get('stopped_at')} ({record.get('reason') or '-'})"))
    return rows


def _relay_failures(record: RelayRecord) -> str:
    """The relay's last ten failures as a list, or nothing."""
    failures = record.get("failures") or []
    if not (isinstance(failures, list) and failures):
        return ""
    items = "".join(
        f"<li>[{escape(str(f.get('at')))}] {escape(str(f.get('what')))}</li>"
        for f in failures[-10:] if isinstance(f, dict)
    )
    return f'<h2>Failures</h2><ul class="s-failed">{items}</ul>'


def log_html(store: StateStore, head: str) -> str:
    lines = [e.line for e in store.entries(start=head, limit=LOG_TAIL)]
    lines.reverse()
    return "<pre>" + "\n".join(escape(line) for line in lines) + "</pre>"


def _session_numbers(snap: Snapshot) -> list[int]:
    count = int(snap.meta().get("session_count") or 0)  # the highest number minted
    return list(range(max(1, count - SESSIONS_SHOWN + 1), count + 1))


def sessions_html(snap: Snapshot) -> str:
    numbers = _session_numbers(snap)
    if not numbers:
        return '<p class="muted">No session yet.</p>'
    left = writers.unapproved_records(snap.repo, snap.commit)
    left_sessions, left_docs = (_by_session(left, session_records.SESSIONS_DIR),
                                _by_session(left, session_records.DOCS_DIR))
    cards = []
    for n in numbers:
        rec = session_records.read_session(snap, n) or {}
        doc = session_records.read_doc(snap, n)
        ack = rec.get("ack")
        ack_text = ack.get("status") if isinstance(ack, dict) else "-"
        done = len(rec.get("completed") or [])
        cards.append(
            f'<a class="session" data-session="{n}" href="/session/{n}"><b>session {n}</b>'
            f'<br><span class="muted">{escape(str(rec.get("started_at") or "-"))}</span>'
            f'<br>{escape(str(rec.get("worker") or "-"))}'
            f'<br>completed {done} · ACK {escape(str(ack_text))}'
            + (f'<br><span data-tokens="{n}">{_usage_text(rec["usage"])}</span>'
               if isinstance(rec.get("usage"), dict) else "")
            + (f'<br><b>budget</b>: {escape(str(rec["budget"]))}' if rec.get("budget") else "")
            + f'<br>{"handoff document" if isinstance(doc, dict) else "<span class=muted>no document</span>"}'
            + (f"<br>record{unapproved_mark(left_sessions[n])}" if n in left_sessions else "")
            + (f"<br>document{unapproved_mark(left_docs[n])}" if n in left_docs else "") + "</a>"
        )
    total = session_records.usage_totals(snap)
    used = f' · <span data-count="tokens">{_usage_text(total)}</span>' if total["sessions"] else ""
    return (f'<p><b data-count="sessions">{len(numbers)}</b> session(s){used}</p>'
            f'<div class="timeline">{"".join(cards)}</div>')


def _usage_text(used: dict[str, Any]) -> str:
    """`1234 tokens (in 1000, out 234), $0.0123`, escaped."""
    cost = used.get("cost_usd")
    return escape(f"{used.get('tokens')} tokens (in {used.get('input_tokens')}, out {used.get('output_tokens')})"
                  + (f", ${cost:.4f}" if isinstance(cost, int | float) else ""))


def inline_graph_html(tasks: dict[str, Task], blocked: set[str]) -> str:
    if len(tasks) <= INLINE_GRAPH_MAX:
        return f'<div class="graph-wrap">{svg.render(tasks, blocked, link=task_url)}</div>'
    return f'<p>{len(tasks)} tasks: <a href="/graph">the whole graph</a>.</p>'


def live_fragments(store: StateStore) -> dict[str, Any]:
    snap = store.snapshot()
    tasks = snap.tasks()
    return _live(store, snap, tasks, selection.blocked_ids(tasks))


def _live(store: StateStore, snap: Snapshot, tasks: dict[str, Task], blocked: set[str]) -> dict[str, Any]:
    return {
        "commit": snap.commit,
        "html": {
            "counts": counts_html(tasks, blocked),
            "graph": inline_graph_html(tasks, blocked),
            "relay": relay_html(snap),
            "log": log_html(store, snap.commit),
            "sessions": sessions_html(snap),
        },
    }


# -- pages ------------------------------------------------------------------------------


def _by_status(tasks: dict[str, Task], blocked: set[str]) -> dict[str, list[Task]]:
    groups: dict[str, list[Task]] = {s: [] for s in SHOWN_STATUSES}
    for t in tasks.values():
        groups[_status_of(t, blocked)].append(t)
    return groups


def _task_items(chosen: list[Task], left: dict[str, str]) -> str:
    """List items of tasks; those an unapproved writer wrote last (`left`) marked."""
    return "".join(
        f'<li><a class="task-link" href="{task_url(t.id)}">{escape(t.id)}</a> {escape(t.title)} '
        f'<span class="muted">{t.priority} {t.attempts}/{t.max_attempts}</span>{work.mark(t)}'
        f'{unapproved_mark(left[t.id]) if t.id in left else ""}</li>'
        for t in chosen
    )


def overview(store: StateStore) -> str:
    snap = store.snapshot()
    tasks = snap.tasks()
    blocked = selection.blocked_ids(tasks)
    live = _live(store, snap, tasks, blocked)
    left = writers.unapproved(snap.repo, snap.commit)
    groups = []
    for s, chosen in _by_status(tasks, blocked).items():
        if not chosen:
            continue
        more = ""
        if len(chosen) > GROUP_SHOWN:  # a page of 10,000 list items helps nobody: the rest a click away
            more = f'<p><a href="/tasks/{s}">all {len(chosen)} {s} tasks</a></p>'
        groups.append(f'<h2 class="s-{s}">{s} ({len(chosen)})</h2><ul class="tasks" data-group="{s}">'
                      f"{_task_items(chosen[:GROUP_SHOWN], left)}</ul>{more}")
    h = live["html"]
    body = (
        f'<section><h2>Progress</h2><div id="counts">{h["counts"]}</div></section>'
        f'<section><h2>Dependencies</h2><div id="graph">{h["graph"]}</div></section>'
        f'<section><h2>Relay</h2><div id="relay">{h["relay"]}</div></section>'
        f'<section><h2>Sessions</h2><div id="sessions">{h["sessions"]}</div></section>'
        f'<section><h2>Log</h2><div id="log">{h["log"]}</div></section>'
        f'<section><h2>Tasks</h2>{"".join(groups) or "<p class=muted>No task yet.</p>"}</section>'
    )
    return page("overview", body, live=True, state=live["commit"])


def tasks_page(store: StateStore, status: str) -> str | None:
    """Every task of one status (computed `blocked` included), or None for another word."""
    if status not in SHOWN_STATUSES:
        return None
    snap = store.snapshot()
    tasks = snap.tasks()
    chosen = _by_status(tasks, selection.blocked_ids(tasks))[status]
    left = writers.unapproved(snap.repo, snap.commit)
    return page(f"{status} tasks", f'<section><h2 class="s-{status}">{status} ({len(chosen)})</h2>'
                                   f'<ul class="tasks" data-group="{status}">{_task_items(chosen, left)}</ul>'
                                   '</section>')


def graph_svg(store: StateStore) -> str:
    tasks = store.snapshot().tasks()
    return svg.render(tasks, selection.blocked_ids(tasks), link=task_url)


def graph_page(store: StateStore) -> str:
    tasks = store.snapshot().tasks()
    edges = sum(1 for t in tasks.values() for d in t.depends_on if d in tasks)
    drawing = svg.render(tasks, selection.blocked_ids(tasks), link=task_url)
    body = (f"<section><h2>Dependency graph</h2><p>{len(tasks)} task(s), {edges} dependenc"
            f"{'y' if edges == 1 else 'ies'} · <a href=\"/graph.svg\">SVG</a></p>"
            f'<div class="graph-wrap">{drawing}</div></section>')
    return page("graph", body)


def _kv(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows) + "</table>"


def task_page(store: StateStore, task_id: str) -> str | None:
    """The page of one task, or None when there is no such task."""
    snap = store.snapshot()
    task = snap.task(task_id) if _plausible_id(task_id) else None
    if task is None:
        return None
    tasks = snap.tasks()
    state = _status_of(task, selection.blocked_ids(tasks))
    dependents = [t.id for t in tasks.values() if task.id in t.depends_on]
    writer = writers.unapproved(snap.repo, snap.commit).get(task.id)
    checkpoints = "".join(
        f"<tr><td>{escape(str(c.get('step')))}/{escape(str(c.get('total')))}</td><td>{escape(str(c.get('description')))}</td>"
        f"<td class=muted>{escape(str(c.get('timestamp')))}</td></tr>" for c in task.checkpoints
    )
    errors = "".join(f"<li>{escape(e)}</li>" for e in task.error_log)
    attempt_rows = "".join(_attempt_row(a) for a in attempt_ops.attempts(store, task.id))
    record = json.dumps(task_to_json(task), indent=2, ensure_ascii=False, default=str)
    body = (
        f'<section><h2 class="s-{state}">{escape(task.id)}: {escape(task.title)}'
        f'{unapproved_mark(writer) if writer is not None else ""}</h2>{_kv(_task_rows(task, state))}'
        f"<p>depends on: {_task_links(task.depends_on)}</p><p>needed by: {_task_links(dependents)}</p></section>"
        '<section><h2>Attempts</h2><table '
        f'id="attempts">{attempt_rows or "<tr><td class=muted>none saved</td></tr>"}</table></section>'
        '<section><h2>Checkpoints</h2><table '
        f'id="checkpoints">{checkpoints or "<tr><td class=muted>none</td></tr>"}</table></section>'
        f'<section><h2>Error log</h2><ul id="errors">{errors or "<li class=muted>empty</li>"}</ul></section>'
        f"<section><h2>Record</h2><pre>{escape_block(record)}</pre></section>"
    )
    return page(task.id, body)


def _task_links(ids: Sequence[str]) -> str:
    """Links to the pages of the tasks `ids`, or "-"."""
    return " ".join(f'<a href="{task_url(d)}">{escape(d)}</a>' for d in ids) or "-"


def _task_rows(task: Task, state: str) -> list[tuple[str, str]]:
    """The fields of a task's page table; who holds it and until when while it is in progress."""
    rows = [
        ("status", state), ("priority", task.priority), ("attempts", f"{task.attempts}/{task.max_attempts}"),
        ("check", task.check or "-"), ("timeout", f"{task.timeout_seconds}s"), ("cleanup", task.cleanup or "-"),
        ("spec", task.spec_ref or "-"), ("created", task.created_at or "-"),
        ("started at", task.started_at_commit or "-"), ("completed", task.completed_at or "-"),
        ("tokens", str(task.tokens)), ("cost", _micro_usd_text(task.get("cost_micro_usd"))),
        ("held", _seconds_text(task.get("held_seconds"))),
    ]
    if task.status == "in_progress" and task.claimed_by:
        rows.append(("claimed by", f"{task.claimed_by} (lease until {task.lease_expires_at})"))
    said = work.row(task)
    if said:
        rows.append(("work", said))
    return rows


def _micro_usd_text(micro: object) -> str:
    """A task's share of its sessions' cost (`cost_micro_usd`) in dollars, or "-" (none printed)."""
    return f"${micro / 1e6:.4f}" if isinstance(micro, int) and not isinstance(micro, bool) and micro > 0 else "-"


def _seconds_text(held: object) -> str:
    """A task's ended claims' wall time (`held_seconds`), or "-"."""
    return f"{held}s" if isinstance(held, int) and not isinstance(held, bool) and held > 0 else "-"


def _attempt_row(a: Attempt) -> str:
    """One saved attempt as a table row (an attempt whose record cannot be read says why)."""
    return (
        f'<tr class="attempt" data-attempt="{a["attempt"]}"><td>#{a["attempt"]}</td>'
        f'<td>{escape(str(a.get("time") or "-"))}</td>'
        f'<td>{escape(str(a.get("category") or "-"))}</td>'
        '<td>'
        f'{escape(str(a.get("reason") or ("unreadable: " + str(a["unreadable"]) if a.get("unreadable") else "")))}'
        '</td>'
        f'<td><code>{escape(str(a.get("ref")))}</code></td><td>{len(a.get("files") or [])} file(s)</td></tr>'
    )


def sessions_page(store: StateStore) -> str:
    snap = store.snapshot()
    return page("sessions", f'<section><h2>Sessions</h2>{sessions_html(snap)}</section>')


def session_page(store: StateStore, number: int) -> str | None:
    snap = store.snapshot()
    rec = session_records.read_session(snap, number)
    if rec is None:
        return None
    doc = session_records.read_doc(snap, number)
    ack = rec.get("ack")
    rows = [
        ("worker", str(rec.get("worker") or "-")), ("started", str(rec.get("started_at") or "-")),
        ("ended", str(rec.get("ended_at") or "-")), ("base", str(rec.get("base") or "-")),
        ("ACK", str(ack.get("status")) if isinstance(ack, dict) else "-"),
    ]
    if isinstance(rec.get("usage"), dict):
        rows.append(("usage", f"{rec['usage'].get('tokens')} tokens (in {rec['usage'].get('input_tokens')}, out "
                              f"{rec['usage'].get('output_tokens')}), {rec['usage'].get('turns')} turns"
                              + (f", ${rec['usage']['cost_usd']:.4f}"
                                 if isinstance(rec["usage"].get("cost_usd"), int | float) else "")))
    if rec.get("budget"):
        rows.append(("budget", str(rec["budget"])))
    done = " ".join(f'<a href="{task_url(str(t))}">{escape(str(t))}</a>' for t in rec.get("completed") or []) or "-"
    facts = "".join(f"<li>{escape(str(d.get('what')))} — {escape(str(d.get('why')))}</li>"
                    for d in rec.get("decisions") or [] if isinstance(d, dict))
    doc_html = (f'<pre id="handoff-doc">{escape_block(doc_markdown.render_markdown(doc))}</pre>'
                if isinstance(doc, dict)
                else '<p class="muted">No handoff document for this session.</p>')
    left = writers.unapproved_records(snap.repo, snap.commit)
    record_by = _by_session(left, session_records.SESSIONS_DIR).get(number)
    doc_by = _by_session(left, session_records.DOCS_DIR).get(number) if isinstance(doc, dict) else None
    body = (
        f"<section><h2>Session {number}{unapproved_mark(record_by) if record_by is not None else ''}</h2>{_kv(rows)}"
        f"<p>completed: {done}</p><ul>{facts}</ul></section>"
        f"<section><h2>Handoff document{unapproved_mark(doc_by) if doc_by is not None else ''}</h2>{doc_html}</section>"
    )
    return page(f"session {number}", body)


def _plausible_id(task_id: str) -> bool:
    try:
        check_id(task_id)
    except UsageError:
        return False
    return True
