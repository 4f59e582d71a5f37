"""Commands of the task graph: init, add, import, list, show, edit, status, next, log, graph."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from git_handoff.cli import (
    emit_json,
    emit_json_text,
    get_store,
    json_option,
    numbers,
    visible,
    writer_mark,
)
from git_handoff.cli.ids import complete_task_id
from git_handoff.cli.progress import Progress
from git_handoff.core import selection
from git_handoff.core.model import Task
from git_handoff.ops import views
from git_handoff.ops.payloads import StatusRow

F = TypeVar("F", bound=Callable[..., Any])


def _ops() -> Any:
    """The write side (init, add, import, edit), imported only by the commands that write:
    `list`, `show`, `status` and `next` do not pay for it."""
    from git_handoff.ops import tasks  # noqa: PLC0415 - import cost, see above

    return tasks


def task_line(task: Task, blocked: set[str] | None = None, unapproved: dict[str, str] | None = None) -> str:
    state = selection.shown_status(task.id, task.status, blocked)
    line = f"[{state}] {task.id}: {visible(task.title)} ({task.attempts}/{task.max_attempts})"
    return line + unapproved_mark(task.id, unapproved)


def unapproved_mark(task_id: str, unapproved: dict[str, str] | None) -> str:
    """The mark of a task an unapproved writer wrote last (never offered to agents)."""
    if not unapproved or task_id not in unapproved:
        return ""
    return writer_mark(unapproved[task_id])


def use_mark(row: StatusRow) -> str:
    """What was charged to a task `status` lists (`show`'s tokens, cost and held time), or ""."""
    if "tokens" not in row:
        return ""
    cost, held = row.get("cost_micro_usd", 0), row.get("held_seconds", 0)
    return (f"  used: {row['tokens']} tokens" + (f", ${cost / 1e6:.4f}" if cost else "")
            + (f", held {held}s" if held else ""))


def work_mark(row: StatusRow) -> str:
    """Where the work of a task `status` lists is (core/selection.work_state), or ""."""
    state = row.get("work")
    if state == "landed":
        return f"  work: landed {str(row.get('integrated_commit'))[:12]}"
    if state == "waiting":
        return f"  work: waiting to land ({visible(str(row.get('work_ref')))})"
    if state == "withheld":
        return f"  work: withheld, a secret in its commits (git handoff show {row['id']})"
    if state == "sent_back":
        return f"  work: sent back by the integration queue (git handoff show {row['id']})"
    return ""


def describe(task: Task) -> str:
    lines = [
        f"{task.id}: {visible(task.title)}",
        f"  status:        {task.status}",
        f"  priority:      {task.priority}",
        f"  depends on:    {', '.join(task.depends_on) or '-'}",
        f"  attempts:      {task.attempts}/{task.max_attempts}",
        f"  check:         {visible(task.check) if task.check else '- (none: `done` will refuse)'}",
        f"  timeout:       {task.timeout_seconds}s",
        f"  cleanup:       {visible(task.cleanup or '-')}",
        f"  spec:          {visible(task.spec_ref or '-')}",
        f"  created:       {task.created_at}",
    ]
    lines += _claim_lines(task) + _work_lines(task) + _use_lines(task)
    for cp in task.checkpoints:
        said = visible(str(cp.get("description")))
        lines.append(f"  checkpoint:    step={cp.get('step')}/{cp.get('total')} \"{said}\" at {cp.get('timestamp')}")
    for err in task.error_log:
        lines.append(f"  error:         {visible(err)}")
    return "\n".join(lines)


def _claim_lines(task: Task) -> list[str]:
    """Where the task started, who holds or last held it, when it completed."""
    lines = [f"  started at:    {task.started_at_commit}"] if task.started_at_commit else []
    if task.status == "in_progress" and task.claimed_by:
        lease = f" (lease until {task.lease_expires_at})" if task.lease_expires_at else ""
        lines.append(f"  claimed by:    {visible(task.claimed_by)}{lease}")
    elif task.claimed_by:
        lines.append(f"  last claimed:  {visible(task.claimed_by)}")
    if task.completed_at:
        lines.append(f"  completed:     {task.completed_at}")
    return lines


def _work_lines(task: Task) -> list[str]:
    """Where its work is: withheld (a secret), published under its work ref, landed."""
    lines = []
    if isinstance(task.get("work_withheld"), str):
        lines.append(f"  work:          {visible(str(task.get('work_withheld')))}")
    work = task.get("work_ref")
    if isinstance(work, str):
        landed = task.get("integrated_commit")
        lines.append(f"  work:          {visible(work)} "
                     + (f"(landed on the target as {str(landed)[:12]})" if isinstance(landed, str) else
                        "(not on the target yet: `git handoff integrate`)"))
    return lines


def _use_lines(task: Task) -> list[str]:
    """What it used: tokens and cost (its share of its sessions'), wall time held."""
    lines = [f"  tokens:        {task.tokens} (its share of its sessions' agents' tokens)"] if task.tokens else []
    cost, held = task.get("cost_micro_usd"), task.get("held_seconds")
    if isinstance(cost, int) and not isinstance(cost, bool) and cost > 0:
        lines.append(f"  cost:          ${cost / 1e6:.4f} (its share of its sessions' printed cost)")
    if isinstance(held, int) and not isinstance(held, bool) and held > 0:
        lines.append(f"  held:          {held}s (its ended claims' wall time)")
    return lines


def task_options(for_edit: bool) -> Callable[[F], F]:
    """The options `add` and `edit` share."""

    def decorate(fn: F) -> F:
        opts = [
            click.option("--priority", "-p", type=click.Choice(["P0", "P1", "P2"]), default=None if for_edit else "P1",
                         show_default=not for_edit, help="P0 is taken first."),
            click.option("--after", "after", multiple=True, metavar="ID",
                         help="A task this one depends on (repeat for several)."
                         + (" Replaces the list." if for_edit else "")),
            click.option("--check", metavar="CMD", default=None,
                         help="Validation command (sh -c, at the worktree root); `done` requires it to pass."),
            click.option("--timeout", type=numbers.TIMEOUT, default=None, metavar="S",
                         help="Seconds the check may run"
                         + (" (the task's own value is kept unless given)." if for_edit else " [default: 300].")),
            click.option("--max-attempts", type=numbers.ATTEMPTS, default=None, metavar="N",
                         help="Failed attempts before the task fails for good"
                         + (" (kept unless given)." if for_edit else " [default: 3].")),
            click.option("--cleanup", metavar="CMD", default=None,
                         help="Command run after a failed attempt is rolled back."),
            click.option("--spec", metavar="PATH", default=None, help="Where the task's specification lives."),
        ]
        if for_edit:
            opts.append(click.option("--title", default=None, help="A new title."))
            opts.append(click.option("--no-after", is_flag=True, help="Remove every dependency."))
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


@click.command("init")
@click.option("--mode", type=click.Choice(["exclusive", "concurrent"]), default=None,
              help="exclusive: one claim at a time in the repository; concurrent: one per worktree.")
@click.option("--max-tasks-per-session", type=numbers.POSITIVE, default=None, metavar="N",
              help="Completed tasks before a session must hand off.")
@click.option("--max-sessions", type=numbers.POSITIVE, default=None, metavar="N",
              help="Sessions before the work stops.")
@click.option("--spec", default=None, metavar="PATH",
              help="The specification the work follows (shown to every session).")
@click.option("--init-command", default=None, metavar="CMD", help="Health check run at every session start.")
@click.option("--remote", default=None, metavar="REMOTE",
              help="Share through REMOTE: sets handoff.remote and adds refspecs so `git fetch` brings the state.")
@json_option
def init_cmd(mode: str | None, max_tasks_per_session: int | None, max_sessions: int | None, spec: str | None,
             init_command: str | None, remote: str | None, as_json: bool) -> None:
    """Create the state on refs/harness/state (idempotent; given options update the config)."""
    store = get_store()
    chosen = None
    if remote is not None:
        from git_handoff.ops import sync

        chosen = sync.named_remote(store.repo, remote)
    result = _ops().init(store, mode=mode, max_tasks_per_session=max_tasks_per_session,
                      max_sessions=max_sessions, spec=spec, init_command=init_command)
    refspecs: dict[str, list[str]] = {}
    if chosen is not None:
        refspecs = sync.use_remote(store.repo, chosen)
    if as_json:
        emit_json(result)
        return
    if result["created"]:
        click.echo("Initialized git handoff state in refs/harness/state")
    elif result["changed"]:
        click.echo("Updated config: " + ", ".join(result["changed"]))
    else:
        click.echo("git handoff is already initialized here")
    if chosen is not None:
        from git_handoff.cli.sync import refspec_lines

        for line in refspec_lines(chosen.spec, refspecs):
            click.echo(line)


@click.command("add")
@click.argument("title")
@click.option("--id", "task_id", default=None, metavar="ID",
              help="The task's id [default: assigned, unique across machines].")
@task_options(for_edit=False)
@json_option
def add_cmd(title: str, task_id: str | None, priority: str, after: tuple[str, ...], check: str | None,
            timeout: int | None, max_attempts: int | None, cleanup: str | None, spec: str | None,
            as_json: bool) -> None:
    """Add a task; prints its id."""
    task = _ops().add(get_store(), title=title, task_id=task_id, priority=priority, after=after, check=check,
                   timeout=timeout, max_attempts=max_attempts, cleanup=cleanup, spec=spec)
    if as_json:
        emit_json(views.view(task))
    else:
        click.echo(task.id)


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
@json_option
def import_cmd(file: str, as_json: bool) -> None:
    """Add every task of FILE, all or nothing.

    FILE is a TOML plan of [[task]] tables (keys: id, title, priority,
    depends_on, check, timeout, max_attempts, cleanup, spec) or a harness
    `.harness/tasks.json` (version 2), whose every field is kept.
    """
    with Progress("import", as_json=as_json) as progress:
        tasks = _ops().import_file(get_store(), file, progress=progress)
    if as_json:
        emit_json([views.view(t) for t in tasks])
    else:
        click.echo(f"Imported {len(tasks)} task(s)")
        for t in tasks:
            click.echo(f"  {t.id}: {visible(t.title)}")


@click.command("list")
@click.option("--status", "status", default=None, metavar="S",
              help="pending, in_progress, completed, failed or blocked.")
@click.option("--ready", is_flag=True, help="Only tasks `claim` could take now, in the order it would.")
@json_option
def list_cmd(status: str | None, ready: bool, as_json: bool) -> None:
    """List tasks: `[status] id: title (attempts/max_attempts)`."""
    snap = get_store().snapshot()
    if as_json:
        emit_json(views.list_view(snap, status=status, ready=ready))
        return
    tasks, blocked = views.list_tasks(snap, status=status, ready=ready)
    hidden = views.unapproved(snap)
    for t in tasks:
        click.echo(task_line(t, blocked, hidden))


@click.command("show")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@json_option
def show_cmd(task_id: str, as_json: bool) -> None:
    """Show one task whole."""
    snap = get_store().snapshot()
    if as_json:
        emit_json(views.show_view(snap, task_id))
    else:
        text = describe(views.show(snap, task_id))
        writer = views.unapproved(snap).get(task_id)
        if writer is not None:
            text += f"\n  written by:    {visible(writer)} (an unapproved writer: not offered to agents)"
        click.echo(text)


@click.command("edit")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@task_options(for_edit=True)
@json_option
def edit_cmd(task_id: str, priority: str | None, after: tuple[str, ...], check: str | None, timeout: int | None,
             max_attempts: int | None, cleanup: str | None, spec: str | None, title: str | None, no_after: bool,
             as_json: bool) -> None:
    """Change fields of a task (an empty --check/--cleanup/--spec clears it)."""
    deps: tuple[str, ...] | None = after if after else (() if no_after else None)
    task = _ops().edit(get_store(), task_id, title=title, priority=priority, after=deps, check=check, timeout=timeout,
                    max_attempts=max_attempts, cleanup=cleanup, spec=spec)
    if as_json:
        emit_json(views.view(task))
    else:
        click.echo(describe(task))


@click.command("status")
@json_option
def status_cmd(as_json: bool) -> None:
    """Counts by status, every task, the last 5 log lines, sessions."""
    if as_json and not sys.stdout.isatty():  # compact: written without building each row
        emit_json_text(views.status_json(get_store()))
        return
    result = views.status(get_store())
    if as_json:
        emit_json(result)
        return
    c = result["counts"]
    click.echo(
        f"tasks: {len(result['tasks'])}  completed={c['completed']} in_progress={c['in_progress']} "
        f"pending={c['pending']} failed={c['failed']} blocked={c['blocked']}"
    )
    for t in result["tasks"]:
        mark = unapproved_mark(t["id"], {t["id"]: t["unapproved_writer"]} if "unapproved_writer" in t else None)
        click.echo(f"[{t['status']}] {t['id']}: {visible(t['title'])} ({t['attempts']}/{t['max_attempts']}){mark}"
                   + work_mark(t) + use_mark(t))
    work = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in result["work"].items() if n)
    if work:
        click.echo(f"work: {work}")
    if result["log"]:
        click.echo("\nlast log lines:")
        for line in result["log"]:
            click.echo(f"  {visible(line)}")
    used = views.summary_line(result["usage"])
    click.echo(f"\nsessions: {result['session_count']}  last session: {result['last_session'] or '-'}"
               + (f"  {used}" if used else ""))
    for note in result.get("notes", []):
        click.echo(visible(note))


