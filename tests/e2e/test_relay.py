"""The relay: sessions launched, acknowledged and handed off until the work is done."""

from __future__ import annotations

import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import handoff
from git_handoff.state import this_clone
from git_handoff.state.store import StateStore
from tests.support.processes import processes_with, sigkill_once, wait_for
from tests.support.repo import git, run, run_exe, state_head, state_record

pytestmark = pytest.mark.slow  # whole relays of real agent processes: the slow layer

AGENT = f"{sys.executable} -m git_handoff.agents.scripted"


def tasks_json(path: Path, count: int, per_session: int, max_sessions: int = 50) -> Path:
    """A harness .harness/tasks.json (version 2): task-NNN creates task-NNN.txt holding done-task-NNN."""
    tasks = []
    for n in range(1, count + 1):
        tid = f"task-{n:03d}"
        tasks.append({
            "id": tid, "title": f"Create {tid}.txt", "status": "pending", "priority": "P1", "depends_on": [],
            "attempts": 0, "max_attempts": 3, "started_at_commit": None,
            "validation": {"command": f"grep -qx done-{tid} {tid}.txt", "timeout_seconds": 30},
            "on_failure": {"cleanup": None}, "error_log": [], "checkpoints": [], "completed_at": None,
        })
    data = {"version": 2, "created": "2026-07-01T10:00:00Z",
            "session_config": {"concurrency_mode": "exclusive", "max_tasks_per_session": per_session,
                               "max_sessions": max_sessions},
            "tasks": tasks, "session_count": 0, "last_session": None}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def setup_tasks(repo: Path, count: int, per_session: int, max_sessions: int = 50) -> None:
    assert run("init").rc == 0
    plan = tasks_json(repo / ".harness" / "tasks.json", count, per_session, max_sessions)
    res = run("import", str(plan))
    assert res.rc == 0, res.err
    (repo / ".gitignore").write_text(".harness/\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore the plan", cwd=repo)


def store_of(repo: Path) -> StateStore:
    return StateStore(Repo.discover(repo), session=0)


def all_completed(repo: Path) -> bool:
    tasks = store_of(repo).snapshot().tasks()
    return bool(tasks) and all(t.status == "completed" for t in tasks.values())


def session_count(repo: Path) -> int:
    return int(store_of(repo).snapshot().meta().get("session_count") or 0)


def log_lines(repo: Path, kind: str | None = None) -> list[str]:
    args = ["log"] + (["--type", kind] if kind else [])
    res = run(*args)
    assert res.rc == 0, res.err
    return res.out.splitlines()


def assert_every_session_acked_and_handed_off(repo: Path, minimum: int) -> int:
    store = store_of(repo)
    count = session_count(repo)
    assert count >= minimum
    for n in range(1, count + 1):
        assert handoff.acknowledged(store, n), f"session {n} has no ACK"
        assert handoff.handed_off(store, n), f"session {n} has no handoff document"
    acks = log_lines(repo, "ACK")
    docs = log_lines(repo, "HANDOFF")
    for n in range(1, count + 1):
        assert any(f"[SESSION-{n}] ACK" in line for line in acks), n
        assert any(f"[SESSION-{n}] HANDOFF" in line for line in docs), n
    return count





# -- end to end -----------------------------------------------------------------------


def test_relay_runs_100_tasks_through_sessions_to_the_end(repo: Path) -> None:
    setup_tasks(repo, 100, per_session=10)
    started = time.monotonic()
    res = run("relay", "--agent", AGENT, "--ack-timeout", "60")
    elapsed = time.monotonic() - started
    assert res.rc == 0, res.out + res.err
    assert "relay finished: all 100 task(s) completed" in res.out
    assert all_completed(repo)
    count = assert_every_session_acked_and_handed_off(repo, minimum=10)
    for n in range(1, 101):
        assert (repo / f"task-{n:03d}.txt").read_text() == f"done-task-{n:03d}\n"
    assert git("status", "--porcelain", cwd=repo) == ""
    print(f"\n100 tasks, {count} sessions: {elapsed:.1f}s")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
