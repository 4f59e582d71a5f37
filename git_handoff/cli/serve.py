"""`git handoff serve`: the read-only dashboard."""

from __future__ import annotations

from typing import TypedDict

import click

from git_handoff.cli import emit_json, get_store, json_option, numbers
from git_handoff.core.errors import UsageError
from git_handoff.core.model import parse_duration


class Serving(TypedDict):
    """`serve`, once it listens."""

    url: str
    root: str
    host: str
    stop_after: int | None


@click.command("serve")
@click.option("--port", "-p", type=numbers.PORT, default=0, show_default=True,
              help="TCP port; 0 picks a free one.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback exposes the state to the network.")
@click.option("--open", "open_browser", is_flag=True, help="Open the dashboard in a browser, where there is one.")
@click.option("--stop-after", default=None, metavar="DURATION",
              help="Stop serving after DURATION (e.g. 90s, 30m, 2h) instead of at Ctrl-C.")
@json_option
def serve_cmd(port: int, host: str, open_browser: bool, stop_after: str | None, as_json: bool) -> None:
    """A live, read-only dashboard of the state in a web browser.

    Progress by status and priority, the dependency graph, sessions with their
    handoff documents, the relay's state and the log, updating while the work goes
    on; every task links to its record, attempts and checkpoints. It reads
    refs/harness/state on every request and never changes anything (every method
    but GET and HEAD is refused). Prints its URL (--json: {"url", "root"} once it
    listens); Ctrl-C stops it.
    """
    from git_handoff.dashboard import server

    seconds = parse_duration(stop_after) if stop_after is not None else None
    # Opened once through the one door, as every command: the notices and an interrupted
    # rollback are dealt with here; the requests then only read.
    root = get_store().repo.root()

    def ready(url: str) -> None:
        if as_json:
            serving: Serving = {"url": url, "root": str(root), "host": host, "stop_after": seconds}
            emit_json(serving)
        else:
            click.echo(f"Serving the dashboard of {root} at {url}" + ("" if seconds else "  (Ctrl-C to stop)"))
        if host not in ("127.0.0.1", "localhost", "::1"):
            click.echo(f"warning: listening on {host}: anyone who can reach it can read the state", err=True)
        if open_browser:
            import webbrowser

            if not webbrowser.open(url):
                click.echo("warning: no browser found; open the URL yourself", err=True)

    try:
        server.serve(root, host=host, port=port, stop_after=seconds, ready=ready)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
