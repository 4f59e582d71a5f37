"""A remote as git handoff lays it out, and the two ways to talk to it: fetch (through the
checks of git_handoff.remote.incoming) and push (compare-and-swap, with git's answer
classified by git_handoff.remote.push_outcome).

The layout has no ref that every machine must move (docs/fleet.md: pushes to one ref from
many machines fail on the server's ref lock):

- refs/harness/clones/<clone-id>/state   one clone's state: only that clone moves it, always
  forward, so its pushes never collide; every clone merges everyone's (the merge is
  deterministic and order-independent, so all converge);
- refs/harness/clones/<clone-id>/notes   that clone's notes;
- refs/harness/claims/<task-id>          a claim that must hold across machines: the claimer's
  state commit, created (or an expired one taken over) by one compare-and-swap push, so
  two machines contend only when they want the same task;
- refs/harness/attempts/<task-id>/<n>    failed attempts (created, never moved);
- refs/harness/state, refs/notes/harness the one-ref layout of earlier versions: still
  fetched and merged; pushed (when it fast-forwards) only with `handoff.legacyState`.

Fetch and push go through the git CLI (ssh config, credential helpers, as git itself would use them).
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from typing import Any

from git_handoff.core.errors import Contention, GitFailure, UsageError
from git_handoff.infra.file_lock import StateLock
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import incoming, push_outcome, shallow
from git_handoff.state import identity, quarantine
from git_handoff.state.snapshot import NOTES_REF, STATE_REF

CLONES = "refs/harness/clones/"
CLAIMS = "refs/harness/claims/"
INCOMING = "refs/handoff-incoming/"
UNCHECKED = "refs/handoff-fetched/"  # where a plain `git fetch` puts the state: read by nothing
FETCH_LOCK_SECONDS = 120
# a fetch that brings more than fetch.unpackLimit (100) objects keeps them as a pack: from
# this many packs on (git gc --auto's own limit, gc.autoPackLimit), roll them up
PACKS_BEFORE_REPACK = 50


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
        self.clone = identity.clone_id(repo)
        # the remote-tracking refs as this process's last fetch left them ({name: oid}),
        # kept up to date by `moved`: a sync of 10,000 clone heads read them once per
        # question (the states, the notes, the clones, the claims), ~1 s a read
        self.tracked: dict[str, str] | None = None

    def refs(self, repo: Repo, prefix: str) -> dict[str, str]:
        """The remote-tracking refs under `prefix` ({name: oid}), as fetched."""
        if self.tracked is None or not prefix.startswith(f"refs/remotes/{self.track}/"):
            return repo.refs_in(prefix)
        return {name: oid for name, oid in self.tracked.items() if name.startswith(prefix)}

    def moved(self, name: str, oid: str | None) -> None:
        """The tracking ref `name` is at `oid` now (None: deleted) without a fetch."""
        if self.tracked is not None:
            if oid is None:
                self.tracked.pop(name, None)
            else:
                self.tracked[name] = oid

    # -- names on the remote ----------------------------------------------------------------

    @property
    def my_state(self) -> str:
        """This clone's state ref on the remote."""
        return f"{CLONES}{self.clone}/state"

    @property
    def my_notes(self) -> str:
        return f"{CLONES}{self.clone}/notes"

    @staticmethod
    def claim_ref(task_id: str) -> str:
        return CLAIMS + task_id

    # -- the remote-tracking refs a fetch leaves ----------------------------------------------

    def tracking(self, remote_ref: str) -> str:
        """Where `remote_ref` (refs/harness/... or refs/notes/harness) is tracked here."""
        if remote_ref == NOTES_REF:
            return self.notes
        return f"refs/remotes/{self.track}/{remote_ref[len('refs/'):]}"

    @property
    def state(self) -> str:
        """The tracking ref of the remote's one-ref (earlier versions') state."""
        return f"refs/remotes/{self.track}/harness/state"

    @property
    def notes(self) -> str:
        return f"refs/remotes/{self.track}/notes/harness"

    @property
    def attempts(self) -> str:
        return f"refs/remotes/{self.track}/harness/attempts/"

    @property
    def clones(self) -> str:
        return f"refs/remotes/{self.track}/harness/clones/"

    @property
    def claims(self) -> str:
        return f"refs/remotes/{self.track}/harness/claims/"

    def state_heads(self, repo: Repo) -> list[tuple[str, str]]:
        """Every state the remote holds, as fetched: [(label, commit)], the one-ref state
        first, then each clone's in name order (a fixed order: every clone merges alike)."""
        out: list[tuple[str, str]] = []
        legacy = repo.ref_target(self.state)
        if legacy is not None:
            out.append((self.spec, legacy))
        for name, oid in sorted(self.refs(repo, self.clones).items()):
            if name.endswith("/state"):
                who = name[len(self.clones):-len("/state")]
                out.append((self.spec if who == self.clone else f"{self.spec} (clone {who[:8]})", oid))
        return out

    def publishing_clones(self, repo: Repo) -> list[str]:
        """The ids of the clones with a state ref on the remote (as fetched), sorted."""
        return sorted(name[len(self.clones):-len("/state")] for name in self.refs(repo, self.clones)
                      if name.endswith("/state"))

    def notes_heads(self, repo: Repo) -> list[str]:
        out = [oid for oid in [repo.ref_target(self.notes)] if oid is not None]
        out += [oid for name, oid in sorted(self.refs(repo, self.clones).items()) if name.endswith("/notes")]
        return out

    def claim_refs(self, repo: Repo) -> dict[str, str]:
        """{task id: the claim commit} as fetched."""
        return {name[len(self.claims):]: oid for name, oid in self.refs(repo, self.claims).items()}

    @property
    def staging(self) -> str:
        """Where sync's fetch puts what the remote holds, before the checks: a namespace of
        this remote's own that only the edge reads (kept between fetches, so that a fetch
        writes only the refs that changed)."""
        return f"{INCOMING}{self.track}/"

    def refspecs(self) -> list[str]:
        """What a plain `git fetch` of this remote brings of the state (remote.<name>.fetch):
        the namespaces this version reads, into a namespace nothing reads (refs/handoff-
        fetched/), so that what it brings unchecked is never where a command looks; the
        next sync then finds the objects here and checks them."""
        return fetch_specs(f"{UNCHECKED}{self.track}/")

    def legacy_refspecs(self) -> list[str]:
        """What earlier versions added to remote.<name>.fetch and this one replaces: they
        brought everything under refs/harness/ unchecked into the remote-tracking refs."""
        return [f"+refs/notes/*:refs/remotes/{self.track}/notes/*",
                f"+refs/harness/*:refs/remotes/{self.track}/harness/*",
                f"+{NOTES_REF}*:{self.notes}*"]


