"""Commands of sessions and handoff: session start|end|show, decide, blocker,
doc write|show|list, prompt, ack."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from git_handoff.cli import emit_json, get_store, json_option, numbers, visible, writer_mark


def _session_text(record: Mapping[str, Any]) -> str:
    lines = [
        f"session {record.get('session')}" + (" (open in this worktree)" if record.get("open_here") else ""),
        f"  worker:     {visible(str(record.get('worker') or '-'))}",
        f"  clone:      {visible(str(record.get('clone') or '-'))}",
        f"  base:       {visible(str(record.get('base') or '-'))}",
        f"  started:    {visible(str(record.get('started_at')))}",
        f"  ended:      {visible(str(record.get('ended_at') or '-'))}",
        f"  completed:  {visible(', '.join(record.get('completed') or []) or '-')}",
        *_what_happened(record),
    ]
    if record.get("budget"):
        lines.append(f"  budget:     {visible(str(record['budget']))}")
    for d in record.get("decisions") or []:
        lines.append(f"  decision:   {visible(str(d.get('what')))} (why: {visible(str(d.get('why')))})")
    for b in record.get("blockers") or []:
        lines.append(f"  blocker:    {visible(str(b.get('text') if isinstance(b, dict) else b))}")
    return "\n".join(lines)


def _what_happened(record: Mapping[str, Any]) -> list[str]:
    """The lines of a session's optional records: its agents, ack, namesakes, handoff, usage."""
    lines = []
    if record.get("agents"):  # the relay's agents that ran in it (ops/relay_agents.py)
        lines.append(f"  agents:     {visible(' -> '.join(str(a) for a in record['agents']))}")
    ack = record.get("ack")
    if isinstance(ack, dict):
        lines.append(f"  ack:        {visible(str(ack.get('status')))} at {visible(str(ack.get('at')))}"
                     + (f" ({visible(str(ack['reason']))})" if ack.get("reason") else ""))
    if record.get("also"):
        lines.append(f"  also {record.get('session')}: clone(s) {', '.join(str(c)[:8] for c in record['also'])} "
                     "numbered a session alike offline (`git handoff session list`)")
    written = record.get("handoff")
    if isinstance(written, dict):
        lines.append(f"  handoff:    written {visible(str(written.get('written_at')))} "
                     f"({visible(str(written.get('trigger')))})")
    used = record.get("usage")
    if isinstance(used, dict):
        lines.append(_usage_line(used))
    return lines


def _usage_line(used: Mapping[str, Any]) -> str:
    cost = used.get("cost_usd")
    return (f"  usage:      {used.get('tokens')} tokens (in {used.get('input_tokens')}, out "
            f"{used.get('output_tokens')}), {used.get('turns')} turns"
            + (f", {used['seconds']}s" if isinstance(used.get("seconds"), int) else "")
            + (f", ${cost:.4f}" if isinstance(cost, int | float) else "")
            + f" ({visible(', '.join(str(c) for c in used.get('clis') or []))})")


@click.group("session")
def session_cmd() -> None:
    """Sessions: start one (health check, recovery of interrupted tasks), end it, show it."""


@session_cmd.command("start")
@click.option("--worker", default=None, metavar="W",
              help="Who works in this session [default: $HANDOFF_WORKER, else git config handoff.worker, else "
              "user@host:<worktree>].")
@json_option
def session_start_cmd(worker: str | None, as_json: bool) -> None:
    """Open a session in this worktree (exit 1 when max_sessions is reached)."""
    from git_handoff.ops import session_start

    record = session_start.start(get_store(), worker=worker)
    if as_json:
        emit_json(record)
        return
    click.echo(f"Session {record['session']} started (base {(record.get('base') or '-')[:7]}, "
               f"worker {visible(record['worker'])})")
    for action in record.get("recovery") or []:
        click.echo(f"  RECOVERY [{action['task']}] action=\"{visible(action['action'])}\" "
                   f"reason=\"{visible(action['reason'])}\"")
    click.echo("Next: `git handoff ack`, then `git handoff claim`.")


@session_cmd.command("end")
@json_option
def session_end_cmd(as_json: bool) -> None:
    """Close this worktree's session: notes for its commits, the STATS line."""
    from git_handoff.ops import sessions

    record = sessions.end(get_store())
    if as_json:
        emit_json(record)
    else:
        click.echo(f"Session {record['session']} ended: {record['stats']}")


