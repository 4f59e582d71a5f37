"""The programs the suite runs besides Python, checked when a test session starts
(tests/conftest.py).

Two it cannot do without: git, and `git-handoff`, the package's own console script, which
the tests run as a user does (`git handoff ...`, hooks, relays' agents). pip writes the
script beside the interpreter (a venv's bin/, activated or not) or into the user's
scripts directory; found there, that directory goes first on PATH for the session;
found nowhere, the session stops with one sentence saying what to put on PATH.

Every other program is optional: a test marked `@pytest.mark.needs("ssh-keygen")` is
skipped where it is missing, the reason naming the Debian package that installs it, or
for an agent CLI its npm package and version (.ci/run installs them all). The tmux, chromium,
zsh, man, gitolite and agent-CLI tests skip the same way through their own checks
(tests/support/browser.py, gitolite.py, agent_clis.py, claude_cli.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

GIT_AT_LEAST = (2, 30)

# program -> the Debian package that installs it
OPTIONAL = {
    "ssh-keygen": "openssh-client",  # ssh-signed state commits (handoff.signState, allowedSigners)
    "dot": "graphviz",  # the dashboard's rendered graph
    "ps": "procps",  # the torture tests' look at the remote's and a relay's processes
    "pgrep": "procps",
    "tmux": "tmux",
    "zsh": "zsh",
    "man": "man-db",
    "setpriv": "util-linux",  # a client under no_new_privs, as an agent CLI's sandbox starts it
    "unshare": "util-linux",  # a client in another mount namespace
    # the agent CLIs, from npm at the versions the suite proves (each CLI's VERSION in
    # git_handoff/agent_cli/; .ci/run's CLAUDE_CODE_VERSION and AGENT_CLIS lines)
    "claude": "npm:@anthropic-ai/claude-code@2.1.332",
    "codex": "npm:@openai/codex@0.171.0",
    "gemini": "npm:@google/gemini-cli@0.61.0",
    "qwen": "npm:@qwen-code/qwen-code@0.24.4",
    "copilot": "npm:@github/copilot@1.0.102",
    "opencode": "npm:opencode-ai@1.18.33",
}


def missing(program: str) -> str | None:
    """Why the tests that run `program` skip here (None: it is on PATH)."""
    if shutil.which(program) is not None:
        return None
    package = OPTIONAL[program]
    install = f"npm install -g {package[4:]}" if package.startswith("npm:") else f"apt-get install {package}"
    return f"{program} is not installed (`{install}`; .ci/run installs it)"


def script_dirs(executable: str = sys.executable) -> list[Path]:
    """Where pip puts the console scripts of packages installed for `executable`: beside it
    (a venv's bin/, activated or not), its scheme's scripts directory, the user's."""
    found = [Path(executable).parent, Path(sysconfig.get_path("scripts"))]
    try:
        found.append(Path(sysconfig.get_path("scripts", f"{os.name}_user")))
    except KeyError:
        pass
    return list(dict.fromkeys(found))


def put_console_script_on_path(environ: dict[str, str] | os._Environ[str], dirs: list[Path] | None = None,
                               executable: str = sys.executable) -> str | None:
    """Put the first of `dirs` (this interpreter's script directories) holding a
    `git-handoff` first on `environ`'s PATH; where none does, keep PATH when it finds one
    already. Otherwise: the one sentence the session stops with."""
    path = environ.get("PATH", os.defpath)
    for where in script_dirs(executable) if dirs is None else dirs:
        if os.access(where / "git-handoff", os.X_OK):
            entries = [p for p in path.split(os.pathsep) if p and Path(p) != where]
            environ["PATH"] = os.pathsep.join([str(where), *entries])
            return None
    if shutil.which("git-handoff", path=path) is not None:
        return None
    return (f"git-handoff, this package's own program, is neither on PATH nor beside {executable}: "
            f"install the package into this interpreter (`{executable} -m pip install -e '.[test]'`; the tests find "
            f"the git-handoff it writes to {sysconfig.get_path('scripts')}) "
            "or put the directory of a git-handoff on PATH")


def git_problem(environ: dict[str, str] | os._Environ[str]) -> str | None:
    """Why git cannot run the suite here (None: git >= 2.30 is on PATH)."""
    git = shutil.which("git", path=environ.get("PATH", os.defpath))
    if git is None:
        return "git is not on PATH: install git >= 2.30 (`apt-get install git`)"
    out = subprocess.run([git, "--version"], capture_output=True, text=True).stdout
    found = re.search(r"(\d+)\.(\d+)", out)
    if found is None or (int(found[1]), int(found[2])) < GIT_AT_LEAST:
        return f"{git} is {out.strip() or 'not a git'}: the suite needs git >= 2.30"
    return None


def session_problems(environ: dict[str, str] | os._Environ[str], executable: str = sys.executable) -> list[str]:
    """What stops the session (the programs it cannot do without), PATH set on the way."""
    return [p for p in (git_problem(environ), put_console_script_on_path(environ, executable=executable)) if p]


def missing_report() -> list[str]:
    """The optional programs missing here, each with its package: the session's header."""
    by_package: dict[str, list[str]] = {}
    for program, package in OPTIONAL.items():
        if shutil.which(program) is None:
            by_package.setdefault(package, []).append(program)
    return [f"{', '.join(progs)} (apt-get install {pkg})" for pkg, progs in by_package.items()]