# The names under refs/ this version reads from a remote, and no others: a remote's
# other refs (any number, anywhere under refs/harness/) are neither fetched nor tracked.
# The one-ref state and the notes are patterns so that a remote without them is no
# error (an exact refspec fails when the ref is missing).
READ_NAMESPACES = ("harness/clones/", "harness/claims/", "harness/attempts/")


def fetch_specs(dst: str) -> list[str]:
    """Refspecs that bring the namespaces this version reads to `dst`<the ref minus refs/>
    (the notes as `dst`harness/notes/harness, under one directory)."""
    return [*(f"+refs/{ns}*:{dst}{ns}*" for ns in READ_NAMESPACES),
            f"+refs/harness/state*:{dst}harness/state*",
            f"+{NOTES_REF}*:{dst}harness/notes/harness*"]


def claim_specs(dst: str) -> list[str]:
    """What a remote claim decides on: the states and the claim refs (the notes and the
    attempts wait for the next sync: they were a third of a claim's work in a fleet)."""
    return [f"+{CLONES}*/state:{dst}harness/clones/*/state", f"+{CLAIMS}*:{dst}harness/claims/*",
            f"+refs/harness/state*:{dst}harness/state*"]


def state_specs(dst: str) -> list[str]:
    """`fetch_specs` without the attempts: what a shallow join fetches one commit deep."""
    return [spec for spec in fetch_specs(dst) if "harness/attempts/" not in spec]


def _git_fetch(repo: Repo, remote: Remote, options: list[str], specs: list[str], *, prune: bool = True) -> None:
    cut = repo.shallow_stamp()
    # --refmap= : a remote's configured refspecs (add_refspecs) must not move refs too.
    # --no-auto-maintenance: git would start `git maintenance run --auto` after every fetch
    # (a process each time, two a task in a fleet); this clone packs in the background
    # itself (Repo.gc_in_background), checked below for the packs fetches keep.
    proc = repo.git("fetch", "--quiet", "--no-tags", *(["--prune"] if prune else []), "--no-write-fetch-head",
                    "--no-auto-maintenance", "--refmap=", *options, remote.spec, *specs, check=False,
                    env={"GIT_TERMINAL_PROMPT": "0", **_protocol_v2()})
    if proc.returncode != 0:
        raise git_error(proc, f"cannot fetch from {remote.spec}")
    if repo.shallow_stamp() != cut:
        repo.reopen()
    if repo.pack_count() >= PACKS_BEFORE_REPACK:
        repo.gc_in_background()


