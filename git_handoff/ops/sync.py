"""Share the state through any git remote: fetch, merge, push (docs/fleet.md), laid out so
that no ref is moved by every machine (git_handoff.remote.layout has the layout).

- Fetch with the git CLI into remote-tracking refs (refs/remotes/<remote>/harness/*),
  checked first (git_handoff.remote.incoming) — never onto local refs, which only move by
  compare-and-swap after a merge.
- Merge every state the remote holds (each clone's, and the one-ref state of earlier
  versions) into the local one: fast-forward when one side contains the other, else a
  3-way merge (git_handoff.core.merge) written as a merge commit with both parents.
- Push this clone's state to its own ref on the remote (only this clone moves it, so it
  always fast-forwards), its notes beside it, new attempts, and delete the claim refs
  this clone's finished claims left. A ref the server could not lock is retried.
- `transact_remote` runs one transaction whose commit only counts once the remote
  accepted it, with the task's claim ref moved by compare-and-swap in the same atomic
  push: the base of `claim --remote` (ops/claim.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import TypedDict, TypeVar

from git_handoff.core import field_merge, merge
from git_handoff.core.errors import Contention, HandoffError, NotInitialized
from git_handoff.core.model import Task, now_iso
from git_handoff.core.selection import lease_expired
from git_handoff.ops import sync_plan
from git_handoff.ops.fleet_claims import CLOSED_CLAIM_SECONDS, fleet_view
from git_handoff.ops.fleet_claims import Fleet as Fleet  # callers (ops/claim.py) know it from here
from git_handoff.ops.fleet_claims import claims_to_prune as _claims_to_prune
from git_handoff.ops.retire import retirable
from git_handoff.remote import incoming, tracked, transport
from git_handoff.remote.push_outcome import ACCEPTED, ATOMIC, LOCKED, MOVED
from git_handoff.remote.transport import Remote
from git_handoff.state import integrate, quarantine, writers
from git_handoff.state.integrate import MergeStep
from git_handoff.state.snapshot import (
    ATTEMPTS_PREFIX,
    KEPT_PREFIXES,
    NOTES_REF,
    WORK_PREFIX,
    Snapshot,
)
from git_handoff.state.store import StateStore, Tx

# The names callers (cli, tests) know from this module.
fetch = transport.fetch
named_remote = transport.named_remote
use_remote = transport.use_remote
add_refspecs = transport.add_refspecs

T = TypeVar("T")

PUSH_TRIES = 8


class AttemptsReport(TypedDict):
    fetched: list[str]  # attempt refs taken from the remote
    pushed: list[str]
    conflicting: list[str]  # the same attempt ref differs here and there: both kept


class MergedReport(TypedDict):
    """What merging the remote's states and notes did (the part of a sync before the push)."""

    action: str  # the biggest step over all states: "" < no-remote-state < up-to-date < adopted < fast-forward < merged
    incoming: int
    conflicts: list[field_merge.ConflictJson]
    claims_lost: list[merge.LostClaim]
    notes: str  # none, up-to-date, adopted, fast-forward, merged
    states: int  # state heads the remote holds (one per publishing clone, plus the legacy ref)


class SyncReport(MergedReport, total=False):
    """What `sync` returns and `sync --json` prints (keys in this order)."""

    remote: str
    outgoing: int
    pushed: list[str]
    attempts: AttemptsReport
    work: AttemptsReport  # the tasks' published work (refs/harness/work/...), as the attempts
    retries: int
    claims_pruned: list[str]  # tasks whose finished claim refs this push deleted
    claims_closed: list[str]  # tasks whose claim refs this push moved to the commit that finished them
    quarantined: list[quarantine.Held]  # the remote's refs that failed the edge: not used
    retired: list[str]  # clones whose refs this push deleted (ops/retire.py)
    refspecs: dict[str, list[str]]  # what was added to / removed from remote.<name>.fetch
    state_commit: str | None


def _merged() -> MergedReport:
    return {"action": "", "incoming": 0, "conflicts": [], "claims_lost": [], "notes": "none", "states": 0}


class PublishReport(TypedDict):
    """What `publish` returns: the refs it pushed and the tries it took."""

    remote: str
    pushed: list[str]
    retries: int


# -- sync -------------------------------------------------------------------------------


def _check_and_integrate(store: StateStore, heads: list[tuple[str, str]]) -> MergeStep:
    """check -> integrate: every head ([(label, commit)]) this clone does not hold yet goes
    through the edge's parsers (git_handoff.remote.incoming: InvalidState, exit 2, nothing
    changed, for a state this version cannot read safely), then the merge engine
    (git_handoff.state.integrate) brings them all in."""
    fresh = integrate.fresh_heads(store, heads)
    incoming.check_incoming_states(store.repo, fresh)
    return integrate.integrate_all(store, heads, fresh)


