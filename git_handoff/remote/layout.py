"""A remote as git handoff lays it out: the refs this version reads from it, where a fetch
stages them and where they are tracked here (`Remote`), and the refspecs that bring them.

The layout has no ref that every machine must move (docs/fleet.md: pushes to one ref from
many machines fail on the server's ref lock):

- refs/harness/clones/<clone-id>/state   one clone's state: only that clone moves it,
  always forward, so its pushes never collide; every clone merges everyone's (the merge
  is deterministic and order-independent, so all converge);
- refs/harness/clones/<clone-id>/notes   that clone's notes;
- refs/harness/claims/<task-id>          a claim that must hold across machines: the
  claimer's state commit, created (or an expired one taken over) by one compare-and-swap
  push, so two machines contend only when they want the same task;
- refs/harness/attempts/<task-id>/<n>    failed attempts (created, never moved);
- refs/harness/work/<task-id>/<n>        a task's work as `done` completed it (likewise);
- refs/harness/state, refs/notes/harness the one-ref layout of earlier versions: still
  fetched and merged; pushed (when it fast-forwards) only with `handoff.legacyState`.

Talking to the remote is git_handoff.remote.fetch and git_handoff.remote.transport.
"""

from __future__ import annotations

import os

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import identity, target
from git_handoff.state.snapshot import NOTES_REF

CLONES = "refs/harness/clones/"
CLAIMS = "refs/harness/claims/"
INCOMING = "refs/handoff-incoming/"
# where a plain `git fetch` puts the state (Remote.refspecs): read by nothing
UNCHECKED = "refs/handoff-fetched/"

# The names under refs/ this version reads from a remote, and no others: a remote's
# other refs (any number, anywhere under refs/harness/) are neither fetched nor tracked.
# The one-ref state and the notes are patterns so that a remote without them is no
# error (an exact refspec fails when the ref is missing).
READ_NAMESPACES = ("harness/clones/", "harness/claims/", "harness/attempts/", "harness/work/")


class Remote:
    """A remote as git knows it (a name), or a URL/path given directly."""

    def __init__(self, repo: Repo, spec: str | None) -> None:
        names = set(repo.raw.remotes.names())
        if spec is None:
            spec = repo.config_get("handoff.remote") or "origin"
            if spec not in names:
                raise UsageError(
                    f"no remote {spec!r}: name one (`git handoff sync REMOTE`) "
                    "or set `git config handoff.remote NAME`"
                )
        if not spec or spec.startswith("-"):
            raise UsageError(f"invalid remote {spec!r}")
        self.spec = spec
        self.named = spec in names
        if self.named or "/" in spec or ":" in spec or os.path.isdir(spec):
            self.track = target.track_of(spec, self.named)
        else:
            raise UsageError(f"unknown remote {spec!r} (see `git remote -v`)")
        self.clone = identity.clone_id(repo)
        # the remote-tracking refs as this process's last fetch left them ({name: oid}),
        # kept up to date by `moved`: a sync of 10,000 clone heads read them once per
        # question (the states, the notes, the clones, the claims), ~1 s a read
        self.tracked: dict[str, str] | None = None

    def refs(self, repo: Repo, prefix: str) -> dict[str, str]:
        """The remote-tracking refs under `prefix` ({name: oid}), as fetched."""
        if self.tracked is None or not prefix.startswith(self.tracking_prefix):
            return repo.refs_in(prefix)
        return {name: oid for name, oid in self.tracked.items() if name.startswith(prefix)}

    def moved(self, name: str, oid: str | None) -> None:
        """The tracking ref `name` is at `oid` now (None: deleted) without a fetch."""
        if self.tracked is not None:
            if oid is None:
                self.tracked.pop(name, None)
            else:
                self.tracked[name] = oid

    # -- names on the remote --------------------------------------------------------------

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

    # -- the remote-tracking refs a fetch leaves --------------------------------------------

    @property
    def tracking_prefix(self) -> str:
        """The namespace of this remote's tracking refs: refs/remotes/<track>/."""
        return f"refs/remotes/{self.track}/"

    def tracking(self, remote_ref: str) -> str:
        """Where `remote_ref` (refs/harness/... or refs/notes/harness) is tracked here."""
        if remote_ref == NOTES_REF:
            return self.notes
        return f"{self.tracking_prefix}{remote_ref[len('refs/'):]}"

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

    def kept(self, local_prefix: str) -> str:
        """Where the remote's refs of a created-once namespace (KEPT_PREFIXES) are tracked."""
        return f"refs/remotes/{self.track}/{local_prefix[len('refs/'):]}"

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
                label = self.spec if who == self.clone else f"{self.spec} (clone {who[:8]})"
                out.append((label, oid))
        return out

    def publishing_clones(self, repo: Repo) -> list[str]:
        """The ids of the clones with a state ref on the remote (as fetched), sorted."""
        return sorted(name[len(self.clones):-len("/state")]
                      for name in self.refs(repo, self.clones) if name.endswith("/state"))

    def notes_heads(self, repo: Repo) -> list[str]:
        out = [oid for oid in [repo.ref_target(self.notes)] if oid is not None]
        out += [oid for name, oid in sorted(self.refs(repo, self.clones).items())
                if name.endswith("/notes")]
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


# -- the refspecs of a fetch, and the refs it brings -----------------------------------------


def fetch_specs(dst: str) -> list[str]:
    """Refspecs that bring the namespaces this version reads to `dst`<the ref minus refs/>
    (the notes as `dst`harness/notes/harness, under one directory)."""
    return [*(f"+refs/{ns}*:{dst}{ns}*" for ns in READ_NAMESPACES),
            f"+refs/harness/state*:{dst}harness/state*",
            f"+{NOTES_REF}*:{dst}harness/notes/harness*"]


def claim_specs(dst: str) -> list[str]:
    """What a remote claim decides on: the states and the claim refs (the notes and the
    attempts wait for the next sync: they were a third of a claim's work in a fleet)."""
    return [f"+{CLONES}*/state:{dst}harness/clones/*/state",
            f"+{CLAIMS}*:{dst}harness/claims/*",
            f"+refs/harness/state*:{dst}harness/state*"]


def state_specs(dst: str) -> list[str]:
    """`fetch_specs` without the attempts and the work: what a shallow join fetches one
    commit deep."""
    return [spec for spec in fetch_specs(dst) if "harness/attempts/" not in spec and "harness/work/" not in spec]


def remote_rest(staged_rest: str) -> str:
    """The ref on the remote (minus refs/) of a ref staged as `staged_rest`."""
    if staged_rest.startswith("harness/notes/"):
        return staged_rest[len("harness/"):]
    return staged_rest


def is_read(rest: str) -> bool:
    """Whether this version reads the remote's ref `refs/<rest>`."""
    return rest in ("harness/state", "notes/harness") or rest.startswith(READ_NAMESPACES)


def in_claim_specs(rest: str) -> bool:
    """Whether a claim's fetch (`claim_specs`) brings the remote's ref `refs/<rest>`: the
    states and the claim refs."""
    return is_state(rest) or rest.startswith("harness/claims/")


def is_state(rest: str) -> bool:
    """Whether the remote's ref `refs/<rest>` is a state: a clone's, or the one-ref legacy
    state."""
    clone_state = rest.startswith("harness/clones/") and rest.endswith("/state")
    return rest == "harness/state" or clone_state


def is_notes(rest: str) -> bool:
    """Whether the remote's ref `refs/<rest>` is notes: a clone's, or the one-ref legacy
    notes."""
    clone_notes = rest.startswith("harness/clones/") and rest.endswith("/notes")
    return rest == "notes/harness" or clone_notes
