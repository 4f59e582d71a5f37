"""Share the state through any git remote: fetch, merge, push (DESIGN §3).

- Fetch with the git CLI into refs/remotes/<remote>/harness/* and
  refs/remotes/<remote>/notes/* — never onto local refs, which only move by
  compare-and-swap after a merge.
- Merge: fast-forward when one side contains the other, else a 3-way merge
  (git_handoff.merge) written as a merge commit with both parents.
- Push without force through the git CLI (ssh config, credential helpers);
  rejected -> fetch, merge, retry (bounded, then Contention, exit 3).
- `transact_remote` runs one transaction whose commit only counts once the
  remote accepted it: the base of `claim --remote` (ops/claim.py).
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from git_handoff import incoming
from git_handoff.errors import (
    Contention,
    GitFailure,
    HandoffError,
    NotInitialized,
    UsageError,
)
from git_handoff.gitrepo import Repo
from git_handoff.ops.sync_merge import integrate, merge_notes
from git_handoff.store import (
    ATTEMPTS_PREFIX,
    NOTES_REF,
    STATE_REF,
    Snapshot,
    StateStore,
    Tx,
)

T = TypeVar("T")

PUSH_TRIES = 8


# -- remotes ------------------------------------------------------------------------


class Remote:
    """A remote as git knows it (a name), or a URL/path given directly."""

    def __init__(self, repo: Repo, spec: str | None) -> None:
        names = set(repo.raw.remotes.names())
        if spec is None:
            spec = repo.config_get("handoff.remote") or "origin"
            if spec not in names:
                raise UsageError(
                    f"no remote {spec!r}: name one (`git handoff sync REMOTE`) or set `git config handoff.remote NAME`"
                )
        if not spec or spec.startswith("-"):
            raise UsageError(f"invalid remote {spec!r}")
        self.spec = spec
        self.named = spec in names
        if self.named:
            self.track = spec
        elif "/" in spec or ":" in spec or os.path.isdir(spec):
            self.track = "handoff-" + hashlib.sha1(spec.encode()).hexdigest()[:10]
        else:
            raise UsageError(f"unknown remote {spec!r} (see `git remote -v`)")

    @property
    def state(self) -> str:
        return f"refs/remotes/{self.track}/harness/state"

    @property
    def notes(self) -> str:
        return f"refs/remotes/{self.track}/notes/harness"

    @property
    def attempts(self) -> str:
        return f"refs/remotes/{self.track}/harness/attempts/"

    def refspecs(self) -> list[str]:
        """What sync fetches: the state and attempts, and our notes only (not every
        notes namespace the remote holds). The notes refspec is a pattern so that a remote
        without notes yet is no error (an exact refspec fails when the ref is missing)."""
        return [f"+refs/harness/*:refs/remotes/{self.track}/harness/*",
                f"+{NOTES_REF}*:{self.notes}*"]

    def legacy_refspecs(self) -> list[str]:
        """What earlier versions added to remote.<name>.fetch and this one replaces."""
        return [f"+refs/notes/*:refs/remotes/{self.track}/notes/*"]


def _git_error(proc: Any, what: str) -> GitFailure:
    err = proc.stderr.decode(errors="replace").strip().splitlines()
    lines = [line for line in err if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    tail = (fatal or lines or [f"exit {proc.returncode}"])[0]
    return GitFailure(f"{what}: {tail}")


def add_refspecs(repo: Repo, remote: Remote) -> dict[str, list[str]]:
    """So that a plain `git fetch` brings the state too, into remote-tracking refs (and a
    `git fetch --prune` keeps them). Adds only what is missing, and replaces the broader
    notes refspec earlier versions added; returns {"added", "removed"} for the user."""
    changed: dict[str, list[str]] = {"added": [], "removed": []}
    if not remote.named:
        return changed
    key = f"remote.{remote.spec}.fetch"
    configured = set(repo.git("config", "--get-all", key, check=False).stdout.decode().split())
    for spec in remote.refspecs():
        if spec not in configured:
            repo.git("config", "--add", key, spec, check=False)
            changed["added"].append(spec)
    for spec in remote.legacy_refspecs():
        if spec in configured:
            repo.git("config", "--fixed-value", "--unset", key, spec, check=False)
            changed["removed"].append(spec)
    return changed


def named_remote(repo: Repo, name: str) -> Remote:
    """A remote git knows by this name (UsageError otherwise)."""
    if name not in set(repo.raw.remotes.names()):
        raise UsageError(f"unknown remote {name!r} (see `git remote -v`; add it with `git remote add`)")
    return Remote(repo, name)


def use_remote(repo: Repo, remote: Remote) -> dict[str, list[str]]:
    """`init --remote R`: R becomes handoff.remote and plain `git fetch R` brings the state."""
    changed = add_refspecs(repo, remote)
    repo.git("config", "handoff.remote", remote.spec)
    return changed


INCOMING = "refs/handoff-incoming/"


def fetch(repo: Repo, remote: Remote) -> None:
    """Fetch the remote's state, attempts and notes into remote-tracking refs.

    They land in a private namespace first and reach the tracking refs only once every
    ref points at the kind of object it must and the state parses (git_handoff.incoming):
    a remote holding something this version cannot read safely is refused (exit 2) with
    the tracking refs and the local state as they were."""
    staging = f"{INCOMING}{remote.track}/"
    # our notes only, as Remote.fetch_refspecs says: never another notes namespace
    specs = [f"+refs/harness/*:{staging}harness/*", f"+{NOTES_REF}*:{staging}notes/harness*"]
    # --refmap= : a remote's configured refspecs (add_refspecs) must not also move the
    # tracking refs behind the checks' back
    proc = repo.git("fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head", "--refmap=", remote.spec,
                    *specs, check=False, env={"GIT_TERMINAL_PROMPT": "0"})
    if proc.returncode != 0:
        raise _git_error(proc, f"cannot fetch from {remote.spec}")
    fetched = repo.refs_under(staging)
    try:
        incoming.check_refs(repo, fetched, staging, remote.spec)
        theirs = fetched.get(f"{staging}harness/state")
        if theirs is not None:
            incoming.check_incoming_state(repo, theirs, remote.spec)
    finally:
        for name in fetched:
            repo.delete_ref(name)
    tracking = f"refs/remotes/{remote.track}/"
    current = {name: oid for name, oid in repo.refs_under(tracking).items()
               if name.startswith((remote.state, remote.notes, remote.attempts))}
    wanted = {tracking + name[len(staging):]: oid for name, oid in fetched.items()}
    for name, oid in wanted.items():
        if current.get(name) != oid:
            repo.cas_ref(name, oid, current.get(name), f"handoff: fetched from {remote.spec}")
    for name in current.keys() - wanted.keys():
        repo.delete_ref(name)


def _push(repo: Repo, remote: Remote, refspecs: list[str]) -> dict[str, str]:
    """Push without force; {destination ref: flag} with git's porcelain flags ('!' rejected)."""
    if not refspecs:
        return {}
    proc = repo.git("push", "--porcelain", "--no-verify", remote.spec, *refspecs, check=False,
                    env={"GIT_TERMINAL_PROMPT": "0"})
    out: dict[str, str] = {}
    for line in proc.stdout.decode(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and len(parts[0]) == 1 and ":" in parts[1]:
            ref = parts[1].split(":", 1)[1]
            out[ref] = parts[0]
            summary = parts[2] if len(parts) > 2 else ""
            if parts[0] == "!" and "remote rejected" in summary and ref in (STATE_REF, NOTES_REF):
                # a hook or policy on the remote said no: fetching again will not change that
                raise Contention(f"{remote.spec} refused {ref}: {summary.strip()}; nothing was lost locally")
    if proc.returncode != 0 and not out:
        raise _git_error(proc, f"cannot push to {remote.spec}")
    return out


def _take_attempts(repo: Repo, remote: Remote) -> tuple[list[str], list[str]]:
    """Create local attempt refs for the remote's attempts we lack; report clashes."""
    fetched, clashing = [], []
    for name, oid in sorted(repo.refs_under(remote.attempts).items()):
        local = ATTEMPTS_PREFIX + name[len(remote.attempts):]
        mine = repo.ref_target(local)
        if mine is None:
            if repo.cas_ref(local, oid, None, f"handoff: attempt from {remote.spec}"):
                fetched.append(local)
        elif mine != oid:
            clashing.append(local)
    return fetched, clashing


# -- sync -------------------------------------------------------------------------------


def _round(store: StateStore, remote: Remote, report: dict[str, Any],
           say: Callable[[str], None] = lambda _text: None) -> bool:
    """One fetch-merge-push round; True when everything reached the remote."""
    repo = store.repo
    say(f"fetching from {remote.spec}")
    fetch(repo, remote)
    theirs = repo.ref_target(remote.state)
    say("merging the remote's state")
    step = integrate(store, theirs, remote.spec)
    if report["action"] in ("", "up-to-date", "no-remote-state"):
        report["action"] = step["action"]
    report["incoming"] += step["incoming"]
    report["conflicts"].extend(step["conflicts"])
    report["claims_lost"].extend(step["claims_lost"])
    report["notes"] = merge_notes(repo, store, repo.ref_target(remote.notes))
    fetched, clashing = _take_attempts(repo, remote)
    report["attempts"]["fetched"].extend(fetched)
    report["attempts"]["conflicting"] = clashing
    local = store.head()
    if local is None:
        raise NotInitialized(f"nothing to sync: neither this clone nor {remote.spec} has a git handoff state "
                             "(run `git handoff init`)")
    specs: list[str] = []
    if local != theirs:
        specs.append(f"{STATE_REF}:{STATE_REF}")
        report["outgoing"] = repo.count_commits(local, theirs)
    notes = repo.ref_target(NOTES_REF)
    if notes is not None and notes != repo.ref_target(remote.notes):
        specs.append(f"{NOTES_REF}:{NOTES_REF}")
    remote_attempts = repo.refs_under(remote.attempts)
    for name, _oid in sorted(repo.refs_under(ATTEMPTS_PREFIX).items()):
        if remote_attempts.get(remote.attempts + name[len(ATTEMPTS_PREFIX):]) is None:
            specs.append(f"{name}:{name}")
    if specs:
        say(f"pushing {len(specs)} ref(s) to {remote.spec}")
    flags = _push(repo, remote, specs)
    rejected = [ref for ref, flag in flags.items() if flag == "!"]
    report["pushed"].extend(sorted(ref for ref, flag in flags.items() if flag in (" ", "*", "+")))
    report["attempts"]["pushed"].extend(sorted(r for r in report["pushed"] if r.startswith(ATTEMPTS_PREFIX)))
    if any(r.startswith(ATTEMPTS_PREFIX) for r in rejected):
        report["attempts"]["conflicting"] = sorted(set(report["attempts"]["conflicting"])
                                                   | {r for r in rejected if r.startswith(ATTEMPTS_PREFIX)})
    if STATE_REF in flags and flags[STATE_REF] != "!":
        # the remote has it now; keep the tracking ref honest without another fetch
        repo.cas_ref(remote.state, local, repo.ref_target(remote.state), "handoff: pushed")
    return not any(r in (STATE_REF, NOTES_REF) for r in rejected)


def sync(store: StateStore, remote: str | None = None, *, tries: int = PUSH_TRIES,
         progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fetch, merge and push the state, attempts and notes; a summary of what moved.
    `progress(text)`, when given, hears each step (a sync of many changes takes seconds)."""
    remote_obj = Remote(store.repo, remote)
    say = progress or (lambda _text: None)
    report: dict[str, Any] = {
        "remote": remote_obj.spec, "action": "", "incoming": 0, "outgoing": 0, "conflicts": [],
        "claims_lost": [], "pushed": [], "attempts": {"fetched": [], "pushed": [], "conflicting": []},
        "notes": "none", "retries": 0,
    }
    for attempt in range(tries):
        if _round(store, remote_obj, report, say):
            report["refspecs"] = add_refspecs(store.repo, remote_obj)
            report["state_commit"] = store.head()
            if report["action"] in ("up-to-date", "no-remote-state") and STATE_REF in report["pushed"]:
                report["action"] = "pushed"
            return report
        report["retries"] = attempt + 1
        _backoff(attempt)
    raise Contention(f"{remote_obj.spec} kept rejecting the push ({tries} tries); nothing was lost, retry "
                     "`git handoff sync`")


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0.01, 0.05 * (2 ** min(attempt, 4))))


# -- a transaction that counts only once the remote has it -------------------------------


def transact_remote(store: StateStore, apply: Callable[[Tx], T], remote: str | None = None,
                    *, tries: int = 30) -> T:
    """fetch -> merge -> apply -> push. Only a push the remote accepted makes the change;
    a rejected one is dropped and `apply` runs again on the newer state (so a claim that
    lost the race takes the next task). Contention (exit 3) after `tries`."""
    repo = store.repo
    remote_obj = Remote(repo, remote)
    for attempt in range(tries):
        fetch(repo, remote_obj)
        theirs = repo.ref_target(remote_obj.state)
        integrate(store, theirs, remote_obj.spec)
        head = store.head()
        if head is None:
            raise NotInitialized("git handoff is not initialized here or on the remote: run `git handoff init`")
        tx = Tx(store, Snapshot(repo, head))
        result = apply(tx)
        if not tx.changes and not tx.lines:
            return result
        commit = store.build_commit(tx, [head])
        flags = _push(repo, remote_obj, [f"{commit}:{STATE_REF}"])
        if flags.get(STATE_REF, "!") != "!":
            repo.cas_ref(remote_obj.state, commit, repo.ref_target(remote_obj.state), "handoff: pushed")
            with store.lock():
                moved = store.publish(commit, head, "handoff: remote transaction")
            if not moved:
                integrate(store, commit, remote_obj.spec)
            store.run_followups(tx)
            return result
        _backoff(min(attempt, 3))
    raise Contention(f"lost the race on {remote_obj.spec} {tries} times; nothing was changed, retry")


# -- autoSync ----------------------------------------------------------


def auto_sync(store: StateStore) -> str | None:
    """With `handoff.autoSync = true`, push after a transaction. Offline or rejected: the
    work stays local and a one-line reason is returned (status says what waits)."""
    repo = store.repo
    if not repo.config_bool("handoff.autoSync"):
        return None
    try:
        sync(store, None, tries=3)
    except HandoffError as exc:
        return f"not pushed yet ({exc.message}); kept locally, `git handoff sync` pushes it"
    return None
