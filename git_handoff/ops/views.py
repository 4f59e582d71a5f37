"""The read-only views of the task graph: list, show, next, status, log, graph.
Nothing here writes the state."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from json.encoder import encode_basestring as _encode_string
from typing import cast

from git_handoff.core import display, selection
from git_handoff.core.errors import Negative, UsageError
from git_handoff.core.model import LOG_TYPES, SHOWN_STATUSES, Task, check_id, now_iso
from git_handoff.core.serialization import task_to_json
from git_handoff.ops.payloads import (
    GraphView,
    LogLine,
    StatusRow,
    StatusView,
    TaskView,
    UsageTotal,
    WorkCounts,
    config_view,
)
from git_handoff.state import (
    claim_index,
    identity,
    quarantine,
    session_records,
    status_index,
    target,
    this_clone,
    writers,
)
from git_handoff.state.snapshot import Snapshot
from git_handoff.state.store import LogEntry, StateStore

# -- views --------------------------------------------------------------------------


def view(task: Task, blocked: set[str] | None = None, unapproved: dict[str, str] | None = None) -> TaskView:
    """A task for --json output: the harness task fields, plus the computed `blocked`, and, for a
    task an unapproved writer wrote last (handoff.allowedSigners), `unapproved_writer`."""
    out = cast(TaskView, task_to_json(task))  # it writes the fields TaskJson names
    out["blocked"] = bool(blocked and task.id in blocked)
    if unapproved and task.id in unapproved:
        out["unapproved_writer"] = unapproved[task.id]
    return out


def unapproved(snap: Snapshot) -> dict[str, str]:
    """{task id: writer} of the tasks never offered to an agent here (git_handoff.state.writers);
    {} without handoff.allowedSigners."""
    return writers.unapproved(snap.repo, snap.commit)


def list_tasks(snap: Snapshot, *, status: str | None = None, ready: bool = False) -> tuple[list[Task], set[str]]:
    tasks = snap.tasks()
    blocked = selection.blocked_ids(tasks)
    if status is not None and status not in SHOWN_STATUSES:
        raise UsageError(f"invalid status {status!r}: use {', '.join(SHOWN_STATUSES[:-1])} or {SHOWN_STATUSES[-1]}")
    chosen: Iterable[Task]
    if ready:
        prepared, _ = selection.prepare(tasks, now_iso())
        chosen = selection.eligible(prepared, skip=unapproved(snap))
    else:
        chosen = tasks.values()
    if status == "blocked":
        chosen = [t for t in chosen if t.id in blocked]
    elif status is not None:
        chosen = [t for t in chosen if t.status == status and t.id not in blocked]
    return list(chosen), blocked


def show(snap: Snapshot, task_id: str) -> Task:
    check_id(task_id)
    task = snap.task(task_id)
    if task is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    return task


# The --json answers every adapter gives (the CLI's --json, the MCP server's tools).


def list_view(snap: Snapshot, *, status: str | None = None, ready: bool = False) -> list[TaskView]:
    """`list --json`."""
    found, blocked = list_tasks(snap, status=status, ready=ready)
    hidden = unapproved(snap)
    return [view(t, blocked, hidden) for t in found]


def show_view(snap: Snapshot, task_id: str) -> TaskView:
    """`show --json`: the task, with `blocked` computed for a pending one."""
    task = show(snap, task_id)
    return view(task, selection.blocked_ids(snap.tasks()) if task.status == "pending" else None, unapproved(snap))


def next_task(snap: Snapshot) -> Task:
    """The task `claim` would take; Negative (exit 1) when none."""
    hidden = unapproved(snap)
    found = claim_index.next_eligible(snap, now_iso(), skip=hidden)
    held: list[str] = []
    if found is not None and found.depends_on:
        found, held = _with_its_work(snap, found, hidden)
    if found is None and held:
        raise Negative(f"nothing eligible here: {held[0]}")
    if found is None:
        if hidden:
            raise Negative(f"nothing eligible from approved writers: {len(hidden)} task(s) were last written by a "
                           "writer this clone has not approved (`git handoff trust` lists them)")
        raise Negative("nothing eligible: every task is completed, in progress, or waiting on failed dependencies")
    return found


def _with_its_work(snap: Snapshot, found: Task, hidden: dict[str, str]) -> tuple[Task | None, list[str]]:
    """The first eligible task whose dependencies' work this worktree's HEAD or the target
    holds (what `claim` takes: ops/claim_base.py), and why each passed over was."""
    repo = snap.repo
    head = repo.head()
    try:
        goal = target.resolve(repo)
        tip = target.tip(repo, goal)
    except UsageError:
        goal, tip = None, None
    bases = [target.WorkAt(repo, base) for base in dict.fromkeys((head, tip)) if base]
    skip: dict[str, str] = dict(hidden)
    held: list[str] = []
    current: Task | None = found
    for _ in range(50):
        if current is None:
            return None, held
        tasks = {d: t for d in current.depends_on if (t := snap.task(d)) is not None}
        lacking = [b.lacking(current, tasks) for b in bases]
        if not bases or any(not missing for missing in lacking):
            return current, held
        held.append(target.missing_message(current, lacking[-1], bases[0].base, goal.name if goal else None))
        skip[current.id] = "lacks its dependencies' work"
        current = claim_index.next_eligible(snap, now_iso(), skip=skip)
    return None, held


def status(store: StateStore) -> StatusView:
    """`status`: counted and listed from the status index (state/status_index.py), so no
    task is read or built whose leaf did not change since the index was written."""
    snap = store.snapshot()
    hidden = unapproved(snap)
    summary = status_index.summary(snap)
    rows: list[StatusRow] = []
    work = work_counts(())
    if summary is None:
        counts = selection.counts({}, set())
    else:
        blocked = summary.blocked()
        counts = summary.status_counts(blocked)
        listed = list(map(summary.rows.__getitem__, summary.ids()))
        rows = [_status_row(r, blocked, hidden) for r in listed]
        work = work_counts(listed)
    return _status_view(store, snap, counts, rows, hidden, work)


def _status_row(r: status_index.Row, blocked: set[str], hidden: dict[str, str]) -> StatusRow:
    """One row of `status`'s "tasks", from the status index's row."""
    row: StatusRow = {
        "id": r[0],
        "title": r[1],
        "status": selection.shown_status(r[0], r[2], blocked),
        "attempts": r[3],
        "max_attempts": r[4],
        "priority": r[5],
        "claimed_by": r[6],
    }
    if r[0] in hidden:
        row["unapproved_writer"] = hidden[r[0]]
    work = r[status_index.WORK]
    if work is not None:
        row["work"] = work[0]
        if work[0] == selection.LANDED:
            row["integrated_commit"] = work[1]
        elif work[0] == selection.WAITING:
            row["work_ref"] = work[1]
    use = r[status_index.USE]
    if use is not None:
        row["tokens"], row["cost_micro_usd"], row["held_seconds"] = use
    return row


def work_counts(rows: Iterable[status_index.Row]) -> WorkCounts:
    """How many tasks' work is in each place (core/selection.work_state), from the index's rows."""
    out = dict.fromkeys(selection.WORK_STATES, 0)
    at = status_index.WORK
    for r in rows:
        if r[at] is not None:
            out[r[at][0]] += 1
    return cast(WorkCounts, out)


def status_json(store: StateStore) -> str:
    """`status --json`, compact: the text `json.dumps(status(store), ensure_ascii=False)`
    gives, its "tasks" array written row by row from the status index's tuples (at
    10,000 tasks, building 10,000 dicts and encoding them took longer than the rest of
    the command)."""
    snap = store.snapshot()
    hidden = unapproved(snap)
    summary = status_index.summary(snap)
    if summary is None:
        return json.dumps(_status_view(store, snap, selection.counts({}, set()), [], hidden, work_counts(())),
                          ensure_ascii=False, default=str)
    blocked = summary.blocked()
    counts = summary.status_counts(blocked)
    rows = list(map(summary.rows.__getitem__, summary.ids()))
    text = json.dumps(_status_view(store, snap, counts, [], hidden, work_counts(rows)), ensure_ascii=False,
                      default=str)
    head = '{"counts": ' + json.dumps(counts, ensure_ascii=False) + ', "tasks": []'
    if not text.startswith(head):  # (the view starts with its counts and tasks)
        return json.dumps(status(store), ensure_ascii=False, default=str)
    listed = None
    if not hidden and all(type(r[3]) is int and type(r[4]) is int for r in rows):
        enc, at, used = _encode_string, status_index.WORK, status_index.USE
        try:
            listed = ", ".join([_ROW % (enc(r[0]), enc(r[1]), enc("blocked" if r[0] in blocked else r[2]), r[3], r[4],
                                        enc(r[5]), "null" if r[6] is None else enc(r[6]),
                                        "" if (w := r[at]) is None else _WORK_JSON[w[0]] + ("" if w[1] is None
                                                                                         else enc(w[1])),
                                        "" if (u := r[used]) is None else _USE_JSON % u)
                                for r in rows])
        except (TypeError, KeyError):  # a value of another type than the parser gives: as json.dumps writes it
            listed = None
    if listed is None:
        listed = ", ".join([json.dumps(_status_row(r, blocked, hidden), ensure_ascii=False, default=str) for r in rows])
    return f"{head[:-1]}{listed}]{text[len(head):]}"


# a row of `status --json` as json.dumps writes the dict `status` builds, when its strings
# are strings and its numbers whole numbers
_ROW = ('{"id": %s, "title": %s, "status": %s, "attempts": %d, "max_attempts": %d, "priority": %s, '
        '"claimed_by": %s%s%s}')

# the keys `_status_row` adds for a row's use (the index's USE), as json.dumps writes them
_USE_JSON = ', "tokens": %d, "cost_micro_usd": %d, "held_seconds": %d'

# the keys `_status_row` adds for a row's work (the index's WORK: state, detail), as json.dumps
# writes them, up to the detail's value (landed: the commit, waiting: the work ref, else none)
_WORK_JSON = {selection.LANDED: ', "work": "landed", "integrated_commit": ',
              selection.WAITING: ', "work": "waiting", "work_ref": ',
              selection.WITHHELD: ', "work": "withheld"', selection.SENT_BACK: ', "work": "sent_back"'}


def _status_view(store: StateStore, snap: Snapshot, counts: dict[str, int], rows: list[StatusRow],
                 hidden: dict[str, str], work: WorkCounts) -> StatusView:
    meta = snap.meta()
    last_lines = [e.line for e in store.entries(limit=5)]
    last_lines.reverse()
    out: StatusView = {
        "counts": counts,
        "tasks": rows,
        "log": last_lines,
        "session_count": session_records.sessions_started(meta),
        "last_session": meta.get("last_session"),
        "config": config_view(snap.config()),
        "state_commit": snap.commit,
        "notes": _notes(store, snap),
        "usage": cast(UsageTotal, session_records.usage_totals(snap)),
        "work": work,
    }
    note = writers.file_note(store.repo)
    if note:
        out["notes"].append(note)
    if hidden:
        out["notes"].append(f"{len(hidden)} task(s) last written by a writer this clone has not approved are shown "
                            "but not offered to agents: `git handoff trust` lists the writers")
    return out


def summary_line(total: Mapping[str, object]) -> str:
    """`tokens: 1234 (in 1000, out 234), cost $0.0123` ("" when nothing was recorded)."""
    if not total.get("tokens") and not total.get("turns"):
        return ""
    cost = total.get("cost_usd")
    return (f"tokens: {total.get('tokens', 0)} (in {total.get('input_tokens', 0)}, out {total.get('output_tokens', 0)})"
            + (f", cost ${cost:.4f}" if isinstance(cost, int | float) else ""))


def _notes(store: StateStore, snap: Snapshot) -> list[str]:
    """Extra lines for `status` from other areas: what waits to be pushed, the relay."""
    return (this_clone.unpushed_lines(store.repo, store.head(), identity.clone_id(store.repo))
            + session_records.relay_status_lines(snap) + quarantine.status_lines(store.repo))


def log(
    store: StateStore,
    *,
    limit: int | None = None,
    task: str | None = None,
    session: int | None = None,
    kind: str | None = None,
) -> list[LogEntry]:
    """Log lines oldest first; with `limit`, the last `limit` matching lines."""
    if not store.is_initialized():
        store.snapshot()  # raises NotInitialized
    if limit is not None and limit < 0:
        raise UsageError("-n must not be negative")
    if limit == 0:
        return []
    if task is not None:
        check_id(task)
    if kind is not None and kind.lower() not in {t.lower() for t in LOG_TYPES}:
        raise UsageError(f"unknown log type {kind!r}: use one of {', '.join(LOG_TYPES)}")
    # imported here: it brings the remote's transport, which no other view needs
    from git_handoff.ops.history import ensure_history  # noqa: PLC0415 - import cost, see above

    ensure_history(store)  # a clone that joined one commit deep fetches what lies below
    out: list[LogEntry] = []
    for entry in store.entries():
        if task is not None and entry.task != task:
            continue
        if session is not None and entry.session != session:
            continue
        if kind is not None and entry.type.lower() != kind.lower():
            continue
        out.append(entry)
        if limit is not None and len(out) >= limit:
            break
    out.reverse()
    return out


def log_view(entry: LogEntry) -> LogLine:
    """One line of `log --json`."""
    return {"line": entry.line, "timestamp": entry.ts, "session": entry.session, "type": entry.type,
            "task": entry.task, "commit": entry.commit}


# -- graph --------------------------------------------------------------------------


GRAPH_DEPTH = 32  # levels of indentation `graph` draws; deeper lines say their depth


def graph_view(snap: Snapshot) -> GraphView:
    """`graph --json`."""
    tasks = snap.tasks().values()
    return {"nodes": [{"id": t.id, "title": t.title, "status": t.status} for t in tasks],
            "edges": [[d, t.id] for t in tasks for d in t.depends_on]}


def graph(snap: Snapshot, fmt: str = "text") -> str:
    """The task graph drawn in `fmt`: text (a tree per root), dot, mermaid or svg."""
    tasks = snap.tasks()
    blocked = selection.blocked_ids(tasks)
    if fmt == "svg":
        # imported here, not at the top: it (with html, shutil, subprocess) would cost
        # every `status` and `list` ~10-25 ms for a format they never print
        from git_handoff.infra import graph_svg  # noqa: PLC0415 - import cost, see above

        return graph_svg.render(tasks, blocked)
    draw = _GRAPH_FORMATS.get(fmt)
    if draw is None:
        raise UsageError(f"invalid format {fmt!r}: use text, dot, mermaid or svg")
    return draw(tasks, lambda t: selection.shown_status(t.id, t.status, blocked))


def _graph_dot(tasks: dict[str, Task], state: Callable[[Task], str]) -> str:
    """`graph --format dot`: a box per task (`state` its shown status), an edge per dependency."""
    lines = ["digraph handoff {", "  rankdir=LR;", "  node [shape=box];"]
    for t in tasks.values():
        label = f"{t.id}\\n{display.line(t.title)}\\n[{state(t)}]".replace('"', '\\"')
        lines.append(f'  "{t.id}" [label="{label}"];')
    for t in tasks.values():
        for dep in t.depends_on:
            lines.append(f'  "{dep}" -> "{t.id}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _graph_mermaid(tasks: dict[str, Task], state: Callable[[Task], str]) -> str:
    """`graph --format mermaid`: nodes named by position; edges only to tasks that exist."""
    names = {tid: f"n{n}" for n, tid in enumerate(tasks)}
    lines = ["graph TD"]
    for t in tasks.values():
        label = f"{t.id}: {display.line(t.title)} [{state(t)}]".replace('"', "'")
        lines.append(f'  {names[t.id]}["{label}"]')
    for t in tasks.values():
        for dep in t.depends_on:
            if dep in names:
                lines.append(f"  {names[dep]} --> {names[t.id]}")
    return "\n".join(lines) + "\n"


def _graph_text(tasks: dict[str, Task], state: Callable[[Task], str]) -> str:
    """`graph`: each root, then what depends on it, indented; a task reached again is shown
    once more as a reference, and the tasks only reachable through a cycle (no root) last."""
    dependents: dict[str, list[str]] = {}
    for t in tasks.values():
        for dep in t.depends_on:
            dependents.setdefault(dep, []).append(t.id)
    roots = [t.id for t in tasks.values() if not any(d in tasks for d in t.depends_on)]
    out: list[str] = []
    printed: set[str] = set()
    for start in [*roots, *tasks]:
        if start not in printed:
            _walk(start, tasks, dependents, state, printed, out)
    return "\n".join(out) + ("\n" if out else "")


def _walk(start: str, tasks: dict[str, Task], dependents: dict[str, list[str]],
          state: Callable[[Task], str], printed: set[str], out: list[str]) -> None:
    """The lines of the tree below `start` into `out`: iterative, depth first (a fetched
    chain 5,000 deep overflowed the recursion); the indentation stops growing at GRAPH_DEPTH
    levels (the depth is written instead), or a deep chain printed a prefix of its whole
    depth on every line."""
    stack: list[tuple[str, str, bool, int]] = [(start, "", True, 0)]
    while stack:
        tid, prefix, last, depth = stack.pop()
        t = tasks[tid]
        branch = "" if depth == 0 else ("└── " if last else "├── ")
        deep = f"({depth} deep) " if depth > GRAPH_DEPTH else ""
        seen = tid in printed
        suffix = " (see above)" if seen else ""
        out.append(f"{prefix}{branch}{deep}[{state(t)}] {tid}: {display.line(t.title)}{suffix}")
        if seen:
            continue
        printed.add(tid)
        kids = dependents.get(tid, [])
        child_prefix = prefix
        if 0 < depth <= GRAPH_DEPTH:
            child_prefix = prefix + ("    " if last else "│   ")
        for n in range(len(kids) - 1, -1, -1):
            stack.append((kids[n], child_prefix, n == len(kids) - 1, depth + 1))


_GRAPH_FORMATS: dict[str, Callable[[dict[str, Task], Callable[[Task], str]], str]] = {
    "text": _graph_text, "dot": _graph_dot, "mermaid": _graph_mermaid,
}
