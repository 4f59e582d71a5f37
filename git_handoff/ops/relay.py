"""The relay: run agent sessions one after another until the work is done.

Per session: `session start` (recovery included) -> the handoff prompt rendered to a
file -> the agent launched (a child process in its own process group, or a detached
tmux session on the relay's own tmux socket) -> its ACK awaited -> the session runs
until it hands off or the agent exits -> a handoff document written from git facts
when the agent left none -> `session end` -> the next session.

One relay per repository, and its record in the state: git_handoff.ops.relay_record.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from git_handoff.agent_cli import agent_process
from git_handoff.agent_cli.agent_process import Agent, launch, stop_tmux_server, tmux_socket_name
from git_handoff.core.errors import HandoffError, Negative, Signalled, UsageError
from git_handoff.core.record_schemas import RelayRecord
from git_handoff.infra import procs
from git_handoff.ops import (
    handoff,
    prompt,
    relay_agents,
    relay_land,
    relay_wait,
    relay_watch,
    session_start,
    sessions,
)
from git_handoff.ops.budgets import Budgets, Tracker
from git_handoff.ops.payloads import AckEntry, RelaySummary
from git_handoff.ops.relay_record import record_start, record_stop, relay_lock, update_record
from git_handoff.remote.fleet_lock import FleetLock
from git_handoff.state.store import StateStore
from git_handoff.state.this_clone import open_session


@dataclass
class Options:
    agent: str
    tmux: bool = False
    ack_timeout: float = 60.0
    session_timeout: float | None = None
    max_launch_failures: int = 3
    handoff_grace: float = 10.0
    max_idle_sessions: int = 3
    tmux_socket: str | None = None
    poll: float = 0.05
    # an agent exiting non-zero this soon after its ACK, having done nothing, failed to start
    launch_grace: float = 15.0
    fleet_lock: FleetLock | None = None  # one relay per remote, not only per clone (git_handoff.remote.fleet_lock)
    hang_timeout: float | None = 1800.0  # no progress this long: a hang (ops/relay_watch.py), None: never
    limit_backoff: float = 60.0  # the first wait on a limit that printed no reset time; doubled per limit in a row
    limit_backoff_max: float = 1800.0
    limit_wait_max: float = relay_wait.WAIT_CAP  # the longest wait for a limit, whatever reset the CLI printed
    integrate: bool | None = None  # land finished work between sessions (ops/relay_land.py); None: as configured
    wait_poll: float = relay_land.POLL
    wait_patience: float = relay_land.PATIENCE
    budgets: Budgets | None = None  # tokens, money, time, sessions (ops/budgets.py)
    agents: list[str] = field(default_factory=list)  # every agent command in order ([agent] when empty)
    switch_after: float = relay_agents.SWITCH_AFTER  # a limit resetting later: the next agent (ops/relay_agents.py)


class Stopped(Negative):
    """The relay stopped with work left (exit 1)."""


# -- the loop ------------------------------------------------------------------------


class Relay:
    def __init__(self, store: StateStore, opts: Options, say: Callable[[str], None],
                 waiting: Callable[[str | None], None] | None = None) -> None:
        self.store = store
        self.opts = opts
        self.say = _unfailing(say)  # a terminal that hung up (SIGHUP) must not stop the cleanup
        self.waiting = _unfailing(waiting or (lambda _text: None))  # a transient progress line; None clears it
        self.agent: Agent | None = None
        self.session: int | None = None
        self.acked_at: float | None = None
        self.progress_at_ack: tuple[int, int] | None = None
        self.relay_dir = store.repo.handoff_dir / "relay"
        self.relay_dir.mkdir(exist_ok=True)
        self.budget = Tracker(store, opts.budgets or Budgets(), self.relay_dir)
        self.watch = relay_watch.Watch(store, self.relay_dir, opts.agent, opts.hang_timeout, opts.limit_backoff,
                                       opts.limit_backoff_max, opts.poll, say, self.waiting, self._failure,
                                       lambda changes, log: update_record(self._session_store(), changes, log=log),
                                       wait_cap=opts.limit_wait_max, before_wait=self._before_wait)
        self.agents = relay_agents.Agents(opts.agents or [opts.agent], opts.switch_after, say=self.say,
                                          record=lambda changes, log: update_record(self._session_store(), changes,
                                                                                    log=log))
        self.watch.switch = self.agents.after_limit

    # -- helpers --

    def _session_store(self) -> StateStore:
        return StateStore(self.store.repo, session=self.session or 0)

    def _failure(self, what: str, category: str) -> None:
        self.say(f"relay: {what}")
        update_record(self._session_store(), {}, failure=what, log=("ERROR", f"relay: {what}", category))

    def _remember_agent(self) -> None:
        agent = self.agent
        agent_process.remember(self.relay_dir, self.session, agent)
        update_record(self.store, {
            "session": self.session,
            "agent_pid": agent.pid if agent else None,
            "agent_token": agent.token if agent else None,
            "tmux_session": agent.tmux[1] if agent and agent.tmux else None,
            "tmux_socket": agent.tmux[0] if agent and agent.tmux else None,
        })

    def _handed_off(self, number: int) -> bool:
        return bool(handoff.handed_off(self.store, number))

    def _acknowledged(self, number: int) -> bool:
        return bool(handoff.acknowledged(self.store, number))

    def _ack_status(self, number: int) -> AckEntry | None:
        return handoff.ack_status(self.store, number)

    # -- phases --

    def start_session(self) -> int:
        store = StateStore(self.store.repo, session=0)
        record = session_start.start(store)
        self.session = int(record["session"])
        recovered = record.get("recovery") or []
        self.say(f"relay: session {self.session} started"
                 + (f" ({len(recovered)} task(s) recovered)" if recovered else ""))
        return self.session

    def launch_and_ack(self) -> None:
        assert self.session is not None
        number = self.session
        what, attempt = "", 0
        while attempt < self.opts.max_launch_failures:
            attempt += 1
            prompt_file = self.relay_dir / f"prompt-{number}.md"
            prompt_file.write_text(prompt.render_prompt(self._session_store()))
            earlier = self._ack_status(number)  # a rejection by the previous launch is not this one's
            self.watch.use(self.agents.choose(number))
            self.watch.launched(number)
            self.agent = launch(self.store, self.agents.command, number, prompt_file, self.relay_dir,
                                tmux_socket=tmux_socket_name(self.store, self.opts.tmux_socket) if self.opts.tmux
                                else None)
            self._remember_agent()
            where = f"tmux session {self.agent.tmux[1]}" if self.agent.tmux else f"pid {self.agent.pid}"
            self.say(f"relay: session {number}: agent launched ({where}, launch {attempt}/"
                     f"{self.opts.max_launch_failures}), waiting for its ACK")
            attach = self.agent.attach_command()
            if attach:
                self.say(f"relay: session {number}: watch or answer it with: {attach}")
            failure = self._await_ack(number, self.agent, f"launch {attempt}/{self.opts.max_launch_failures}: ",
                                      earlier=earlier)
            if failure is None:
                self.say(f"relay: session {number}: acknowledged")
                relay_agents.note_session(self._session_store(), number, self.agents.name)
                self.acked_at = time.monotonic()
                self.progress_at_ack = relay_land.progress(self.store)
                self.watch.acknowledged()
                return
            if failure == relay_watch.RELAUNCH:
                attempt -= 1  # a limit waited out: no launch spent
            else:  # killed before its ACK: the document its exit hook wrote ends nothing; the session goes on
                relay_wait.withdraw_exit_doc(self.store, number, self.watch.launched_at)
            what = failure
        self.agent = None
        self._remember_agent()
        raise Stopped(
            f"relay stopped: the agent failed to start {self.opts.max_launch_failures} time(s) in a row "
            f"(last: {what}); check the agent command: {self.agents.command}"
        )

    def _failed_start(self, number: int, status: int) -> str | None:
        """An agent that exits non-zero within launch_grace of its ACK with nothing done did
        not really start (a bad flag, a prompt its CLI never got): what to report, else None."""
        if status == 0 or self.acked_at is None or status > 128 or status < 0 or self.watch.worked():
            return None  # killed by a signal, or it did something: it started
        after = time.monotonic() - self.acked_at
        if after > self.opts.launch_grace or relay_land.progress(self.store) != self.progress_at_ack:
            return None
        return f"agent exited with status {status} {after:.1f}s after its ACK, having done nothing"

    def wait_session(self) -> str | None:
        """Until the session's agent is done; what went wrong when it failed to start, else None."""
        assert self.session is not None and self.agent is not None
        number, agent = self.session, self.agent
        started = time.monotonic()
        while True:
            status = agent.exit_status()
            if status is not None and self.watch.limited(agent, number, status):
                return relay_watch.RELAUNCH
            if status is not None:
                failed = self._failed_start(number, status)
                if failed:
                    self._failure(f"session {number}: launch failure: {failed}", "ENV_SETUP")
                    return failed
                if status != 0 and not self._handed_off(number):
                    said = self.watch.last_line(number)
                    self._failure(f"session {number}: agent exited with status {status} without a handoff"
                                  + (f" (its last output: {said})" if said else ""), "TASK_EXEC")
                else:
                    self.say(f"relay: session {number}: agent exited (status {status})")
                break
            if self._handed_off(number):
                return self._after_handoff(number, agent)
            timeout = self.opts.session_timeout
            if timeout is not None and time.monotonic() - started > timeout:
                agent.kill()
                self._failure(f"session {number}: ran longer than --session-timeout {timeout:g}s; agent killed",
                              "SESSION_TIMEOUT")
                break
            if (spent := self.budget.over(number)) is not None:
                self.budget.end_session(number, spent, agent, self.say)
                break
            if (ended := self.watch.turn_ended(agent)) is not None:
                self._turn_ended(number, ended)
                break
            if (hung := self.watch.hung(agent)) is not None:
                agent.kill()
                self._failure(f"session {number}: {hung}; agent killed", relay_watch.HANG_CATEGORY)
                break
            time.sleep(self.opts.poll)
        return None

    def _before_wait(self, number: int, seconds: float) -> None:
        """A limit's wait that would pass the run's time budget ends the session as a budget
        does and stops the relay (exit 1), before any of the wait; else the wait is not
        counted in the session's time."""
        reason = self.budget.wait_passes_run(seconds)
        if reason is not None and self.agent is not None:
            self.budget.end_session(number, reason, self.agent, self.say)
            raise Negative(f"relay stopped: {reason} after {self.budget.sessions} session(s)")
        self.budget.waited(seconds)

    def _after_handoff(self, number: int, agent: Agent) -> str | None:
        """The session handed off: the agent has handoff_grace to exit (an interactive CLI
        never does: it waits at its prompt, and is ended); what wait_session returns."""
        self.say(f"relay: session {number}: handed off; waiting for the agent to exit")
        grace = time.monotonic() + self.opts.handoff_grace
        while agent.running() and time.monotonic() < grace:
            time.sleep(self.opts.poll)
        if agent.running():
            self.say(f"relay: session {number}: agent still running after the handoff: ending it")
            agent.kill()
            return None
        if self.watch.limited(agent, number, agent.exit_status()):
            return relay_watch.RELAUNCH
        failed = self._failed_start(number, agent.exit_status() or 0)
        if failed:  # its SessionEnd hook wrote the document on the way out
            self._failure(f"session {number}: launch failure: {failed}", "ENV_SETUP")
        return failed

    def _turn_ended(self, number: int, ended: str) -> None:
        """An interactive agent's turn ended without a handoff: the session ends here (the
        next one, if work is left, starts from its document)."""
        mine = [t.id for t in self.store.snapshot().tasks().values()
                if t.status == "in_progress" and t.claim.session == number]
        left = f"; {len(mine)} task(s) still in progress ({', '.join(mine[:5])}): recovery takes them" if mine else ""
        self.say(f"relay: session {number}: {ended}{left}; ending the session")
        update_record(self._session_store(), {}, log=("HANDOFF", f"relay: session {number}: {ended}{left}; "
                                                      "session ended", None))

    def finish_session(self) -> None:
        if self.session is None:
            return
        number = self.session
        if self.agent is not None:
            self.agent.kill()  # also whatever it left running in the background
        if not self._handed_off(number):
            handoff.write_doc(self._session_store(), trigger="relay")
            self.say(f"relay: session {number}: no handoff document from the agent; written from git facts")
        sessions.end(self._session_store(), cost=self.budget.cost_of(number))
        self.budget.session_ended(number)
        self.say(f"relay: session {number} ended")
        self.agent = None
        self.session = None
        self._remember_agent()

    def adopt(self, previous: RelayRecord) -> None:
        """Take over the session a dead relay left open: wait for its agent (its ACK first,
        when it had not given one), then close the session. No second agent is launched."""
        opened = open_session(self.store.repo)
        if opened is None:
            return
        number = int(opened["session"])
        self.session = number
        self.say(f"relay: taking over session {number} from the dead relay (pid {previous.get('pid')})")
        # the agent as this clone's relay recorded it locally, never as a (replayable) state
        # record names it; and only while that pid still carries its launch token, never a
        # process that got the number after a reboot
        found = agent_process.remembered(self.relay_dir, number) if previous.get("session") == number else None
        token = found.token if found is not None else None
        if found is not None and token is not None and procs.launched_with(found.pid, token):
            pid, self.agent = found.pid, found
            self._remember_agent()
            self.say(f"relay: session {number}: its agent (pid {pid}) is still running; waiting for it")
            if self._await_ack(number, self.agent) is None:
                self.wait_session()
        elif token is not None:
            procs.kill_tagged(token)  # the agent is gone: what it left running in the background goes too
        self.finish_session()

    def _await_ack(self, number: int, agent: Agent, label: str = "",
                   earlier: AckEntry | None = None) -> str | None:
        """None once session `number` acknowledged; else what went wrong (the agent is then
        killed), or relay_watch.RELAUNCH after a limit it stopped on was waited out."""
        return self.watch.await_ack(number, agent, self.opts.ack_timeout, label, earlier)

    # -- main --

    def run(self, previous: RelayRecord | None) -> RelaySummary:
        """Sessions until the work is done (its summary) or the relay stops (Stopped);
        `previous`: a dead relay's record, whose session this one adopts first."""
        record_start(self.store, previous, agent=self.agents.command, agent_name=self.agents.name,
                     tmux=self.opts.tmux, agents=self.agents.commands)
        self.say(f"relay: agent output and prompts go to {self.relay_dir}/session-<n>.log and prompt-<n>.md")
        try:
            if previous:
                self.adopt(previous)
            reason, sessions_run = self._sessions()
        except Negative as exc:
            reason = exc.message.removeprefix("relay stopped: ")  # _stop says "relay stopped: " itself
            try:
                self.finish_session()
            finally:
                self._stop(reason)
            raise Stopped(exc.message if exc.message.startswith("relay stopped")
                          else f"relay stopped: {exc.message}") from None
        except BaseException as exc:
            self._interrupted(exc)
            raise
        tasks = self.store.snapshot().tasks()
        all_done = bool(tasks) and all(t.status == "completed" for t in tasks.values())
        self._stop(reason)
        summary: RelaySummary = {"sessions": sessions_run, "reason": reason, "completed": all_done}
        if not all_done:
            raise Stopped(f"relay stopped: {reason}", payload=summary)
        return summary

    def _sessions(self) -> tuple[str, int]:
        """Land, wait or run the next session, until no work is left: why it ended and the
        sessions run. A Negative stops it (a budget, the fleet lock lost, failed starts, idling)."""
        sessions_run = idle = failed_starts = 0
        lander = (relay_land.Lander(self.store, self.say, self.opts.wait_poll, self.opts.wait_patience)
                  if relay_land.wanted(self.store.repo, self.opts.integrate) else None)
        while True:
            if lander is not None:
                lander.land()
                if (wait := lander.waiting()) is not None:
                    lander.pause(wait)
                    continue
            more, why = relay_land.work_left(self.store)
            if not more:
                return why, sessions_run
            if self.opts.fleet_lock is not None and self.opts.fleet_lock.taken_over:
                raise Stopped(f"relay stopped: {self.opts.fleet_lock.lost}")  # no new session without the lock
            before = relay_land.progress(self.store)
            self.budget.check_run()  # a run budget reached: Negative, the relay stops
            sessions_run += 1
            failed = self._session()
            failed_starts = failed_starts + 1 if failed else 0
            if failed_starts >= self.opts.max_launch_failures:
                raise Stopped(
                    f"relay stopped: the agent failed to start {failed_starts} time(s) in a row (last: {failed}); "
                    f"check the agent command: {self.agents.command}")
            if failed:
                continue
            idle = idle + 1 if relay_land.progress(self.store) == before else 0
            if idle >= self.opts.max_idle_sessions:
                raise Stopped(f"relay stopped: {idle} session(s) in a row made no progress; see `git handoff log` "
                              f"and the agent logs in {self.relay_dir}")

    def _session(self) -> str | None:
        """One session, start to end: None, or why its agent failed to start."""
        self.start_session()
        self.launch_and_ack()
        failed = self.wait_session()
        while failed == relay_watch.RELAUNCH:  # a limit waited out: the same session goes on
            self.launch_and_ack()
            failed = self.wait_session()
        self.finish_session()
        return failed

    def _interrupted(self, cause: BaseException) -> None:
        """End the agent's whole tree, close its session with a document, release the relay:
        procs.signals_as_interrupt ignores the signals that come while this runs."""
        reason = "interrupted"
        if isinstance(cause, Signalled) and cause.signum != signal.SIGINT:
            reason = f"interrupted by {signal.Signals(cause.signum).name}"
        elif isinstance(cause, HandoffError):  # e.g. an init command fetched meanwhile and not trusted
            reason = cause.message
        elif not isinstance(cause, KeyboardInterrupt):
            reason = f"unexpected {type(cause).__name__}: {cause}"
        try:
            if self.agent is not None:
                self.agent.kill()
            if self.session is not None:
                self.finish_session()
        finally:
            self._stop(reason)

    def _stop(self, reason: str) -> None:
        if self.opts.tmux:
            stop_tmux_server(tmux_socket_name(self.store, self.opts.tmux_socket))
        record_stop(self.store, reason)


