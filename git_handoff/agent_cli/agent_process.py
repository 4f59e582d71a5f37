"""Launching an agent for one session, and ending it: a child process in its own
process group, or a detached tmux session `handoff-<repo>-<n>` on a tmux socket of the
relay's own. Everything the agent starts carries HANDOFF_AGENT_TOKEN in its
environment, so ending the agent ends what it left behind too."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shlex
import subprocess
from pathlib import Path

from git_handoff.core.errors import UsageError
from git_handoff.infra import procs
from git_handoff.state.store import StateStore


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40] or "repo"


def tmux_socket_name(store: StateStore, chosen: str | None = None) -> str:
    """The relay's own tmux socket (`tmux -L NAME`): one per repository unless chosen."""
    if chosen:
        return chosen
    root = store.repo.root()
    digest = hashlib.sha1(str(store.repo.common_dir).encode()).hexdigest()[:8]
    return f"handoff-{_slug(root.name)}-{digest}"


def tmux_session_name(store: StateStore, number: int) -> str:
    return f"handoff-{_slug(store.repo.root().name)}-{number}"


class Agent:
    """One launched agent: a process group of ours, or a tmux session."""

    def __init__(self, *, pid: int, status_file: Path, token: str | None, proc: subprocess.Popen[bytes] | None = None,
                 tmux: tuple[str, str] | None = None) -> None:
        self.pid = pid
        self.token = token
        self.status_file = status_file
        self.proc = proc
        self.tmux = tmux  # (socket, session name)

    def exit_status(self) -> int | None:
        """The agent's exit status once it has exited, else None."""
        if self.proc is not None:
            code = self.proc.poll()
            if code is None:
                return None
            return code if code >= 0 else 128 - code
        if procs.alive(self.pid):
            return None
        try:
            return int(self.status_file.read_text().strip() or "0")
        except (OSError, ValueError):
            return -1  # killed before it could record a status

    def running(self) -> bool:
        return self.exit_status() is None

    def kill(self) -> None:
        """End the agent's whole process tree (then its tmux session)."""
        procs.kill_tree(self.pid, self.token)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.tmux is not None:
            socket_name, name = self.tmux
            subprocess.run(["tmux", "-L", socket_name, "kill-session", "-t", f"={name}"],
                           capture_output=True)
            if subprocess.run(["tmux", "-L", socket_name, "list-sessions"], capture_output=True).returncode != 0:
                remove_socket(socket_name)  # the server is gone; tmux leaves its socket file behind

    def attach_command(self) -> str | None:
        """The exact command that shows this agent's terminal (tmux only)."""
        if self.tmux is None:
            return None
        socket_name, name = self.tmux
        return f"tmux -L {shlex.quote(socket_name)} attach -t {shlex.quote(name)}"


def tmux_socket_path(socket_name: str) -> Path | None:
    """Where the tmux server of `tmux -L socket_name` listens (None when none runs)."""
    proc = subprocess.run(["tmux", "-L", socket_name, "display-message", "-p", "#{socket_path}"],
                          capture_output=True, text=True)
    found = proc.stdout.strip()
    return Path(found) if proc.returncode == 0 and found else None


def default_socket_path(socket_name: str) -> Path:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{uid}" / socket_name


def remove_socket(socket_name: str, path: Path | None = None) -> None:
    target = path or default_socket_path(socket_name)
    try:
        if target.is_socket():
            target.unlink()
    except OSError:
        pass


def stop_tmux_server(socket_name: str) -> None:
    """End the relay's own tmux server and remove its socket file."""
    path = tmux_socket_path(socket_name)
    subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    remove_socket(socket_name, path)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# set by tmux for the pane itself, not taken from the relay
_PANE_OWN = ("TERM", "TMUX", "TMUX_PANE", "COLUMNS", "LINES")


def _write_env_file(path: Path, env: dict[str, str]) -> None:
    """A shell file that gives a tmux pane exactly `env`: a tmux server already running on
    the socket (one left behind, or --tmux-socket) starts new sessions with its own
    environment, not the relay's (ANTHROPIC_BASE_URL, API keys, PATH). Readable by this
    user only, and removed by the session's script once read: it holds the API keys.
    Variables the server has and the relay has not are unset first."""
    keep = sorted(name for name in env if _NAME.fullmatch(name) and name not in _PANE_OWN)
    lines = [
        "for _v in $(env | sed -n 's/^\\([A-Za-z_][A-Za-z0-9_]*\\)=.*/\\1/p'); do",
        f"  case ' {' '.join(keep + list(_PANE_OWN))} ' in *\" $_v \"*) ;; *) unset \"$_v\" ;; esac",
        "done; unset _v",
    ]
    lines += [f"{name}={shlex.quote(env[name])}; export {name}" for name in keep]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fd, 0o600)
        fh.write("\n".join(lines) + "\n")