def test_relay_with_tmux_runs_100_tasks(repo: Path) -> None:
    setup_tasks(repo, 100, per_session=10)
    git("config", "handoff.tasksPerSession", "10", cwd=repo)  # here `done` writes the handoff documents
    socket_name = f"handoff-test-{os.getpid()}"
    try:
        res = run("relay", "--tmux", "--tmux-socket", socket_name, "--agent", AGENT, "--ack-timeout", "60")
        assert res.rc == 0, res.out + res.err
        assert "tmux session handoff-repo-1" in res.out
        assert all_completed(repo)
        count = assert_every_session_acked_and_handed_off(repo, minimum=10)
        triggers = [json.loads(state_record("docs", n, cwd=repo))["trigger"]
                    for n in range(1, count + 1)]
        assert triggers[:10] == ["tasks"] * 10
        # the relay closed its tmux server on the way out
        assert subprocess.run(["tmux", "-L", socket_name, "ls"], capture_output=True).returncode != 0
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)


# -- failure paths --------------------------------------------------------------------


def test_agent_that_never_acknowledges_is_killed_recorded_retried_then_stopped(repo: Path) -> None:
    setup_tasks(repo, 3, per_session=2)
    marker = f"{4000 + os.getpid() % 1000}.{os.getpid()}"
    agent = f"sleep {marker} & (setsid sleep {marker} &) ; sleep {marker}"
    res = run("relay", "--agent", agent, "--ack-timeout", "1", "--max-launch-failures", "2")
    assert res.rc == 1
    assert "failed to start 2 time(s)" in res.err
    assert len(res.err.strip().splitlines()) == 1
    errors = [line for line in log_lines(repo, "ERROR") if "did not acknowledge" in line]
    assert len(errors) == 2 and all("[ENV_SETUP]" in line for line in errors)
    wait_for(lambda: not processes_with(marker), timeout=10, what="the agent's processes to go")
    status = run("status")
    assert "relay failure:" in status.out and "did not acknowledge" in status.out
    assert this_clone.open_session(Repo.discover(repo)) is None  # the session was closed
    assert session_count(repo) == 1  # retries stay in the session they were for


def test_an_agent_command_of_several_lines_stops_the_relay_into_a_record_it_reads(repo: Path) -> None:
    """The stop reason quotes the agent command: one of several lines made a relay.json
    whose `reason` held a newline, which this clone's own parser (and every other
    clone's sync) refused: status and relay exited 2 from then on."""
    from git_handoff.core import record_schemas

    setup_tasks(repo, 1, per_session=1)
    res = run("relay", "--agent", "echo hi\nexit 3", "--ack-timeout", "1", "--max-launch-failures", "1")
    assert res.rc == 1, res.err
    raw = subprocess.run(["git", "show", "refs/harness/state:relay.json"], cwd=repo, capture_output=True,
                         check=True).stdout
    reason = record_schemas.relay(raw)["reason"]
    assert reason is not None and reason.endswith("check the agent command: echo hi exit 3")
    assert run("status").rc == 0


def test_agent_crashing_mid_task_is_recovered_in_the_next_session(repo: Path) -> None:
    setup_tasks(repo, 8, per_session=4)
    res = run("relay", "--agent", f"{AGENT} --crash-on task-003", "--ack-timeout", "60")
    assert res.rc == 0, res.out + res.err
    assert all_completed(repo)
    crash = [line for line in log_lines(repo, "ERROR") if "exited with status 7" in line]
    assert len(crash) == 1 and "[SESSION-1]" in crash[0]
    recovered = [line for line in log_lines(repo, "RECOVERY") if "task-003" in line]
    assert recovered and all("[SESSION-2]" in line for line in recovered)
    crashed = store_of(repo).snapshot().task("task-003")
    assert crashed is not None and crashed.status == "completed"
    assert_every_session_acked_and_handed_off(repo, minimum=2)


