"""Commands of the work cycle: claim, renew, release, checkpoint, verify, done, fail,
attempts, restore."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, cast

import click

from git_handoff.cli import emit_json, get_store, json_option, numbers, visible
from git_handoff.cli.ids import complete_task_id
from git_handoff.core.errors import Negative
from git_handoff.core.model import CATEGORIES, Task, parse_duration
from git_handoff.infra import task_commands
from git_handoff.ops import attempts as attempts_ops
from git_handoff.ops import claim as claim_ops
from git_handoff.ops import work as ops
from git_handoff.ops.payloads import FailOutcome, TaskJson, task_json
from git_handoff.state.claim_checks import short

if TYPE_CHECKING:
    from git_handoff.state.store import StateStore

force_option = click.option("--force", is_flag=True,
                            help="Act even where the claim (another worktree's, or another worker's), branch or "
                                 "mode says no.")


def synced(store: StateStore) -> contextlib.AbstractContextManager[None]:
    """Around the current command's call into ops: ops/work.py's one table says whether it
    pushes what it recorded (handoff.autoSync / handoff.syncClaims); a push that failed is
    a warning on stderr."""
    return ops.syncing(store, click.get_current_context().command.name or "", _warn)


def _warn(problem: str) -> None:
    click.echo(f"warning: {problem}", err=True)


def live_output(as_json: bool) -> task_commands.Sink | None:
    """At a terminal (and not --json), a check's output as it comes: its stdout to our
    stdout, its stderr to our stderr. Elsewhere None: output is shown once it ends."""
    if as_json or not sys.stdout.isatty():
        return None

    def sink(stream: str, chunk: bytes) -> None:
        out = sys.stdout if stream == "stdout" else sys.stderr
        out.buffer.write(chunk)
        out.buffer.flush()

    return sink


def _lease(text: str | None) -> int | None:
    return parse_duration(text) if text is not None else None


def _view(task: Task) -> TaskJson:
    return task_json(task)


@click.command("claim")
@click.argument("task_id", metavar="[ID]", required=False, shell_complete=complete_task_id)
@click.option("--worker", default=None, metavar="W",
              help="Who claims [default: $HANDOFF_WORKER, else git config handoff.worker (`git -c "
                   "handoff.worker=W handoff claim` too), else user@host:<worktree>].")
@click.option("--lease", default=None, metavar="DURATION",
              help="How long the claim holds unrenewed (90s, 30m, 2h) [default: 30m].")
@click.option("--remote", default=None, metavar="REMOTE",
              help="Make the claim hold across machines: fetch, merge, claim, push to REMOTE "
                   "[default with handoff.syncClaims=true: handoff.remote, else origin].")
@force_option
@json_option
def claim_cmd(task_id: str | None, worker: str | None, lease: str | None, remote: str | None, force: bool,
              as_json: bool) -> None:
    """Take the next eligible task (or ID) for this worktree, atomically.

    Exit 1 when nothing is eligible; 3 when another worktree holds the claim in
    exclusive mode, or the state kept changing. --force lets a worktree that
    already holds a task claim another, and overrides exclusive mode.

    \b
    Several agents in one work tree: start each with its own name,
      HANDOFF_WORKER=agent-1 claude ...     HANDOFF_WORKER=agent-2 codex ...
    A worker so named acts only on its own claims: renew, release, checkpoint,
    done and fail refuse another worker's live claim (exit 2; --force acts
    anyway), and claim says when another worker here holds one (exit 3).
    """
    store = get_store()
    with synced(store):
        task = claim_ops.claim(store, task_id, worker=worker, lease=_lease(lease), force=force, remote=remote)
    if as_json:
        emit_json(_view(task))
    else:
        click.echo(f"Claimed {task.id}: {visible(task.title)} (base {short(task.started_at_commit)}, "
                   f"lease until {task.lease_expires_at})")


@click.command("renew")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@click.option("--lease", default=None, metavar="DURATION", help="New lease from now [default: the claim's].")
@force_option
@json_option
def renew_cmd(task_id: str, lease: str | None, force: bool, as_json: bool) -> None:
    """Push the lease of a claimed task forward.

    Refused (exit 2) for a claim of another worktree, or of another worker
    (HANDOFF_WORKER) while its lease runs; --force acts anyway.
    """
    store = get_store()
    with synced(store):
        task = ops.renew(store, task_id, lease=_lease(lease), force=force)
    if as_json:
        emit_json(_view(task))
    else:
        click.echo(f"Renewed {task.id}: lease until {task.lease_expires_at}")


@click.command("release")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@force_option
@json_option
def release_cmd(task_id: str, force: bool, as_json: bool) -> None:
    """Give a claimed task back: pending again, no attempt counted, work tree untouched.

    Refused (exit 2) for a claim of another worktree, or of another worker
    (HANDOFF_WORKER) while its lease runs; --force acts anyway.
    """
    store = get_store()
    with synced(store):
        task = ops.release(store, task_id, force=force)
    if as_json:
        emit_json(_view(task))
    else:
        click.echo(f"Released {task.id}: back to pending")


@click.command("checkpoint")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@click.argument("message")
@click.option("--step", type=numbers.POSITIVE, default=None, metavar="M", help="Step number [default: next].")
@click.option("--of", "total", type=numbers.POSITIVE, default=None, metavar="N", help="Number of steps.")
@force_option
@json_option
def checkpoint_cmd(task_id: str, message: str, step: int | None, total: int | None, force: bool, as_json: bool) -> None:
    """Record progress on a claimed task (also renews its lease).

    Refused (exit 2) for a claim of another worktree, or of another worker
    (HANDOFF_WORKER) while its lease runs; --force acts anyway.
    """
    store = get_store()
    with synced(store):
        task = ops.checkpoint(store, task_id, message, step, total, force=force)
    if as_json:
        emit_json(_view(task))
    else:
        cp = task.checkpoints[-1]
        total_text = cp.get("total") if cp.get("total") is not None else "?"
        click.echo(f"Checkpoint {task.id} step={cp.get('step')}/{total_text}; lease until {task.lease_expires_at}")


@click.command("verify")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@json_option
def verify_cmd(task_id: str, as_json: bool) -> None:
    """Run the task's validation command under its timeout (exit 0 pass, 1 fail); changes nothing."""
    store = get_store()
    sink = live_output(as_json)
    with task_commands.streaming(sink):
        result = ops.verify(store, task_id)
    if as_json:
        emit_json(ops.verify_view(task_id, result))
    else:
        if result.output_tail and sink is None:
            click.echo(result.output_tail.rstrip("\n"))
        click.echo("PASS" if result.ok else f"FAIL [{result.category}] {result.summary()}")
    if not result.ok:
        raise ops.verify_failure(task_id, result)


