"""`git handoff serve` and `graph --format svg`: the read-only dashboard, over real HTTP
and in a real headless Chromium."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from git_handoff.core.model import Task
from git_handoff.dashboard import server as dash_server
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.store import StateStore, Tx
from tests.support.browser import Browser, chromium
from tests.support.remotes import Clones, clones, remote_url  # noqa: F401  (fixtures)
from tests.support.repo import git, lived_in_state, run, run_exe
from tests.support.work_states import four_ways

# The state the dashboard tests look at: 200 tasks in every status, 5 sessions.
EXPECTED = {"completed": 40, "in_progress": 20, "pending": 40, "failed": 60, "blocked": 40}


def build_state(repo: Path) -> int:
    """Create the 200-task, 5-session state; returns the number of dependency edges."""
    assert run("init").rc == 0
    for n in range(1, 6):
        assert run("session", "start").rc == 0
        assert run("decide", f"decision {n}", "--why", f"because {n}").rc == 0
        assert run("doc", "write").rc == 0
        assert run("session", "end").rc == 0
    # one real failed attempt, saved under refs/harness/attempts/att/1
    assert run("add", "Attempted <once>", "--id", "att", "--check", "false").rc == 0
    assert run("claim", "att").rc == 0
    (repo / "scratch.txt").write_text("the attempt's work\n")
    res = run("fail", "att", "--reason", "wrong approach")
    assert res.rc == 0, res.err
    stamp = "2026-07-01T10:00:00Z"

    def task(n: int, **fields: object) -> Task:
        return dataclasses.replace(Task(id=f"t{n:03d}", title=f"Task number {n}", created_at=stamp, order=n), **fields)  # type: ignore[arg-type]

    made: list[Task] = []
    made += [task(n, status="completed", completed_at=stamp, depends_on=(f"t{n - 1:03d}",) if n % 4 else ())
             for n in range(0, 40)]
    made += [task(n, status="in_progress", claimed_by="someone@else", lease_expires_at="2099-01-01T00:00:00Z",
                  depends_on=(f"t{n - 40:03d}",)) for n in range(40, 60)]
    made += [task(n, priority="P0" if n % 2 else "P2", depends_on=(f"t{n - 60:03d}", f"t{n - 59:03d}"))
             for n in range(60, 100)]
    made += [task(n, status="failed", attempts=1, error_log=("[TEST_FAIL] nope",)) for n in range(100, 139)]
    made += [task(n, status="failed", attempts=3, error_log=("[TEST_FAIL] nope",) * 3) for n in range(140, 160)]
    made += [task(n, depends_on=(f"t{n - 20:03d}",)) for n in range(160, 200)]

    def apply(tx: Tx) -> None:
        for t in made:
            tx.put_task(t)
        tx.log("INIT", f"Imported {len(made)} task(s) for the dashboard test")

    StateStore(Repo.discover(repo)).transact(apply)
    return sum(len(t.depends_on) for t in made)


@pytest.fixture
def served(repo: Path) -> Iterator[str]:
    server, thread = dash_server.start(repo)
    try:
        yield server.url
    finally:
        server.stop()
        server.server_close()
        thread.join(5)
        assert not thread.is_alive()


def get(url: str) -> tuple[int, str, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read().decode(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def counts_in(html: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r'data-count="([a-z_]+)">(\d+)<', html)}


def all_refs(repo: Path) -> str:
    return git("for-each-ref", "--format=%(refname) %(objectname)", cwd=repo)


def test_overview_counts_sessions_and_links(repo: Path, served: str) -> None:
    build_state(repo)
    status, html, headers = get(served)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    counts = counts_in(html)
    assert {k: counts[k] for k in EXPECTED} == EXPECTED
    assert counts["total"] == 200 and counts["sessions"] == 5
    assert len(re.findall(r'class="session" data-session="\d+"', html)) == 5
    assert len(re.findall(r'class="task-link" href="/task/[^"]+"', html)) == 200
    # the by-priority table adds up to the same numbers
    p0_pending = len([n for n in range(60, 100) if n % 2])
    assert f'data-priority="P0" data-status="pending">{p0_pending}<' in html
    assert "script-src" in headers["Content-Security-Policy"] and "http" not in headers["Content-Security-Policy"]


def test_graph_svg_one_node_per_task_one_edge_per_dependency(repo: Path, served: str) -> None:
    edges = build_state(repo)
    status, body, headers = get(served + "graph.svg")
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
    assert body.count('<g class="node"') == 200 and body.count('<path class="edge"') == edges
    cli = run("graph", "--format", "svg")
    assert cli.rc == 0 and cli.out.count('<g class="node"') == 200 and cli.out.count('<path class="edge"') == edges
    page = get(served + "graph")[1]
    assert page.count('<g class="node"') == 200 and f"{edges} dependencies" in page


def test_task_and_session_pages(repo: Path, served: str) -> None:
    build_state(repo)
    status, html, _ = get(served + "task/att")
    assert status == 200
    assert 'class="attempt" data-attempt="1"' in html and "wrong approach" in html
    assert "refs/harness/attempts/att/1" in html
    assert "Attempted &lt;once&gt;" in html
    status, html, _ = get(served + "task/t050")
    assert status == 200 and "lease until 2099-01-01T00:00:00Z" in html and 'href="/task/t010"' in html
    assert "lease until" not in get(served + "task/t001")[1]
    status, html, _ = get(served + "session/3")
    assert status == 200 and "decision 3" in html and 'id="handoff-doc"' in html
    for missing in ("task/nope", "task/..%2F..%2Fetc", "session/99", "nowhere"):
        assert get(served + missing)[0] == 404


def test_hostile_titles_are_escaped(repo: Path, served: str) -> None:
    assert run("init").rc == 0
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    assert run("add", evil, "--id", "evil").rc == 0
    for path in ("", "graph", "graph.svg", "task/evil"):
        body = get(served + path)[1]
        assert "<script>alert" not in body and "<img src=x" not in body, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body, path


def test_read_only_every_other_method_is_refused(repo: Path, served: str) -> None:
    build_state(repo)
    before = all_refs(repo)
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "FROB"):
        req = urllib.request.Request(served + "task/att", data=b"x=1", method=method)
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=10)
        assert exc.value.code == 405, method
        assert exc.value.headers["Allow"] == "GET, HEAD"
    req = urllib.request.Request(served, method="HEAD")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200 and resp.read() == b""
    for path in ("", "graph", "sessions", "task/att", "api/live"):
        assert get(served + path)[0] == 200
    assert all_refs(repo) == before


def test_follows_the_repository_changing_under_it(repo: Path, served: str) -> None:
    status, html, _ = get(served)
    assert status == 200 and "git handoff init" in html  # not initialized yet: says so
    assert run("init").rc == 0
    assert run("add", "First", "--id", "first").rc == 0
    assert counts_in(get(served)[1])["total"] == 1
    assert run("add", "Second", "--id", "second").rc == 0
    live = get(served + "api/live")[1]
    assert '\\"total\\">2<' in live or 'data-count=\\"total\\">2<' in live
    git("update-ref", "-d", "refs/harness/state", cwd=repo)
    assert "git handoff init" in get(served)[1]
    (repo / ".git" / "refs" / "harness").mkdir(parents=True, exist_ok=True)
    (repo / ".git" / "refs" / "harness" / "state").write_text(git("rev-parse", "HEAD", cwd=repo) + "\n")
    status, html, _ = get(served)  # a state ref at a commit that is no state: an error page, still serving
    assert status == 500 and "error:" in html
    git("update-ref", "-d", "refs/harness/state", cwd=repo)
    assert get(served)[0] == 200


def test_events_announce_a_new_state_commit(repo: Path, served: str) -> None:
    assert run("init").rc == 0
    with urllib.request.urlopen(served + "events", timeout=10) as stream:
        time.sleep(0.6)  # the stream has read the current commit
        assert run("add", "Later", "--id", "later").rc == 0
        head = git("rev-parse", "refs/harness/state", cwd=repo)
        lines = [stream.readline().decode().strip() for _ in range(2)]
    assert lines == ["event: state", f"data: {head}"]


@pytest.mark.slow  # real `git handoff serve` server processes, each running until --stop-after
def test_serve_command_prints_its_url_binds_loopback_and_stops_by_itself(repo: Path) -> None:
    assert run("init").rc == 0
    proc = subprocess.Popen([sys.executable, "-m", "git_handoff", "serve", "--stop-after", "20s"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:(\d+)/)", line)
        assert match, line
        assert get(match.group(1))[0] == 200
    finally:
        proc.terminate()
        assert proc.wait(10) in (0, 1, 130, -15)
    res = run_exe("serve", "--stop-after", "1s", cwd=repo, timeout=30)
    assert res.rc == 0 and "http://127.0.0.1:" in res.out
    res = run_exe("serve", "--stop-after", "1s", "--json", cwd=repo, timeout=30)
    assert res.rc == 0 and json.loads(res.out)["url"].startswith("http://127.0.0.1:")


def test_serve_refuses_a_bad_duration_or_port(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("serve", "--stop-after", "soon").rc == 2
    assert run("serve", "--port", "70000").rc == 2


def test_serve_refuses_a_port_in_use(repo: Path, served: str) -> None:
    port = served.rsplit(":", 1)[1].strip("/")
    res = run_exe("serve", "--port", port, "--stop-after", "1s", cwd=repo, timeout=30)
    assert res.rc == 2 and res.err.startswith("error: cannot listen on 127.0.0.1:" + port)


def test_status_does_not_import_the_dashboard(repo: Path) -> None:
    assert run("init").rc == 0
    code = ("import sys; from git_handoff.cli import main\n"
            "try:\n    main(['status'])\nexcept SystemExit:\n    pass\n"
            "print([m for m in sys.modules if m.startswith(('git_handoff.dashboard', 'http.server', 'html'))])")
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


# -- in a real browser ------------------------------------------------------------------

needs_browser = pytest.mark.skipif(chromium() is None, reason="chromium is not installed (.ci/run installs it)")


@pytest.mark.slow
@needs_browser
def test_browser_renders_counts_graph_and_attempts(repo: Path, served: str) -> None:
    edges = build_state(repo)
    with Browser() as b:
        b.goto(served)
        shown = b.eval("Object.fromEntries([...document.querySelectorAll('[data-count]')]"
                       ".map(e => [e.dataset.count, Number(e.textContent)]))")
        assert {k: shown[k] for k in EXPECTED} == EXPECTED and shown["total"] == 200 and shown["sessions"] == 5
        b.goto(served + "graph")
        assert b.eval("document.querySelectorAll('svg.graph g.node').length") == 200
        assert b.eval("document.querySelectorAll('svg.graph path.edge').length") == edges
        # the boxes really are drawn: every node has a size on the page
        assert b.eval("[...document.querySelectorAll('svg.graph g.node')].every(g => g.getBBox().width > 0)")
        b.eval("document.querySelector('g.node[data-id=\"att\"] a')"
               ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")
        b.wait_for("location.pathname === '/task/att' && document.readyState === 'complete'")
        assert b.eval("document.querySelectorAll('#attempts tr.attempt').length") == 1
        assert "wrong approach" in b.eval("document.getElementById('attempts').textContent")


@pytest.mark.slow
@needs_browser
def test_browser_page_updates_live_while_a_relay_runs(repo: Path, served: str) -> None:
    from tests.e2e.test_relay import AGENT, setup_tasks

    setup_tasks(repo, count=4, per_session=1)
    with Browser() as b:
        b.goto(served)
        loaded_at = b.eval("window.dashboardLoadedAt")
        assert b.eval("document.querySelector('[data-count=\"completed\"]').textContent") == "0"
        relay = subprocess.Popen(["git", "handoff", "relay", "--agent", f"{AGENT} --slow 0.3"], cwd=repo,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # a running relay shows up, then sessions and completed tasks count up, all without a reload
            b.wait_for("document.querySelector('[data-relay]') && "
                       "document.querySelector('[data-relay]').dataset.relay === 'running'", timeout=60)
            b.wait_for("Number(document.querySelector('[data-count=\"completed\"]').textContent) >= 2", timeout=90)
            assert b.eval("Number(document.body.dataset.updates)") >= 2
            assert b.eval("window.dashboardLoadedAt") == loaded_at
            out, err = relay.communicate(timeout=120)
            assert relay.returncode == 0, err
        finally:
            if relay.poll() is None:
                relay.kill()
                relay.wait(10)
        b.wait_for("document.querySelector('[data-count=\"completed\"]').textContent === '4'", timeout=30)
        b.wait_for("document.querySelector('[data-relay]').dataset.relay === 'stopped'", timeout=30)
        assert b.eval("window.dashboardLoadedAt") == loaded_at
        assert b.eval("Number(document.querySelector('[data-count=\"sessions\"]').textContent)") >= 4


def test_large_groups_are_a_click_away(repo: Path, served: str) -> None:
    assert run("init").rc == 0

    def apply(tx: Tx) -> None:
        for n in range(250):
            tx.put_task(Task(id=f"p{n:03d}", title=f"Pending {n}", created_at="2026-07-01T10:00:00Z", order=n))

    StateStore(Repo.discover(repo)).transact(apply)
    html = get(served)[1]
    assert len(re.findall(r'class="task-link"', html)) == 200 and 'href="/tasks/pending">all 250 pending tasks' in html
    assert html.count('<g class="node"') == 250  # 250 tasks: the overview still draws the graph
    status, listed, _ = get(served + "tasks/pending")
    assert status == 200 and len(re.findall(r'class="task-link"', listed)) == 250
    assert get(served + "tasks/bogus")[0] == 404


def test_requests_for_another_host_name_are_refused(repo: Path, served: str) -> None:
    """DNS rebinding: a page of evil.example whose name now points at 127.0.0.1."""
    assert run("init").rc == 0
    port = served.rsplit(":", 1)[1].strip("/")
    req = urllib.request.Request(served, headers={"Host": f"evil.example:{port}"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=10)
    assert exc.value.code == 403
    req = urllib.request.Request(served, headers={"Host": f"localhost:{port}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


READ_ONLY = """mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" || exit 97
cd "$0" || exit 97
touch .git/probe 2>/dev/null && exit 98
exec "$@"
"""


@contextlib.contextmanager
def read_only(repo: Path) -> Iterator[Callable[[list[str]], list[str]]]:
    """While inside, `repo` can not be written by the commands the yielded function wraps.
    Root ignores permission bits (chmod binds nobody), so as root the command runs with
    the repository as a read-only bind mount in a mount namespace of its own; otherwise
    the repository's permission bits are taken away (and given back after)."""
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.skip("running as root, and no unshare for a read-only bind mount")
        yield lambda command: ["unshare", "-m", "sh", "-c", READ_ONLY, str(repo), *command]
        return
    subprocess.run(["chmod", "-R", "a-w", str(repo)], check=True)
    try:
        yield lambda command: command
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(repo)], check=True)


