"""Processes in the process table, as the relay's tests look for what an agent left."""

from __future__ import annotations

import os
from pathlib import Path

from git_handoff.infra import procs


def processes_with(marker: str) -> list[int]:
    """The live processes whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and procs.alive(int(name)):
                found.append(int(name))
    return found