@click.command("done")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@force_option
@json_option
def done_cmd(task_id: str, force: bool, as_json: bool) -> None:
    """Complete a claimed task: its check must pass. A failing check fails the task
    exactly as `fail` does (attempt saved, work tree rolled back) and exits 1.

    Refused (exit 2) for a claim of another worktree, or of another worker
    (HANDOFF_WORKER) while its lease runs; --force acts anyway.
    """
    store = get_store()
    sink = live_output(as_json)
    try:
        with synced(store), task_commands.streaming(sink):
            task = ops.done(store, task_id, force=force)
    except Negative as exc:
        if as_json and isinstance(exc.payload, dict):
            emit_json(exc.payload)
        elif isinstance(exc.payload, dict):
            _echo_fail(cast(FailOutcome, exc.payload), streamed=sink is not None)  # done: its check failed
        raise
    if as_json:
        emit_json(_view(task))
    else:
        click.echo(f"Completed {task.id} (commit {short(task.get('completed_commit'))})")
        if task.get("work_withheld"):
            click.echo(f"warning: {task.get('work_withheld')}", err=True)


def _echo_fail(outcome: FailOutcome, streamed: bool = False) -> None:
    task = outcome["task"]
    validation = outcome.get("validation")
    if validation and validation.get("output_tail") and not streamed:
        click.echo(str(validation["output_tail"]).rstrip("\n"))
    click.echo(f"Failed {task['id']} [{outcome['category']}] {outcome['reason']} "
               f"(attempt {task['attempts']}/{task['max_attempts']})")
    if outcome.get("attempt_ref"):
        click.echo(f"  attempt saved as {outcome['attempt_ref']} ({len(outcome['files'])} file(s))")
        if outcome.get("attempt_local_only"):
            where = "; ".join(f"{visible(path)}: {', '.join(kinds)}" for path, kinds in outcome["secret_files"].items())
            click.echo(f"  kept on this machine only, never pushed: its files hold a secret ({where}); "
                       "`git handoff restore` brings it back")
    if outcome.get("operation_ended"):
        click.echo(f"  ended the {outcome['operation_ended']} in progress (after saving the attempt)")
    if outcome.get("rolled_back") and outcome.get("snapshot"):
        click.echo(f"  rolled back to the claim: HEAD {short(outcome['base'])}, and the work tree, index and "
                   "untracked files as they were then")
    elif outcome.get("rolled_back"):
        click.echo(f"  rolled back: git reset --hard {short(outcome['base'])} && git clean -fd")
    elif outcome.get("attempt_ref") and outcome.get("snapshot_missing"):
        click.echo("  no rollback: the claim's snapshot is missing from the repository; work tree kept as it is")
    elif outcome.get("attempt_ref") and outcome.get("no_local_claim"):
        click.echo("  no rollback: this worktree keeps no journal of this claim (claimed by an older git handoff, "
                   "elsewhere, or a claim record that came back from a remote); work tree kept as it is")
    elif outcome.get("attempt_ref"):
        click.echo("  work tree kept as it is")
    else:
        click.echo("  no rollback: started_at_commit is missing from the repository")
    cleanup = outcome.get("cleanup")
    if cleanup is not None:
        click.echo("  cleanup: " + ("ok" if cleanup.get("ok") else f"FAILED [{cleanup.get('category')}]"))


