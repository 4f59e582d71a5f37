"""The command server: one per repository, pre-imported, a forked worker per command.

Started on demand by the client (git_handoff/cmdclient.py) in a session of its own, with
/dev/null for its standard streams. It imports the heavy modules (pygit2, click, the
command tree) once, then listens on `<git dir>/handoff/cmdserver/sock` (the directory
0700, the socket 0600, both this user's; a peer of another uid is refused by
SO_PEERCRED). Beside the socket it writes its profile, for the fast client
(git_handoff/cmdproto.py). Each request carries the client's identity of the code, argv,
environment, working directory, umask and standard file descriptors; the server forks a
worker (git_handoff/cli/command_worker.py) that takes all of them on and runs the
ordinary command-line entry point, then reports the worker's exit status or signal.
One worker per request: no state of one command reaches the next.

It exits when idle for `handoff.commandServerIdle` seconds (or HANDOFF_COMMAND_SERVER_IDLE;
120 by default), when its socket is removed or replaced, when the switch is turned off,
and at once when its code or the git config files changed since it started (the client
then uses the in-process path; the next call starts a fresh server). See
docs/command-server.md.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import os
import selectors
import signal
import socket
import sys
import time

from git_handoff import cmdclient, cmdproto
from git_handoff.cli import command_worker

DEFAULT_IDLE_SECONDS = 120.0
# What the served commands import, once for all workers. A name missing here (a module
# moved) only costs its importer the import in each worker: it is skipped, not fatal.
PRELOAD = ("pygit2", "click", "json", "tomllib", "git_handoff.cli", "git_handoff.cli.tasks", "git_handoff.cli.work",
           "git_handoff.cli.session", "git_handoff.cli.hooks", "git_handoff.cli.revise",
           "git_handoff.ops.hook_entry", "git_handoff.ops.tasks", "git_handoff.ops.views", "git_handoff.ops.work",
           "git_handoff.ops.attempts", "git_handoff.ops.sessions", "git_handoff.ops.claim", "git_handoff.ops.open_state",
           "git_handoff.ops.hook_decisions", "git_handoff.state.store", "git_handoff.state.claim_index",
           "git_handoff.state.status_index", "git_handoff.infra.gitrepo", "git_handoff.state.notices",
           "git_handoff.infra.worktree", "git_handoff.infra.task_commands", "git_handoff.cli.sync", "git_handoff.ops.sync")
MAX_REQUEST = 4 << 20
LOG_LIMIT = 1 << 20


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m git_handoff.cli.command_server GIT_DIR")
    git_dir = os.path.realpath(args[0])
    interp = cmdproto.interpreter()
    start_identity = cmdproto.identity(os.environ, interp)
    if not _turned_on(git_dir):
        return
    server = Server(git_dir, start_identity, idle_seconds(git_dir), interp)
    if not server.open():
        return
    try:
        server.serve()
    finally:
        server.close()
    os._exit(0)


def _turned_on(git_dir: str) -> bool:
    """HANDOFF_COMMAND_SERVER, else handoff.commandServer, says the server is on."""
    on = cmdclient.switch()
    return on is True or (on is None and cmdproto.configured(git_dir))


def idle_seconds(git_dir: str) -> float:
    value = os.environ.get(cmdclient.ENV_IDLE)
    if value is None:
        import subprocess

        proc = subprocess.run(["git", "--git-dir", git_dir, "config", "--type=int", "--get",
                               "handoff.commandServerIdle"], capture_output=True, text=True, check=False)
        value = proc.stdout.strip() or None
    try:
        return max(0.1, float(value)) if value is not None else DEFAULT_IDLE_SECONDS
    except ValueError:
        return DEFAULT_IDLE_SECONDS


class Server:
    def __init__(self, git_dir: str, identity: bytes, idle: float, interp: list[str] | None = None) -> None:
        self.git_dir = git_dir
        self.identity = identity
        self.interp = cmdproto.interpreter() if interp is None else interp
        self.config = cmdproto.config_stamp(git_dir)
        self.idle = idle
        self.dir_fd = -1
        self.lock_fd = -1
        self.log_fd = -1
        self.listener: socket.socket | None = None
        self.inode: tuple[int, int] | None = None
        self.workers: dict[int, socket.socket] = {}
        self.stopping = False
        self.last = time.monotonic()

    # -- start and stop -----------------------------------------------------------------

    def open(self) -> bool:
        where = cmdclient.server_dir(self.git_dir)
        try:
            os.makedirs(os.path.dirname(where), exist_ok=True)
            os.mkdir(where, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
        fd = cmdclient.private_dir_fd(where)
        if fd is None:
            return False
        self.dir_fd = fd
        self.lock_fd = os.open("lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        if not _lock(self.lock_fd):
            return False  # another server of this repository holds it
        self.log_fd = os.open("log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        if os.fstat(self.log_fd).st_size > LOG_LIMIT:
            os.ftruncate(self.log_fd, 0)
        for name in PRELOAD:
            try:
                __import__(name)
            except ImportError:
                self.note(f"preload: no module {name}")
        from git_handoff.core import patterns

        patterns.compile_all()  # the preloaded modules' regular expressions, not once per worker
        command_worker.keep_stdio()
        gc.collect()
        gc.freeze()  # what the imports made is never walked again, nor copied by a worker's gc
        self._write_profile()
        try:
            os.unlink(cmdclient.SOCKET_NAME, dir_fd=fd)
        except FileNotFoundError:
            pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(cmdclient.socket_address(fd))
        finally:
            os.umask(old)
        listener.listen(64)
        listener.setblocking(False)
        self.listener = listener
        st = os.stat(cmdclient.SOCKET_NAME, dir_fd=fd, follow_symlinks=False)
        self.inode = (st.st_dev, st.st_ino)
        self.note(f"start {os.getpid()} idle {self.idle:g}s")
        return True

    def _config_keeps_serving(self) -> bool:
        """The git config files changed since they were last stamped: whether this server
        goes on. Nothing of the config lives in the server (each worker opens the
        repository afresh), so it goes on while the config still turns it on; its idle
        time is read again. A fleet's clone writes its config twice early on (its first
        sync's refspecs, its first note's rewriteRef): each was a server started anew."""
        stamp = cmdproto.config_stamp(self.git_dir)
        if stamp == self.config:
            return True
        if not _turned_on(self.git_dir):
            return False
        self.config = stamp
        self.idle = idle_seconds(self.git_dir)
        self.note(f"the git config changed; still on, idle {self.idle:g}s")
        return True

    def _write_profile(self) -> None:
        """The profile the fast client reads (cmdproto.read_profile), replaced whole."""
        import site

        user = getattr(site, "USER_SITE", None)
        absent = [user] if site.ENABLE_USER_SITE and user and user not in sys.path else []
        data = cmdproto.profile_bytes(self.interp, absent)
        tmp = f"{cmdproto.PROFILE_NAME}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=self.dir_fd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, cmdproto.PROFILE_NAME, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)

    def note(self, line: str) -> None:
        """One line in the server's log (`cmdserver/log`, beside the socket): what it served and why
        it refused or ended, for a person (and the tests) to see which path a command took."""
        try:
            os.write(self.log_fd, f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n".encode(errors="replace"))
        except OSError:
            pass

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            if self._socket_is_ours():
                try:
                    os.unlink(cmdclient.SOCKET_NAME, dir_fd=self.dir_fd)
                except OSError:
                    pass

    def _socket_is_ours(self) -> bool:
        try:
            st = os.stat(cmdclient.SOCKET_NAME, dir_fd=self.dir_fd, follow_symlinks=False)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self.inode

    # -- the loop -------------------------------------------------------------------------

    def serve(self) -> None:
        assert self.listener is not None
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._stop)
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ, "accept")
        selector.register(wake_r, selectors.EVENT_READ, "wake")
        self.wake_fds = (wake_r, wake_w)
        self.selector = selector
        while True:
            self._reap()
            if self.stopping and not self.workers:
                self.note("stop")
                return
            if self.stopping:
                self._stop_listening()
            if not self.workers and time.monotonic() - self.last > self.idle:
                self.note("idle exit")
                return
            if not self.stopping and not self._socket_is_ours():
                self.stopping = True
                continue
            for key, _ in selector.select(timeout=min(1.0, self.idle)):
                if key.data == "wake":
                    try:
                        while os.read(wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                elif key.data == "accept":
                    if not self.stopping:
                        self._accept()
                else:
                    self._client_readable(key.data)

    def _stop(self, *_: object) -> None:
        self.stopping = True

    def _stop_listening(self) -> None:
        """Once stopping, while workers still run: no client may wait on a listener nobody
        accepts on (it would hang until they end), so the socket goes now; a new client
        then runs in its own process or starts a fresh server."""
        if self.listener is None:
            return
        self.selector.unregister(self.listener)
        self.close()
        self.listener = None

    def _reap(self) -> None:
        while self.workers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.workers.pop(pid, None)
            self.last = time.monotonic()
            if conn is None:
                continue
            try:
                self.selector.unregister(conn)
            except (KeyError, ValueError):
                pass  # already, when its client went away
            if os.WIFSIGNALED(status):
                report = f"signal {os.WTERMSIG(status)}\n"
            else:
                report = f"exit {os.waitstatus_to_exitcode(status)}\n"
            self.note(f"worker {pid}: {report.strip()}")
            try:
                conn.setblocking(True)
                conn.sendall(report.encode())
            except OSError:
                pass
            conn.close()

    def _client_readable(self, pid: int) -> None:
        """A client says nothing after its request: readable means it is gone (killed
        outright, SIGKILL, no chance to forward anything). Its command dies with it, as it
        would have in-process."""
        conn = self.workers.get(pid)
        if conn is None:
            return
        try:
            data = conn.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.selector.unregister(conn)
            self.note(f"worker {pid}: its client is gone, killed")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        self.last = time.monotonic()
        fds: list[int] = []
        try:
            conn.setblocking(True)
            conn.settimeout(5)
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            uid = int.from_bytes(creds[4:8], sys.byteorder)
            if uid != os.geteuid():
                self.note(f"refused a peer of uid {uid}")
                return  # another user: closed unanswered
            fields, fds = _receive(conn)
            if len(fds) != 3 or not fields:
                conn.sendall(b"refused bad request\n")
                return
            if fields[0] != self.identity + b"\0\0" + self.config:
                if cmdproto.identity(_environ()) != self.identity or not self._config_keeps_serving():
                    conn.sendall(b"stale\n")
                    self.note("stale: the code or the git config changed since the start")
                    self.stopping = True  # a fresh server will start
                    return
                if fields[0] != self.identity + b"\0\0" + self.config:
                    conn.sendall(b"refused another interpreter or environment\n")
                    self.note("refused a client of another interpreter, code or environment")
                    return
            pid = os.fork()
            if pid == 0:
                self._worker(conn, fields[1:], fds)  # never returns
            self.workers[pid] = conn
            conn.setblocking(False)
            self.selector.register(conn, selectors.EVENT_READ, pid)
            self.note(f"worker {pid}: {_command(fields)}")
            conn = None  # type: ignore[assignment]  # kept for the exit report
        except (OSError, ValueError):
            pass
        finally:
            for fd in fds:  # the worker has its own copies
                try:
                    os.close(fd)
                except OSError:
                    pass
            if conn is not None:
                conn.close()

    # -- the worker ---------------------------------------------------------------------

    def _worker(self, conn: socket.socket, fields: list[bytes], fds: list[int]) -> None:
        try:
            signal.set_wakeup_fd(-1)
            self.selector.close()
            for fd in self.wake_fds:
                os.close(fd)
            if self.listener is not None:  # gone already when the server was stopping
                self.listener.close()
            for other in self.workers.values():
                other.close()
            for fd in (self.lock_fd, self.log_fd, self.dir_fd):
                os.close(fd)
            conn.settimeout(None)
            command_worker.take_on(fields, fds)
            conn.sendall(f"ok {os.getpid()}\n".encode())
        except BaseException:  # noqa: BLE001 - the worker must end here, never in the server's loop
            os._exit(70)
        command_worker.run()


def _lock(fd: int, wait: float = 10.0) -> bool:
    """The server's lock, waited for a while: a stale server that refused a client still
    finishes its running workers before it lets go."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def _command(fields: list[bytes]) -> str:
    """The served command's first two words, for the log (never its environment)."""
    try:
        argc = int(fields[4])
        return " ".join(a.decode("utf-8", "replace") for a in fields[6:5 + min(argc, 3)])
    except (IndexError, ValueError):
        return "?"