def fetch_history(repo: Repo, remote: Remote) -> None:
    """The whole history of the remote's states, claims and notes, for a clone that joined
    one commit deep (git_handoff.remote.shallow): what `log` and `trust` read below the cut.
    The refs land in the staging namespace only (the next sync checks what moved)."""
    with StateLock(repo.handoff_dir / f"fetch-{remote.track}.lock", FETCH_LOCK_SECONDS):
        _git_fetch(repo, remote, ["--unshallow"], state_specs(remote.staging), prune=False)


def _staged_heads(repo: Repo, staging: str) -> list[str]:
    """The state commits staged from the remote, and ours: the heads a sync merges."""
    heads = [oid for name, oid in sorted(repo.refs_in(staging).items())
             if name.endswith("/state") and (found := repo.object_kind(oid)) is not None and found[0] == "commit"]
    ours = repo.ref_target(STATE_REF)
    return heads + ([ours] if ours else [])


def _remote_rest(staged_rest: str) -> str:
    """The ref on the remote (minus refs/) of a ref staged as `staged_rest`."""
    return staged_rest[len("harness/"):] if staged_rest.startswith("harness/notes/") else staged_rest


def is_read(rest: str) -> bool:
    """Whether this version reads the remote's ref `refs/<rest>`."""
    return rest in ("harness/state", "notes/harness") or rest.startswith(READ_NAMESPACES)


def is_state(rest: str) -> bool:
    """Whether the remote's ref `refs/<rest>` is a state: a clone's, or the one-ref legacy state."""
    return rest == "harness/state" or (rest.startswith("harness/clones/") and rest.endswith("/state"))


def git_error(proc: Any, what: str) -> GitFailure:
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
    local = set(repo.local_config_values(key))
    if local.issuperset(remote.refspecs()) and local.isdisjoint(remote.legacy_refspecs()):
        return changed  # every sync after the first: known without a git process
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


# -- fetch --------------------------------------------------------------------------------


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