def start_relay(repo: Path, *args: str) -> subprocess.Popen[str]:
    """The relay as its own process (in its own process group, as a terminal would start it)."""
    return subprocess.Popen([sys.executable, "-m", "git_handoff", "relay", *args], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_relay_killed_and_restarted_continues_without_a_duplicate_session(repo: Path, tmp_path: Path) -> None:
    setup_tasks(repo, 9, per_session=3)
    trace = tmp_path / "trace"
    agent = f"{AGENT} --slow 0.5 --trace {trace}"
    first = start_relay(repo, "--agent", agent)
    try:
        wait_for(lambda: handoff.acknowledged(store_of(repo), 2), what="session 2 to be acknowledged")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        assert f"relay: died (pid {first.pid}" in run("status").out
        res = run_exe("relay", "--agent", agent, cwd=repo, timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
        first.communicate()
    assert res.rc == 0, res.out + res.err
    assert "taking over session 2" in res.out
    assert all_completed(repo)
    events = [line.split()[0] + " " + line.split()[2] for line in trace.read_text().splitlines()]
    starts = [e.split()[0] for e in events if e.endswith("start")]
    assert len(starts) == len(set(starts)) == session_count(repo)  # no session launched twice
    # never two agents at once: every start follows the previous session's end
    assert [e.split()[1] for e in events] == ["start", "end"] * len(starts)
    assert_every_session_acked_and_handed_off(repo, minimum=3)


def test_second_relay_is_refused_and_ctrl_c_ends_agent_and_relay(repo: Path, tmp_path: Path) -> None:
    setup_tasks(repo, 6, per_session=3)
    marker = tmp_path / "slow-agent-marker"
    first = start_relay(repo, "--agent", f"{AGENT} --slow 30 --trace {marker}")
    try:
        wait_for(lambda: handoff.acknowledged(store_of(repo), 1), what="session 1 to be acknowledged")
        second = run_exe("relay", "--agent", AGENT, cwd=repo)
        assert second.rc == 3
        assert f"pid {first.pid}" in second.err and "already running" in second.err
        record = json.loads(git("show", "refs/harness/state:relay.json", cwd=repo))
        assert record["pid"] == first.pid and record["state"] == "running"  # not taken over
        assert f"relay: running (pid {first.pid}" in run("status").out
        os.killpg(first.pid, signal.SIGINT)  # Ctrl-C in the relay's terminal
        out, err = first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    assert first.returncode == 130, err
    assert not processes_with(str(marker))
    assert this_clone.open_session(Repo.discover(repo)) is None
    assert handoff.handed_off(store_of(repo), 1)
    record = json.loads(git("show", "refs/harness/state:relay.json", cwd=repo))
    assert record["state"] == "stopped" and record["reason"] == "interrupted"


def test_relay_stops_at_max_sessions(repo: Path) -> None:
    setup_tasks(repo, 6, per_session=2, max_sessions=2)
    res = run("relay", "--agent", AGENT)
    assert res.rc == 1
    assert "max_sessions" in res.err
    assert session_count(repo) == 2
    assert "relay: stopped" in run("status").out


def test_relay_stops_when_sessions_make_no_progress(repo: Path) -> None:
    setup_tasks(repo, 2, per_session=2)
    res = run("relay", "--agent", "git handoff ack", "--max-idle-sessions", "2")
    assert res.rc == 1 and "no progress" in res.err
    assert session_count(repo) == 2


def test_relay_with_nothing_to_do_exits_0_and_with_failed_work_exits_1(repo: Path) -> None:
    setup_tasks(repo, 1, per_session=2)
    res = run("relay", "--agent", AGENT)
    assert res.rc == 0
    again = run("relay", "--agent", AGENT)
    assert again.rc == 0 and "all 1 task(s) completed in 0 session(s)" in again.out
    assert run("add", "impossible", "--id", "never", "--check", "false", "--max-attempts", "1").rc == 0
    res = run("relay", "--agent", AGENT)
    assert res.rc == 1 and "no eligible task left" in res.err


@pytest.mark.parametrize("args", [
    ["--agent", AGENT, "--ack-timeout", "0"],
    ["--agent", AGENT, "--max-launch-failures", "0"],
    ["--agent", "  "],
    [],
])
def test_relay_bad_input(repo: Path, args: list[str]) -> None:
    setup_tasks(repo, 1, per_session=1)
    before = state_head(repo)
    res = run("relay", *args)
    assert res.rc == 2, res
    assert state_head(repo) == before


def test_relay_not_initialized(repo: Path) -> None:
    res = run("relay", "--agent", AGENT)
    assert res.rc == 2 and "init" in res.err


def test_agent_rejecting_its_prompt_is_a_launch_failure(repo: Path) -> None:
    setup_tasks(repo, 2, per_session=2)
    res = run("relay", "--agent", "git handoff ack --failed \"stale $(date +%N)\" && sleep 600",
              "--max-launch-failures", "2", "--ack-timeout", "30")
    assert res.rc == 1 and "rejected its prompt: stale" in res.err
    rejected = [line for line in log_lines(repo, "ERROR") if "rejected its prompt" in line]
    assert len(rejected) == 2 and all("[ENV_SETUP]" in line for line in rejected)
    assert "launch 1/2" in rejected[0] and "launch 2/2" in rejected[1]
    reasons = [line.rsplit("stale ", 1)[1] for line in rejected]
    assert reasons[0] != reasons[1]  # the second launch's own rejection, not the first one's again


def test_session_timeout_ends_a_hanging_session(repo: Path, tmp_path: Path) -> None:
    setup_tasks(repo, 2, per_session=2)
    marker = f"{7000 + os.getpid() % 1000}.{os.getpid()}"
    res = run("relay", "--agent", f"git handoff ack && sleep {marker}", "--session-timeout", "1",
              "--max-idle-sessions", "1")
    assert res.rc == 1 and "no progress" in res.err
    timeouts = [line for line in log_lines(repo, "ERROR") if "--session-timeout" in line]
    assert len(timeouts) == 1 and "[SESSION_TIMEOUT]" in timeouts[0]
    assert handoff.handed_off(store_of(repo), 1)  # written from git facts
    assert not processes_with(marker)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
def test_tmux_agent_that_never_acknowledges_leaves_no_process_and_no_tmux_session(repo: Path) -> None:
    setup_tasks(repo, 2, per_session=2)
    socket_name = f"handoff-test-noack-{os.getpid()}"
    marker = f"{6000 + os.getpid() % 1000}.{os.getpid()}"
    try:
        res = run("relay", "--tmux", "--tmux-socket", socket_name, "--agent", f"sleep {marker}",
                  "--ack-timeout", "1", "--max-launch-failures", "1")
        assert res.rc == 1 and "did not acknowledge" in res.err
        wait_for(lambda: not processes_with(marker), timeout=10, what="the agent's processes to go")
        assert subprocess.run(["tmux", "-L", socket_name, "ls"], capture_output=True).returncode != 0
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)


def test_scripted_agent_through_the_real_executable(repo: Path) -> None:
    setup_tasks(repo, 4, per_session=2)
    res = run("relay", "--agent", f"{AGENT} --subprocess")
    assert res.rc == 0, res.out + res.err
    assert all_completed(repo)
    assert_every_session_acked_and_handed_off(repo, minimum=2)


def test_agent_gets_the_prompt_file_and_session_number(repo: Path, tmp_path: Path) -> None:
    setup_tasks(repo, 1, per_session=1)
    seen = tmp_path / "seen"
    agent = (f"cp {{prompt_file}} {seen}.md && echo \"$HANDOFF_SESSION $PWD\" > {seen}.env && "
             f"cmp -s {{prompt_file}} \"$HANDOFF_PROMPT_FILE\" && {AGENT}")
    res = run("relay", "--agent", agent)
    assert res.rc == 0, res.out + res.err
    assert f"1 {repo}" == seen.with_suffix(".env").read_text().strip()
    prompt = seen.with_suffix(".md").read_text()
    assert "task-001" in prompt and len(prompt.encode()) < 10_000


def test_relay_killed_before_the_ack_adopts_the_agent_instead_of_launching_another(repo: Path, tmp_path: Path) -> None:
    setup_tasks(repo, 2, per_session=2)
    trace = tmp_path / "trace"
    agent = f"sleep 3 && {AGENT} --trace {trace}"
    first = start_relay(repo, "--agent", agent)

    def launched() -> bool:
        raw = subprocess.run(["git", "show", "refs/harness/state:relay.json"], cwd=repo,
                             capture_output=True, text=True).stdout
        return bool(raw) and json.loads(raw).get("agent_pid") is not None

    def launched_not_acknowledged() -> None:
        wait_for(launched, what="the agent to be launched")
        assert not handoff.acknowledged(store_of(repo), 1)

    sigkill_once(first, launched_not_acknowledged)
    res = run("relay", "--agent", agent)
    assert res.rc == 0, res.out + res.err
    assert "taking over session 1" in res.out
    assert trace.read_text().count("start") == 1 and session_count(repo) == 1
    assert "took over from dead relay pid" in "\n".join(log_lines(repo, "LOCK"))


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
def test_relay_tmux_gives_the_agent_a_terminal_logs_it_and_removes_its_socket(repo: Path) -> None:
    from git_handoff.agent_cli.agent_process import default_socket_path

    setup_tasks(repo, 2, per_session=10)
    socket_name = f"handoff-tty-{os.getpid()}"
    agent = ("if [ -t 0 ] && [ -t 1 ]; then echo agent-has-a-terminal; else echo agent-has-no-terminal; fi; "
             f"{AGENT}")
    try:
        res = run("relay", "--tmux", "--tmux-socket", socket_name, "--agent", agent, "--ack-timeout", "60")
        assert res.rc == 0, res.out + res.err
        assert f"watch or answer it with: tmux -L {socket_name} attach -t handoff-repo-1" in res.out
        log = (repo / ".git" / "handoff" / "relay" / "session-1.log").read_text(errors="replace")
        assert "agent-has-a-terminal" in log and "agent-has-no-terminal" not in log
        assert not default_socket_path(socket_name).exists()
    finally:
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)