def run_relay(store: StateStore, opts: Options, say: Callable[[str], None],
              waiting: Callable[[str | None], None] | None = None) -> RelaySummary:
    """Run sessions until the work is done; Stopped (exit 1) when it stops with work left,
    Contention (exit 3) when another relay runs here, KeyboardInterrupt passed on (exit 130);
    `waiting` gets the transient "waiting for ACK" line each second (None: clear it)."""
    if not opts.agent.strip() or any(not c.strip() for c in opts.agents):
        raise UsageError("--agent needs a command")
    if opts.switch_after < 0:
        raise UsageError("--switch-after must not be negative")
    for name, value in (("--ack-timeout", opts.ack_timeout), ("--session-timeout", opts.session_timeout)):
        if value is not None and value <= 0:
            raise UsageError(f"{name} must be positive")
    if opts.max_launch_failures < 1:
        raise UsageError("--max-launch-failures must be at least 1")
    if opts.tmux and subprocess.run(["sh", "-c", "command -v tmux"], capture_output=True).returncode != 0:
        raise UsageError("--tmux: tmux is not installed")
    store.snapshot()  # NotInitialized before anything else
    session_start.require_trusted_init(store)  # a refused relay writes nothing, not even its start
    with procs.signals_as_interrupt(), relay_lock(store, opts.fleet_lock) as previous:
        return Relay(store, opts, say, waiting).run(previous)


def _unfailing(show: Callable[[Any], None]) -> Callable[[Any], None]:
    def shown(text: Any) -> None:
        try:
            show(text)
        except OSError:
            pass
    return shown