@click.command("fail")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@click.option("--reason", required=True, metavar="TEXT", help="What went wrong (goes to the error log).")
@click.option("--category", default="TASK_EXEC", show_default=True, type=click.Choice(list(CATEGORIES)),
              metavar="CAT", help="One of " + ", ".join(CATEGORIES) + ".")
@click.option("--keep-worktree", is_flag=True, help="Save the attempt but do not roll the work tree back.")
@force_option
@json_option
def fail_cmd(task_id: str, reason: str, category: str, keep_worktree: bool, force: bool, as_json: bool) -> None:
    """Fail a claimed task: count the attempt, save it whole under
    refs/harness/attempts/ID/N (commits, work tree, index, untracked files), return the
    worktree exactly to the moment of the claim, then run the task's cleanup command.

    Files that existed at the claim come back as they were (untracked ones too);
    files the attempt created are removed (they are in the attempt); ignored files
    are untouched. Refused (exit 2, nothing changed) during a rebase, merge,
    cherry-pick, revert, bisect or am (--force ends it after saving the attempt),
    and when a submodule has work of its own, and for a claim of another
    worktree or of another worker (HANDOFF_WORKER) while its lease runs
    (--force acts anyway).

    The claim's moment is what this worktree journalled when it claimed (never what a
    fetched record says); a claim it has no journal of (made by an older version, or
    elsewhere) is failed and saved without a rollback.
    """
    store = get_store()
    with synced(store):
        outcome = attempts_ops.fail(store, task_id, reason=reason, category=category, keep_worktree=keep_worktree,
                                    force=force)
    if as_json:
        emit_json(outcome)
    else:
        _echo_fail(outcome)


@click.command("attempts")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@json_option
def attempts_cmd(task_id: str, as_json: bool) -> None:
    """List the saved attempts of a task: number, time, reason, files."""
    found = attempts_ops.attempts(get_store(), task_id)
    if as_json:
        emit_json(found)
        return
    if not found:
        click.echo(f"no saved attempts of {task_id}")
    for a in found:
        if a["unreadable"]:  # another clone's record, of the wrong types: said in one line
            click.echo(f"#{a['attempt']} unreadable: {visible(a['unreadable'])}")
            continue
        click.echo(f"#{a['attempt']} {a['time'] or '?'} [{visible(a['category'] or '?')}] {visible(a['reason'] or '')} "
                   f"({len(a['files'])} file(s), {a['ref']}"
                   + (", kept on this machine only: its files hold a secret" if a["local_only"] else "") + ")")
        for f in a["files"]:  # a file name may hold a newline or a control character: escaped
            click.echo(f"    {f['status']} {visible(f['path'])}")


@click.command("restore")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@click.argument("n", type=numbers.POSITIVE, metavar="N")
@force_option
@json_option
def restore_cmd(task_id: str, n: int, force: bool, as_json: bool) -> None:
    """Bring saved attempt N back into this work tree: its files, and the entries it had
    staged for them (HEAD is not moved). Refuses to overwrite a file with uncommitted
    changes of your own without --force; never removes a file git does not hold."""
    result = attempts_ops.restore(get_store(), task_id, n, force=force)
    if as_json:
        emit_json(result)
    else:
        click.echo(f"Restored attempt {n} of {task_id}: {len(result['restored'])} file(s) written, "
                   f"{len(result['deleted'])} removed"
                   + (", its staged entries back in the index" if result["index"] else "")
                   + (f" (from {result['ref']}, kept on this machine only: its files hold a secret)"
                      if result["local_only"] else ""))
