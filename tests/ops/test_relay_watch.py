"""The relay's watch, in process: how long a limit is waited out, what `status` says
while it waits, and the document an agent's exit wrote being withdrawn (the session
goes on). The relay with the real CLIs: tests/e2e/test_relay_unattended.py."""

from __future__ import annotations

import datetime
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from git_handoff.agent_cli.agent_output import limit_in
from git_handoff.agent_cli.agent_process import Agent
from git_handoff.core.record_schemas import RelayRecord
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import relay_watch
from git_handoff.state.session_records import waiting_lines
from git_handoff.state.store import StateStore
from tests.support.repo import run

NOW = datetime.datetime(2026, 7, 1, 10, 0, 0, tzinfo=datetime.UTC)


def test_status_shows_the_wait_with_its_reset_and_what_the_agent_printed() -> None:
    until = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=3, minutes=12, seconds=30))
    record: RelayRecord = {"state": "running", "waiting": {
        "kind": "usage_limit", "since": "2026-07-01T10:00:00Z", "until": until.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "line": "You've hit your session limit · resets 8pm"}}
    (line,) = waiting_lines(record)
    assert line.startswith(f"relay: waiting for the usage limit, resumes at {until.strftime('%Y-%m-%dT%H:%M:%SZ')} "
                           "(in 3 h 12 min)"), line
    assert line.endswith(": You've hit your session limit · resets 8pm")
    assert waiting_lines({"state": "running", "waiting": None}) == []


def test_a_reset_printed_to_the_minute_within_that_minute_is_now_not_tomorrow() -> None:
    """claude prints "resets 12:01pm (UTC)" for a reset at 12:01:40; read at 12:01:10 that
    was the same time tomorrow: a 24-hour wait (found by the relay test of the plan limit)."""
    now = datetime.datetime(2026, 7, 1, 12, 1, 10, tzinfo=datetime.UTC)
    found = limit_in("claude", 1, "You've hit your session limit · resets 12:01pm (UTC)", now)
    assert found is not None and found.resets_at == "2026-07-01T12:01:00Z"
    later = limit_in("claude", 1, "You've hit your session limit · resets 11:30am (UTC)", now)
    assert later is not None and later.resets_at == "2026-07-02T11:30:00Z"


# -- a pane's turn and a pane's hang, on a real tmux pane -----------------------------------------


@pytest.fixture
def pane(repo: Path, tmp_path: Path) -> Iterator[Callable[[str], Agent]]:
    """`pane(script)`: an Agent whose tmux pane runs `script` (sh), its output piped to the
    session log as the launcher pipes it; the tmux server ends with the test."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (.ci/run installs it)")
    socket_name = f"handoff-watch-{os.getpid()}-{tmp_path.name}"

    def start(script: str) -> Agent:
        status = tmp_path / "agent.status"
        subprocess.run(["tmux", "-L", socket_name, "new-session", "-d", "-x", "120", "-y", "20", "-s", "w",
                        "sh", "-c", script], check=True, cwd=repo)
        subprocess.run(["tmux", "-L", socket_name, "pipe-pane", "-t", "w", "-o",
                        f"cat >> {shlex.quote(str(status.with_suffix('.log')))}"], check=True)
        pid = subprocess.run(["tmux", "-L", socket_name, "display-message", "-p", "-t", "w", "#{pane_pid}"],
                             capture_output=True, text=True, check=True).stdout.strip()
        return Agent(pid=int(pid), status_file=status, token=None, tmux=(socket_name, "w"))

    try:
        yield start
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)


def _watch(repo: Path, agent_command: str, hang_timeout: float | None = None) -> relay_watch.Watch:
    assert run("init").rc == 0
    store = StateStore(Repo.discover(repo))
    return relay_watch.Watch(store, repo / ".git" / "handoff", agent_command, hang_timeout, 60, 1800, 0.05,
                             lambda _: None, lambda _: None, lambda *_: None, lambda *_: None)


def _first(check: Callable[[], str | None], within: float) -> tuple[str | None, float]:
    started = time.monotonic()
    while time.monotonic() - started < within:
        if (said := check()) is not None:
            return said, time.monotonic() - started
        time.sleep(0.1)
    return None, within


RESTING_PANE = "printf '● I am done for now.\\n\\n✻ Baked for 3s\\n────\\n❯ \\n────\\n'; sleep 120"
# the working pane of a CLI waiting on its model: one process redrawing its spinner, its
# timer and its token count five times a second (no new process, as a CLI's own redraw)
WORKING_PANE = (f"exec {shlex.quote(sys.executable)} -c " + shlex.quote(
    "import itertools, sys, time\n"
    "for i in itertools.count():\n"
    "    sys.stdout.write('\\033[H\\033[2J● Reading\\n%s Churning… (%ds · ↓ %d tokens)\\n❯ \\n'\n"
    "                     '  ⏵⏵ bypass permissions on · esc to interrupt' % ('*✻✶✳'[i % 4], i // 5, i * 7))\n"
    "    sys.stdout.flush()\n"
    "    time.sleep(0.2)\n"))


def test_a_pane_resting_at_the_prompt_ends_its_turn_and_a_working_one_does_not(
        repo: Path, pane: Callable[[str], Agent], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relay_watch, "TURN_IDLE", 2.0)
    watch = _watch(repo, "claude --dangerously-skip-permissions x")
    working = pane(WORKING_PANE)
    assert _first(lambda: watch.turn_ended(working), 5)[0] is None
    working.kill()
    watch.launched(1)
    resting = pane(RESTING_PANE)
    said, after = _first(lambda: watch.turn_ended(resting), 10)
    assert said is not None and "turn ended" in said and 2.0 <= after < 6, (said, after)


def test_a_spinner_that_only_redraws_is_no_progress_for_the_hang_watch(
        repo: Path, pane: Callable[[str], Agent]) -> None:
    """A CLI waiting on a model that never answers redraws its spinner and timer every
    moment: before, every redraw grew the pane's log and the hang timeout never fired."""
    watch = _watch(repo, "claude --dangerously-skip-permissions x", hang_timeout=2.0)
    agent = pane(WORKING_PANE)
    said, _ = _first(lambda: watch.hung(agent), 8)
    assert said is not None and "no progress" in said, said
    assert agent.status_file.with_suffix(".log").stat().st_size > 0  # the pane's log did grow meanwhile


def test_a_pane_that_prints_new_lines_is_progress(repo: Path, pane: Callable[[str], Agent]) -> None:
    watch = _watch(repo, "claude --dangerously-skip-permissions x", hang_timeout=2.0)
    agent = pane("i=0; while :; do i=$((i+1)); echo \"line $(printf %s $i | tr 0-9 a-j)\"; sleep 0.3; done")
    assert _first(lambda: watch.hung(agent), 5)[0] is None
