"""Ways to serve one bare remote on 127.0.0.1, for the fleet bench and tests:
`git daemon`, smart HTTP (`git http-backend` behind a small threaded web server), and
a delay proxy in front of a daemon that models a forge's round trip.

Every server is a separate process with a bounded lifetime: coreutils `timeout`
around it, a parent-death signal, and (for the Python ones) a timer of its own, so
a killed or timed-out run leaves nothing behind. Each is a context manager that
yields the URL and stops the server on exit.

    python -m tests.support.transports http --root DIR --port N [--lifetime S]
    python -m tests.support.transports proxy --port N --upstream PORT --delay-ms D [--stats FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hmac
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.remotes import _die_with_parent, _free_port, _git_daemon

ROOT = Path(__file__).resolve().parents[2]
LIFETIME = 3600  # seconds: longer than any bench run (K = 32 on 2 cores), short enough to bound a leak


def _wait_listening(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{what} did not start on 127.0.0.1:{port}") from None
            time.sleep(0.05)


@contextlib.contextmanager
def _serving(argv: list[str], port: int, what: str, *, stderr: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    err = open(stderr, "ab") if stderr else subprocess.DEVNULL  # noqa: SIM115 - closed below
    proc = subprocess.Popen(["timeout", "--kill-after=5", str(LIFETIME), *argv], stdout=subprocess.DEVNULL,
                            stderr=err, preexec_fn=_die_with_parent, env=env, cwd=ROOT)
    try:
        _wait_listening(port, proc, what)
        yield proc
    finally:
        proc.terminate()  # `timeout` passes it on
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if stderr:
            err.close()  # type: ignore[union-attr]


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """`git daemon` serving every repository under `base` (push enabled); yields the
    URL prefix `git://127.0.0.1:PORT` (append `/name.git`)."""
    port = _free_port()
    argv = [_git_daemon(), "--reuseaddr", f"--base-path={base}", "--export-all", "--enable=receive-pack",
            "--listen=127.0.0.1", f"--port={port}", "--max-connections=0", "--informative-errors", str(base)]
    with _serving(argv, port, "git daemon"):
        yield f"git://127.0.0.1:{port}"


@contextlib.contextmanager
def smart_http(base: Path, users: Path | None = None) -> Iterator[str]:
    """Smart HTTP: `git http-backend` (CGI) behind a threaded web server; yields
    `http://127.0.0.1:PORT`. Pushing needs `http.receivepack true` in the bare repo.
    With `users` (a file of `name:password` lines), every request needs HTTP basic
    authentication as one of them (401 otherwise), and git http-backend and the
    repository's hooks see the name as REMOTE_USER, as behind any web server."""
    port = _free_port()
    argv = [sys.executable, "-m", "tests.support.transports", "http", "--root", str(base), "--port", str(port),
            "--lifetime", str(LIFETIME)] + (["--users", str(users)] if users else [])
    with _serving(argv, port, "smart HTTP server"):
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def delay_proxy(upstream_port: int, delay_ms: float, stats: Path | None = None) -> Iterator[int]:
    """A TCP proxy on 127.0.0.1 that holds every client->server burst for `delay_ms`
    before passing it on (so each request/response round trip costs at least that);
    yields its port. With `stats`, one line per connection is appended there:
    `<service> <bytes client->server> <bytes server->client>`."""
    port = _free_port()
    argv = [sys.executable, "-m", "tests.support.transports", "proxy", "--port", str(port),
            "--upstream", str(upstream_port), "--delay-ms", str(delay_ms), "--lifetime", str(LIFETIME)]
    if stats:
        argv += ["--stats", str(stats)]
    with _serving(argv, port, "delay proxy"):
        yield port


def read_proxy_stats(stats: Path, settle: float = 30.0) -> dict[str, list[int]]:
    """Per service: [connections, bytes client->server, bytes server->client], once
    every connection the proxy holds has closed (its last bytes wait out the delay)."""
    deadline = time.monotonic() + settle
    live = stats.with_name(stats.name + ".open")
    while live.exists() and live.read_text().strip() not in ("", "0") and time.monotonic() < deadline:
        time.sleep(0.05)
    out: dict[str, list[int]] = {}
    if not stats.exists():
        return out
    for line in stats.read_text().splitlines():
        service, up, down = line.split()
        row = out.setdefault(service, [0, 0, 0])
        row[0] += 1
        row[1] += int(up)
        row[2] += int(down)
    return out


# -- the servers themselves (run as `python -m tests.support.transports ...`) --------------


