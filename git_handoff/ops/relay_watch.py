"""What the relay watches while its agent runs, and the waits that follow.

- Why an agent stopped: the output of this launch (the session log the launcher fills:
  the child's stdout and stderr, or the tmux pane through `pipe-pane`) read by
  git_handoff.agent_cli.agent_output: a usage limit, a rate limit or an API outage is a *wait*
  (until the reset time the CLI printed, else a capped exponential backoff), never a
  failed launch and never a new session: the session stays open, its claims are renewed
  for the wait, and the agent is launched again into it.
- Whether it still makes progress: the state ref, HEAD, the session log, the hooks'
  private files and the agent's process tree (a tool run is a new process). Nothing of
  these moving for `hang_timeout` seconds is a hang, ended like a crash.
- Whether it waits for a person: with --tmux, the pane of an agent that has done
  nothing yet, read by agent_output.person_prompt_in (first-run, trust, API-key and
  permission screens), which names the setting that answers it.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from git_handoff.agent_cli import agent_output, registry
from git_handoff.agent_cli.agent_output import Limit
from git_handoff.agent_cli.agent_process import Agent
from git_handoff.core.errors import Negative
from git_handoff.core.model import now_iso, printable
from git_handoff.core.record_schemas import RelayRecord
from git_handoff.infra import procs
from git_handoff.ops import handoff
from git_handoff.ops.payloads import AckEntry
from git_handoff.ops.relay_wait import (
    WAIT_CAP,
    beyond_cap,
    clock,
    renew_claims,
    span,
    wait_seconds,
    withdraw_exit_doc,
)
from git_handoff.state.store import StateStore

LIMIT_CATEGORY = "LIMIT"  # the log category of a limit or outage waited out
HANG_CATEGORY = "SESSION_TIMEOUT"  # a hang is a session that stopped making progress
RELAUNCH = "relaunch after a limit"  # what a phase returns when the agent is to be launched again
OUTPUT_READ = 64 << 10  # the tail of a launch's output that is read for a limit
SCREEN_EVERY = 1.0  # seconds between two reads of a tmux pane
TURN_IDLE = 10.0  # seconds a pane rests at its CLI's prompt, nothing changing, before its turn counts as ended
ACTIVITY_EVERY = 1.0  # seconds between two looks at the agent's progress
KIND_WORDS = {agent_output.USAGE_LIMIT: "the usage limit", agent_output.RATE_LIMIT: "the rate limit",
              agent_output.OUTAGE: "the API outage"}

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_RESUMES = re.compile(r"(?i)continu(?:e|ing) automatically")  # Claude Code's pane on a plan limit it waits out itself
Record = Callable[[RelayRecord, tuple[str, str, str | None] | None], object]


def progress(store: StateStore) -> tuple[int, int, int, int, str | None]:
    """What a working agent changes: completed tasks, attempts, checkpoints, claims, HEAD."""
    tasks = store.snapshot().tasks().values()
    return (sum(1 for t in tasks if t.status == "completed"), sum(t.attempts for t in tasks),
            sum(len(t.checkpoints) for t in tasks), sum(1 for t in tasks if t.status == "in_progress"),
            store.repo.head())


class WaitsForPerson(Negative):
    """The agent's screen waits for a person: the relay stops, saying what to set."""


Say = Callable[[str], None]
Waiting = Callable[[str | None], None]
Failure = Callable[[str, str], None]  # (what, category): said, logged, kept in the relay record


