"""Running `git handoff` through the command server in tests: a console script of our own
on PATH (as pip writes it), the server's log and process, waiting for both."""

from __future__ import annotations

import os
import signal
import site
import subprocess
import sys
import sysconfig
import time
import venv
from pathlib import Path

from tests.support.processes import processes_with

ROOT = Path(__file__).resolve().parent.parent.parent

# What `pip install` writes as bin/git-handoff (the console script git_handoff.cli:main).
CONSOLE_SCRIPT = f"""#!{sys.executable}
# -*- coding: utf-8 -*-
import re
import sys
from git_handoff.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def console_script(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "git-handoff"
    script.write_text(CONSOLE_SCRIPT)
    script.chmod(0o755)
    return script


def client_env(bin_dir: Path, *, server: str | None, idle: float = 30, pythonpath: Path = ROOT) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{pythonpath}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(pythonpath)
    env.pop("HANDOFF_COMMAND_SERVER", None)
    if server is not None:
        env["HANDOFF_COMMAND_SERVER"] = server
    env["HANDOFF_COMMAND_SERVER_IDLE"] = str(idle)
    return env


def server_dir(repo: Path) -> Path:
    return repo / ".git" / "handoff" / "cmdserver"


def log_lines(repo: Path) -> list[str]:
    try:
        text = (server_dir(repo) / "log").read_text()
    except FileNotFoundError:
        return []
    return [line.split(" ", 1)[1] for line in text.splitlines()]


def another_interpreter(where: Path, *, packages: bool) -> Path:
    """Another Python, the same version as this one: the interpreter of a virtual
    environment made at `where` (`python -m venv`, without pip), so another
    `sys.executable` whether the tests run in the base interpreter or in a venv (a
    symbolic link to this interpreter is not: in a venv it starts the base interpreter,
    whose `sys.prefix` has none of the venv's packages). With `packages` it imports what
    this interpreter imports (a .pth file adds this one's site directories, their own .pth
    files included); without, only the standard library."""
    venv.EnvBuilder(symlinks=True, with_pip=False).create(where)
    python = where / "bin" / "python"
    if packages:
        purelib = sysconfig.get_path("purelib", scheme="venv", vars={"base": str(where), "platbase": str(where)})
        dirs = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
        Path(purelib, "this-interpreters-sites.pth").write_text(
            "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs if os.path.isdir(d)))
    return python


def served(repo: Path) -> list[str]:
    """The commands workers ran ("next", "hook claude-stop", ...), in order."""
    return [line.split(": ", 1)[1] for line in log_lines(repo)
            if line.startswith("worker ") and not line.split(": ", 1)[1].startswith(("exit ", "signal ", "its client"))]


def server_pids(repo: Path) -> list[int]:
    """The live servers of this repository (their command line names its git dir)."""
    git_dir = str((repo / ".git").resolve())
    return [pid for pid in processes_with("git_handoff.cli.command_server") if git_dir in _cmdline(pid)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_for(predicate, what: str, limit: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def wait_until_serving(repo: Path) -> int:
    """The server's pid once its socket answers."""
    wait_for(lambda: (server_dir(repo) / "sock").exists() and server_pids(repo), "the command server")
    return server_pids(repo)[0]


def stop_servers(repo: Path) -> None:
    """SIGTERM every server of `repo` (one may still be starting) and wait for its end."""
    for pid in server_pids(repo):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists() or _zombie(pid), f"server {pid} to exit", 10)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def blocked_reading_stdin(pid: int) -> bool:
    """Whether `pid` sits in read(0, ...) (/proc/PID/syscall: number 0 on x86-64, fd 0)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(fields) > 1 and fields[0] == "0" and int(fields[1], 16) == 0


def child_pids(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def run_cmd(argv: list[str], repo: Path, env: dict[str, str], stdin: str | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=repo, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)