def _merge_remote(store: StateStore, remote: Remote, report: MergedReport | SyncReport, *, notes: bool = True) -> None:
    """Check and merge every state and (`notes`) the notes the remote holds, as fetched, into ours."""
    repo = store.repo
    if writers.enabled(repo):  # what this clone held before its first merge under the setting is the baseline
        writers.approvals(repo)
    rank = ("", "no-remote-state", "up-to-date", "adopted", "fast-forward", "merged")
    heads = remote.state_heads(repo)
    report["states"] = len(heads)
    step: MergeStep = (_check_and_integrate(store, heads) if heads else
                       {"action": "no-remote-state", "incoming": 0, "conflicts": [], "claims_lost": []})
    if rank.index(step["action"]) > rank.index(report["action"] if report["action"] in rank else ""):
        report["action"] = step["action"]
    report["incoming"] += step["incoming"]
    report["conflicts"].extend(step["conflicts"])
    report["claims_lost"].extend(step["claims_lost"])
    if not notes:
        return
    notes_rank = ("none", "up-to-date", "adopted", "fast-forward", "merged")
    got = integrate.merge_notes(repo, store, remote.notes_heads(repo))
    if notes_rank.index(got) > notes_rank.index(report["notes"]):
        report["notes"] = got


def _round(store: StateStore, remote: Remote, report: SyncReport,
           say: Callable[[str], None] = lambda _text: None) -> bool:
    """One round: fetch -> check -> integrate -> publish; True when everything reached the remote."""
    repo = store.repo
    say(f"fetching from {remote.spec}")
    report["quarantined"] = fetch(repo, remote)
    say("merging the remote's state")
    _merge_remote(store, remote, report)
    for prefix, key in ((ATTEMPTS_PREFIX, "attempts"), (WORK_PREFIX, "work")):
        fetched, clashing = tracked.take_attempts(repo, remote, prefix)
        kept = report["work"] if key == "work" else report["attempts"]
        kept["fetched"].extend(fetched)
        kept["conflicting"] = clashing
    return _publish_round(store, remote, report, say)


def _seen(store: StateStore, remote: Remote) -> sync_plan.Seen:
    """What the refs hold as a round's publish begins (ops/sync_plan.py plans from it)."""
    repo = store.repo
    local = store.head()
    if local is None:
        raise NotInitialized(f"nothing to sync: neither this clone nor {remote.spec} has a git handoff state "
                             "(run `git handoff init`)")
    mine = repo.ref_target(remote.tracking(remote.my_state))
    legacy = None
    if repo.config_bool("handoff.legacyState"):
        legacy = (repo.ref_target(remote.state), repo.ref_target(remote.notes))
    remote_attempts = frozenset(prefix + name[len(remote.kept(prefix)):] for prefix in KEPT_PREFIXES
                                for name in remote.refs(repo, remote.kept(prefix)))
    prune, close = _claims_to_prune(repo, remote, local, Snapshot(repo, local))
    return sync_plan.Seen(
        local=local, published=mine, notes=repo.ref_target(NOTES_REF),
        notes_published=repo.ref_target(remote.tracking(remote.my_notes)),
        my_state=remote.my_state, my_notes=remote.my_notes, legacy=legacy,
        attempts=tuple(repo.refs_in(*KEPT_PREFIXES)), remote_attempts=remote_attempts,
        prune=prune, close=close, retired=retirable(repo, remote, local, mine))


def _publish_round(store: StateStore, remote: Remote, report: SyncReport, say: Callable[[str], None]) -> bool:
    """Push what the remote lacks: this clone's state and notes, new attempts, and the
    deletion of finished claim refs and retired clones' refs (each under a lease), as
    ops/sync_plan.py plans it and reads the answer; True when state and notes got there."""
    repo = store.repo
    plan = sync_plan.plan(_seen(store, remote))
    if plan.outgoing:
        report["outgoing"] = repo.count_commits(plan.seen.local, plan.seen.published)
    if plan.specs:
        say(f"pushing {len(plan.specs)} ref(s) to {remote.spec}")
    got = plan.read(transport.push(repo, remote, list(plan.specs), leases=dict(plan.leases)))
    if got.refused:
        # a hook or policy on the remote said no: fetching again will not change that
        raise transport.refused_error(remote, got.refused)
    for ref, oid in got.track:
        tracked.track(repo, remote, ref, oid)
    tracked.forget(repo, remote, list(got.forget))
    report["pushed"].extend(got.pushed)
    report["claims_pruned"].extend(got.claims_pruned)
    report["claims_closed"] += got.claims_closed
    report["retired"] = list(got.retired)
    for prefix, kept in ((ATTEMPTS_PREFIX, report["attempts"]), (WORK_PREFIX, report["work"])):
        kept["pushed"].extend(ref for ref in got.attempts_pushed if ref.startswith(prefix))
        stuck = [ref for ref in got.attempts_stuck if ref.startswith(prefix)]
        if stuck:
            kept["conflicting"] = sorted(set(kept["conflicting"]) | set(stuck))
    return got.done