@dataclass
class Watch:
    """The relay's eyes on one agent at a time (`launched` starts each launch)."""

    store: StateStore
    relay_dir: Path
    agent_command: str
    hang_timeout: float | None
    backoff: float
    backoff_max: float
    poll: float
    say: Say
    waiting: Waiting
    failure: Failure
    record: Record
    cli: str = ""
    streak: int = 0  # limits in a row without a launch that worked in between
    log_offset: int = 0
    launched_at: str = ""
    _seen: tuple[Any, ...] = ()
    _seen_at: float = 0.0
    _looked_at: float = 0.0
    _screen_at: float = 0.0
    _baseline: tuple[Any, ...] = field(default_factory=tuple)
    _rest: tuple[Any, ...] = ()  # the pane at rest as last seen (turn_ended)
    wait_cap: float = WAIT_CAP  # the longest wait for a limit, whatever reset the CLI printed
    number: int = 0  # the session of the launch watched
    _rest_at: float = 0.0
    # called with (session, seconds) before a limit is waited out: it may stop the relay
    # (a run's time budget the wait would pass: ops/budgets.py)
    before_wait: Callable[[int, float], None] | None = None
    _pane_limit: str | None = None  # the limit line of a pane that continues by itself (turn_ended)
    _pane_done: set[str] = field(default_factory=set)  # such lines it went on from (still on its screen)
    switch: Callable[[Limit, int], Limit | None] | None = None  # another agent instead of a wait: relay_agents

    def __post_init__(self) -> None:
        self.use(self.agent_command)

    def use(self, agent_command: str) -> None:
        """The agent command the next launches run (the relay switched agents)."""
        if agent_command != self.agent_command or not self.cli:
            self.streak = 0
        self.agent_command = agent_command
        self.cli = agent_output.cli_of(agent_command)

    def _log(self, number: int) -> Path:
        return self.relay_dir / f"session-{number}.log"

    # -- a launch ------------------------------------------------------------------------

    def launched(self, number: int) -> None:
        """Before each launch: what the log holds already is an earlier launch's."""
        self.number = number
        try:
            self.log_offset = self._log(number).stat().st_size
        except OSError:
            self.log_offset = 0
        self.launched_at = now_iso()
        self._seen, self._seen_at, self._looked_at, self._screen_at = (), time.monotonic(), 0.0, 0.0
        self._baseline = ()
        self._rest, self._rest_at = (), 0.0
        self._pane_limit, self._pane_done = None, set()

    def output(self, number: int) -> str:
        """What this launch printed (its last OUTPUT_READ bytes)."""
        try:
            with open(self._log(number), "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(self.log_offset, size - OUTPUT_READ))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def last_line(self, number: int) -> str | None:
        """The last line this launch printed, as one printable line (for a failure's text)."""
        return _last_line(self.output(number))

    def limit(self, number: int, status: int | None) -> Limit | None:
        """The limit or outage this launch stopped on, read from its output."""
        return agent_output.limit_in(self.cli, status, self.output(number), datetime.datetime.now().astimezone(),
                                     self.foreign(number))

    def foreign(self, number: int) -> frozenset[str]:
        """What the agent was given and may echo, so never a limit of its CLI's: the lines
        of this session's prompt and every task's title (fetched ones included)."""
        try:
            prompt_text = (self.relay_dir / f"prompt-{number}.md").read_text(errors="replace")
        except OSError:
            prompt_text = ""
        titles = [t.title for t in self.store.snapshot().tasks().values()]
        return agent_output.foreign_texts([prompt_text, *titles])

    # -- the ACK -------------------------------------------------------------------------

    def await_ack(self, number: int, agent: Agent, timeout: float, label: str = "",
                  earlier: AckEntry | None = None) -> str | None:
        """None once session `number` acknowledged; else what went wrong (the agent is then
        killed), or RELAUNCH once a limit it stopped on was waited out. WaitsForPerson when
        its tmux pane shows a screen only a person answers."""
        started = time.monotonic()
        deadline, shown = started + timeout, -1
        while True:
            if (elapsed := int(time.monotonic() - started)) != shown:
                shown = elapsed
                self.waiting(f"session {number}: waiting for ACK ({elapsed} s of {timeout:g} s)")
            ack = handoff.ack_status(self.store, number)
            if ack == earlier:
                ack = None  # the previous launch's
            if ack and ack.get("status") == "accepted":
                self.waiting(None)
                return None
            if ack and ack.get("status") == "failed":
                what = f"agent rejected its prompt: {ack.get('reason')}"
                break
            status = agent.exit_status()
            if status is not None and self.limited(agent, number, status):
                return RELAUNCH
            if status is not None and (asked := self._asked_on_the_way_out(number)) is not None:
                self.failure(f"session {number}: {label}the agent stopped on a screen for a person: {asked}",
                             "ENV_SETUP")
                raise WaitsForPerson(f"the agent stopped on a screen for a person: {asked}")
            if status is not None:
                what = f"agent exited with status {status} before acknowledging"
                said = self.last_line(number)
                what += f" (its last output: {said})" if said else ""
                break
            if (asked := self.person_prompt(agent)) is not None:
                self.waiting(None)
                agent.kill()
                self.failure(f"session {number}: {label}the agent waits for a person: {asked}", "ENV_SETUP")
                raise WaitsForPerson(f"the agent waits for a person: {asked}")
            if time.monotonic() >= deadline:
                screen = _last_line(self.screen(agent))
                what = (f"agent did not acknowledge within {timeout:g}s; its processes were killed"
                        + (f" (its screen showed: {screen})" if screen else ""))
                break
            time.sleep(self.poll)
        self.waiting(None)
        if handoff.acknowledged(self.store, number) and handoff.ack_status(self.store, number) != earlier:
            return None  # acknowledged just as it exited
        agent.kill()
        self.failure(f"session {number}: {label}{what}", "ENV_SETUP")
        return what

    def acknowledged(self) -> None:
        """At the ACK: the baseline a failed start is judged against."""
        self._baseline = progress(self.store)

    def worked(self) -> bool:
        """Did the agent change anything since its ACK (a claim, a checkpoint, a commit...)?"""
        return bool(self._baseline) and progress(self.store) != self._baseline

    # -- progress ------------------------------------------------------------------------

    def _activity(self, agent: Agent) -> tuple[Any, ...]:
        """What moves while an agent works. Its output is the log's size for a child, and
        for a pane the shape of its screen (agent_output.screen_shape): the pane's log
        grows with every redraw of a spinner, which is no progress."""
        repo = self.store.repo
        paths = [repo.git_dir / "handoff"]
        if agent.tmux is None:
            paths.insert(0, agent.status_file.with_suffix(".log"))
        sizes: list[Any] = []
        for path in paths:
            try:
                info = path.stat()
                sizes.append((info.st_size, info.st_mtime_ns))
            except OSError:
                sizes.append((0, 0))
        if agent.tmux is not None:
            sizes.append(agent_output.screen_shape(self.screen(agent)))
        return (self.store.head(), repo.head(), *sizes, frozenset(procs.tree(agent.pid)))

    def hung(self, agent: Agent) -> str | None:
        """What to report once the agent made no progress for hang_timeout seconds, else
        None (looked at once per ACTIVITY_EVERY)."""
        if self.hang_timeout is None:
            return None
        now = time.monotonic()
        if now - self._looked_at < ACTIVITY_EVERY:
            return None
        self._looked_at = now
        seen = self._activity(agent)
        if seen != self._seen:
            self._seen, self._seen_at = seen, now
            return None
        idle = now - self._seen_at
        if idle < self.hang_timeout:
            return None
        if agent.tmux is not None and agent_output.limit_in(self.cli, None, self.screen(agent),
                                                            datetime.datetime.now().astimezone(),
                                                            self.foreign(self.number)) is not None:
            self._seen_at = now  # an interactive CLI waiting out a limit on its screen resumes by itself
            return None
        return (f"hung: no progress for {span(idle)} (no output, commit, state change or new process; "
                f"--hang-timeout {self.hang_timeout:g}s)")

    def turn_ended(self, agent: Agent) -> str | None:
        """What to report once an interactive agent's turn is over, else None (tmux only;
        read once per SCREEN_EVERY). Over: its pane has rested at the CLI's prompt for
        TURN_IDLE seconds: no working status line, not a screen for a person, not a limit
        the CLI waits out by itself, and nothing changed meanwhile (the state, HEAD, the
        agent's processes; for a CLI whose working line is not known, its screen). An
        interactive CLI whose turn ended waits for a person for ever; the relay ends its
        session as a handoff does."""
        now = time.monotonic()
        if agent.tmux is None or now - self._screen_at < SCREEN_EVERY:
            return None
        self._screen_at = now
        screen = self.screen(agent)
        limit = agent_output.limit_in(self.cli, None, screen, datetime.datetime.now().astimezone(),
                                      self.foreign(self.number)) if screen.strip() else None
        waits = limit is not None and _RESUMES.search(screen) and not _working(self.cli, screen)
        self._pane_waits(limit if waits and limit is not None and limit.line not in self._pane_done else None)
        if (not screen.strip() or agent_output.busy_in(screen) or agent_output.person_prompt_in(self.cli, screen)
                or limit is not None):
            self._rest, self._rest_at = (), now
            return None
        # the known CLIs show a working status line for as long as a turn runs, and change
        # their resting screen by themselves (hints rotate below the prompt every few
        # seconds): their screen's text is no activity; another CLI's is
        shape = "" if self.cli in agent_output.BUSY_LINES else agent_output.screen_shape(screen)
        rest = (shape, self.store.head(), self.store.repo.head(), frozenset(procs.tree(agent.pid)))
        if rest != self._rest:
            self._rest, self._rest_at = rest, now
            return None
        if now - self._rest_at < TURN_IDLE:
            return None
        return f"its turn ended: the pane has rested at the CLI's prompt for {span(now - self._rest_at)}"

    def _pane_waits(self, limit: Limit | None) -> None:
        """An interactive CLI that says it continues by itself at the reset ("set to continue
        automatically at 3:52pm") is left alone until then: no kill, no new session; the
        relay record (status, dashboard) and the log say so, and again when it went on."""
        if (limit.line if limit else None) == self._pane_limit:
            return
        number, was, self._pane_limit = self.number, self._pane_limit, limit.line if limit else None
        if limit is None:  # working again (its status line), or the limit gone from its screen
            self._pane_done.add(str(was))
            self.record({"waiting": None}, ("WARN", f"relay: session {number}: the agent's pane no longer shows the "
                                                    f"limit ({printable(str(was))[:200]}): it went on", LIMIT_CATEGORY))
            return
        when = f"at {limit.resets_at}" if limit.resets_at else "at the reset"
        line = printable(limit.line)[:300]
        self.say(f"relay: session {number}: the agent's pane waits for {KIND_WORDS.get(limit.kind, 'the limit')} and "
                 f"continues by itself {when}: left alone until then")
        self.record({"waiting": {"kind": limit.kind, "since": now_iso(), "until": limit.resets_at, "line": line}},
                    ("WARN", f"relay: session {number}: {limit.kind.replace('_', ' ')} on the agent's pane: {line}; "
                             f"it continues by itself {when}; left alone (no kill, no new session)", LIMIT_CATEGORY))

    # -- a person's screen (tmux) ----------------------------------------------------------

    def screen(self, agent: Agent) -> str:
        """The text on the agent's tmux pane ("" without tmux)."""
        if agent.tmux is None:
            return ""
        socket_name, name = agent.tmux
        proc = subprocess.run(["tmux", "-L", socket_name, "capture-pane", "-p", "-t", f"={name}:"],
                              capture_output=True, text=True, errors="replace")
        return proc.stdout if proc.returncode == 0 else ""

    def _asked_on_the_way_out(self, number: int) -> str | None:
        """A first-run screen in what an agent that exited before its ACK printed (a
        terminal's log: its escape sequences read as spaces)."""
        return agent_output.person_prompt_in(self.cli, _ESCAPE.sub(" ", self.output(number)))

    def person_prompt(self, agent: Agent) -> str | None:
        """What to set, when the agent's pane shows it waiting for a person (tmux only;
        the pane read once per SCREEN_EVERY)."""
        now = time.monotonic()
        if agent.tmux is None or now - self._screen_at < SCREEN_EVERY:
            return None
        self._screen_at = now
        return agent_output.person_prompt_in(self.cli, self.screen(agent))

    # -- waiting a limit out ---------------------------------------------------------------

    def limited(self, agent: Agent, number: int, status: int | None) -> bool:
        """The agent exited on a usage or rate limit or an API outage: wait it out, then True
        (launch it again into the same session) unless the session had handed off."""
        limit = self.limit(number, status) if status else None
        if limit is None:
            return False
        self.waiting(None)
        agent.kill()  # whatever it left behind
        if self.switch is not None:
            waited = self.switch(limit, number)
            if waited is None:  # another agent goes on in this session now: the exit's document is no end
                withdraw_exit_doc(self.store, number, self.launched_at)
                return not handoff.handed_off(self.store, number)
            limit = waited
        self.wait_out(limit, number)
        return not handoff.handed_off(self.store, number)

    def wait_out(self, limit: Limit, number: int) -> None:
        """Wait `limit` out: the relay record says so (status, dashboard), the log has it
        under LIMIT, the session's claims are renewed to outlast the wait, and a document
        the agent's exit wrote is withdrawn (the session goes on afterwards)."""
        self.streak = 1 if self.worked() else self.streak + 1  # a launch that worked starts the backoff over
        now = datetime.datetime.now(datetime.UTC)
        seconds, at_reset = wait_seconds(limit, self.streak, self.backoff, self.backoff_max, now, self.wait_cap)
        if self.before_wait is not None:
            self.before_wait(number, seconds)
        until = now + datetime.timedelta(seconds=seconds)
        stamp = until.strftime("%Y-%m-%dT%H:%M:%SZ")
        words = KIND_WORDS.get(limit.kind, "the limit")
        line = printable(limit.line)[:300]
        how = "the reset time it printed" if at_reset else f"backoff, limit {self.streak} in a row"
        if beyond_cap(limit, now, self.wait_cap):
            how = (f"it printed a reset at {limit.resets_at}, further than --max-limit-wait "
                   f"{span(self.wait_cap)}: the wait is cut to that")
            self.say(f"relay: session {number}: the reset it printed ({limit.resets_at}) is further away than "
                     f"--max-limit-wait ({span(self.wait_cap)}): waiting {span(seconds)} at most")
        withdrawn = withdraw_exit_doc(self.store, number, self.launched_at)
        self.say(f"relay: session {number}: the agent stopped on {words}: {line}")
        self.say(f"relay: waiting for {words}, resumes at {clock(until, now)} (in {span(seconds)})")
        self.record({"waiting": {"kind": limit.kind, "since": now_iso(), "until": stamp, "line": line}},
                    ("WARN", f"relay: session {number}: {limit.kind.replace('_', ' ')}: {line}; waiting until "
                             f"{stamp} ({how}); no session or launch counted"
                     + ("; the document its exit wrote withdrawn" if withdrawn else ""), LIMIT_CATEGORY))
        renew_claims(self.store, number, int(min(seconds + 60, self.wait_cap)))  # never past the cap
        deadline = time.monotonic() + seconds
        try:
            while (left := deadline - time.monotonic()) > 0:
                self.waiting(f"session {number}: waiting for {words}: {span(left)} left")
                time.sleep(min(left, 1.0))
        finally:
            self.waiting(None)
        renew_claims(self.store, number, None)
        self.record({"waiting": None}, ("WARN", f"relay: session {number}: {words} waited out; "
                                                 "launching the agent again", LIMIT_CATEGORY))
        self.say(f"relay: session {number}: {words} waited out; launching the agent again")


def _working(cli: str, screen: str) -> bool:
    """Does the pane show `cli`'s own working status line (not another CLI's: Gemini's
    "esc to cancel" is Claude Code's "Esc to cancel" of an automatic continuation)?"""
    busy = registry.CLIS[cli].BUSY if cli in registry.CLIS else None
    return re.search("(?i)" + busy, screen) is not None if busy else agent_output.busy_in(screen)


def _last_line(text: str) -> str | None:
    for line in reversed(text.splitlines()):
        shown = printable(line).strip()
        if shown:
            return shown[:200]
    return None
