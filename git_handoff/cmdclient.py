"""The command server's client: hand this run of `git handoff` to a pre-imported server.

Started as a program (`git-handoff`, `git handoff`, `python -m git_handoff`), git handoff
first asks whether a command server for this repository is running and is the same code
under the same interpreter and settings (git_handoff/cli/command_server.py; docs/command-server.md).
If so, it hands the server its argv, environment, working directory and umask, and, once
a worker forked from the server has answered (within cmdproto.ANSWER_SECONDS, or the
command runs here), its three standard file descriptors (SCM_RIGHTS over a Unix socket);
the worker runs the command on them, and this process only relays signals to the worker and its exit
status back. On any doubt (no server, a server of other code, a socket that is not this
user's alone, an error before the worker started) it returns and the command runs here,
in-process: that plain path stays the reference.

This module is imported before anything else of the program, so it imports only what
Python has already loaded at start-up (os, sys) and two small C modules (_socket, _signal;
not `signal`, which imports enum: a third of a bare interpreter's start).
"""

from __future__ import annotations

import os
import sys

from git_handoff import cmdproto

TYPE_CHECKING = False  # typing is not imported at start-up: its names are for mypy only
if TYPE_CHECKING:
    from _socket import socket
    from collections.abc import Callable

ENV_SWITCH = "HANDOFF_COMMAND_SERVER"  # 1: on, 0: off; unset: git config handoff.commandServer
ENV_IDLE = "HANDOFF_COMMAND_SERVER_IDLE"  # seconds an idle server waits before it exits
SOCKET_NAME = "sock"

# Commands a worker may run: the short, hot ones. Long-running commands with their own
# process groups, terminals or servers (relay, dispatch, demo, serve, mcp, edit,
# completion) always run in-process.
SERVED = frozenset({
    "add", "ack", "attempts", "blocker", "checkpoint", "claim", "decide", "doc", "done", "fail",
    "graph", "hook", "init", "list", "log", "ls", "next", "prompt", "ready", "release", "renew",
    "reopen", "rename", "restore", "rm", "session", "show", "status", "verify",
})
# `sync` fetches and pushes as `claim --remote` does, but a person runs it at a terminal,
# where git may ask for a password or a key's passphrase on /dev/tty: a worker has no
# controlling terminal, so it is served only to a client that has none either (a fleet's
# loop, an agent's tool call), where no prompt could be answered anyway.
SERVED_WITHOUT_TERMINAL = frozenset({"sync"})
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def started_as_program() -> bool:
    """Whether this process is `git-handoff` (the console script) or `python -m git_handoff`,
    not a test or another program importing the package."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return getattr(spec, "name", None) == "git_handoff.__main__"
    return os.path.basename(getattr(main, "__file__", None) or "") == "git-handoff"


_tried: list[bool] = []


def run_if_started_as_program() -> None:
    """The program's first step: leave through a command server when one fits; return
    (to the in-process path) otherwise."""
    if _tried or not started_as_program():
        return
    _tried.append(True)
    try:
        on = switch()
        if on is False or not _served(sys.argv[1:]):
            return
        git_dir = common_git_dir()
        if git_dir is None:
            return
        code = handoff(git_dir)
    except Exception:  # noqa: BLE001 - any doubt: the in-process path
        return
    if code is None or code == "stale":
        try:
            if on is None:
                on = cmdproto.configured(git_dir)
            if on:
                start_server(git_dir)
        except Exception:  # noqa: BLE001 - no git on PATH, a config it cannot read: in-process
            pass
        return
    if code == "refused":  # a server of this repository for another interpreter or environment
        return
    _leave_with(code)


def switch() -> bool | None:
    """HANDOFF_COMMAND_SERVER as set: on, off, or None (the git config decides)."""
    value = os.environ.get(ENV_SWITCH, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return None


def _served(args: list[str]) -> bool:
    while args and args[0] == "--debug":
        args = args[1:]
    if not args:
        return False
    return args[0] in SERVED or (args[0] in SERVED_WITHOUT_TERMINAL and not _has_terminal())


def _has_terminal() -> bool:
    """Whether this process has a controlling terminal (git could prompt on it)."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


# -- where ----------------------------------------------------------------------------------

