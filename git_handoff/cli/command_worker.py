"""A command server's worker: become the client, then run the command.

The server (git_handoff/cli/command_server.py) forks one worker per request. The worker
takes on what the request carries - the working directory, umask, ignored signals, argv
and whole environment (nothing of the server's own environment stays) - rebuilds
sys.stdin/stdout/stderr as Python makes them at start, and runs the ordinary entry point
`git_handoff.cli.main`, ending through `infra/exit_fast.py` with the command's status.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import traceback
from typing import Any, NoReturn

from git_handoff import cmdclient
from git_handoff.infra import exit_fast

_KEEP: list[Any] = []  # the server's own stdio objects, never closed by a worker (they own fds 0-2)


def run() -> NoReturn:
    """The command, as the program would run it: its exit code, or the traceback and 1."""
    code: str | int | None = 1
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded_signals())  # blocked since the fork
        from git_handoff.cli import main

        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - as Python would: the traceback and exit 1
        traceback.print_exc()
        code = 1
    exit_fast.leave(code)


def forwarded_signals() -> set[signal.Signals]:
    """The signals the client forwards to its worker (cmdclient.FORWARDED)."""
    return {getattr(signal, name) for name in cmdclient.FORWARDED}


def take_on(fields: list[bytes]) -> None:
    """Become the client: its directory, umask, signals ignored, argv and environment
    (the server's own environment is dropped whole); its fds come with its go (`take_fds`)."""
    cwd, umask, ignored, argc = fields[0], int(fields[1]), fields[2], int(fields[3])
    argv = [a.decode("utf-8", "surrogateescape") for a in fields[4:4 + argc]]
    env = fields[4 + argc:]
    os.chdir(cwd)
    os.umask(umask)
    ignore = {int(n) for n in ignored.split(b",") if n}
    for name in cmdclient.FORWARDED:
        sig = getattr(signal, name)
        default = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
        signal.signal(sig, signal.SIG_IGN if sig in ignore else default)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.environb.clear()
    for item in env:
        key, _, value = item.partition(b"=")
        if key:
            os.environb[key] = value
    sys.argv = argv


def take_fds(fds: list[int]) -> None:
    """The client's standard file descriptors as this process's 0-2, and sys.std* on them."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target, inheritable=True)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    _new_stdio()


def keep_stdio() -> None:
    """Keep the server's own stdio objects alive for ever: a worker replaces sys.std*, and
    the old objects, once unreferenced, would close fds 0-2 (the client's by then)."""
    _KEEP.extend([sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__])


def _new_stdio() -> None:
    """sys.stdin/stdout/stderr on the client's fds, made as Python makes them at start-up:
    the same encoding and errors; stdout and stderr unbuffered under -u/PYTHONUNBUFFERED
    (the server runs with the client's flags), else stdout line-buffered on a terminal and
    stderr always."""
    unbuffered = bool(getattr(sys.__stdout__, "write_through", False))  # as Python made the server's own
    made = []
    for fd, old in ((0, sys.__stdin__), (1, sys.__stdout__), (2, sys.__stderr__)):
        assert old is not None
        raw_unbuffered = unbuffered and fd != 0
        raw = open(fd, "rb" if fd == 0 else "wb", buffering=0 if raw_unbuffered else -1, closefd=False)  # noqa: SIM115
        made.append(io.TextIOWrapper(raw, encoding=old.encoding, errors=old.errors,
                                     newline=None if fd == 0 else "\n", write_through=raw_unbuffered,
                                     line_buffering=not unbuffered and fd != 0 and (fd == 2 or os.isatty(fd))))
    sys.stdin, sys.stdout, sys.stderr = made
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = made  # type: ignore[misc]  # typeshed marks the originals read-only; the worker rebuilds them as Python does at start-up
