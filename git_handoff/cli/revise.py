"""Revising the plan: rm, rename, reopen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from git_handoff.cli import emit_json, get_store, json_option
from git_handoff.cli.ids import complete_task_id
from git_handoff.ops import revise as ops


def _answer(result: Mapping[str, object], as_json: bool, headline: str, *details: Any) -> None:
    """The use case's result as JSON, or a headline and the details that apply (falsy
    ones are left out), indented under it."""
    if as_json:
        emit_json(result)
        return
    click.echo(headline)
    for line in details:
        if line:
            click.echo(f"  {line}")


@click.command("rm")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@click.option("--force", is_flag=True,
              help="Remove it even while other tasks depend on it (they lose that dependency) or it is claimed.")
@json_option
def rm_cmd(task_id: str, force: bool, as_json: bool) -> None:
    """Remove a task from the plan (logged; its saved attempts are kept).

    Refused while other tasks depend on it or it is in progress, unless --force.
    """
    result = ops.remove(get_store(), task_id, force=force)
    _answer(result, as_json, f"Removed {task_id}",
            result["detached"] and f"no longer a dependency of: {', '.join(result['detached'])}",
            result["attempts_kept"]
            and f"its {len(result['attempts_kept'])} saved attempt(s) stay: {', '.join(result['attempts_kept'])}")


@click.command("rename")
@click.argument("old", metavar="OLD", shell_complete=complete_task_id)
@click.argument("new", metavar="NEW")
@json_option
def rename_cmd(old: str, new: str, as_json: bool) -> None:
    """Give task OLD the id NEW: dependencies, saved attempts and notes follow."""
    result = ops.rename(get_store(), old, new)
    _answer(result, as_json, f"Renamed {old} to {new}",
            result["dependents"] and f"dependencies updated in: {', '.join(result['dependents'])}",
            result["attempts"] and f"{len(result['attempts'])} saved attempt(s) moved to refs/harness/attempts/{new}/",
            result["notes"] and f"{result['notes']} commit note(s) updated")


@click.command("reopen")
@click.argument("task_id", metavar="ID", shell_complete=complete_task_id)
@click.option("--reason", required=True, metavar="TEXT", help="Why it is reopened (logged).")
@json_option
def reopen_cmd(task_id: str, reason: str, as_json: bool) -> None:
    """Put a completed or failed task back to pending (after a mistaken `done` or `fail`).

    Its attempts, error log and checkpoints are kept; tasks that failed only because
    this one had failed for good come back with it.
    """
    result = ops.reopen(get_store(), task_id, reason=reason)
    task = result["task"]
    _answer(result, as_json,
            f"Reopened {task_id} (was {result['was']}; attempts {task['attempts']}/{task['max_attempts']})",
            result["also_reopened"] and f"also back to pending: {', '.join(result['also_reopened'])}")