def fetch(repo: Repo, remote: Remote, *, everything: bool = True) -> list[quarantine.Held]:
    """Fetch the remote's states, claims, attempts and notes into remote-tracking refs,
    through the checks of git_handoff.remote.incoming, ref by ref; the refs that fail them (the
    quarantined ones, also written down for `status`) are returned. `everything=False`:
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


def _fetch_locked(repo: Repo, remote: Remote, whole: bool) -> list[quarantine.Held]:
    staging = remote.staging
    # what a fetch killed midway left: its ref locks here (this clone's fetches of this
    # remote hold the lock above, so none is live), and the per-fetch namespaces of
    # earlier versions
    repo.sweep_incoming(INCOMING, fixed=staging, listed={})  # the files: a stale lock would fail the fetch
    if shallow.wants_shallow_join(repo, repo.ref_target(STATE_REF) is not None):
        # the states, claims and notes one commit deep; the attempts (commits of the
        # project's own history) whole, by the fetch below
        _git_fetch(repo, remote, ["--depth=1"], state_specs(staging))
        whole = True
    _git_fetch(repo, remote, [], fetch_specs(staging) if whole else claim_specs(staging))
    if shallow.cut(repo):
        shallow.settle(repo, lambda: _staged_heads(repo, staging),
                       lambda options: _git_fetch(repo, remote, options, state_specs(staging), prune=False))
    tracking = f"refs/remotes/{remote.track}/"
    listed = repo.refs_in(INCOMING, tracking)  # one git process for both namespaces
    # the refs of per-fetch namespaces whose process is gone (not read, so swept after)
    repo.sweep_incoming(INCOMING, fixed=staging, listed={n: o for n, o in listed.items() if n.startswith(INCOMING)})
    fetched = {_remote_rest(name[len(staging):]): oid for name, oid in listed.items() if name.startswith(staging)}
    # what this fetch brought (claim_specs: the states and claims): the rest stays as it is
    covered = is_read if whole else (lambda rest: is_state(rest) or rest.startswith("harness/claims/"))
    fetched = {rest: oid for rest, oid in fetched.items() if covered(rest)}
    remote.tracked = None
    everything = {name: oid for name, oid in listed.items() if name.startswith(tracking)}
    current = {name[len(tracking):]: oid for name, oid in everything.items()}
    current = {rest: oid for rest, oid in current.items() if covered(rest)}
    held_before = quarantine.read(repo, remote.track)  # (what this fetch did not bring stays held)
    held: dict[str, quarantine.Held] = {ref: item for ref, item in held_before.items() if not covered(ref[len("refs/"):])}
    good: dict[str, str] = {}
    notes: dict[str, str] = {}
    states: dict[str, str] = {}
    for rest, oid in sorted(fetched.items()):
        if current.get(rest) == oid:
            continue  # checked when it came
        ref = "refs/" + rest
        before = held_before.get(ref)
        if before is not None and before["oid"] == oid:
            held[ref] = before  # refused already, unchanged: no second look
            continue
        why = incoming.ref_problem(repo, rest, oid, remote.spec)
        if why is None and is_state(rest):
            states[rest] = oid
            continue
        if why is None and (rest == "notes/harness" or (rest.startswith("harness/clones/") and rest.endswith("/notes"))):
            notes[rest] = oid
            continue
        if why is None:
            good[rest] = oid
        else:
            held[ref] = {"ref": ref, "oid": oid, "why": why}
    if states:  # checked together: one walk of their history for all of them
        labels = {rest: f"{remote.spec}'s refs/{rest}" for rest in states}
        bad_states = incoming.state_problems(repo, [(labels[rest], oid) for rest, oid in states.items()])
        for rest, oid in states.items():
            why = bad_states.get(labels[rest])
            if why is None:
                good[rest] = oid
            else:
                held["refs/" + rest] = {"ref": "refs/" + rest, "oid": oid, "why": why}
    if notes:
        ours_notes = repo.ref_target(NOTES_REF)
        bad = incoming.notes_problems(repo, {rest: repo.commit_tree(oid) for rest, oid in notes.items()},
                                      repo.commit_tree(ours_notes) if ours_notes else None, remote.spec)
        for rest, oid in notes.items():
            if rest in bad:
                held["refs/" + rest] = {"ref": "refs/" + rest, "oid": oid, "why": bad[rest]}
            else:
                good[rest] = oid
    updates: list[tuple[str, str | None, str | None]] = [
        (tracking + rest, oid, current.get(rest)) for rest, oid in sorted(good.items())]
    updates += [(tracking + rest, None, oid) for rest, oid in sorted(current.items()) if rest not in fetched]
    repo.update_refs(updates, f"handoff: fetched from {remote.spec}")
    for name, new, _old in updates:
        if new is None:
            everything.pop(name, None)
        else:
            everything[name] = new
    remote.tracked = everything
    if held != held_before:
        quarantine.write(repo, remote.track, held)
    return [held[ref] for ref in sorted(held)]


# -- push ---------------------------------------------------------------------------------


def push(repo: Repo, remote: Remote, refspecs: list[str], *, leases: dict[str, str | None] | None = None,
         atomic: bool = False) -> push_outcome.Pushed:
    """Push `refspecs` without force. `leases` {remote ref: expected oid, None = must not
    exist} makes each of those refs a compare-and-swap on the server; `atomic`: all or none."""
    if not refspecs:
        return push_outcome.Pushed({})
    args = ["push", "--porcelain", "--no-verify"]
    if atomic:
        args.append("--atomic")
    for ref, expected in sorted((leases or {}).items()):
        args.append(f"--force-with-lease={ref}:{expected or ''}")
    proc = repo.git(*args, remote.spec, *refspecs, check=False, env={"GIT_TERMINAL_PROMPT": "0"})
    pushed = push_outcome.read(proc.stdout, proc.stderr, failed=proc.returncode != 0)
    if proc.returncode != 0 and not pushed.refs:
        raise git_error(proc, f"cannot push to {remote.spec}")
    return pushed


def refused_error(remote: Remote, what: str) -> Contention:
    """A ref the server refuses by a rule (an access rule, a hook): not a race, so trying
    again changes nothing until the rule or this clone's settings do."""
    return Contention(f"{remote.spec} refused {what}: a rule on the server, not a race "
                      "(docs/server-rights.md); nothing was lost locally")


def backoff(attempt: int, contenders: int = 1) -> None:
    """Between tries after a lost race: random, growing with the try and with how many
    machines share the remote (their pushes are what we wait out)."""
    spread = 0.02 * max(1, min(contenders, 64)) * (2 ** min(attempt, 4))
    time.sleep(random.uniform(0.005, min(spread, 2.0)))
