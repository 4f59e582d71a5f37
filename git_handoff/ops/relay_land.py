"""The relay between sessions: whether work is left for a session (`work_left`), and the
integration queue (SPEC §10): between sessions the relay lands finished
work on the target (ops/integration.py), and while this clone has nothing it may claim but
other machines' work is on its way — tasks in progress elsewhere, dependencies whose work
has not landed yet, work waiting to land — it waits and looks again instead of starting
sessions that would find nothing (and stop the relay as idle).

On when `relay --integrate` is given, or `handoff.integrate` is true, or, unset, when
`handoff.target` names the target: a relay never pushes to a branch nobody named.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from git_handoff.core import landing, selection
from git_handoff.core.errors import HandoffError, Negative
from git_handoff.core.model import Task, now_iso
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import claim_base
from git_handoff.state import target as targets
from git_handoff.state import writers
from git_handoff.state.claim_checks import held_here
from git_handoff.state.store import StateStore
from git_handoff.state.this_clone import worker_identity

POLL = 5.0  # seconds between two looks while waiting for other machines' work
PATIENCE = 1800.0  # seconds without any progress anywhere after which a waiting relay stops


def progress(store: StateStore) -> tuple[int, int]:
    """(completed tasks, attempts spent): what a session changed."""
    tasks = store.snapshot().tasks()
    return (sum(1 for t in tasks.values() if t.status == "completed"), sum(t.attempts for t in tasks.values()))


def work_left(store: StateStore) -> tuple[bool, str]:
    """(is there work a session could do, why not)."""
    tasks = store.snapshot().tasks()
    if not tasks:
        return False, "there are no tasks (add some with `git handoff add` or `git handoff import`)"
    if all(t.status == "completed" for t in tasks.values()):
        return False, f"all {len(tasks)} task(s) completed"
    prepared, _ = selection.prepare(tasks, now_iso())
    hidden = writers.unapproved_at_head(store.repo)  # an unapproved writer's tasks are no work for an agent
    if selection.eligible(prepared, skip=hidden) or any(
            t.status == "in_progress" and t.id not in hidden for t in prepared.values()):
        return True, ""
    counts = selection.counts(prepared)
    if hidden:
        return False, (f"no eligible task left from approved writers: {len(hidden)} task(s) were last written by a "
                       "writer this clone has not approved (`git handoff trust --writers`)")
    return False, (f"no eligible task left: {counts['failed']} failed, {counts['blocked']} blocked, "
                   f"{counts['completed']} completed")


# Why a task's work waits that no amount of waiting changes (ops/integration.py's words): a
# check not approved here, an unapproved writer, no check, a check this clone cannot run.
_NEEDS_A_PERSON = ("is not approved on this clone", "does not approve", "has no check to run",
                   "could not run in the scratch worktree")


def wanted(repo: Repo, flag: bool | None) -> bool:
    """Whether this relay integrates (the module's docstring)."""
    if flag is not None:
        return flag
    configured = repo.config_get("handoff.integrate")
    if configured is not None:
        return repo.config_bool("handoff.integrate")
    return bool(repo.config_get("handoff.target"))


@dataclass
class Lander:
    store: StateStore
    say: Callable[[str], None]
    poll: float = POLL
    patience: float = PATIENCE
    _since: float = field(default_factory=time.monotonic)
    _seen: tuple[int, int, int] = (-1, -1, -1)
    _held: tuple[tuple[str, str], ...] = ()

    def land(self) -> None:
        """One round of the queue; what it did said in one line, a failure too (never fatal:
        the work stays published and the next round tries again)."""
        from git_handoff.ops import integration  # noqa: PLC0415  (the remote side: only a relay that integrates)

        try:
            report = integration.integrate(self.store)
        except HandoffError as exc:
            self.say(f"relay: integrate: {exc.message}")
            return
        if report["landed"] or report["returned"]:
            self.say(f"relay: integrate {report['target']}: {len(report['landed'])} landed, "
                     f"{len(report['returned'])} sent back, {len(report['waiting'])} waiting")
        held = tuple((w["task"], w["why"]) for w in report["waiting"])
        if held and held != self._held:  # why work does not land, said once each time it changes
            shown = "; ".join(f"{tid}: {why}" for tid, why in held[:3]) + (" …" if len(held) > 3 else "")
            self.say(f"relay: integrate {report['target']}: {len(held)} waiting ({shown})")
        self._held = held

    def waiting(self) -> str | None:
        """Why this clone should wait rather than start a session, or None."""
        repo = self.store.repo
        tasks = self.store.snapshot().tasks()
        prepared, _ = selection.prepare(tasks, now_iso())
        hidden = writers.unapproved_at_head(repo)
        worker, root = worker_identity(repo, None), str(repo.root())
        if any(t.status == "in_progress" and held_here(t, root, worker, repo) for t in prepared.values()):
            return None  # a claim of this worktree: a session recovers it
        eligible = selection.eligible(prepared, skip=frozenset(hidden))
        if eligible:
            return _eligible_wait(repo, prepared, eligible)
        elsewhere = [t.id for t in prepared.values() if t.status == "in_progress" and t.id not in hidden]
        if elsewhere:
            return f"{len(elsewhere)} task(s) in progress on other machines"
        return self._landing_wait(prepared)

    def _landing_wait(self, prepared: Mapping[str, Task]) -> str | None:
        """The work that can land with time, if any: not work only a person can unblock
        (_NEEDS_A_PERSON: a task behind a dependency that failed waits for a person)."""
        stuck = {tid for tid, why in self._held if any(words in why for words in _NEEDS_A_PERSON)}
        order = landing.queue(prepared).order
        for task in order:  # in landing order: behind a stuck dependency is stuck too
            if stuck & set(task.depends_on):
                stuck.add(task.id)
        unlanded = [t for t in order if t.id not in stuck]
        if unlanded:
            return f"{len(unlanded)} task(s)' work waits to land ({', '.join(t.id for t in unlanded[:5])})"
        return None

    def pause(self, why: str) -> None:
        """Wait one poll; stop the relay (Negative) after `patience` without progress."""
        tasks = self.store.snapshot().tasks().values()
        seen = (sum(t.status == "completed" for t in tasks), sum(landing.landed(t) for t in tasks),
                sum(t.status == "in_progress" for t in tasks))
        now = time.monotonic()
        if seen != self._seen:
            self._seen, self._since = seen, now
            self.say(f"relay: waiting: {why}")
        elif now - self._since > self.patience:
            raise Negative(f"relay stopped: waited {self.patience:g}s with no progress anywhere ({why})")
        time.sleep(self.poll)


def _eligible_wait(repo: Repo, prepared: Mapping[str, Task], eligible: list[Task]) -> str | None:
    """None when one of the `eligible` tasks can start on the target's tip (or HEAD), else
    that they all wait for their dependencies' work to land."""
    goal = claim_base.target_of(repo)
    base = (targets.tip(repo, goal) if goal else None) or repo.head()
    if base is None:
        return None
    work = claim_base.WorkAt(repo, base)
    if any(not work.lacking(t, prepared) for t in eligible):
        return None
    return f"{len(eligible)} eligible task(s) wait for their dependencies' work to land"
