"""`git handoff dispatch`: hand a prompt to an agent backend, in the background."""

from __future__ import annotations

import sys

import click

from git_handoff.cli import emit_json, get_store, json_option, numbers
from git_handoff.core.errors import Negative
from git_handoff.core.record_schemas import DispatchRun
from git_handoff.ops import dispatch as ops


def _read_prompt() -> str:
    return sys.stdin.read()


def _line(record: DispatchRun) -> str:
    exit_status = record.get("exit_status")
    shown = "-" if exit_status is None else str(exit_status)
    extra = f"  resumes {record['resume_of']}" if record.get("resume_of") else ""
    return f"{record['run_id']}  {record['backend']}  {record['status']}  exit={shown}  {record['created_at']}{extra}"


@click.group("dispatch")
def dispatch_cmd() -> None:
    """Hand prompts to an agent backend in the background; results kept in the state.

    \b
    Backends are named in git config:
      git config handoff.backend.NAME.command 'claude -p --output-format json'
      git config handoff.backend.NAME.resume  'claude -p --output-format json --resume {session_id}'
    The prompt goes to the command on stdin and in $HANDOFF_PROMPT_FILE.

    \b
      RUN=$(git handoff dispatch new --backend NAME --slug fix-auth <prompt.md)
      git handoff dispatch run "$RUN" --background
      git handoff dispatch wait "$RUN" && git handoff dispatch result "$RUN"
    """


@dispatch_cmd.command("new")
@click.option("--backend", "-b", required=True, metavar="NAME",
              help="A backend named in git config handoff.backend.NAME.command.")
@click.option("--slug", "-s", required=True, metavar="SLUG",
              help="One to three lowercase words joined by '-' (fix-auth).")
@json_option
def new_cmd(backend: str, slug: str, as_json: bool) -> None:
    """Record a run of the prompt read from stdin; prints its RUN_ID."""
    record = ops.new(get_store(), backend=backend, slug=slug, prompt=_read_prompt())
    if as_json:
        emit_json(record)
    else:
        click.echo(record["run_id"])


def _run(run_id: str, background: bool, as_json: bool, detached_child: bool = False) -> None:
    store = get_store()
    if background:
        record = ops.start_background(store, run_id)
        if as_json:
            emit_json(record)
        else:
            click.echo(record["run_id"])
        return
    record = ops.execute(store, run_id, detached_child=detached_child)
    if detached_child:
        return
    if as_json:
        emit_json(record)
    else:
        text = record.get("result") or ""
        if text:
            click.echo(text.rstrip("\n"))
    if record.get("status") != "succeeded":
        # A failed backend is a negative answer (exit 1): its own status 2, 3 or
        # 130 would read as bad input, contention or an interrupt. The status is in this
        # line and in the record (--json: `exit_status`).
        raise Negative(f"run {run_id} failed (backend exit status {record.get('exit_status')}); "
                       f"see `git handoff dispatch result {run_id} --json`", payload=record)


@dispatch_cmd.command("run")
@click.argument("run_id")
@click.option("--background", "-B", is_flag=True, help="Return at once; the backend runs in a detached process.")
@click.option("--detached-child", is_flag=True, hidden=True)
@json_option
def run_cmd(run_id: str, background: bool, detached_child: bool, as_json: bool) -> None:
    """Run RUN_ID: in the foreground, exit 0 when the backend succeeded, 1 when it failed
    (its own exit status in the message and in --json's `exit_status`)."""
    _run(run_id, background, as_json, detached_child)


@dispatch_cmd.command("resume")
@click.argument("first_run_id")
@click.option("--background", "-B", is_flag=True, help="Return at once; the backend runs in a detached process.")
@click.option("--slug", "-s", default=None, metavar="SLUG", help="Slug of the new run [default: the first run's].")
@json_option
def resume_cmd(first_run_id: str, background: bool, slug: str | None, as_json: bool) -> None:
    """Continue the conversation FIRST_RUN_ID started, with a follow-up prompt from stdin.

    Prints the new RUN_ID, then runs it with the backend's resume command.
    """
    record = ops.new_resume(get_store(), first_run_id, prompt=_read_prompt(), slug=slug)
    if not as_json and not background:
        click.echo(record["run_id"])
    _run(record["run_id"], background, as_json)


@dispatch_cmd.command("wait")
@click.argument("run_ids", nargs=-1, required=True)
@click.option("--timeout", type=numbers.SECONDS, default=None, metavar="S", help="Give up after S seconds (exit 1).")
@json_option
def wait_cmd(run_ids: tuple[str, ...], timeout: float | None, as_json: bool) -> None:
    """Block until every RUN_ID has finished; exit 0 only if all succeeded."""
    try:
        records = ops.wait(get_store(), list(run_ids), timeout=timeout)
    except Negative as exc:
        if isinstance(exc.payload, list):
            _show_many(exc.payload, as_json)
        raise
    _show_many(records, as_json)


def _show_many(records: list[DispatchRun], as_json: bool) -> None:
    if as_json:
        emit_json(records)
    else:
        for record in records:
            click.echo(_line(record))


@dispatch_cmd.command("result")
@click.argument("run_id")
@json_option
def result_cmd(run_id: str, as_json: bool) -> None:
    """Print the result of RUN_ID (exit 1 while it has not finished)."""
    record = ops.result(get_store(), run_id)
    if as_json:
        emit_json(record)
        return
    click.echo((record.get("result") or "").rstrip("\n"))
    if record.get("status") != "succeeded":  # a negative answer (exit 1), mapped by the CLI's main like any other
        raise Negative(f"run {run_id} failed (exit {record.get('exit_status')})", payload=record)


@dispatch_cmd.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """Every run: RUN_ID, backend, status, exit status, creation time."""
    records = ops.list_runs(get_store())
    if as_json:
        emit_json(records)
        return
    for record in records:
        click.echo(_line(record))