@pytest.mark.parametrize("private", ["absent", "present"])
def test_serve_shows_a_read_only_repository(repo: Path, private: str) -> None:
    """`git handoff serve` of a repository it can not write to (a read-only mount, or
    permissions that keep it out), whether this clone's private directory is there or
    was never made: every page answers, nothing is written; a command that would change
    the state says why it can not, in one line."""
    lived_in_state()
    if private == "absent":
        shutil.rmtree(repo / ".git" / "handoff")
    handoff = [sys.executable, "-m", "git_handoff"]
    with read_only(repo) as wrap:
        proc = subprocess.Popen(wrap([*handoff, "serve", "--stop-after", "60s"]), cwd=repo, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            if proc.poll() == 97:
                pytest.skip(f"running as root, and no read-only bind mount here: {proc.stderr.read()}")
            match = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
            assert match, (line, proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
            for page in ("", "tasks/pending", "task/a", "graph", "graph.svg", "sessions", "session/1", "api/live"):
                status, html, _ = get(match.group(1) + page)
                assert status == 200, (page, html)
            assert "a decision" in get(match.group(1) + "session/1")[1]
        finally:
            proc.terminate()
            proc.wait(10)
        add = subprocess.run(wrap([*handoff, "add", "Two"]), cwd=repo, capture_output=True, text=True)
        assert add.returncode == 2 and add.stderr.count("\n") == 1, add
        assert "cannot write here" in add.stderr and "read-only to this process" in add.stderr, add
    assert (repo / ".git" / "handoff").exists() == (private == "present")


def test_the_use_of_each_session_and_task_is_shown(repo: Path, served: str, tmp_path: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "Used", "--id", "u1", "--check", "true").rc == 0
    assert run("session", "start").rc == 0
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {"id": "m", "usage": {
        "input_tokens": 1200, "output_tokens": 34}}}) + "\n")
    payload = {"session_id": "s", "cwd": str(repo), "transcript_path": str(transcript)}
    assert run("hook", "claude-stop", stdin=json.dumps(payload)).rc == 0
    assert run("claim", "u1").rc == 0 and run("done", "u1").rc == 0
    assert run("session", "end").rc == 0
    overview = get(served)[1]
    assert 'data-tokens="1">1234 tokens (in 1200, out 34)<' in overview
    assert '<span data-count="tokens">1234 tokens (in 1200, out 34)</span>' in overview
    assert "<th>usage</th><td>1234 tokens (in 1200, out 34), 1 turns</td>" in get(served + "session/1")[1]
    assert "<th>tokens</th><td>1234</td>" in get(served + "task/u1")[1]
    assert "<th>cost</th><td>-</td>" in get(served + "task/u1")[1]  # Claude Code's transcript holds no cost