def common_git_dir() -> str | None:
    """The repository's common git directory as git would find it from here, or None when
    finding it needs more than reading `.git` (a ceiling, a bare repository): then the
    in-process path decides."""
    if os.environ.get("GIT_CEILING_DIRECTORIES") or os.environ.get("GIT_DISCOVERY_ACROSS_FILESYSTEM"):
        return None
    named = os.environ.get("GIT_DIR")
    if named:
        return _common(os.path.abspath(named)) if os.path.isdir(named) else None
    here = os.getcwd()
    while True:
        dot = os.path.join(here, ".git")
        if os.path.isdir(dot):
            return _common(dot)
        if os.path.isfile(dot):
            try:
                with open(dot, encoding="utf-8") as f:
                    line = f.readline().strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not line.startswith("gitdir: "):
                return None
            return _common(os.path.join(here, line[len("gitdir: "):]))
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _common(git_dir: str) -> str | None:
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as f:
            git_dir = os.path.join(git_dir, f.readline().strip())
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return None
    git_dir = os.path.realpath(git_dir)
    return git_dir if os.path.isfile(os.path.join(git_dir, "HEAD")) else None


def server_dir(git_dir: str) -> str:
    return os.path.join(git_dir, "handoff", "cmdserver")


def private_dir_fd(path: str) -> int | None:
    """An fd on `path` when it is a directory of this user's that no one else may enter
    (checked on the fd itself, so the check and the use see the same directory)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        return None
    return fd


def socket_is_private(dir_fd: int) -> bool:
    import stat

    try:
        st = os.stat(SOCKET_NAME, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def socket_address(dir_fd: int) -> str:
    """The socket's path through the directory fd: short (a Unix socket path holds at most
    107 bytes, a test's temporary directory may not) and bound to the checked directory."""
    return f"/proc/self/fd/{dir_fd}/{SOCKET_NAME}"


def start_server(git_dir: str) -> None:
    """Start this repository's server in the background, detached (a session of its own,
    /dev/null for its standard streams, so it holds none of the caller's pipes), and go on
    with the in-process path. Two clients racing start two servers; one keeps the lock."""
    parent = os.path.dirname(PACKAGE_DIR)
    code = f"import sys; sys.path.insert(0, {parent!r}); from git_handoff.cli.command_server import main; main()"
    devnull = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    # without the caller's git tracing (GIT_TRACE=FILE, GIT_TRACE2_EVENT=...): the server
    # outlives this command, and its own git runs (the config, when it changes) went on
    # writing to that file, after the caller had removed it; each worker traces as its
    # client asks
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_TRACE")}
    try:
        os.posix_spawn(sys.executable, [sys.executable, "-P", "-c", code, git_dir], env,
                       file_actions=devnull, setsid=True)
    except OSError:
        pass


# -- the hand-over ------------------------------------------------------------------------

def request_fields() -> list[bytes]:
    import _signal as signal

    mask = os.umask(0)
    os.umask(mask)
    ignored = [str(int(getattr(signal, n))) for n in FORWARDED
               if signal.getsignal(getattr(signal, n)) == signal.SIG_IGN]
    env = [k.encode("utf-8", "surrogateescape") + b"=" + v.encode("utf-8", "surrogateescape")
           for k, v in os.environ.items()]
    argv = [a.encode("utf-8", "surrogateescape") for a in sys.argv]
    return [os.getcwd().encode("utf-8", "surrogateescape"), str(mask).encode(), ",".join(ignored).encode(),
            str(len(argv)).encode(), *argv, *env]


def handoff(git_dir: str, fast: bool = False) -> int | tuple[str, int] | str | None:
    """Run this command in a worker of the server; its outcome (an exit code, or
    ("signal", n)). Nothing ran when it returns None (no server), "stale" (a server of
    other code or config, now leaving) or "refused" (one for another interpreter,
    environment or confinement, or one that did not answer within
    `cmdproto.ANSWER_SECONDS`; it stays). `fast`: this is the fast client (`run_fast`), which speaks
    for a full start of the server's interpreter (its profile) when it is that one."""
    import _signal as signal

    connected = _connect(git_dir, fast)
    if connected is None or isinstance(connected, str):
        return connected
    sock, interp = connected
    pending: list[int] = []
    worker: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if worker:
            try:
                os.kill(worker[0], signum)
            except OSError:
                pass
        else:
            pending.append(signum)

    saved = {}
    for name in FORWARDED:
        sig = getattr(signal, name)
        if signal.getsignal(sig) != signal.SIG_IGN:
            saved[sig] = signal.signal(sig, forward)
    try:
        who = cmdproto.identity(os.environ, interp) + b"\0\0" + cmdproto.config_stamp(git_dir)
        sock.sendall(cmdproto.frame([who, *request_fields()]))
        reader = _Lines(sock)
        try:
            first = reader.line()
        except TimeoutError:
            return "refused"  # no answer in time: the worker, if any, never gets its go
        if not first.startswith(b"ok "):
            sock.close()  # stale, refused or gone before a worker started: nothing ran
            return "stale" if first == b"stale" else "refused" if first.startswith(b"refused") else None
        outcome = _go(sock, reader, first, worker, pending, forward)
        if outcome is not None:
            return outcome
    finally:
        try:
            sock.close()
        except OSError:
            pass
        for sig, old in saved.items():
            signal.signal(sig, old)
    try:
        sys.stderr.write("git handoff: the command server ended before the command did\n")
    except (OSError, ValueError):  # stderr closed: the exit code still says it
        pass
    return 2  # the exit code of an unexpected failure (docs/git-handoff.md, EXIT STATUS)


