"""Fetching a remote through the checks of the edge (git_handoff.remote.incoming), ref by
ref: what git brings lands in the remote's staging namespace (Remote.staging), and only
the refs that pass reach their remote-tracking refs; those that fail are quarantined
(git_handoff.state.quarantine) and everything else from the remote is still used.

One fetch, in its steps (`_fetch_locked`):

1. fetch: git writes the refs that changed into the staging namespace (`_bring`);
2. classify: `plan` decides, before any object is read, which refs moved and need a
   look, which stay quarantined without one, which tracking refs go (a `Plan`);
3. check: each ref that moved, at the edge (`_check`): the states in one walk of their
   history, the notes against ours;
4. apply: the refs that passed reach their tracking refs in one transaction (`_apply`);
5. quarantine: what failed is written down for `status` and returned (`_quarantine`).

Fetch goes through the git CLI (ssh config, credential helpers, as git itself would use
them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from git_handoff.core.errors import GitFailure
from git_handoff.infra.file_lock import StateLock
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import incoming, shallow
from git_handoff.remote.layout import (
    INCOMING,
    Remote,
    claim_specs,
    fetch_specs,
    in_claim_specs,
    is_notes,
    is_read,
    is_state,
    remote_rest,
    state_specs,
)
from git_handoff.state import quarantine, writers
from git_handoff.state.snapshot import NOTES_REF, STATE_REF

FETCH_LOCK_SECONDS = 120
# a fetch that brings more than fetch.unpackLimit (100) objects keeps them as a pack: from
# this many packs on (git gc --auto's own limit, gc.autoPackLimit), roll them up
PACKS_BEFORE_REPACK = 50

Updates = list[tuple[str, str | None, str | None]]  # (tracking ref, new oid, old oid)


def fetch(repo: Repo, remote: Remote, *, everything: bool = True) -> list[quarantine.Held]:
    """Fetch the remote's states, claims, attempts and notes into remote-tracking refs,
    through the checks of git_handoff.remote.incoming, ref by ref; the refs that fail them
    (the quarantined ones, also written down for `status`) are returned. `everything=False`:
    the states and the claim refs only (`claim_specs`); the other refs, staged and tracked
    as the last fetch left them, are not touched.

    git fetches into the remote's staging namespace (Remote.staging), which keeps what
    the remote held at the last fetch: git writes only the refs that changed, and only
    those are checked (or a quarantined ref that moved again). A ref that passes reaches
    its tracking ref; one that fails stays out of them (its tracking ref keeps the last
    value that passed), and everything else from the remote is still used: one bad ref
    never cuts this clone off the rest of the fleet."""
    with StateLock(repo.handoff_dir / f"fetch-{remote.track}.lock", FETCH_LOCK_SECONDS):
        return _fetch_locked(repo, remote, everything)


def fetch_history(repo: Repo, remote: Remote) -> None:
    """The whole history of the remote's states, claims and notes, for a clone that joined
    one commit deep (git_handoff.remote.shallow): what `log` and `trust` read below the cut.
    The refs land in the staging namespace only (the next sync checks what moved)."""
    with StateLock(repo.handoff_dir / f"fetch-{remote.track}.lock", FETCH_LOCK_SECONDS):
        _git_fetch(repo, remote, ["--unshallow"], state_specs(remote.staging), prune=False)


def _fetch_locked(repo: Repo, remote: Remote, whole: bool) -> list[quarantine.Held]:
    """`fetch`, under this remote's fetch lock, step by step (the module's docstring)."""
    whole = _bring(repo, remote, whole)
    listed = _listed(repo, remote)
    remote.tracked = None  # until the tracking refs are written below
    held_before = quarantine.read(repo, remote.track)
    todo = plan(listed, staging=remote.staging, tracking=remote.tracking_prefix, whole=whole,
                held_before=held_before)
    good, refused = _check(repo, remote.spec, todo.unchecked)
    _apply(repo, remote, todo, good)
    return _quarantine(repo, remote.track, held_before, {**todo.kept, **refused})


# -- 1. fetch ---------------------------------------------------------------------------------


def _bring(repo: Repo, remote: Remote, whole: bool) -> bool:
    """git fetches into the staging namespace: the states and claims only, or (`whole`)
    every namespace this version reads. Returns whether it fetched them all (a shallow
    join does)."""
    staging = remote.staging
    # what a fetch killed midway left: its ref locks here (this clone's fetches of this
    # remote hold the fetch lock, so none is live), and the per-fetch namespaces of
    # earlier versions. Here the files only: a stale lock would fail the fetch.
    repo.sweep_incoming(INCOMING, fixed=staging, listed={})
    if shallow.wants_shallow_join(repo, repo.ref_target(STATE_REF) is not None):
        # the states, claims and notes one commit deep; the attempts (commits of the
        # project's own history) whole, by the fetch below
        _git_fetch(repo, remote, ["--depth=1"], state_specs(staging))
        whole = True
    _git_fetch(repo, remote, [], fetch_specs(staging) if whole else claim_specs(staging))
    if shallow.cut(repo):
        shallow.settle(repo, lambda: _staged_heads(repo, staging),
                       lambda options: _git_fetch(repo, remote, options, state_specs(staging),
                                                  prune=False))
    if shallow.cut(repo) and writers.enabled(repo):
        # who wrote a record is the commit that introduced it, which may lie below the cut
        # (git_handoff.state.authorship): judged there, it would count as unknown
        _git_fetch(repo, remote, ["--unshallow"], state_specs(staging), prune=False)
    return whole


def _listed(repo: Repo, remote: Remote) -> dict[str, str]:
    """The staged and the tracking refs of this remote ({name: oid}, one git process for
    both namespaces); the refs of per-fetch namespaces whose process is gone swept (they
    are not read, so after the listing)."""
    listed = repo.refs_in(INCOMING, remote.tracking_prefix)
    repo.sweep_incoming(INCOMING, fixed=remote.staging,
                        listed={n: o for n, o in listed.items() if n.startswith(INCOMING)})
    return listed


def _git_fetch(repo: Repo, remote: Remote, options: list[str], specs: list[str], *,
               prune: bool = True) -> None:
    cut = repo.shallow_stamp()
    # --refmap= : a remote's configured refspecs (add_refspecs) must not move refs too.
    # --no-auto-maintenance: git would start `git maintenance run --auto` after every fetch
    # (a process each time, two a task in a fleet); this clone packs in the background
    # itself (Repo.gc_in_background), checked below for the packs fetches keep.
    proc = repo.git("fetch", "--quiet", "--no-tags", *(["--prune"] if prune else []),
                    "--no-write-fetch-head", "--no-auto-maintenance", "--refmap=", *options,
                    remote.spec, *specs, check=False,
                    env={"GIT_TERMINAL_PROMPT": "0", **_protocol_v2()})
    if proc.returncode != 0:
        raise git_error(proc, f"cannot fetch from {remote.spec}")
    if repo.shallow_stamp() != cut:
        repo.reopen()
    if repo.pack_count() >= PACKS_BEFORE_REPACK:
        repo.gc_in_background()


def _protocol_v2() -> dict[str, str]:
    """protocol.version=2 for one git command, whatever the user's config says (added to
    any GIT_CONFIG_COUNT settings of the environment): with it the server lists only the
    refs under the prefixes of the refspecs, so refs piled up in other namespaces cost a
    fetch nothing; a server without version 2 answers in version 0, as before."""
    try:
        count = int(os.environ.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    return {"GIT_CONFIG_COUNT": str(count + 1), f"GIT_CONFIG_KEY_{count}": "protocol.version",
            f"GIT_CONFIG_VALUE_{count}": "2"}


def _staged_heads(repo: Repo, staging: str) -> list[str]:
    """The state commits staged from the remote, and ours: the heads a sync merges."""
    heads = [oid for name, oid in sorted(repo.refs_in(staging).items())
             if name.endswith("/state") and (found := repo.object_kind(oid)) is not None
             and found[0] == "commit"]
    ours = repo.ref_target(STATE_REF)
    return heads + ([ours] if ours else [])


def git_error(proc: Any, what: str) -> GitFailure:
    """A failed git process in one line: `what`, then git's first fatal or error line."""
    err = proc.stderr.decode(errors="replace").strip().splitlines()
    lines = [line for line in err if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    tail = (fatal or lines or [f"exit {proc.returncode}"])[0]
    return GitFailure(f"{what}: {tail}")


# -- 2. classify --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What one fetch does with the refs it listed, decided before any object is read.
    A ref on the remote is named by its rest (the ref minus refs/)."""

    tracking: str  # this remote's tracking namespace, refs/remotes/<track>/
    fetched: dict[str, str]  # {rest: oid} staged, of the refs this fetch brings
    current: dict[str, str]  # {rest: oid} tracked, of the refs this fetch brings
    tracked: dict[str, str]  # {tracking ref: oid}, every tracking ref of this remote
    unchecked: dict[str, str]  # {rest: oid} moved since it was tracked (or refused): checked
    kept: dict[str, quarantine.Held]  # {ref: held} stays quarantined without a look

    def updates(self, good: dict[str, str]) -> Updates:
        """The tracking refs to write: each ref that passed (`good`, {rest: oid}) to its new
        object, and each the remote no longer holds deleted; a ref refused keeps its
        tracking ref at the last value that passed."""
        out: Updates = [(self.tracking + rest, oid, self.current.get(rest))
                        for rest, oid in sorted(good.items())]
        out += [(self.tracking + rest, None, oid) for rest, oid in sorted(self.current.items())
                if rest not in self.fetched]
        return out

    def tracked_after(self, updates: Updates) -> dict[str, str]:
        """The tracking refs ({name: oid}) once `updates` are written."""
        after = dict(self.tracked)
        for name, new, _old in updates:
            if new is None:
                after.pop(name, None)
            else:
                after[name] = new
        return after


def plan(listed: dict[str, str], *, staging: str, tracking: str, whole: bool,
         held_before: dict[str, quarantine.Held]) -> Plan:
    """The `Plan` of a fetch from the refs it `listed` ({name: oid}: the `staging` and the
    `tracking` namespaces) and the refs quarantined before it. `whole`: it brought every
    namespace this version reads, else the states and the claims only (the other refs
    stay as the last fetch left them, quarantined ones included)."""
    covered: Callable[[str], bool] = is_read if whole else in_claim_specs
    staged = {remote_rest(name[len(staging):]): oid
              for name, oid in listed.items() if name.startswith(staging)}
    fetched = {rest: oid for rest, oid in staged.items() if covered(rest)}
    tracked = {name: oid for name, oid in listed.items() if name.startswith(tracking)}
    current = {rest: oid for name, oid in tracked.items() if covered(rest := name[len(tracking):])}
    kept = {ref: item for ref, item in held_before.items() if not covered(ref[len("refs/"):])}
    unchecked: dict[str, str] = {}
    for rest, oid in sorted(fetched.items()):
        if current.get(rest) == oid:
            continue  # checked when it came
        before = held_before.get("refs/" + rest)
        if before is not None and before["oid"] == oid:
            kept["refs/" + rest] = before  # refused already, unchanged: no second look
        else:
            unchecked[rest] = oid
    return Plan(tracking=tracking, fetched=fetched, current=current, tracked=tracked,
                unchecked=unchecked, kept=kept)


# -- 3. check at the edge -----------------------------------------------------------------------


def _check(repo: Repo, spec: str,
           unchecked: dict[str, str]) -> tuple[dict[str, str], dict[str, quarantine.Held]]:
    """The refs that moved ({rest: oid}), checked at the edge: ({rest: oid} those that
    pass, {ref: held} those that fail). Each ref's own object first; then the states
    together (one walk of their history for all of them) and the notes against ours."""
    good: dict[str, str] = {}
    refused: dict[str, quarantine.Held] = {}
    states: dict[str, str] = {}
    notes: dict[str, str] = {}
    for rest, oid in unchecked.items():
        why = incoming.ref_problem(repo, rest, oid, spec)
        if why is not None:
            refused["refs/" + rest] = _held(rest, oid, why)
        elif is_state(rest):
            states[rest] = oid
        elif is_notes(rest):
            notes[rest] = oid
        else:
            good[rest] = oid
    if states:
        _sort_out(states, _state_problems(repo, spec, states), good, refused)
    if notes:
        _sort_out(notes, _notes_problems(repo, spec, notes), good, refused)
    return good, refused


def _state_problems(repo: Repo, spec: str, states: dict[str, str]) -> dict[str, str]:
    """{rest: why} for the fetched states ({rest: oid}) that fail their checks."""
    labels = {rest: f"{spec}'s refs/{rest}" for rest in states}
    bad = incoming.state_problems(repo, [(labels[rest], oid) for rest, oid in states.items()])
    return {rest: why for rest in states if (why := bad.get(labels[rest])) is not None}


def _notes_problems(repo: Repo, spec: str, notes: dict[str, str]) -> dict[str, str]:
    """{rest: why} for the fetched notes ({rest: oid}) that fail their checks."""
    ours = repo.ref_target(NOTES_REF)
    trees = {rest: repo.commit_tree(oid) for rest, oid in notes.items()}
    return incoming.notes_problems(repo, trees, repo.commit_tree(ours) if ours else None, spec)


def _sort_out(batch: dict[str, str], problems: dict[str, str], good: dict[str, str],
              refused: dict[str, quarantine.Held]) -> None:
    """Each ref of `batch` ({rest: oid}) into `refused` when `problems` names it, else
    into `good`."""
    for rest, oid in batch.items():
        if rest in problems:
            refused["refs/" + rest] = _held(rest, oid, problems[rest])
        else:
            good[rest] = oid


def _held(rest: str, oid: str, why: str) -> quarantine.Held:
    return {"ref": "refs/" + rest, "oid": oid, "why": why}


# -- 4. apply, 5. quarantine ----------------------------------------------------------------------


def _apply(repo: Repo, remote: Remote, todo: Plan, good: dict[str, str]) -> None:
    """The refs that passed reach their tracking refs, the refs the remote dropped leave
    them, in one transaction; the remote's cache of its tracking refs follows."""
    updates = todo.updates(good)
    repo.update_refs(updates, f"handoff: fetched from {remote.spec}")
    remote.tracked = todo.tracked_after(updates)


def _quarantine(repo: Repo, track: str, before: dict[str, quarantine.Held],
                held: dict[str, quarantine.Held]) -> list[quarantine.Held]:
    """What is held now, written down for `status` when it changed; returned by ref."""
    if held != before:
        quarantine.write(repo, track, held)
    return [held[ref] for ref in sorted(held)]