def test_a_tasks_cost_and_held_time_are_shown_beside_its_tokens(repo: Path, served: str, tmp_path: Path) -> None:
    """OpenCode's transcript (the one our plugin writes) holds a cost: the task's share of it and
    the wall time of its claim are on its page, beside its tokens."""
    assert run("init").rc == 0
    assert run("add", "Used", "--id", "u1", "--check", "true").rc == 0
    assert run("session", "start").rc == 0
    transcript = tmp_path / "ses_1.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "id": "m", "cost": 0.0123, "tokens": {
        "input": 1000, "output": 20, "reasoning": 0, "cache": {"read": 200, "write": 0}}}) + "\n")
    payload = {"session_id": "ses_1", "cwd": str(repo), "transcript_path": str(transcript), "source": "startup"}
    assert run("hook", "opencode-session-start", stdin=json.dumps(payload)).rc == 0
    assert run("claim", "u1").rc == 0
    time.sleep(1.2)  # a claim held a second and more
    assert run("done", "u1").rc == 0 and run("session", "end").rc == 0
    task = run("show", "u1", "--json").json()
    assert task["tokens"] == 1220 and task["cost_micro_usd"] == 12300 and task["held_seconds"] >= 1
    page = get(served + "task/u1")[1]
    assert "<th>tokens</th><td>1220</td><th>cost</th><td>$0.0123</td>" in page.replace("</tr><tr>", "")
    assert f"<th>held</th><td>{task['held_seconds']}s</td>" in page