def test_agent_exiting_non_zero_right_after_its_ack_is_a_launch_failure(repo: Path) -> None:
    """`claude -p --allowedTools Bash "$(cat prompt)"`: the variadic flag swallows the prompt,
    SessionStart ACKs, the CLI exits 1. That is a launch failure, not "no progress"."""
    setup_tasks(repo, 2, per_session=10)
    res = run("relay", "--agent", "git handoff ack && exit 1", "--ack-timeout", "30")
    assert res.rc == 1
    assert "the agent failed to start 3 time(s) in a row" in res.err
    assert "exited with status 1" in res.err and "after its ACK" in res.err
    assert "made no progress" not in res.out + res.err
    assert len(log_lines(repo, "ERROR")) >= 3


def test_a_launch_that_fails_before_its_ack_leaves_no_document_for_the_next_launch(repo: Path) -> None:
    """An agent whose exit hook wrote the session's document (Claude Code's SessionEnd does)
    before it acknowledged: the session is not over, so the next launch into it must not
    be asked to acknowledge that document as its handoff (before, it was)."""
    setup_tasks(repo, 1, per_session=2)
    agent = "git handoff hook claude-session-end </dev/null; exit 3"
    res = run("relay", "--agent", agent, "--ack-timeout", "20", "--max-launch-failures", "2")
    assert res.rc == 1 and "failed to start 2 time(s)" in res.err, res.err
    prompt = (repo / ".git" / "handoff" / "relay" / "prompt-1.md").read_text()  # the second launch's
    assert "Handoff document of session 1" not in prompt, prompt
    assert "No handoff document yet" in prompt
    # the relay's own document closes the session it stopped in
    assert run("doc", "show", "1", "--json").json()["trigger"] == "relay"
    stopped = [line for line in log_lines(repo, "LOCK") if "relay stopped" in line]
    assert stopped and all(line.count("relay stopped:") == 1 for line in stopped), stopped


