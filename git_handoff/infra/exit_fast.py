"""Leave a one-shot command without the interpreter's teardown.

At exit CPython destroys every module and lets the garbage collector walk every object
still alive: tens of milliseconds once a command has read ten thousand tasks, spent on
memory the kernel frees anyway. A one-shot `git handoff` command (the program, not a test
calling main in-process) instead runs what must run at exit itself, then ends at once:

- the `atexit` handlers (weakref finalizers such as temporary directories, logging's
  flush, the joins of thread pools), in the order Python would run them;
- stdout and stderr flushed, a failed flush giving exit status 120 as Python's own;
- nothing else: locks are context managers released before the command returns, and
  background work (`git repack` after a write) is a process already started.

Any other thread still running means Python's ordinary exit (which waits for it).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def exit_code(code: str | int | None) -> int:
    """The status `sys.exit(code)` gives: None 0, an int itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except (OSError, ValueError):
        pass
    return 1


def leave(code: str | int | None) -> NoReturn:
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        sys.exit(code)
    status = exit_code(code)
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout:
                status = 120
    os._exit(status)
