"""Commands for many machines: sync, trust."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

import click

from git_handoff.cli import emit_json, get_store, json_option, visible
from git_handoff.cli.progress import Progress

if TYPE_CHECKING:
    from collections.abc import Callable

    from git_handoff.ops.approvals import TrustAnswer
    from git_handoff.ops.integration import IntegrateReport
    from git_handoff.ops.sync import SyncReport
    from git_handoff.state.writers import PendingWriter


class ApprovedWriters(TypedDict):
    """`trust --writer KEY`."""

    approved_writers: list[str]


def _sync_text(r: SyncReport) -> list[str]:
    action = {
        "adopted": "adopted the remote's state",
        "fast-forward": "fast-forwarded to the remote's state",
        "merged": "merged the remote's state",
        "pushed": "pushed",
        "up-to-date": "up to date",
        "no-remote-state": "the remote had no state",
    }.get(r["action"], r["action"])
    lines = [f"sync {r['remote']}: {action}; {r['incoming']} commit(s) in, {r['outgoing']} out"
             + (f", {len(r['conflicts'])} conflict(s) resolved" if r["conflicts"] else "")]
    for c in r["conflicts"]:
        where = f"{c['record']} " if c.get("record") else f"{c['path']} "
        lines.append(f"  conflict {where}{c['field']}: kept {c['kept']!r} over {c['dropped']!r}")
    for item in r["claims_lost"]:
        lines.append(f"  claim of {item['task']} by {visible(str(item['worker']))} lost (now "
                     f"{visible(str(item['now']))})")
    att = r["attempts"]
    if att["fetched"] or att["pushed"]:
        lines.append(f"  attempts: {len(att['fetched'])} fetched, {len(att['pushed'])} pushed")
    for ref in att["conflicting"]:
        lines.append(f"  attempt {ref} differs on the remote; both kept (the remote's under refs/remotes/)")
    work = r.get("work") or {"fetched": [], "pushed": [], "conflicting": []}
    if work["fetched"] or work["pushed"]:
        lines.append(f"  work: {len(work['fetched'])} task(s)' work fetched, {len(work['pushed'])} published")
    for ref in work["conflicting"]:
        lines.append(f"  work {ref} differs on the remote; both kept (the remote's under refs/remotes/); "
                     "this clone integrates only its own")
    if r["notes"] not in ("none", "up-to-date"):
        lines.append(f"  notes: {r['notes']}")
    if r.get("retired"):
        lines.append(f"  retired {len(r['retired'])} clone(s) whose state ours holds (their refs deleted from "
                     f"{r['remote']}; one that comes back publishes again)")
    held = r.get("quarantined") or []
    if held:
        lines.append(f"  quarantined {len(held)} ref(s) of {r['remote']} that this version can not read safely "
                     "(skipped; everything else was used):")
        lines += [f"    {visible(item['why'])}" for item in held[:20]]
        if len(held) > 20:
            lines.append(f"    ... and {len(held) - 20} more (`git handoff sync --json` lists them)")
    lines += refspec_lines(r["remote"], r.get("refspecs") or {})
    return lines


def refspec_lines(remote: str, changed: dict[str, list[str]]) -> list[str]:
    """Say what was changed in remote.<name>.fetch (once: later runs find it there)."""
    lines = []
    if changed.get("added"):
        lines.append(f"  added to remote.{remote}.fetch, so a plain `git fetch` brings the state too: "
                     + ", ".join(changed["added"]))
    if changed.get("removed"):
        lines.append(f"  removed from remote.{remote}.fetch (broader than needed): " + ", ".join(changed["removed"]))
    return lines


@click.command("sync")
@click.argument("remote", required=False)
@json_option
def sync_cmd(remote: str | None, as_json: bool) -> None:
    """Fetch, merge and push the state, attempts and notes (default: handoff.remote, else origin).

    This clone publishes to refs/harness/clones/<id>/ on the remote. On a server with
    per-machine rights (gitolite, or the shipped hooks-templates/server-update hook), set
    the id's start to the prefix the server grants this machine's key before the first
    sync: `git config handoff.cloneId a1` (docs/server-rights.md). A ref the server
    refuses is exit 3, naming the ref and what the server said.

    Only the refs git handoff reads are fetched, and each one that changed is checked: a
    ref this version can not read safely is quarantined (named here, listed by `status`,
    not used) and everything else from the remote is still merged. Refs of clones idle
    past handoff.retireAfter whose state yours already published are deleted (retired).
    """
    from git_handoff.ops import sync as ops

    with Progress("sync", as_json=as_json) as progress:
        result = ops.sync(get_store(), remote, progress=progress)
    if as_json:
        emit_json(result)
        return
    for line in _sync_text(result):
        click.echo(line)


@click.command("integrate")
@click.argument("remote", required=False)
@json_option
def integrate_cmd(remote: str | None, as_json: bool) -> None:
    """Land finished tasks' work on the target branch, one task at a time, each checked.

    The target is `git config handoff.target` (default: the remote's default branch, else
    the branch of the main worktree). With a remote (REMOTE, else handoff.remote, else
    origin) this syncs first, so that every clone's published work (refs/harness/work/...)
    is here. Then, dependencies first, then priority, then completion time, each task's
    work is merged onto the target's tip, the task's check runs on the merged tree in a
    scratch worktree (.git/handoff/scratch/), and only if it passes is the target moved:
    by a push that names the tip it was checked on, never a force push.

    A conflict, or a check that fails on the merged tree, sends the task back as a new
    attempt (its work saved: `git handoff restore ID N`), named in the task's error and the
    next session's prompt. Exit 0: everything landed, or nothing to do; 1: a task went back
    to work; 3: another integrate runs here, the target kept moving, or the server refused
    to move it (a protected branch: the work stays published for the forge's own queue).
    """
    from git_handoff.ops import integration

    with Progress("integrate", as_json=as_json) as progress:
        report = integration.integrate(get_store(), remote=remote, say=progress)
    code = integration.exit_code(report)
    if as_json:
        emit_json(report)
    else:
        for line in _integrate_text(report):
            click.echo(line)
    if code:
        raise SystemExit(code)


def _integrate_text(r: IntegrateReport) -> list[str]:
    landed, returned, waiting = r["landed"], r["returned"], r["waiting"]
    if not (landed or returned or waiting):
        return [f"integrate {r['target']}: nothing to land (tip {str(r['tip'] or '-')[:7]})"]
    lines = [f"integrate {r['target']}: {len(landed)} landed, {len(returned)} sent back, {len(waiting)} waiting"
             f" (tip {str(r['tip'] or '-')[:7]})"]
    how = {"already": "already there", "fast-forward": "fast-forward", "merged": "merged"}
    lines += [f"  landed {item['task']} at {item['commit'][:7]} ({how[item['how']]})" for item in landed]
    lines += [f"  sent back {item['task']} ({item['status']}): [{item['category']}] {visible(item['reason'])}"
              for item in returned]
    lines += [f"  waiting {item['task']}: {visible(item['why'])}" for item in waiting]
    return lines


@click.command("trust")
@click.argument("ids", nargs=-1)
@click.option("--all", "approve_all", is_flag=True, help="Trust every command listed.")
@click.option("--approved", "list_approved", is_flag=True, help="List what this clone has approved, and where.")
@click.option("--writers", "list_writers", is_flag=True,
              help="List the writers whose tasks are not offered to agents (handoff.allowedSigners).")
@click.option("--writer", "writer_keys", multiple=True, metavar="KEY",
              help="Approve a writer by its key fingerprint (SHA256:..., as --writers lists it): its tasks are "
                   "offered to agents here.")
@json_option
def trust_cmd(ids: tuple[str, ...], approve_all: bool, list_approved: bool, list_writers: bool,
              writer_keys: tuple[str, ...], as_json: bool) -> None:
    """List the commands that came from elsewhere, or approve them (--all, or by task ID).

    An approval covers a command's text at the places it was listed for: the validation
    or the cleanup of one task (T:validation, T:cleanup) or the init command (init). The
    same text moved by a remote into another task is listed again, for that place.
    Each command is shown whole, its control, escape and bidi characters as escapes and
    each further line of a script marked `    | `: read it before you approve it. An
    agent is never told to approve a command: it is told to ask a person.
    """
    from git_handoff.ops import approvals

    store = get_store()
    answer = approvals.trust(store, ids=ids, approve_all=approve_all, list_approved=list_approved,
                             list_writers=list_writers, writer_keys=writer_keys, with_writers=not as_json)
    if as_json:
        emit_json(_trust_json(answer))
        return
    for line in _TRUST_TEXT[answer.mode](answer):
        click.echo(line)


def _trust_json(answer: TrustAnswer) -> object:
    """`trust --json`: the list of its mode, or for `--writer KEY` the keys approved."""
    if answer.mode == "approve-writers":
        approved: ApprovedWriters = {"approved_writers": answer.keys}
        return approved
    return {"untrusted": answer.commands, "approve": answer.commands, "approved": answer.approvals,
            "writers": answer.writers}[answer.mode]


def _untrusted_lines(answer: TrustAnswer) -> list[str]:
    """`trust`: each command from elsewhere, where it is used and who brought it."""
    items = answer.commands
    if not items:
        return ["every command in the state is trusted on this clone", *_writers_note(answer.writers)]
    lines = []
    for item in items:
        who = visible(item.get("introduced_by") or "?")
        when = item.get("introduced_at") or "?"
        uses = item["uses"]
        more = f" (and {len(uses) - 1} more use(s))" if len(uses) > 1 else ""
        lines.append(f"{item['id']} {item['kind']}: {visible(item['command'], lines=True)}{more}")
        lines.append(f"    at {', '.join(u['place'] for u in uses[:5])}" + (", ..." if len(uses) > 5 else ""))
        if item.get("trusted_at"):
            lines.append(f"    (this text is approved at {', '.join(item['trusted_at'][:5])}, not here)")
        lines.append(f"    introduced by {who} at {when}"
                     + (f" ({commit[:10]})" if (commit := item.get("commit")) else ""))
    lines.append("read each command whole before you approve it: `git handoff trust ID...` approves the ones "
                 "listed for those tasks, `git handoff trust --all` every one listed")
    return lines + _writers_note(answer.writers)


def _approved_lines(answer: TrustAnswer) -> list[str]:
    """`trust --approved`: each approved command and the places it is approved for."""
    lines = []
    for entry in answer.approvals:
        lines.append(visible(entry["command"], lines=True))
        lines.append(f"    at {', '.join(entry['places']) or '(no place: approved before places were kept)'}")
    return lines


def _approve_lines(answer: TrustAnswer) -> list[str]:
    """`trust ID...` and `trust --all`: what was approved."""
    return [f"trusted {item['id']} {item['kind']}: {visible(item['command'], lines=True)}"
            for item in answer.commands] or [
        "nothing to trust"]


def _writers_note(pending: list[PendingWriter]) -> list[str]:
    if not pending:
        return []
    count = sum(len(p["tasks"]) for p in pending)
    return [f"{count} task(s) were last written by {len(pending)} writer(s) this clone has not approved: "
            "`git handoff trust --writers` lists them"]


def _approved_writers_lines(answer: TrustAnswer) -> list[str]:
    """`trust --writer KEY`."""
    return [f"approved writer {key}: the tasks it writes are offered to agents on this clone" for key in answer.keys]


def _pending_writers_lines(answer: TrustAnswer) -> list[str]:
    """`trust --writers`: each writer this clone has not approved, and the tasks it wrote last."""
    pending = answer.writers
    if not pending:
        return ["every task was last written by an approved writer"]
    lines = []
    for item in pending:
        ids_shown = ", ".join(item["tasks"][:10]) + (", ..." if len(item["tasks"]) > 10 else "")
        lines.append(f"{visible(item['writer'])}: {len(item['tasks'])} task(s): {visible(ids_shown)}")
    if any(item["key"] for item in pending):
        lines.append("a person who knows the key approves it: `git handoff trust --writer SHA256:...`, or adds it "
                     "to the allowed-signers file; an unsigned writer's tasks wait until it signs")
    return lines


_TRUST_TEXT: dict[str, Callable[[TrustAnswer], list[str]]] = {
    "untrusted": _untrusted_lines, "approved": _approved_lines, "approve": _approve_lines,
    "writers": _pending_writers_lines, "approve-writers": _approved_writers_lines,
}