@click.command("next")
@json_option
def next_cmd(as_json: bool) -> None:
    """The task `claim` would take (exit 1 when none is eligible)."""
    task = views.next_task(get_store().snapshot())
    if as_json:
        emit_json(views.view(task))
    else:
        click.echo(task_line(task))


@click.command("log")
@click.option("-n", "limit", type=numbers.NATURAL, default=None, metavar="N", help="Only the last N lines.")
@click.option("--task", default=None, metavar="ID", help="Only lines about this task.")
@click.option("--session", type=numbers.NATURAL, default=None, metavar="N",
              help="Only lines of session N (0: lines written outside any session).")
@click.option("--type", "kind", default=None, metavar="TYPE", help="Only lines of this type (ERROR, CHECKPOINT, ...).")
@json_option
def log_cmd(limit: int | None, task: str | None, session: int | None, kind: str | None, as_json: bool) -> None:
    """The progress log, oldest first, rendered from the history of refs/harness/state."""
    entries = views.log(get_store(), limit=limit, task=task, session=session, kind=kind)
    if as_json:
        emit_json([views.log_view(e) for e in entries])
        return
    for e in entries:
        click.echo(visible(e.line))


@click.command("graph")
@click.option("--format", "fmt", type=click.Choice(["text", "dot", "mermaid", "svg"]), default="text",
              show_default=True)
@json_option
def graph_cmd(fmt: str, as_json: bool) -> None:
    """The dependency graph: a text tree (roots first), Graphviz dot, Mermaid, or SVG
    (laid out by Graphviz where `dot` is installed, by a built-in layered layout otherwise)."""
    snap = get_store().snapshot()
    if as_json:
        emit_json(views.graph_view(snap))
        return
    click.echo(views.graph(snap, fmt), nl=False)
