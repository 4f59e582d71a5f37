"""`git handoff serve`: the dashboard's HTTP server (stdlib, one thread per request).

Read-only by construction: only GET and HEAD are answered; every other method gets
405 and touches nothing. Each request opens the repository afresh and reads the state
at its current commit, so the server follows commits, syncs, even a state created or
deleted while it runs, and a broken state shows an error page instead of stopping it.
`/events` is a server-sent-event stream announcing each new state commit; the
overview page's script then fetches `/api/live` and swaps the changed fragments in.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from git_handoff.core.errors import HandoffError, NotInitialized
from git_handoff.dashboard import pages
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.snapshot import STATE_REF
from git_handoff.state.store import StateStore

EVENT_POLL_SECONDS = 0.25
EVENT_KEEPALIVE_SECONDS = 10.0
STOP_POLL_SECONDS = 0.05


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, root: Path, host: str, port: int) -> None:
        self.root = root
        self.stopping = threading.Event()
        super().__init__((host, port), Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def store(self) -> StateStore:
        """The state as it is now, for one request to read. `serve` opened it through the one
        door (ops/open_state.py) when it started; a request only reads, so it changes nothing."""
        return StateStore(Repo.discover(self.root))

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()


class Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "git-handoff-dashboard"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        return  # a dashboard left open would otherwise fill the terminal

    # -- read-only: everything but GET/HEAD is refused ----------------------------------

    def __getattr__(self, name: str) -> Callable[[], None]:
        if name.startswith("do_"):
            return self._refuse
        raise AttributeError(name)

    def _refuse(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"read-only dashboard: only GET and HEAD\n",
                   "text/plain; charset=utf-8", extra={"Allow": "GET, HEAD"})

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    # -- routing -------------------------------------------------------------------------

    def _host_allowed(self) -> bool:
        """On loopback, only requests addressed to loopback: a web page elsewhere that
        rebinds its own name to 127.0.0.1 (DNS rebinding) cannot read the state."""
        host, port = self.server.server_address[:2]
        if host not in ("127.0.0.1", "::1"):
            return True
        asked = (self.headers.get("Host") or "").lower()
        return asked in {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}

    def _route(self, head: bool) -> None:
        if not self._host_allowed():
            self._send(HTTPStatus.FORBIDDEN, b"this dashboard answers requests for 127.0.0.1 or localhost only\n",
                       "text/plain; charset=utf-8", head=head)
            return
        path = unquote(urlsplit(self.path).path)
        if path == "/events":
            if head:
                self._send(HTTPStatus.OK, b"", "text/event-stream", head=True)
            else:
                self._events()
            return
        try:
            status, body, ctype = self._render(path)
        except NotInitialized as exc:
            if path.startswith("/api/"):
                status, body, ctype = HTTPStatus.OK, json.dumps(
                    {"commit": None, "html": {"counts": pages.not_initialized_page(exc.message)}}), "application/json"
            else:
                status, body, ctype = HTTPStatus.OK, pages.not_initialized_page(exc.message), "text/html"
        except HandoffError as exc:
            status, body, ctype = (HTTPStatus.INTERNAL_SERVER_ERROR,
                                   pages.page("error", f"<p>error: {escape(exc.message)}</p>"), "text/html")
        except Exception as exc:  # noqa: BLE001 - one bad request must not stop the dashboard
            status, body, ctype = (HTTPStatus.INTERNAL_SERVER_ERROR,
                                   pages.page("error", f"<p>error: unexpected {escape(type(exc).__name__)}: "
                                                       f"{escape(str(exc))}</p>"), "text/html")
        self._send(status, body.encode(), ctype + "; charset=utf-8", head=head)

    def _render(self, path: str) -> tuple[HTTPStatus, str, str]:
        store = self.server.store()
        if path in ("/", "/index.html"):
            return HTTPStatus.OK, pages.overview(store), "text/html"
        if path == "/graph":
            return HTTPStatus.OK, pages.graph_page(store), "text/html"
        if path == "/graph.svg":
            return HTTPStatus.OK, pages.graph_svg(store), "image/svg+xml"
        if path == "/sessions":
            return HTTPStatus.OK, pages.sessions_page(store), "text/html"
        if path == "/api/live":
            return HTTPStatus.OK, json.dumps(pages.live_fragments(store)), "application/json"
        found: str | None = None
        if path.startswith("/tasks/"):
            found = pages.tasks_page(store, path[len("/tasks/"):])
        elif path.startswith("/task/"):
            found = pages.task_page(store, path[len("/task/"):])
        elif path.startswith("/session/") and path[len("/session/"):].isdigit():
            found = pages.session_page(store, int(path[len("/session/"):]))
        if found is not None:
            return HTTPStatus.OK, found, "text/html"
        return HTTPStatus.NOT_FOUND, pages.page("not found", f"<p>Nothing at {escape(path)}.</p>"), "text/html"

    def _send(self, status: HTTPStatus, body: bytes, ctype: str, *, head: bool = False,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        # no script, style or image from anywhere else, ever: the page works offline
        self.send_header("Content-Security-Policy",
                         "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _events(self) -> None:
        """Announce every new state commit until the client goes or the server stops."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        last: str | None = ""
        quiet_since = time.monotonic()
        repo: Repo | None = None
        try:
            while not self.server.stopping.is_set():
                try:
                    repo = repo or Repo.discover(self.server.root)
                    current = repo.ref_target(STATE_REF)
                except HandoffError:
                    repo, current = None, None
                if current != last:
                    if last != "":
                        self.wfile.write(f"event: state\ndata: {current or ''}\n\n".encode())
                        self.wfile.flush()
                    last = current
                    quiet_since = time.monotonic()
                elif time.monotonic() - quiet_since > EVENT_KEEPALIVE_SECONDS:
                    self.wfile.write(b": keepalive\n\n")
                    self.wfile.flush()
                    quiet_since = time.monotonic()
                self.server.stopping.wait(EVENT_POLL_SECONDS)
        except (BrokenPipeError, ConnectionResetError):
            return


def start(root: Path, host: str = "127.0.0.1", port: int = 0) -> tuple[DashboardServer, threading.Thread]:
    """A running server in a background thread (the caller stops it with `.stop()`)."""
    server = DashboardServer(root, host, port)
    # serve_forever notices shutdown() only between polls: the default 0.5 s made every
    # stop wait ~0.4 s (measured); 50 ms costs nothing idle and stops at once
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": STOP_POLL_SECONDS},
                              name="dashboard", daemon=True)
    thread.start()
    return server, thread


def serve(root: Path, *, host: str = "127.0.0.1", port: int = 0, stop_after: float | None = None,
          ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted (KeyboardInterrupt propagates) or `stop_after` seconds."""
    server, thread = start(root, host, port)
    try:
        if ready is not None:
            ready(server.url)
        deadline = None if stop_after is None else time.monotonic() + stop_after
        while thread.is_alive():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            thread.join(0.5 if remaining is None else min(0.5, remaining))
    finally:
        server.stop()
        server.server_close()