@session_cmd.command("list")
@json_option
def session_list_cmd(as_json: bool) -> None:
    """List every session of the fleet: number, clone, worker, start and end.

    Clones that start sessions offline number them independently; two sessions may share
    a number (each is kept, under its clone), and both are listed here."""
    from git_handoff.ops import sessions

    rows = sessions.list_sessions(get_store())
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo("no session was started yet (`git handoff session start`)")
    for row in rows:
        clone = (row.get("clone") or "-")[:8]
        here = " (this clone)" if row.get("here") else ""
        click.echo(f"session {row['session']}  clone {visible(clone)}{here}  worker "
                   f"{visible(row.get('worker') or '-')}  "
                   f"started {row.get('started_at') or '-'}  ended {row.get('ended_at') or '-'}  "
                   f"completed {row['completed']}")


@session_cmd.command("show")
@click.argument("number", type=numbers.POSITIVE, required=False)
@json_option
def session_show_cmd(number: int | None, as_json: bool) -> None:
    """Show session NUMBER (default: this worktree's open session, else the latest)."""
    from git_handoff.ops import sessions

    record = sessions.show(get_store(), number)
    if as_json:
        emit_json(record)
    else:
        click.echo(_session_text(record))


@click.command("decide")
@click.argument("what")
@click.option("--why", required=True, help="Why it was chosen (a fact for the next session).")
@json_option
def decide_cmd(what: str, why: str, as_json: bool) -> None:
    """Record a decision of this session for the handoff document."""
    from git_handoff.ops import sessions

    entry = sessions.decide(get_store(), what, why)
    if as_json:
        emit_json(entry)
    else:
        click.echo(f"Decision recorded: {entry['what']}")


@click.command("blocker")
@click.argument("text")
@json_option
def blocker_cmd(text: str, as_json: bool) -> None:
    """Record a blocker found in this session for the handoff document."""
    from git_handoff.ops import sessions

    entry = sessions.blocker(get_store(), text)
    if as_json:
        emit_json(entry)
    else:
        click.echo(f"Blocker recorded: {entry['text']}")


@click.group("doc")
def doc_cmd() -> None:
    """The facts-only handoff document: write, show, list."""


@doc_cmd.command("write")
@json_option
def doc_write_cmd(as_json: bool) -> None:
    """Write (or rewrite) this session's handoff document from git and the state."""
    from git_handoff.ops import doc_markdown, handoff

    doc = handoff.write_doc(get_store(), trigger="manual")
    if as_json:
        emit_json(doc)
    else:
        click.echo(doc_markdown.render_markdown(doc), nl=False)


@doc_cmd.command("show")
@click.argument("number", type=numbers.POSITIVE, required=False)
@json_option
def doc_show_cmd(number: int | None, as_json: bool) -> None:
    """Show the handoff document of session NUMBER (default: the latest)."""
    from git_handoff.ops import doc_markdown, handoff

    doc = handoff.show_doc(get_store(), number)
    if as_json:
        emit_json(doc)
    else:
        who = doc.get("unapproved_writer")
        click.echo(doc_markdown.render_markdown(doc, writer_mark(who) if who is not None else ""), nl=False)


@doc_cmd.command("list")
@json_option
def doc_list_cmd(as_json: bool) -> None:
    """List the handoff documents."""
    from git_handoff.ops import handoff

    docs = handoff.list_docs(get_store())
    if as_json:
        emit_json(docs)
        return
    for d in docs:
        state = (f"accepted by session {visible(str(d['accepted_by']))}" if d["accepted_by"]
                 else "archived" if d["archived"] else "pending")
        mark = writer_mark(d["unapproved_writer"]) if "unapproved_writer" in d else ""
        click.echo(f"session {d['session']}: {visible(str(d['written_at']))} ({visible(str(d['trigger']))}) {state}; "
                   f"completed={d['completed']} files_changed={d['files_changed']}{mark}")


@click.command("prompt")
@json_option
def prompt_cmd(as_json: bool) -> None:
    """Print the next session's prompt (Markdown, under 10 KB).

    Text that may come from other clones (titles, checks, reasons, decisions...) is
    one line of data in it, control, escape and bidi characters shown as escapes; a
    check this clone has not approved (`git handoff trust`) is marked NOT APPROVED,
    and the agent is told to ask a person rather than run it.
    """
    from git_handoff.ops import prompt

    store = get_store()
    if as_json:
        emit_json(prompt.prompt_view(store))
    else:
        click.echo(prompt.render_prompt(store), nl=False)


@click.command("ack")
@click.option("--failed", "failed", default=None, metavar="REASON", help="Reject the handoff: the facts do not match.")
@json_option
def ack_cmd(failed: str | None, as_json: bool) -> None:
    """Acknowledge the prompt and the pending handoff document (the first act of a session)."""
    from git_handoff.ops import handoff

    entry = handoff.ack(get_store(), failed=failed)
    if as_json:
        emit_json(entry)
        return
    what = f"the handoff of session {entry['handoff']}" if entry.get("handoff") else "the prompt"
    click.echo(f"Session {entry['session']} {entry['status']} {what}"
               + (f": {visible(entry['reason'] or '')}" if entry.get("reason") else ""))