# -- only the CLI's own words are a limit (docs/threat-model.md) -----------------------------------

FAKE_LIMIT = "You've hit your session limit · resets 4am"


@pytest.mark.parametrize("crash", ["kill -9 $$", "exit 1"], ids=["killed", "exit-1"])
def test_limit_text_in_a_fetched_title_echoed_before_a_crash_is_a_crash(repo: Path, crash: str) -> None:
    """A task whose title says "You've hit your session limit · resets 4am", shown by the
    agent, which then crashes: before, the relay read the title as its CLI's limit and
    waited until 4 am (up to a day), keeping the claim; the crash's recovery never ran."""
    assert run("init").rc == 0
    assert run("add", f"Write t1: {FAKE_LIMIT}", "--id", "t1", "--check", "test -f t1.txt").rc == 0
    agent = ("git handoff ack; if [ \"$HANDOFF_SESSION\" = 1 ]; then git handoff claim t1 >/dev/null; "
             f"git handoff show t1; {crash}; fi; git handoff claim t1 && touch t1.txt && git handoff done t1")
    started = time.monotonic()
    res = run("relay", "--agent", agent, "--ack-timeout", "30")
    assert res.rc == 0, res.out + res.err
    assert time.monotonic() - started < 120
    assert not [line for line in log_lines(repo) if "[LIMIT]" in line]
    status = "137" if "kill" in crash else "1"
    assert any(f"agent exited with status {status} without a handoff" in line for line in log_lines(repo, "ERROR"))
    assert session_count(repo) == 2  # the crash ended session 1; session 2 recovered t1 and did it
    assert run("show", "t1", "--json").json()["status"] == "completed"