def sync(store: StateStore, remote: str | None = None, *, tries: int = PUSH_TRIES,
         progress: Callable[[str], None] | None = None) -> SyncReport:
    """Fetch, merge and push the state, attempts and notes; a summary of what moved.
    `progress(text)`, when given, hears each step (a sync of many changes takes seconds)."""
    remote_obj = Remote(store.repo, remote)
    store.repo.sweep_tmp_refs()
    say = progress or (lambda _text: None)
    report: SyncReport = {
        "remote": remote_obj.spec, "action": "", "incoming": 0, "outgoing": 0, "conflicts": [],
        "claims_lost": [], "pushed": [], "attempts": {"fetched": [], "pushed": [], "conflicting": []},
        "work": {"fetched": [], "pushed": [], "conflicting": []}, "notes": "none", "retries": 0, "states": 0,
        "claims_pruned": [], "claims_closed": [], "quarantined": [], "retired": [],
    }
    for attempt in range(tries):
        if _round(store, remote_obj, report, say):
            report["refspecs"] = transport.add_refspecs(store.repo, remote_obj)
            report["state_commit"] = store.head()
            if report["action"] in ("up-to-date", "no-remote-state") and remote_obj.my_state in report["pushed"]:
                report["action"] = "pushed"
            stats("sync", retries=report["retries"])
            return report
        report["retries"] = attempt + 1
        transport.backoff(attempt, report["states"])
    stats("sync", retries=report["retries"], gave_up=True)
    raise Contention(f"{remote_obj.spec} kept rejecting the push ({tries} tries); nothing was lost, retry "
                     "`git handoff sync`")


def stats(command: str, **figures: object) -> None:
    """With GIT_HANDOFF_STATS=FILE, append one JSON line of figures (for bench/): how
    many tries a push took, never anything a user needs."""
    path = os.environ.get("GIT_HANDOFF_STATS")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"command": command, **figures}) + "\n")
    except OSError:
        pass


# -- a transaction that counts only once the remote has it -------------------------------


def transact_remote(store: StateStore, apply: Callable[[Tx, Fleet], T], claim_of: Callable[[T], str | None],
                    remote: str | None = None, *, tries: int = 30) -> T:
    """fetch -> merge -> apply -> push. Only a push the remote accepted makes the change;
    a rejected one is dropped and `apply` runs again on the newer state (so a claim that
    lost the race takes the next task). `claim_of(result)` names the task whose claim
    ref moves in the same atomic push (compare-and-swap against what was fetched), so two
    machines contend only for the same task. Contention (exit 3) after `tries`."""
    repo = store.repo
    remote_obj = Remote(repo, remote)
    lost = 0
    for attempt in range(tries):
        fetched_at = time.time()  # the wall clock: a machine suspended since the fetch counts
        fetch(repo, remote_obj, everything=False)
        _merge_remote(store, remote_obj, _merged(), notes=False)
        head = store.head()
        if head is None:
            raise NotInitialized("git handoff is not initialized here or on the remote: run `git handoff init`")
        fleet = fleet_view(repo, remote_obj, head)
        tx = Tx(store, Snapshot(repo, head))
        result = apply(tx, fleet)
        if not tx.changes and not tx.lines:
            stats("claim", retries=attempt, lost=lost)
            return result
        if time.time() - fetched_at > CLOSED_CLAIM_SECONDS / 2:
            continue  # decided from a fetch so old that a claim ref it saw absent may be gone again: look again
        commit = store.build_commit(tx, [head])
        specs = [f"{commit}:{remote_obj.my_state}"]
        leases: dict[str, str | None] = {remote_obj.my_state: repo.ref_target(remote_obj.tracking(remote_obj.my_state))}
        task_id = claim_of(result)
        claim_ref = Remote.claim_ref(task_id) if task_id else None
        if claim_ref:
            specs.insert(0, f"{commit}:{claim_ref}")
            leases[claim_ref] = fleet.claims.get(task_id or "")
        pushed = transport.push(repo, remote_obj, specs, leases=leases, atomic=True)
        refused = pushed.refused()
        if refused:
            raise transport.refused_error(remote_obj, refused)
        if all(pushed.ok(ref) for ref in leases):
            for ref in leases:
                tracked.track(repo, remote_obj, ref, commit)
            with store.lock():
                moved = store.publish(commit, head, "handoff: remote transaction")
            if not moved:
                _check_and_integrate(store, [(remote_obj.spec, commit)])
            store.run_followups(tx)
            stats("claim", retries=attempt, lost=lost)
            return result
        outcomes = {pushed.outcome(ref) for ref in leases} - {ACCEPTED, ATOMIC}
        if MOVED in outcomes:
            lost += 1  # someone else took it (or moved our own ref): look again at once
        if LOCKED in outcomes or MOVED not in outcomes:
            transport.backoff(attempt, fleet.others + 1)
    stats("claim", retries=tries, lost=lost, gave_up=True)
    raise Contention(f"lost the race on {remote_obj.spec} {tries} times; nothing was changed, retry")