def _connect(git_dir: str, fast: bool) -> tuple[socket, list[str] | None] | str | None:
    """A connected socket to this repository's server (this user's, checked by its peer
    credentials) and the interpreter the fast client speaks for; else what `handoff`
    returns when nothing ran (None: no server to use; "refused": one that is busy)."""
    import _socket

    dir_fd = private_dir_fd(server_dir(git_dir))
    if dir_fd is None:
        return None
    try:
        if not socket_is_private(dir_fd):
            return None
        interp = None
        if fast:
            interp = _profile_fits(dir_fd)
            if interp is None:
                return None
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(cmdproto.ANSWER_SECONDS)  # a server that does not answer: run it here
        try:
            sock.connect(socket_address(dir_fd))
        except OSError as exc:
            sock.close()
            import errno

            # no one listens (a server gone): start one; a full backlog or no answer: it
            # is there and busy, run the command here without starting another
            return None if exc.errno in (errno.ENOENT, errno.ECONNREFUSED) else "refused"
    finally:
        os.close(dir_fd)
    creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    if int.from_bytes(creds[4:8], sys.byteorder) != os.geteuid():
        sock.close()
        return None
    return sock, interp


def _go(sock: socket, reader: _Lines, first: bytes, worker: list[int], pending: list[int],
        forward: Callable[[int, object], None]) -> int | tuple[str, int] | None:
    """After the server's `ok PID`: the go with our three descriptors, then the worker's
    outcome; None when the connection ended without it (the command has ended by then).
    The signals `pending` (those that came before the worker's pid was known) are
    `forward`ed to it."""
    import _socket

    # The worker waits for this go before it runs anything; once it is sent, the worker
    # runs (or ran) the command: whatever goes wrong, this process must not return to
    # the in-process path, which would run it a second time.
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))  # C ints
    sock.settimeout(None)
    sock.sendmsg([cmdproto.GO], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    try:
        worker.append(int(first[3:]))
        for signum in pending:
            forward(signum, None)
        last = reader.line()
        if last.startswith(b"exit "):
            return int(last[5:])
        if last.startswith(b"signal "):
            return ("signal", int(last[7:]))
    except Exception:  # noqa: BLE001 - a connection reset, a garbled answer: the command's outcome is unknown
        pass
    # The connection ended without the worker's status. Closing it now would have the
    # server kill the worker (a client gone is a client killed): wait for the command
    # to end first, forwarding signals to it meanwhile, as it would end in-process.
    if worker:
        try:
            _wait_for_end(worker[0])
        except Exception:  # noqa: BLE001 - never a reason to run the command again
            pass
    return None


def _wait_for_end(pid: int) -> None:
    """Return once process `pid` has ended (gone, or a zombie nobody reaps)."""
    import time

    while True:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[:1]
        except FileNotFoundError:
            return
        except OSError:  # no /proc: whether the pid is still one of this user's
            try:
                os.kill(pid, 0)
            except OSError:
                return
            state = []
        if state and state[0] in (b"Z", b"X"):
            return
        time.sleep(0.02)


def fast_command(args: list[str]) -> list[str]:
    """The command line that starts `run_fast` with these arguments, for this interpreter
    and this package (absolute paths: what an installed hook runs). Where the package
    cannot be imported there (removed, or for another Python) it runs `git handoff ARGS`."""
    code = ("import sys; sys.path.insert(0, sys.argv.pop(1))\n"
            "try: from git_handoff.cmdclient import run_fast\n"
            "except Exception: import os; os.execvp('git', ['git', 'handoff', *sys.argv[1:]])\n"
            "run_fast()")
    return [sys.executable, "-I", "-S", "-c", code, os.path.dirname(PACKAGE_DIR), *args]


def _profile_fits(dir_fd: int) -> list[str] | None:
    """The server's interpreter, when this process is that interpreter started without
    `site`: the same executable, Python and package, and no directory a full start would
    add (the user site) has appeared since the server started."""
    profile = cmdproto.read_profile(dir_fd)
    if profile is None:
        return None
    interp, absent = profile
    if len(interp) < 6 or interp[1] != sys.executable or interp[2] != sys.version or interp[5] != PACKAGE_DIR:
        return None
    if any(os.path.exists(place) for place in absent):
        return None
    return interp


# `python -m git_handoff`, but of this package by its path: a launcher or hook names its
# package by path, and the interpreter's own search (with site) may find another (an
# installed copy beside a checkout the launcher was written from). Where that interpreter
# cannot import the package's dependencies, it is the plain `git handoff` (`plain_unless_importable`).
# A package directory marked `+` : the server was asked already and refused (or did not
# answer), so the full program does not ask it again.
_FULL = ("import sys, runpy, importlib.util as u\n"
         "d = sys.argv.pop(1)\n"
         "t = d.startswith('+'); d = d[t:]\n"
         "s = u.spec_from_file_location('git_handoff', d + '/__init__.py', submodule_search_locations=[d])\n"
         "m = sys.modules['git_handoff'] = u.module_from_spec(s)\n"
         "s.loader.exec_module(m)\n"
         "c = sys.modules['git_handoff.cmdclient']\n"
         "c.plain_unless_importable(sys.argv[1:])\n"
         "if t: c._tried.append(True)\n"
         "runpy.run_module('git_handoff', run_name='__main__', alter_sys=True)")

# The top-level modules of the package's dependencies (pyproject.toml [project]
# dependencies; tests/cli/test_command_server.py checks that the two name the same).
REQUIRES = ("pygit2", "click", "tomlkit", "filelock")


def plain_unless_importable(args: list[str]) -> None:
    """The fast client's full program, before anything runs: where this interpreter cannot
    find a dependency of the package (the interpreter a hook or launcher names is another
    Python's now, or a virtual environment's base interpreter without its packages), exec
    `git handoff ARGS` instead of failing on the import; return otherwise."""
    import importlib.util

    missing = [name for name in REQUIRES if importlib.util.find_spec(name) is None]
    if not missing:
        return
    try:
        os.execvp("git", ["git", "handoff", *args])
    except OSError as exc:
        sys.stderr.write(f"git handoff: {sys.executable} cannot import {missing[0]}, and git cannot be run: "
                         f"{exc.strerror}\n")
        os._exit(127)


def run_fast(argv: list[str] | None = None) -> None:
    """The fast start an installed hook uses when the command server is on:
    `python -I -S -c "...; run_fast()" ARGS`. Without `site` (and its .pth files) the
    interpreter starts in a fraction of the time; the command goes to the server as the
    full program would send it. On any doubt (no server, another interpreter or
    environment, not a served command) it becomes the full program (`python -m
    git_handoff ARGS` of this package, exec'd, the same environment), which runs the command in-process
    and starts a server where one is configured. Never returns."""
    args = sys.argv[1:] if argv is None else argv
    sys.argv = [os.path.join(PACKAGE_DIR, "__main__.py"), *args]  # as `python -m git_handoff` has it
    asked = False
    try:
        if switch() is not False and _served(args):
            git_dir = common_git_dir()
            if git_dir is not None:
                code = handoff(git_dir, fast=True)
                if code is not None and not isinstance(code, str):
                    _leave_with(code)
                asked = code == "refused"
    except Exception:  # noqa: BLE001 - any doubt: the full program
        pass
    full = [sys.executable, "-c", _FULL, ("+" if asked else "") + PACKAGE_DIR, *args]
    try:
        os.execv(full[0], full)
    except OSError as exc:
        sys.stderr.write(f"git handoff: cannot run {sys.executable}: {exc.strerror}\n")
        os._exit(127)


class _Lines:
    def __init__(self, sock: object) -> None:
        self.sock = sock
        self.buf = b""

    def line(self) -> bytes:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(256)  # type: ignore[attr-defined]  # a _socket.socket, typed object to keep the client free of the socket module
            if not chunk:
                return b""
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line


def _leave_with(code: int | tuple[str, int] | str) -> None:
    """End as the worker ended: its exit code, or death by its signal."""
    if isinstance(code, tuple):
        import _signal as signal

        signum = code[1]
        try:
            signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
            os.kill(os.getpid(), signum)
        except (OSError, ValueError):
            pass
        os._exit(128 + signum)
    assert isinstance(code, int)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