def _environ() -> dict[str, str]:
    return dict(os.environ)


def _receive(conn: socket.socket) -> tuple[list[bytes], list[int]]:
    fds: list[int] = []
    data, ancdata, _flags, _addr = conn.recvmsg(65536, socket.CMSG_SPACE(3 * 4))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[i:i + 4], sys.byteorder) for i in range(0, len(payload) - 3, 4)]
    head = len(cmdproto.MAGIC) + 8
    while len(data) < head:
        more = conn.recv(65536)
        if not more:
            return [], fds
        data += more
    if not data.startswith(cmdproto.MAGIC):
        return [], fds
    count = int.from_bytes(data[len(cmdproto.MAGIC):len(cmdproto.MAGIC) + 4], "big")
    size = int.from_bytes(data[len(cmdproto.MAGIC) + 4:head], "big")
    if size > MAX_REQUEST:
        return [], fds
    body = bytearray(data[head:])
    while len(body) < size:
        more = conn.recv(65536)
        if not more:
            return [], fds
        body += more
    fields, at = [], 0
    for _ in range(count):
        n = int.from_bytes(body[at:at + 4], "big")
        fields.append(bytes(body[at + 4:at + 4 + n]))
        at += 4 + n
    return fields, fds


def is_running(git_dir: str) -> bool:
    """Whether a server of this repository answers on its socket (for tests and `status`)."""
    fd = cmdclient.private_dir_fd(cmdclient.server_dir(git_dir))
    if fd is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(cmdclient.socket_address(fd))
        return True
    except OSError as exc:
        return exc.errno not in (errno.ENOENT, errno.ECONNREFUSED)
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