class _CgiHandler(BaseHTTPRequestHandler):
    """Hands every request to `git http-backend` as CGI/1.1 and relays its answer with
    the status it names (chunked request bodies are decoded first)."""

    protocol_version = "HTTP/1.1"
    root = ""
    users: dict[str, str] = {}  # name -> password; empty: no authentication

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _cgi(self) -> None:
        path, _, query = self.path.partition("?")
        body = self._body()
        user = self._user()
        if self.users and user is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git handoff test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        if user is not None:
            env.update(REMOTE_USER=user, AUTH_TYPE="Basic")
        env.update(GIT_PROJECT_ROOT=self.root, GIT_HTTP_EXPORT_ALL="1", REQUEST_METHOD=self.command,
                   PATH_INFO=path, QUERY_STRING=query, CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)), REMOTE_ADDR=self.client_address[0],
                   SERVER_PROTOCOL="HTTP/1.1", GATEWAY_INTERFACE="CGI/1.1")
        for header in ("Content-Encoding", "Git-Protocol"):
            if self.headers.get(header):
                env["HTTP_" + header.upper().replace("-", "_")] = self.headers[header]
        proc = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env)
        out = proc.stdout
        crlf, lf = out.find(b"\r\n\r\n"), out.find(b"\n\n")
        if crlf >= 0 and (lf < 0 or crlf <= lf):
            head, payload = out[:crlf], out[crlf + 4:]
        elif lf >= 0:
            head, payload = out[:lf], out[lf + 2:]
        else:
            head, payload = b"", out
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        if proc.returncode != 0 and not head:
            status, payload = 500, proc.stderr
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _user(self) -> str | None:
        """The name of a valid basic authentication, else None."""
        scheme, _, value = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        expected = self.users.get(name)
        return name if expected is not None and hmac.compare_digest(expected, password) else None

    do_GET = _cgi
    do_POST = _cgi


def _serve_http(root: str, port: int, users: str | None = None) -> None:
    _CgiHandler.root = root
    if users:
        lines = Path(users).read_text().splitlines()
        _CgiHandler.users = dict(line.split(":", 1) for line in lines if ":" in line)
    server = ThreadingHTTPServer(("127.0.0.1", port), _CgiHandler)
    server.daemon_threads = True
    server.serve_forever()


async def _proxy(port: int, upstream: int, delay: float, stats: str | None) -> None:
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hold: float,
                   count: list[int], first: list[bytes] | None) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def sender() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            with contextlib.suppress(OSError):
                writer.write_eof()

        task = asyncio.create_task(sender())
        try:
            while True:
                data = await reader.read(65536)
                if first is not None and not first:
                    first.append(data[:200])
                count[0] += len(data)
                await queue.put((time.monotonic() + hold, data))
                if not data:
                    break
        except OSError:
            await queue.put((0.0, b""))
        with contextlib.suppress(OSError):
            await task

    live = [0]

    def set_live(delta: int) -> None:
        live[0] += delta
        if stats:
            Path(stats + ".open").write_text(f"{live[0]}\n")

    async def handle(creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        set_live(+1)
        try:
            await relay(creader, cwriter)
        finally:
            set_live(-1)

    async def relay(creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            ureader, uwriter = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            cwriter.close()
            return
        up, down, first = [0], [0], []  # type: ignore[var-annotated]
        await asyncio.gather(pipe(creader, uwriter, delay, up, first), pipe(ureader, cwriter, 0.0, down, None),
                             return_exceptions=True)
        for w in (uwriter, cwriter):
            w.close()
        if stats:
            head = first[0] if first else b""
            service = "receive-pack" if b"git-receive-pack" in head else (
                "upload-pack" if b"git-upload-pack" in head else "other")
            with open(stats, "a") as f:
                f.write(f"{service} {up[0]} {down[0]}\n")

    server = await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.transports")
    sub = parser.add_subparsers(dest="what", required=True)
    http = sub.add_parser("http")
    http.add_argument("--root", required=True)
    http.add_argument("--port", type=int, required=True)
    http.add_argument("--lifetime", type=float, default=LIFETIME)
    http.add_argument("--users")
    proxy = sub.add_parser("proxy")
    proxy.add_argument("--port", type=int, required=True)
    proxy.add_argument("--upstream", type=int, required=True)
    proxy.add_argument("--delay-ms", type=float, default=100.0)
    proxy.add_argument("--stats")
    proxy.add_argument("--lifetime", type=float, default=LIFETIME)
    args = parser.parse_args(argv)
    _die_with_parent()
    # a lifetime of its own, whatever the parent does
    threading.Timer(args.lifetime, lambda: os._exit(0)).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    if args.what == "http":
        _serve_http(args.root, args.port, args.users)
    else:
        asyncio.run(_proxy(args.port, args.upstream, args.delay_ms / 1000.0, args.stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
