"""`git handoff demo`."""

from __future__ import annotations

import click

from git_handoff.ops.demo import run_demo


@click.command("demo")
@click.option("--keep", default=None, metavar="DIR", help="Keep the demo repository in DIR instead of removing it.")
def demo_cmd(keep: str | None) -> None:
    """Show the whole product in a throwaway repository (nothing of yours is touched)."""
    repo = run_demo(keep, click.echo)
    if keep is not None:
        click.echo(f"\nkept: {repo}")
