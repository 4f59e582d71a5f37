"""A one-line progress indicator on stderr, for work that can take more than a
moment. Only at a terminal, and never with --json: pipes and logs stay clean."""

from __future__ import annotations

import sys
import time

import click

REDRAW_SECONDS = 0.1


class Progress:
    def __init__(self, what: str, *, as_json: bool = False) -> None:
        self.what = what
        self.enabled = not as_json and sys.stderr.isatty()
        self.shown = False
        self.last = 0.0
        self.stage = ""

    def __call__(self, text: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        stage = text.split(" ", 1)[0]  # a new stage always shows; counts within one are throttled
        if self.shown and stage == self.stage and now - self.last < REDRAW_SECONDS:
            return
        self.last, self.stage = now, stage
        click.echo(f"\r\x1b[K{self.what}: {text}…", err=True, nl=False)
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.shown = False
            try:
                click.echo("\r\x1b[K", err=True, nl=False)
            except OSError:  # a terminal that hung up: what was being done matters more
                pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()
