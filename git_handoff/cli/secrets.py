"""`secrets`: the secrets already in the refs this clone publishes."""

from __future__ import annotations

import click

from git_handoff.cli import emit_json, get_store, json_option, visible
from git_handoff.core.errors import Negative


@click.command("secrets")
@json_option
def secrets_cmd(as_json: bool) -> None:
    """Scan what this clone publishes (the state's history, the notes, the saved attempts)
    for secrets: where each is and how to remove it. Exit 1 when any is found, 0 clean.
    What is written from now on is redacted before it is committed."""
    from git_handoff.ops import secrets as ops

    try:
        report = ops.scan_published(get_store())
    except Negative as exc:
        if not as_json and isinstance(exc.payload, dict):
            for f in exc.payload["findings"]:
                field = f" {visible(f['field'])}" if f["field"] else ""
                click.echo(f"{f['kind']}: {f['ref']} {f['commit'][:12]} {visible(f['where'])}{field}"
                           f" ({f['commits']} commit(s))")
                click.echo(f"    to remove: {f['remove']}")
        raise
    if as_json:
        emit_json(report)
    else:
        scanned = report["scanned"]
        click.echo(f"no secret in published refs ({scanned['commits']} commit(s), {scanned['blobs']} file(s), "
                   f"{scanned['attempts']} attempt(s) scanned)")
