"""The budgets a relay holds: tokens, money, wall time and sessions, per run, per session
and per task (docs/git-handoff.md, "relay", budgets).

The user sets them with `git config handoff.budget.<key>` and `relay --budget KEY=VALUE`
(an option wins over its key). A budget is reached when what was used is at least the
budget. While a session runs the relay asks `Tracker.over` (at most once a second: it
reads the agent's transcripts, ops/usage.py); a budget reached ends the session cleanly
(`Tracker.end_session`: a WARN line of category BUDGET, the session record's `budget`, the
session's claims released, or kept with claim=keep, a task over its own budget set aside;
then the relay writes the document and ends the session as for any session). A task's
budgets are asked once more when its session has ended (`Tracker.session_ended`): a cost is
printed as the agent exits, so a task still held and over its own budget then is set aside
the same way. A task's time is the wall time it was held under claims, over all of them
(core/selection.held_through). A run budget reached, before a session starts or during one,
stops the relay: `Tracker.check_run` raises the one-line reason (exit 1).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from git_handoff.agent_cli.agent_process import Agent
from git_handoff.agent_cli.usage import Usage, result_cost
from git_handoff.core.errors import Negative, UsageError
from git_handoff.core.model import Task, now_iso, parse_duration
from git_handoff.core.selection import held_through
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import usage, work
from git_handoff.state.session_records import put_record, read_session, session_path
from git_handoff.state.store import StateStore, Tx

# KEY -> (scope, measure, its git config name)
KINDS: dict[str, tuple[str, str, str]] = {
    "tokens": ("run", "tokens", "handoff.budget.tokens"),
    "cost": ("run", "cost", "handoff.budget.cost"),
    "time": ("run", "time", "handoff.budget.time"),
    "sessions": ("run", "sessions", "handoff.budget.sessions"),
    "session-tokens": ("session", "tokens", "handoff.budget.sessionTokens"),
    "session-time": ("session", "time", "handoff.budget.sessionTime"),
    "session-cost": ("session", "cost", "handoff.budget.sessionCost"),
    "task-tokens": ("task", "tokens", "handoff.budget.taskTokens"),
    "task-cost": ("task", "cost", "handoff.budget.taskCost"),
    "task-time": ("task", "time", "handoff.budget.taskTime"),
}
CLAIM_KEY = "handoff.budget.claim"  # release (default) | keep: a session's claims when a budget ends it
CATEGORY = "BUDGET"  # the log category of a budget reached
CHECK_EVERY = 1.0  # seconds between two readings of a running session's transcripts
COST_TAIL = 1 << 20  # bytes of a session's output read for the cost its agent printed
_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9}


@dataclass
class Budgets:
    limits: dict[str, float] = field(default_factory=dict)  # KEY -> the budget (seconds for a time)
    keep_claim: bool = False

    def __bool__(self) -> bool:
        return bool(self.limits)


def _value(key: str, text: str, where: str) -> float:
    measure = KINDS[key][1]
    raw = text.strip().lower()
    try:
        if measure == "time":
            value = float(parse_duration(raw))
        elif measure == "cost":
            value = float(raw.removeprefix("$"))
        else:
            scale = _SUFFIX.get(raw[-1:], 1)
            value = float(int(raw[:-1] if scale > 1 else raw) * scale)
    except (UsageError, ValueError):
        kind = {"time": "a duration (90s, 30m, 8h)", "cost": "an amount in dollars (2.50)"}.get(
            measure, "a whole number (50000, 200k, 2M)")
        raise UsageError(f"{where}: {text!r} is not {kind}") from None
    if not 0 < value < 1e15:
        raise UsageError(f"{where}: a budget must be positive, not {text!r}")
    return value


def _claim_choice(text: str, where: str) -> bool:
    if text.strip() not in ("release", "keep"):
        raise UsageError(f"{where}: claim is release or keep, not {text!r}")
    return text.strip() == "keep"


def configured(repo: Repo, options: Iterable[str] = ()) -> Budgets:
    """The budgets of handoff.budget.* overridden by `--budget KEY=VALUE` options (UsageError,
    exit 2, on a key or value that is none)."""
    out = Budgets()
    for key, (_, _, name) in KINDS.items():
        text = repo.config_get(name)
        if text:
            out.limits[key] = _value(key, text, name)
    claim = repo.config_get(CLAIM_KEY)
    if claim:
        out.keep_claim = _claim_choice(claim, CLAIM_KEY)
    for option in options:
        key, eq, text = option.partition("=")
        key = key.strip()
        if not eq or (key not in KINDS and key != "claim"):
            raise UsageError(f"--budget {option!r}: use KEY=VALUE, KEY one of {', '.join([*KINDS, 'claim'])}")
        if key == "claim":
            out.keep_claim = _claim_choice(text, "--budget claim")
        else:
            out.limits[key] = _value(key, text, f"--budget {key}")
    return out


def _amount(measure: str, value: float) -> str:
    if measure == "time":
        return f"{value:.0f}s"
    if measure == "cost":
        return f"${value:.2f}"
    return f"{value:.0f}"


def _reached(key: str, used: float, limit: float) -> str:
    scope, measure, _ = KINDS[key]
    label = {"run": "the run's", "session": "the session's", "task": "a task's"}[scope]
    return f"{label} {measure} budget reached ({_amount(measure, used)} of {_amount(measure, limit)}; --budget {key})"


@dataclass
class Tracker:
    """What one relay run used, against its budgets."""

    store: StateStore
    budgets: Budgets
    relay_dir: Path
    started: float = field(default_factory=time.monotonic)
    sessions: int = 0
    spent: Usage = field(default_factory=Usage)  # the ended sessions of this run
    session_started: float = 0.0
    checked_at: float = 0.0
    run_over: str | None = None  # a run budget reached during a session: the relay stops after it
    over_tasks: list[str] = field(default_factory=list)
    ended: tuple[int, str] | None = None  # the session a budget ended, and why

    def check_run(self) -> None:
        """Before a session: Negative (the relay stops, exit 1) once a run budget is reached."""
        reason = self.run_over or self._run_reached(Usage(), time.monotonic(), starting=True)
        if reason:
            raise Negative(f"relay stopped: {reason} after {self.sessions} session(s)")
        self.sessions += 1
        self.session_started = time.monotonic()
        self.checked_at = 0.0

    def _run_reached(self, live: Usage, now: float, *, starting: bool = False) -> str | None:
        limits = self.budgets.limits
        total = self.spent + live
        measures = {"tokens": float(total.tokens), "cost": total.cost_usd, "time": now - self.started,
                    "sessions": float(self.sessions) if starting else None}
        for key in ("tokens", "cost", "time", "sessions"):
            used = measures[key]
            if key in limits and used is not None and used >= limits[key]:
                return _reached(key, used, limits[key])
        return None

    def wait_passes_run(self, seconds: float) -> str | None:
        """The run's time budget a wait of `seconds` (a usage limit's) would reach, else None:
        the relay stops now rather than wait past its budget and launch the agent again."""
        limit = self.budgets.limits.get("time")
        if limit is None:
            return None
        at = time.monotonic() - self.started + seconds
        if at < limit:
            return None
        return (f"the run's time budget would be reached while waiting {seconds:.0f}s for a limit "
                f"({_amount('time', at)} of {_amount('time', limit)}; --budget time)")

    def waited(self, seconds: float) -> None:
        """A limit's wait of `seconds` (the session stays open through it) is not the
        session's time: the session-time budget holds the agent's own time."""
        self.session_started += seconds

    def over(self, number: int) -> str | None:
        """The budget the running session `number` reached, else None (read at most once
        every CHECK_EVERY seconds)."""
        limits = self.budgets.limits
        now = time.monotonic()
        if not limits or now - self.checked_at < CHECK_EVERY:
            return None
        self.checked_at = now
        live, _ = usage.of_session(self.store.repo, number)
        live = live or Usage()
        # the session's cost so far: what its transcripts say (OpenCode's) and what its agents
        # printed as they exited (Claude Code's JSON result: a relaunch within the session)
        printed = self.cost_of(number) if "session-cost" in limits or "task-cost" in limits else None
        session = {"tokens": float(live.tokens), "time": now - self.session_started,
                   "cost": (live.cost_usd or 0.0) + (printed or 0.0)}
        for key in ("session-tokens", "session-time", "session-cost"):
            used = session[KINDS[key][1]]
            if key in limits and used >= limits[key]:
                return _reached(key, used, limits[key])
        self.run_over = self._run_reached(dataclasses.replace(live, cost_usd=session["cost"] or None), now)
        if self.run_over:
            return self.run_over
        return self._task_over(number, live.tokens, session["cost"] or None)

    def _task_over(self, number: int, live: int, cost: float | None) -> str | None:
        """The first task budget a task of session `number` reached: its tokens and its cost
        with its share of the session's so far (`live` tokens, `cost` printed), its held
        time with its claim's time so far."""
        limits = {key: limit for key, limit in self.budgets.limits.items() if KINDS[key][0] == "task"}
        if not limits:
            return None
        tasks = usage.worked_on(self.store.snapshot(), number)
        now = now_iso()
        found: list[tuple[Task, str, float]] = []
        micro = usage.shares(round((cost or 0) * 1e6), len(tasks))
        for task, share, paid in zip(tasks, usage.shares(live, len(tasks)), micro, strict=True):
            used = {"task-tokens": float(task.tokens + share), "task-cost": (usage.micro_usd(task) + paid) / 1e6,
                    "task-time": float(held_through(task, now))}
            reached = [(key, used[key]) for key in limits if used[key] >= limits[key]]
            if task.status == "in_progress" and reached:
                found.append((task, *reached[0]))
        if not found:
            return None
        self.over_tasks = [t.id for t, _, _ in found]
        task, key, used_now = found[0]
        return f"task {task.id}: " + _reached(key, used_now, limits[key])

    def end_session(self, number: int, reason: str, agent: Agent, say: Callable[[str], None]) -> None:
        """A budget ends session `number`: its agent ended, logged (category BUDGET) and
        recorded; its claims are released (or kept) and a task over its own budget set aside
        once the session ended (`session_ended`: its tokens are charged to them first)."""
        agent.kill()
        what = "kept" if self.budgets.keep_claim else "released"
        say(f"relay: session {number}: {reason}; ending the session (its claims {what})")
        self.ended = (number, reason)
        self._record(number, reason)

    def _record(self, number: int, reason: str) -> None:
        """The budget that ended session `number`: in its record (`budget`) and the log (BUDGET)."""
        what = "kept" if self.budgets.keep_claim else "released"

        def apply(tx: Tx) -> None:
            record = read_session(tx, number)
            if record is not None:
                record["budget"] = reason
                put_record(tx, session_path(tx, number), record)
            tx.log("WARN", f"relay: session {number}: {reason}; session ended, its claims {what}",
                   category=CATEGORY)

        StateStore(self.store.repo, session=number).transact(apply)

    def _after_budget(self, number: int, reason: str) -> None:
        store = StateStore(self.store.repo, session=number)
        over = list(self.over_tasks)
        self.over_tasks = []
        claimed = [t.id for t in store.snapshot().tasks().values()
                   if t.status == "in_progress" and t.claim.session == number]
        for task_id in claimed:
            if task_id in over or not self.budgets.keep_claim:
                try:
                    work.release(store, task_id, force=True)
                except Negative:
                    continue  # no longer claimed (completed meanwhile)
            if task_id in over:
                store.transact(functools.partial(_set_aside, task_id=task_id, reason=reason))

    def cost_of(self, number: int) -> float | None:
        """The cost the agent of session `number` printed in its output, where it printed one
        (Claude Code's `-p --output-format json` result), else None."""
        try:
            with (self.relay_dir / f"session-{number}.log").open("rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - COST_TAIL))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return None
        return result_cost(tail)

    def session_ended(self, number: int, say: Callable[[str], None] | None = None) -> None:
        """Count session `number`'s use (as sessions.end recorded it) in the run's; a task it
        held that is over its own budget now (the cost is printed when the agent exits) is set
        aside as one found while it ran."""
        record = read_session(self.store.snapshot(), number) or {}
        used = record.get("usage") or {}
        cost = used.get("cost_usd")
        self.spent = self.spent + Usage(int(used.get("input_tokens") or 0), int(used.get("output_tokens") or 0),
                                        int(used.get("turns") or 0), cost if isinstance(cost, float | int) else None)
        if self.ended is None and (reason := self._task_over(number, 0, None)) is not None:
            if say is not None:
                say(f"relay: session {number}: {reason}; setting the task aside")
            self._record(number, reason)
            self.ended = (number, reason)
        if self.ended is not None and self.ended[0] == number:
            self._after_budget(*self.ended)
        self.ended = None


def _set_aside(tx: Tx, task_id: str, reason: str) -> None:
    """A task over its own budget, its claim released: failed for good, its work tree left as
    it is (no rollback:
    `git handoff reopen ID --reason TEXT` gives it back, the budget raised first)."""
    task: Task | None = tx.task(task_id)
    if task is None or task.status != "pending":  # released just before
        return
    new = dataclasses.replace(task, status="failed", attempts=max(task.attempts, task.max_attempts),
                              error_log=(*task.error_log, f"[{CATEGORY}] {reason} at {now_iso()}"))
    tx.put_task(new)
    tx.log("ERROR", f"{reason}; set aside (failed, no rollback)", task=task_id, category=CATEGORY)
