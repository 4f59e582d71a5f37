"""The command server: one per repository, pre-imported, a forked worker per command.

Started on demand by the client (git_handoff/cmdclient.py) in a session of its own, with
/dev/null for its standard streams. It imports the heavy modules (pygit2, click, the
command tree) once, then listens on `<git dir>/handoff/cmdserver/sock` (the directory
0700, the socket 0600, both this user's; a peer of another uid is refused by
SO_PEERCRED). Beside the socket it writes its profile, for the fast client
(git_handoff/cmdproto.py). Each request carries the client's identity of the code, argv,
environment, working directory and umask; a client confined otherwise than the server
(namespaces, cgroup, seccomp, no_new_privs... in /proc) is refused. The server forks a
worker (git_handoff/cli/command_worker.py) that takes all of them on, answers `ok`, takes
the client's standard file descriptors with its go and runs the ordinary command-line
entry point; the server then reports the worker's exit status or signal. One worker per
request: no state of one command reaches the next. No peer holds the loop: every
connection is polled and read only when it has bytes.

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
import select
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
           "git_handoff.ops.attempts", "git_handoff.ops.sessions", "git_handoff.ops.claim",
           "git_handoff.ops.open_state",
           "git_handoff.ops.hook_decisions", "git_handoff.state.store", "git_handoff.state.claim_index",
           "git_handoff.state.status_index", "git_handoff.infra.gitrepo", "git_handoff.state.notices",
           "git_handoff.infra.worktree", "git_handoff.infra.task_commands", "git_handoff.cli.sync",
           "git_handoff.ops.sync")
MAX_REQUEST = 4 << 20
LOG_LIMIT = 1 << 20
# A connection sends its whole request within this many seconds of its accept or is
# dropped; at most MAX_PENDING are read at once (the oldest goes first). A client sends
# its request in one write as it connects: only a peer that is not one waits this long.
REQUEST_SECONDS = 5.0
MAX_PENDING = 64
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)  # Linux >= 6.5; Python names it from 3.12


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
        self.watched: dict[int, int] = {}  # a worker's connection (fd) -> the worker's pid
        self.pending: dict[int, _Pending] = {}  # connections whose request is still coming (by fd)
        self.stopping = False
        self.last = time.monotonic()
        self.confinement: list[str] | None = None

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
        self.confinement = confinement("self")
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
        """One thread, never blocked by a peer: the listener, every request still coming and
        every worker's connection are polled together, and each is read only when it has
        something (docs/command-server.md, "Peers that hold the server")."""
        assert self.listener is not None
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._stop)
        self.poller = select.poll()
        self.poller.register(self.listener.fileno(), select.POLLIN)
        self.poller.register(wake_r, select.POLLIN)
        self.wake_fds = (wake_r, wake_w)
        while not self._over():
            if not self.stopping and not self._socket_is_ours():
                self.stopping = True
                continue
            wait = min(1.0, self.idle)
            if self.pending:
                wait = min(wait, max(0.0, min(p.deadline for p in self.pending.values()) - time.monotonic()))
            for fd, _events in self.poller.poll(wait * 1000):
                self._ready(fd, wake_r)

    def _over(self) -> bool:
        """A turn's bookkeeping (ended workers reaped, late requests dropped, the listener
        closed once stopping); True when the server ends: stopped with no worker left, or idle."""
        self._reap()
        self._expire()
        if self.stopping and not self.workers:
            self.note("stop")
            return True
        if self.stopping:
            self._stop_listening()
        if not self.workers and not self.pending and time.monotonic() - self.last > self.idle:
            self.note("idle exit")
            return True
        return False

    def _ready(self, fd: int, wake_r: int) -> None:
        """Act on one descriptor the poll found ready."""
        if fd == wake_r:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        elif self.listener is not None and fd == self.listener.fileno():
            if not self.stopping:
                self._accept()
        elif fd in self.pending:
            self._read_request(fd)
        elif fd in self.watched:
            self._client_gone(fd)

    def _stop(self, *_: object) -> None:
        self.stopping = True

    def _stop_listening(self) -> None:
        """Once stopping, while workers still run: no client may wait on a listener nobody
        accepts on (it would hang until they end), so the socket goes now, and so do the
        requests still coming (their clients run in their own process); a new client then
        runs in its own process or starts a fresh server."""
        if self.listener is None:
            return
        self.poller.unregister(self.listener.fileno())
        for fd in list(self.pending):
            self._drop(fd)
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
            self._unwatch(conn)
            if os.WIFSIGNALED(status):
                report = f"signal {os.WTERMSIG(status)}\n"
            else:
                report = f"exit {os.waitstatus_to_exitcode(status)}\n"
            self.note(f"worker {pid}: {report.strip()}")
            try:
                conn.send(report.encode())  # a few bytes into an empty buffer: never blocks
            except OSError:
                pass
            conn.close()

    def _unwatch(self, conn: socket.socket) -> None:
        fd = conn.fileno()
        if self.watched.pop(fd, None) is not None:
            self.poller.unregister(fd)

    def _client_gone(self, fd: int) -> None:
        """A worker's client hung up (the poll asks only for that, never reads: what the
        client sends after its request is the worker's). It was killed outright (SIGKILL, no
        chance to forward anything), or it gave up before the worker started: its command
        dies with it, as it would have in-process."""
        pid = self.watched.pop(fd)
        self.poller.unregister(fd)
        self.note(f"worker {pid}: its client is gone, killed")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass

    # -- requests -------------------------------------------------------------------------

    def _accept(self) -> None:
        """Take every waiting connection; read none of them here. A peer of another uid is
        closed unanswered; the others wait, each on its own, for their requests."""
        assert self.listener is not None
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # out of fds: the connection stays in the backlog until one is free
            self.last = time.monotonic()
            conn.setblocking(False)
            try:
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            except OSError:
                conn.close()
                continue
            pid = int.from_bytes(creds[0:4], sys.byteorder)
            uid = int.from_bytes(creds[4:8], sys.byteorder)
            if uid != os.geteuid():
                self.note(f"refused a peer of uid {uid}")
                conn.close()  # another user: closed unanswered
                continue
            if len(self.pending) >= MAX_PENDING:
                oldest = min(self.pending, key=lambda fd: self.pending[fd].deadline)
                self.note("dropped a connection: too many requests still coming")
                self._drop(oldest)
            self.pending[conn.fileno()] = _Pending(conn, pid, _peer_pidfd(conn), time.monotonic() + REQUEST_SECONDS)
            self.poller.register(conn.fileno(), select.POLLIN)

    def _expire(self) -> None:
        now = time.monotonic()
        for fd in [fd for fd, p in self.pending.items() if p.deadline <= now]:
            self.note(f"dropped a connection that sent no whole request in {REQUEST_SECONDS:g}s")
            self._drop(fd)

    def _drop(self, fd: int, answer: bytes | None = None) -> None:
        """The request of connection `fd` is done with: answered (a refusal) or not, closed
        with the descriptors it brought."""
        p = self.pending.pop(fd)
        self.poller.unregister(fd)
        if answer is not None and p.conn is not None:
            _send(p.conn, answer)
        p.close()

    def _read_request(self, fd: int) -> None:
        """What connection `fd` has sent so far, without waiting; once its request is whole,
        the answer."""
        p = self.pending[fd]
        assert p.conn is not None
        try:
            data, ancdata, _flags, _addr = p.conn.recvmsg(65536, socket.CMSG_SPACE(3 * 4))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, ancdata = b"", []
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                p.fds += [int.from_bytes(payload[i:i + 4], sys.byteorder) for i in range(0, len(payload) - 3, 4)]
        if not data:
            self._drop(fd)  # gone before its request was whole
            return
        p.data += data
        head = len(cmdproto.MAGIC) + 8
        if len(p.data) < head:
            return
        if not p.data.startswith(cmdproto.MAGIC):
            self._drop(fd, b"refused bad request\n")
            return
        size = int.from_bytes(p.data[len(cmdproto.MAGIC) + 4:head], "big")
        if size > MAX_REQUEST or len(p.data) > head + size:
            self._drop(fd, b"refused bad request\n")
            return
        if len(p.data) < head + size:
            return
        fields = cmdproto.unframe(bytes(p.data))
        self.pending.pop(fd)
        self.poller.unregister(fd)
        try:
            self._answer(p, fields or [])
        finally:
            p.close()

    def _answer(self, p: _Pending, fields: list[bytes]) -> None:
        """A whole request: refused (a reason on one line), stale, or a worker forked to run
        it, whose connection is then watched for its client's end."""
        conn = p.conn
        assert conn is not None
        if p.fds or not fields:  # the descriptors come with the go, to the worker
            _send(conn, b"refused bad request\n")
            return
        differs = self._confined_otherwise(p)
        if differs:
            _send(conn, b"refused another confinement\n")
            self.note(f"refused a client confined otherwise ({differs}): it runs in its own process")
            return
        if fields[0] != self.identity + b"\0\0" + self.config:
            if cmdproto.identity(_environ()) != self.identity or not self._config_keeps_serving():
                _send(conn, b"stale\n")
                self.note("stale: the code or the git config changed since the start")
                self.stopping = True  # a fresh server will start
                return
            if fields[0] != self.identity + b"\0\0" + self.config:
                _send(conn, b"refused another interpreter or environment\n")
                self.note("refused a client of another interpreter, code or environment")
                return
        try:
            pid = os.fork()
        except OSError:
            return  # closed unanswered: the client runs the command itself
        if pid == 0:
            self._worker(conn, fields[1:])  # never returns
        self.workers[pid] = conn
        self.watched[conn.fileno()] = pid
        self.poller.register(conn.fileno(), select.POLLRDHUP)
        self.note(f"worker {pid}: {_command(fields)}")
        p.conn = None  # kept for the exit report

    def _confined_otherwise(self, p: _Pending) -> str:
        """What of the client's confinement differs from the server's ("" when nothing): a
        worker runs with the server's, so a client in another sandbox is not served."""
        if p.pid <= 0:
            return "its process is not visible here"
        theirs = confinement(p.pid)
        if p.pidfd is not None and select.select([p.pidfd], [], [], 0)[0]:
            return "its process ended"  # the pid read above may be another process's by now
        if theirs is None or self.confinement is None:
            return "its /proc cannot be read"
        return ", ".join(mine.split(" ", 1)[0] for mine, other in zip(self.confinement, theirs, strict=True)
                         if mine != other)

    # -- the worker ---------------------------------------------------------------------

    def _worker(self, conn: socket.socket, fields: list[bytes]) -> None:
        try:
            # the forwarded signals wait until the command runs (command_worker.run): one
            # landing while the worker waits for its client's go would end it unreported
            signal.pthread_sigmask(signal.SIG_BLOCK, command_worker.forwarded_signals())
            signal.set_wakeup_fd(-1)
            for fd in self.wake_fds:
                os.close(fd)
            if self.listener is not None:  # gone already when the server was stopping
                self.listener.close()
            for other in self.workers.values():
                other.close()
            for other_request in self.pending.values():  # nor another client's pipes
                other_request.close()
            for fd in (self.lock_fd, self.log_fd, self.dir_fd):
                os.close(fd)
            conn.setblocking(True)
            command_worker.take_on(fields)
            conn.sendall(f"ok {os.getpid()}\n".encode())
            # The client's go, with its fds 0-2: it still waits for this command (one that
            # gave up on a slow answer runs it itself, and then this worker must not). Its
            # descriptors travel only now: a server that never answered holds none of them
            # (a caller reading the command's stdout to its end would wait on it).
            go, ancdata, _flags, _addr = conn.recvmsg(len(cmdproto.GO), socket.CMSG_SPACE(3 * 4))
            fds = [int.from_bytes(payload[i:i + 4], sys.byteorder)
                   for level, kind, payload in ancdata if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
                   for i in range(0, len(payload) - 3, 4)]
            if go != cmdproto.GO or len(fds) != 3:
                os._exit(70)
            command_worker.take_fds(fds)
        except BaseException:  # noqa: BLE001 - the worker must end here, never in the server's loop
            os._exit(70)
        command_worker.run()


