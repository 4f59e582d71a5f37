"""`git handoff demo`."""

from __future__ import annotations

from typing import TypedDict

import click

from git_handoff.cli import emit_json, json_option
from git_handoff.ops.demo import run_demo


class DemoResult(TypedDict):
    """`demo`."""

    ok: bool
    repository: str
    kept: bool
    transcript: list[str]


@click.command("demo")
@click.option("--keep", default=None, metavar="DIR", help="Keep the demo repository in DIR instead of removing it.")
@json_option
def demo_cmd(keep: str | None, as_json: bool) -> None:
    """Show the whole product in a throwaway repository (nothing of yours is touched)."""
    if as_json:
        transcript: list[str] = []
        repo = run_demo(keep, transcript.append)
        result: DemoResult = {"ok": True, "repository": str(repo), "kept": keep is not None, "transcript": transcript}
        emit_json(result)
        return
    repo = run_demo(keep, click.echo)
    if keep is not None:
        click.echo(f"\nkept: {repo}")
