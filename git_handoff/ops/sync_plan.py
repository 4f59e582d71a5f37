"""What one round of `sync` pushes, and what the remote's answer means for this clone
(the publish half of ops/sync.py, as a pure plan it then carries out).

`plan(seen)` turns what the refs held when the round began (`Seen`, read by ops/sync.py)
into the refspecs and leases of one push: this clone's state and notes to its own refs,
the one-ref state of earlier versions with handoff.legacyState, the attempts the remote
lacks, the deletion of finished claim refs and retired clones' refs, and the closing of
finished claims, each of those under a lease. `PublishPlan.read(pushed)` says what git's
answer (remote/push_outcome.py) means: which tracking refs to move or forget, what the
report lists, and whether the round is done. Neither touches a repository.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from git_handoff.remote.layout import CLAIMS, CLONES
from git_handoff.remote.push_outcome import ACCEPTED, Pushed
from git_handoff.state.snapshot import KEPT_PREFIXES, NOTES_REF, STATE_REF


@dataclass(frozen=True)
class Seen:
    """What the refs held when a round began: all a plan needs."""

    local: str  # this clone's state commit
    published: str | None  # this clone's state ref on the remote, as last fetched or pushed
    notes: str | None  # this clone's notes commit
    notes_published: str | None  # this clone's notes ref on the remote, likewise
    my_state: str  # this clone's refs on the remote (refs/harness/clones/<id>/...)
    my_notes: str
    # handoff.legacyState: where the remote's one-ref state and notes of earlier versions
    # are (as fetched); None when the setting is off
    legacy: tuple[str | None, str | None] | None = None
    attempts: tuple[str, ...] = ()  # the created-once refs here (attempts and work: KEPT_PREFIXES)
    remote_attempts: frozenset[str] = frozenset()  # those the remote has, named as there
    # {remote ref: the oid it must still have}: finished claim refs to delete, to close
    # (move to `local`), and retired clones' refs to delete (ops/fleet_claims.py, retire.py)
    prune: Mapping[str, str] = field(default_factory=dict)
    close: Mapping[str, str] = field(default_factory=dict)
    retired: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PublishResult:
    """What the remote's answer to a plan's push means (`PublishPlan.read`)."""

    refused: str | None  # a ref a rule on the server refused (not a race): exit 3
    track: tuple[tuple[str, str], ...]  # (remote ref, oid) the remote holds now
    forget: tuple[str, ...]  # remote refs this push deleted
    pushed: tuple[str, ...]  # accepted, other than the deletions and the closings
    claims_pruned: tuple[str, ...]  # task ids
    claims_closed: tuple[str, ...]  # task ids
    retired: tuple[str, ...]  # clone ids, sorted
    attempts_pushed: tuple[str, ...]
    attempts_stuck: tuple[str, ...]  # attempt refs the remote holds otherwise: both kept
    done: bool  # this clone's state and notes reached the remote (or had nothing to push)


@dataclass(frozen=True)
class PublishPlan:
    """One push: `specs` in order, `leases` {remote ref: expected oid} for the refs it
    deletes or closes; `outgoing` when this clone's state ref moves (count the commits)."""

    seen: Seen
    specs: tuple[str, ...]
    leases: Mapping[str, str | None]
    outgoing: bool

    def read(self, pushed: Pushed) -> PublishResult:
        """What `pushed` (the answer to this plan's push) means for this clone."""
        seen = self.seen
        mine = (seen.my_state, seen.my_notes)
        accepted = sorted(ref for ref, (what, _) in pushed.refs.items() if what == ACCEPTED)
        closed = _among(accepted, seen.close)
        moved_by_lease = {**seen.prune, **seen.retired, **seen.close}
        return PublishResult(
            refused=pushed.refused((*mine, *KEPT_PREFIXES)),
            track=_mine_moved(seen, pushed) + tuple((ref, seen.local) for ref in closed),
            forget=_among(accepted, {**seen.prune, **seen.retired}),
            pushed=tuple(ref for ref in accepted if ref not in moved_by_lease),
            claims_pruned=_names(CLAIMS, _among(accepted, seen.prune)),
            claims_closed=_names(CLAIMS, closed),
            retired=tuple(sorted({name.partition("/")[0]
                                  for name in _names(CLONES, _among(accepted, seen.retired))})),
            attempts_pushed=tuple(ref for ref in accepted if ref.startswith(KEPT_PREFIXES)),
            attempts_stuck=tuple(ref for ref in pushed.refs
                                 if ref.startswith(KEPT_PREFIXES) and not pushed.ok(ref)),
            done=all(pushed.outcome(ref) in (None, ACCEPTED) for ref in mine),
        )


def _among(refs: Iterable[str], within: Mapping[str, str]) -> tuple[str, ...]:
    """`refs` that `within` names, in their order."""
    return tuple(ref for ref in refs if ref in within)


def _mine_moved(seen: Seen, pushed: Pushed) -> tuple[tuple[str, str], ...]:
    """(remote ref, oid) of this clone's state and notes refs the push moved."""
    values = ((seen.my_state, seen.local), (seen.my_notes, seen.notes))
    return tuple((ref, value) for ref, value in values if pushed.ok(ref) and value is not None)


def _names(prefix: str, refs: Iterable[str]) -> tuple[str, ...]:
    """What follows `prefix` in each of `refs` (a task id, a clone's part of the name)."""
    return tuple(ref[len(prefix):] for ref in refs)


def plan(seen: Seen) -> PublishPlan:
    """The push of one round: what the remote lacks, in the order git is given it."""
    specs: list[str] = []
    outgoing = seen.local != seen.published
    if outgoing:
        specs.append(f"{STATE_REF}:{seen.my_state}")
    if seen.notes is not None and seen.notes != seen.notes_published:
        specs.append(f"{NOTES_REF}:{seen.my_notes}")
    if seen.legacy is not None:
        legacy_state, legacy_notes = seen.legacy
        if seen.local != legacy_state:
            specs.append(f"{STATE_REF}:{STATE_REF}")
        if seen.notes is not None and seen.notes != legacy_notes:
            specs.append(f"{NOTES_REF}:{NOTES_REF}")
    specs += [f"{name}:{name}" for name in sorted(seen.attempts) if name not in seen.remote_attempts]
    leases: dict[str, str | None] = {}
    for ref, oid in {**seen.prune, **seen.retired}.items():
        specs.append(f":{ref}")
        leases[ref] = oid
    for ref, oid in seen.close.items():
        specs.append(f"{seen.local}:{ref}")
        leases[ref] = oid
    return PublishPlan(seen, tuple(specs), leases, outgoing)
