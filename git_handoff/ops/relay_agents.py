"""The relay's agents, in the order the user gave them (`relay --agent CMD` repeated, else
the values of `handoff.agents`): which one the next launch runs.

The first agent runs while it can. When it stops on a limit whose reset is further away
than `switch_after` (`--switch-after`, `handoff.switchAfter`, default an hour), the next
launch runs the first agent in the order that is not itself limited, into the same
session (its claims kept, no session or launch counted); once an earlier agent's reset
has passed, the next launch is that one's again. When every agent is limited the relay
waits as for one agent, until the earliest reset (ops/relay_wait.py). Each switch is a
log line of its own (category LIMIT, with its reason), is kept in the relay record
(`status`, the dashboard) and in the session record's `agents` (`session show`).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from dataclasses import dataclass, field

from git_handoff.agent_cli import agent_output
from git_handoff.agent_cli.agent_output import Limit
from git_handoff.core.errors import HandoffError, UsageError
from git_handoff.core.model import (
    MAX_RELAY_FAILURES,
    now_iso,
    parse_duration,
    parse_time,
    printable,
)
from git_handoff.core.record_schemas import RelayRecord
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.session_records import put_record, read_session, session_path
from git_handoff.state.store import StateStore, Tx

SWITCH_AFTER = 3600.0  # a limit resetting further away than this: switch to the next agent
CATEGORY = "LIMIT"  # a switch's log category: a limit caused it
SWITCHES_KEPT = MAX_RELAY_FAILURES

Record = Callable[[RelayRecord, tuple[str, str, str | None] | None], object]


def configured(repo: Repo, given: tuple[str, ...] | list[str]) -> list[str]:
    """The agent commands: the --agent values given, else handoff.agents (every value, in
    order); UsageError (exit 2) when there is none or one is blank."""
    commands = list(given) or repo.local_config_values("handoff.agents")
    if not commands:
        one = repo.config_get("handoff.agents")
        commands = [one] if one else []
    if not commands:
        raise UsageError("--agent needs a command (or set handoff.agents: `git config --add handoff.agents CMD`)")
    if any(not c.strip() for c in commands):
        raise UsageError("--agent needs a command")
    return commands


def switch_after(repo: Repo, given: str | None) -> float:
    """--switch-after, else handoff.switchAfter (seconds, or a duration: 90s, 30m, 2h), else
    an hour; UsageError (exit 2) naming where a bad value came from."""
    where, value = ("--switch-after", given) if given is not None else (
        "handoff.switchAfter", repo.config_get("handoff.switchAfter"))
    if value is None or (not value and where != "--switch-after"):
        return SWITCH_AFTER
    text = value.strip()
    try:
        seconds = float(text) if text.replace(".", "", 1).isdigit() else float(parse_duration(text))
    except UsageError as exc:
        raise UsageError(f"{where}: {exc.message}") from None
    if seconds > 30 * 24 * 3600:
        raise UsageError(f"{where}: {value!r} is more than 30 days")
    return seconds


def labels(commands: list[str]) -> list[str]:
    """A short name per command: its CLI's kind ("claude"), numbered when two share one."""
    kinds = [agent_output.cli_of(c) for c in commands]
    return [k if kinds.count(k) == 1 else f"{k}#{i + 1}" for i, k in enumerate(kinds)]


