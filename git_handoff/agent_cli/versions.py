"""Keeping up with the agent CLIs: for each supported CLI, the version the suite proves
(its module's `VERSION`, which .ci/run installs and tests/support names) beside the one
installed here (`<program> --version`), and whether they differ (`git handoff hooks
versions`). A CLI's hook contract can change in any release: a difference says this
machine runs a version nobody has run the suite against (docs/agent-clis.md, "Keeping up
with the CLIs", runs it against the newest release of each)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import TypedDict

from git_handoff.agent_cli import registry

VERSION_TIMEOUT = 30.0  # seconds for `<program> --version` (a first run may unpack its package)
_VERSION = re.compile(r"\b(\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?)")


class CliVersion(TypedDict):
    agent: str
    label: str
    package: str
    pinned: str  # the version the suite proves
    installed: str | None  # None: not on PATH, or its --version said no version
    program: str | None  # the executable found on PATH
    differs: bool  # installed, and not the pinned version
    problem: str | None  # why no installed version could be read


def version_in(text: str) -> str | None:
    """The first x.y.z version in a program's --version output ("2.1.332 (Claude Code)",
    "codex-cli 0.171.0", "GitHub Copilot CLI 1.0.102.")."""
    found = _VERSION.search(text)
    return found.group(1) if found else None


def installed(agent: str) -> tuple[str | None, str | None, str | None]:
    """(the version installed, the program found, why none could be read) of one CLI."""
    cli = registry.get(agent)
    program = next((found for name in cli.PROGRAMS if (found := shutil.which(name))), None)
    if program is None:
        return None, None, f"{' or '.join(cli.PROGRAMS)} is not on PATH"
    # no update check, no prompt: a version question must not reach the network or wait
    env = dict(os.environ, COPILOT_AUTO_UPDATE="false", NO_UPDATE_NOTIFIER="1")
    try:
        proc = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT,
                              stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, program, f"`{program} --version` failed: {exc}"
    version = version_in(proc.stdout) or version_in(proc.stderr)
    if version is None:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        return None, program, f"`{program} --version` printed no version" + (f" ({said[0][:120]})" if said else "")
    return version, program, None


def report() -> list[CliVersion]:
    """Every supported CLI, in the registry's order (their --version asked all at once)."""
    out: list[CliVersion] = []
    with ThreadPoolExecutor(max_workers=len(registry.CLIS)) as pool:
        answers = list(pool.map(installed, registry.CLIS))
    for (name, cli), (version, program, problem) in zip(registry.CLIS.items(), answers, strict=True):
        out.append({"agent": name, "label": cli.LABEL, "package": cli.PACKAGE, "pinned": cli.VERSION,
                    "installed": version, "program": program, "differs": version is not None and version != cli.VERSION,
                    "problem": problem})
    return out