# -- before acting on a claim whose lease is over ------------------------------------------


def pull_if_taken_over(store: StateStore, task: Task) -> str | None:
    """A claim made through a remote whose lease is over may have been taken over there
    by another machine: fetch and merge from the first remote that holds a claim ref of
    this task (no push), so the command sees a takeover already made, and name that remote:
    the command's own transaction must then go through it (`transact_remote`, moving the
    claim ref by compare-and-swap), so that a takeover made after this fetch refuses it
    instead of racing it. Offline, or no such remote: None (nothing to learn or race)."""
    repo = store.repo
    if task.status != "in_progress" or not lease_expired(task, now_iso()):
        return None
    names: list[str] = sorted(repo.raw.remotes.names())
    for name in names:
        if repo.ref_target(f"refs/remotes/{name}/harness/claims/{task.id}") is None:
            continue
        remote = Remote(repo, name)
        try:
            fetch(repo, remote)
        except HandoffError:
            continue
        _merge_remote(store, remote, _merged())
        return name
    return None


# -- publishing without a fetch ---------------------------------------------------------


def publish(store: StateStore, remote: str | None = None, *, tries: int = 5) -> PublishReport | SyncReport:
    """Push this clone's state to its own ref on the remote, and delete the claim refs of
    its finished claims, in one push and no fetch: only this clone moves that ref, so
    there is nothing to merge first (`sync` brings the others' work). What `done`,
    `release`, `renew`... do with handoff.syncClaims: a completion and its publication
    share one round trip."""
    repo = store.repo
    remote_obj = Remote(repo, remote)
    local = store.head()
    if local is None:
        raise NotInitialized("git handoff is not initialized here: run `git handoff init`")
    for attempt in range(tries):
        mine = repo.ref_target(remote_obj.tracking(remote_obj.my_state))
        if mine == local:
            return {"remote": remote_obj.spec, "pushed": [], "retries": attempt}
        if mine is not None and not repo.is_ancestor(mine, local):
            # the remote has something of ours we have not merged (another process of this
            # clone pushed): that takes a sync
            return sync(store, remote)
        prune, close = _claims_to_prune(repo, remote_obj, local, Snapshot(repo, local))
        specs = [f"{local}:{remote_obj.my_state}"] + [f":{ref}" for ref in prune] + [f"{local}:{ref}" for ref in close]
        leases: dict[str, str | None] = {remote_obj.my_state: mine, **prune, **close}
        pushed = transport.push(repo, remote_obj, specs, leases=leases)
        refused = pushed.refused((remote_obj.my_state,))
        if refused:
            raise transport.refused_error(remote_obj, refused)
        if pushed.ok(remote_obj.my_state):
            tracked.track(repo, remote_obj, remote_obj.my_state, local)
            tracked.forget(repo, remote_obj, [ref for ref in prune if pushed.ok(ref)])
            for ref in close:
                if pushed.ok(ref):
                    tracked.track(repo, remote_obj, ref, local)
            stats("publish", retries=attempt)
            return {"remote": remote_obj.spec, "pushed": [remote_obj.my_state], "retries": attempt}
        if pushed.outcome(remote_obj.my_state) == MOVED:
            return sync(store, remote)
        transport.backoff(attempt)
    raise Contention(f"{remote_obj.spec} could not take the push of this clone's state ({tries} tries); "
                     "nothing was lost, retry `git handoff sync`")


# -- autoSync ----------------------------------------------------------


def auto_sync(store: StateStore) -> str | None:
    """With `handoff.autoSync = true`, sync after a transaction; with `handoff.syncClaims`
    (and no autoSync), publish this clone's state (one push, no fetch). Offline or
    rejected: the work stays local and a one-line reason is returned (status says what waits)."""
    repo = store.repo
    auto = repo.config_bool("handoff.autoSync")
    if not auto and not repo.config_bool("handoff.syncClaims"):
        return None
    try:
        if auto:
            sync(store, None, tries=3)
        else:
            publish(store, None)
    except HandoffError as exc:
        return f"not pushed yet ({exc.message}); kept locally, `git handoff sync` pushes it"
    return None