@dataclass
class Agents:
    """Which of the relay's agents runs next, and the limits they reported."""

    commands: list[str]
    switch_after: float = SWITCH_AFTER
    record: Record | None = None  # writes the relay record with a log line (ops/relay_record.update_record)
    say: Callable[[str], None] = print
    current: int = 0
    limited_until: dict[int, float] = field(default_factory=dict)  # agent -> epoch its limit resets at
    switches: list[dict[str, object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.names = labels(self.commands)

    @property
    def command(self) -> str:
        return self.commands[self.current]

    @property
    def name(self) -> str:
        return self.names[self.current]

    def _free(self, now: float) -> list[int]:
        return [i for i in range(len(self.commands)) if self.limited_until.get(i, 0.0) <= now]

    def choose(self, number: int, now: float | None = None) -> str:
        """Before each launch: the first agent whose limit (if any) has reset; a return to
        it from another is a switch. The command to launch."""
        now = _now() if now is None else now
        free = self._free(now)
        if free and free[0] != self.current:
            earlier = self.limited_until.pop(free[0], None)
            why = (f"its limit reset at {_stamp(earlier)} has passed" if earlier is not None
                   else "it comes first in the order")
            self._switch(number, free[0], f"back to {self.names[free[0]]}: {why}")
        return self.command

    def after_limit(self, limit: Limit, number: int, now: float | None = None) -> Limit | None:
        """The current agent stopped on `limit`: None when the relay switched to another agent
        (launch it now, no wait); else the limit to wait out (the earliest reset of all
        agents when every one is limited)."""
        if len(self.commands) < 2 or not limit.resets_at:
            return limit
        now = _now() if now is None else now
        try:
            resets = parse_time(limit.resets_at).timestamp()
        except HandoffError:
            return limit
        if resets - now <= self.switch_after:
            return limit  # a short wait: this agent's own, as with one agent
        self.limited_until[self.current] = resets
        free = [i for i in self._free(now) if i != self.current]
        words = limit.kind.replace("_", " ")
        if free:
            self._switch(number, free[0], f"{self.name} stopped on its {words} until {_stamp(resets)}, further "
                                          f"than the switch threshold {_span(self.switch_after)}: "
                                          f"{printable(limit.line)[:160]}")
            return None
        earliest = min(self.limited_until.items(), key=lambda pair: pair[1])
        self.say(f"relay: session {number}: every agent is limited; the earliest reset is "
                 f"{self.names[earliest[0]]}'s at {_stamp(earliest[1])}")
        if earliest[0] != self.current:  # the wait ends at its reset: it is the one launched then
            self._switch(number, earliest[0], f"every agent is limited and {self.names[earliest[0]]}'s limit resets "
                                              f"first, at {_stamp(earliest[1])}: waiting for it ({self.name} stopped "
                                              f"on its {words} until {_stamp(resets)})")
            self.limited_until.pop(earliest[0], None)
            return dataclasses.replace(limit, resets_at=_stamp(earliest[1]))
        self.limited_until.pop(self.current, None)
        return limit

    def _switch(self, number: int, to: int, reason: str) -> None:
        before = self.name
        self.current = to
        entry: dict[str, object] = {"at": now_iso(), "session": number, "from": before, "to": self.name,
                                    "reason": printable(reason)[:400]}
        self.switches = [*self.switches, entry][-SWITCHES_KEPT:]
        text = f"relay: session {number}: switching agent {before} -> {self.name}: {reason}"
        self.say(text)
        if self.record is not None:
            self.record({"agent": self.command, "agent_name": self.name, "switches": self.switches,
                         "limited": self.limited()},
                        ("WARN", printable(text), CATEGORY))

    def limited(self) -> list[dict[str, str]]:
        """The agents limited now and until when (for `status` and the dashboard)."""
        return [{"agent": self.names[i], "until": _stamp(until)} for i, until in sorted(self.limited_until.items())]


def note_session(store: StateStore, number: int, name: str) -> None:
    """Add `name` to session `number`'s `agents` (the agents that ran in it, in order)."""
    def apply(tx: Tx) -> None:
        record = read_session(tx, number)
        if record is None:
            return
        ran = [str(a) for a in (record.get("agents") or [])]
        if ran and ran[-1] == name:
            return
        record["agents"] = [*ran, name][-50:]
        put_record(tx, session_path(tx, number), record)

    store.transact(apply)


def _now() -> float:
    return datetime.datetime.now(datetime.UTC).timestamp()


def _stamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600} h" if whole % 3600 == 0 and whole else (
        f"{whole // 60} min" if whole % 60 == 0 and whole else f"{whole} s")