class _Pending:
    """A connection whose request is still coming: what it sent so far, the descriptors it
    passed, its peer's pid (SO_PEERCRED) and pidfd, and when it is dropped."""

    __slots__ = ("conn", "data", "deadline", "fds", "pid", "pidfd")

    def __init__(self, conn: socket.socket, pid: int, pidfd: int | None, deadline: float) -> None:
        self.conn: socket.socket | None = conn
        self.pid = pid
        self.pidfd = pidfd
        self.deadline = deadline
        self.data = bytearray()
        self.fds: list[int] = []

    def close(self) -> None:
        """Close what the server holds of it (the connection unless a worker took it)."""
        for fd in [*self.fds, *([self.pidfd] if self.pidfd is not None else [])]:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds, self.pidfd = [], None
        if self.conn is not None:
            self.conn.close()


def _send(conn: socket.socket, answer: bytes) -> None:
    try:
        conn.send(answer)
    except OSError:
        pass


def _peer_pidfd(conn: socket.socket) -> int | None:
    """A pidfd of the connecting process (Linux >= 6.5), to know it has not ended while its
    /proc was read; None where the kernel has none."""
    try:
        return int(conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD))
    except OSError:
        return None


# -- confinement -----------------------------------------------------------------------------

NAMESPACES = ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup")
# the lines of /proc/<pid>/status that say what the process may do
STATUS_LINES = ("Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "Seccomp_filters",
                "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def confinement(pid: int | str) -> list[str] | None:
    """How process `pid` ("self": this one) is confined, as /proc shows it, one "what value"
    item each: its namespaces, root directory, cgroups, LSM label, ids, no_new_privs,
    seccomp mode and filter count, capabilities. None when it cannot be read (another
    user's, gone). Two processes with the same list run under the same sandbox; Landlock
    shows nowhere, but an unprivileged process must set no_new_privs to apply it."""
    base = f"/proc/{pid}"
    items = []
    try:
        for ns in NAMESPACES:
            try:
                items.append(f"ns/{ns} {os.readlink(f'{base}/ns/{ns}')}")
            except FileNotFoundError:
                if not os.path.isdir(base):
                    return None
                items.append(f"ns/{ns} -")  # a kernel without this kind of namespace
        root = os.stat(f"{base}/root")
        items.append(f"root {root.st_dev}:{root.st_ino}")
        with open(f"{base}/cgroup", "rb") as f:
            items.append(f"cgroup {f.read().decode(errors='replace')!r}")
        try:
            with open(f"{base}/attr/current", "rb") as f:
                items.append(f"lsm {f.read().decode(errors='replace').strip()}")
        except OSError:
            items.append("lsm -")
        with open(f"{base}/status", "rb") as f:
            status = dict(line.decode(errors="replace").split(":", 1) for line in f if b":" in line)
    except OSError:
        return None
    items += [f"{key} {status.get(key, '-').split()}" for key in STATUS_LINES]
    return items


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