@contextlib.contextmanager
def _serving(root: Path) -> Iterator[str]:
    server, thread = dash_server.start(root)
    try:
        yield server.url
    finally:
        server.stop()
        server.server_close()
        thread.join(5)


@pytest.mark.slow
@needs_browser
def test_browser_shows_where_each_tasks_work_is_and_follows_it_landing(clones: Clones) -> None:  # noqa: F811
    """After a real `integrate` (tests/ops/test_status_work.py): X landed, W waiting to land, C
    withheld, Y sent back: counted on the overview, marked on the lists, said on each task's
    page; W landing moves the counts on the open page, without a reload."""
    b, seen = four_ways(clones)
    with _serving(b) as url, Browser() as br:
        br.goto(url)
        counts = br.eval("Object.fromEntries([...document.querySelectorAll('[data-work-count]')]"
                         ".map(e => [e.dataset.workCount, Number(e.textContent)]))")
        assert counts == {"landed": 1, "waiting": 1, "withheld": 1, "sent_back": 1}
        marks = br.eval("Object.fromEntries([...document.querySelectorAll('ul.tasks li')].map(li => "
                        "[li.querySelector('a.task-link').textContent, "
                        "li.querySelector('[data-work]') ? li.querySelector('[data-work]').textContent : null]))")
        assert marks == {"X": f"landed {seen['landed'][:12]}", "W": "waiting to land (refs/harness/work/W/1)",
                         "C": "withheld: a secret in its commits", "Y": "sent back by the integration queue",
                         "P": None}
        # the marks are drawn in their colours: the withheld one stands out
        assert br.eval("getComputedStyle(document.querySelector('[data-work=\"withheld\"]')).fontWeight") == "600"
        loaded_at = br.eval("window.dashboardLoadedAt")
        assert run("integrate", cwd=b).rc == 0  # W lands
        br.wait_for("document.querySelector('[data-work-count=\"landed\"]').textContent === '2'", timeout=30)
        assert br.eval("document.querySelector('[data-work-count=\"waiting\"]').textContent") == "0"
        assert br.eval("window.dashboardLoadedAt") == loaded_at
        for tid, said in (("X", f"landed on the target as {seen['landed']} (its work: refs/harness/work/X/1)"),
                          ("C", "its work was not published: a secret in"),
                          ("Y", "sent back by the integration queue: the error log says why")):
            br.goto(url + f"task/{tid}")
            cells = br.eval("Object.fromEntries([...document.querySelectorAll('section table tr')]"
                            ".filter(tr => tr.querySelector('th') && tr.querySelector('td'))"
                            ".map(tr => [tr.querySelector('th').textContent, tr.querySelector('td').textContent]))")
            assert said in cells["work"], (tid, cells)
        br.goto(url + "task/P")
        assert br.eval("[...document.querySelectorAll('th')].some(th => th.textContent === 'work')") is False