def launch(store: StateStore, agent_command: str, number: int, prompt_file: Path, relay_dir: Path, *,
           tmux_socket: str | None = None) -> Agent:
    """Start the agent for session `number`: a child in its own process group, or (with
    `tmux_socket`) a detached tmux session on that socket."""
    root = store.repo.root()
    command = agent_command.replace("{prompt_file}", shlex.quote(str(prompt_file)))
    status_file = relay_dir / f"session-{number}.status"
    log_file = relay_dir / f"session-{number}.log"
    script = relay_dir / f"session-{number}.sh"
    token = f"{os.getpid()}-{number}-{secrets.token_hex(6)}"
    try:
        status_file.unlink()
    except FileNotFoundError:
        pass
    env_file = relay_dir / f"session-{number}.env"
    env_line = ""
    if tmux_socket is not None:
        _write_env_file(env_file, dict(os.environ))
        env_line = f". {shlex.quote(str(env_file))}; rm -f {shlex.quote(str(env_file))}\n"
    script.write_text(
        "#!/bin/sh\n"
        + env_line +
        f"cd {shlex.quote(str(root))} || exit 127\n"
        f"HANDOFF_PROMPT_FILE={shlex.quote(str(prompt_file))}; export HANDOFF_PROMPT_FILE\n"
        f"HANDOFF_SESSION={number}; export HANDOFF_SESSION\n"
        f"HANDOFF_AGENT_TOKEN={token}; export HANDOFF_AGENT_TOKEN\n"
        f"/bin/sh -c {shlex.quote(command)}\n"
        "code=$?\n"
        f"echo $code > {shlex.quote(str(status_file))}\n"
        "exit $code\n"
    )
    if tmux_socket is not None:
        socket_name = tmux_socket
        name = tmux_session_name(store, number)
        subprocess.run(["tmux", "-L", socket_name, "kill-session", "-t", f"={name}"], capture_output=True)
        # The agent gets the pane's own terminal (an agent CLI whose stdout is a pipe runs
        # non-interactively); the log is taken by tmux itself. One command list, so the
        # pipe is in place before the pane's first output is read.
        proc = subprocess.run(
            ["tmux", "-L", socket_name, "new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", str(root),
             "-P", "-F", "#{pane_pid}", f"/bin/sh {shlex.quote(str(script))}",
             ";", "pipe-pane", "-o", f"cat >> {shlex.quote(str(log_file))}"],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise UsageError(f"tmux could not start the agent: {proc.stderr.strip() or proc.returncode}")
        return Agent(pid=int(proc.stdout.strip().splitlines()[0]), status_file=status_file, token=token,
                     tmux=(socket_name, name))
    env = dict(os.environ, HANDOFF_PROMPT_FILE=str(prompt_file), HANDOFF_SESSION=str(number),
               HANDOFF_AGENT_TOKEN=token)
    with open(log_file, "ab") as log:
        child = subprocess.Popen(["/bin/sh", str(script)], cwd=root, env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return Agent(pid=child.pid, status_file=status_file, token=token, proc=child)


# -- the agent this clone's relay launched, as the relay itself recorded it -------------------

AGENT_FILE = "agent.json"


def remember(relay_dir: Path, session: int | None, agent: Agent | None) -> None:
    """Record, where nothing fetched can reach (the relay's private directory), which agent
    this clone's relay runs for which session: what a later relay may wait on or end."""
    data = None if agent is None or session is None else {
        "session": session, "pid": agent.pid, "token": agent.token, "tmux": list(agent.tmux) if agent.tmux else None}
    tmp = relay_dir / f".{AGENT_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(data) + "\n")
    os.replace(tmp, relay_dir / AGENT_FILE)


def remembered(relay_dir: Path, session: int) -> Agent | None:
    """The agent this clone's relay recorded for `session` (None: none, or another session):
    a relay record in the shared state, replayed or not, never names the process."""
    try:
        data = json.loads((relay_dir / AGENT_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("session") != session or type(data.get("pid")) is not int:
        return None
    token, tmux = data.get("token"), data.get("tmux")
    pair = None
    if isinstance(tmux, list) and len(tmux) == 2 and all(isinstance(t, str) for t in tmux):
        pair = (str(tmux[0]), str(tmux[1]))
    return Agent(pid=data["pid"], status_file=relay_dir / f"session-{session}.status",
                 token=token if isinstance(token, str) else None, tmux=pair)
