"""`git handoff launcher [FILE]`: the command server's fast client as a program of its
own, for scripts and loops (docs/command-server.md, "The fast launcher")."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path
from typing import TypedDict

import click

from git_handoff import __version__, cmdclient
from git_handoff.cli import emit_json, json_option
from git_handoff.core import display
from git_handoff.core.errors import UsageError
from git_handoff.infra.fileio import atomic_write

MARK = "# git handoff launcher"  # its second line: how a launcher this command wrote is told


class Launcher(TypedDict):
    """`launcher [FILE]`."""

    launcher: str | None  # the file written; None: printed
    python: str
    package: str
    script: str


def script() -> str:
    """The launcher for this interpreter and package: their absolute paths, the fast
    client while both are there, the plain `git handoff` once either is gone."""
    client = cmdclient.fast_command([])
    python, package = client[0], os.path.join(cmdclient.PACKAGE_DIR, "cmdclient.py")
    fast = " ".join(shlex.quote(a) for a in client)
    return (f"#!/bin/sh\n{MARK} (git handoff {__version__}): runs `git handoff ARGS`.\n"
            "# Where this repository's command server runs (git config handoff.commandServer true)\n"
            "# it hands the command to it from a Python started without `site`; otherwise it\n"
            "# runs the command as `git handoff` does. Written again by `git handoff launcher FILE`.\n"
            f"[ -x {shlex.quote(python)} ] && [ -f {shlex.quote(package)} ] && exec {fast} \"$@\"\n"
            "exec git handoff \"$@\"\n")


def _ours(path: Path) -> bool:
    """Whether `path`, a regular file, is a launcher this command wrote (its second line).
    Opened without blocking: a FIFO swapped in after the caller's check is not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            head = f.read(4096).split(b"\n")
    except OSError:
        return False
    return len(head) > 1 and head[1].startswith(MARK.encode())


def write(path: Path, text: str, force: bool) -> None:
    """Write the launcher to `path`, executable; an existing file is replaced only when a
    launcher wrote it (or `force`). Nothing is changed on an error."""
    shown = display.line(str(path))
    if path.name == "git-handoff":
        raise UsageError("a launcher must not be named git-handoff: where its Python is gone it runs "
                         "`git handoff`, which would find the launcher again (name it e.g. `handoff`)")
    try:
        st: os.stat_result | None = path.lstat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"cannot write {shown}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{shown} is a directory: give the launcher's file name")
    if st is not None and not force:
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{shown} is a symbolic link to {display.line(os.readlink(path))}: give the file "
                             "it names (--force replaces the link with the launcher)")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{shown} is not a regular file (--force replaces it)")
        if not _ours(path):
            raise UsageError(f"{shown} exists and is not a launcher of git handoff (--force replaces it)")
    if not path.parent.is_dir():
        raise UsageError(f"no directory {display.line(str(path.parent))}")
    try:
        atomic_write(path, text.encode("utf-8"), mode=0o755)
    except OSError as exc:
        raise UsageError(f"cannot write {shown}: {exc.strerror or exc}") from None


@click.command("launcher")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace FILE even when it is not a launcher this command wrote.")
@json_option
def launcher_cmd(file: Path | None, force: bool, as_json: bool) -> None:
    """Write a fast launcher for scripts and loops (print it, without FILE).

    \b
    git handoff launcher ~/.local/bin/handoff
    handoff claim --remote origin && ... && handoff done ID && handoff sync

    FILE runs `git handoff ARGS` as `git handoff` would. Where the repository's
    command server runs (`git config handoff.commandServer true`), it hands the
    command to it from a Python started without `site`, as the installed agent
    hooks do: a few milliseconds a command instead of a full Python start (the
    plain program through git, and a version manager's shim, cost tens). Without a
    server it runs the command in-process, as `git handoff` does. It names this
    Python and this installation by their paths: after an upgrade to another
    Python, write it again; once they are gone it runs the plain `git handoff`.
    An existing FILE is replaced only when this command wrote it (or --force);
    a symbolic link is not followed: give the file it names.
    """
    text = script()
    client = cmdclient.fast_command([])
    if file is not None:
        write(file, text, force)
    if as_json:
        shown: Launcher = {"launcher": str(file) if file is not None else None, "python": client[0],
                           "package": cmdclient.PACKAGE_DIR, "script": text}
        emit_json(shown)
    elif file is None:
        click.echo(text, nl=False)
    else:
        click.echo(f"Wrote {display.line(str(file))}: runs `git handoff ARGS` through {client[0]} without site")