def test_a_reset_days_away_is_waited_for_at_most_the_cap_and_the_lease_not_past_it(repo: Path) -> None:
    """"resets Dec 14, 2:02am" on Dec 7 made the relay wait 168 h and extend the claim's
    lease to 7 days, holding the task from the whole fleet: the wait is cut to
    --max-limit-wait and said so, the lease extended by no more than that."""
    assert run("init").rc == 0
    assert run("add", "Write t1", "--id", "t1", "--check", "test -f t1.txt", "--max-attempts", "3").rc == 0
    away = (datetime.datetime.now().astimezone() + datetime.timedelta(days=5)).replace(minute=2)
    printed = (f"You've hit your weekly limit · resets {away.strftime('%b')} {away.day}, "
               f"{away.strftime('%I:%M%p').lower()}")
    marker = repo / ".git" / "limit-printed"
    agent = (f"git handoff ack; git handoff claim t1 >/dev/null 2>&1; if [ ! -e {marker} ]; then touch {marker}; "
             f"echo {shlex.quote(printed)}; exit 1; fi; touch t1.txt && git handoff done t1")
    res = run("relay", "--agent", agent, "--max-limit-wait", "3", "--ack-timeout", "30")
    assert res.rc == 0, res.out + res.err
    assert "further away than --max-limit-wait (3 s): waiting 3 s at most" in res.out, res.out
    waits = [line for line in log_lines(repo, "WARN") if "[LIMIT]" in line and "waiting until" in line]
    assert len(waits) == 1 and "further than --max-limit-wait" in waits[0], waits
    renewed = [line for line in log_lines(repo, "LOCK") if "lease renewed until" in line]
    assert renewed, log_lines(repo)
    for line in renewed:  # "[2026-12-07T04:50:00Z] ... lease renewed until 2026-12-07T05:20:03Z ..."
        at = datetime.datetime.strptime(line[1:21], "%Y-%m-%dT%H:%M:%SZ")
        until = datetime.datetime.strptime(line.split("lease renewed until ")[1][:20], "%Y-%m-%dT%H:%M:%SZ")
        assert (until - at).total_seconds() <= 30 * 60 + 3 + 2, line  # its own lease, plus the cap at most
    assert session_count(repo) == 1  # the wait spent no session
