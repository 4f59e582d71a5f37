"""The claim refs a remote holds (refs/harness/claims/<task>), as `sync` and `claim
--remote` see them: which tasks another clone's live claim holds, and which claim refs
are over or junk and are deleted by the next push (part of ops/sync.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

from git_handoff.core import state_tree
from git_handoff.core.errors import HandoffError, UsageError
from git_handoff.core.model import Task, now_iso, parse_time
from git_handoff.core.selection import lease_deadline, lease_expired
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import transport
from git_handoff.remote.transport import Remote
from git_handoff.state import integrate, quarantine
from git_handoff.state.snapshot import Snapshot, task_path

# -- claims seen on the remote ---------------------------------------------------------------

# A claim ref of another clone whose lease ran out this long ago (a machine gone for
# good) is deleted by whichever clone syncs; a clone deletes its own at once.
DEAD_CLAIM_SECONDS = 24 * 3600
# How long a closed claim ref (moved to the commit that finished its task) stays on the
# remote. A `claim --remote` whose fetch is older than half of it fetches again instead
# of pushing (ops/sync.py: transact_remote), so no claim decided before the claim ref
# existed can find it deleted again.
CLOSED_CLAIM_SECONDS = 3600
# What the claim records that are over (closed, released) say, kept between commands: a
# closed claim ref stays an hour, so each sync, publish and remote claim read every one
# of them again (a tree walk, a blob and a parse each: ~1 ms a ref, 200 refs in a
# 200-task hour). A commit never changes, so what a (task, claim commit) records holds
# for good; the file is only a cache, read again from the commits when unreadable.
OVER_FILE = "claims-over.json"
_OVER_VERSION = 1


def claim_record(repo: Repo, commit: str, task_id: str) -> Task | None:
    """The task as the claim commit `commit` records it, parsed like any fetched record;
    None when it is absent or unreadable (such a claim is never taken over)."""
    try:
        found = repo.tree_lookup(repo.commit_tree(commit), task_path(task_id))
        if found is None or found[1]:
            return None
        kind = repo.object_kind(found[0])
        if kind is None or kind[0] != "blob" or kind[1] > state_tree.MAX_STATE_BLOB_BYTES:
            return None
        raw = repo.read_blob(found[0])
        state_tree.check_record(task_path(task_id), raw)
        return Snapshot(repo, commit).task(task_id)
    except (HandoffError, ValueError, KeyError):
        return None


@dataclass(frozen=True)
class Fleet:
    """What the remote says of the other machines, for a claim: the tasks a live claim
    ref of another clone holds that the merged state does not show yet, the claim refs
    ({task id: commit}), how many other clones publish a state there, and this clone's
    rank among all of them (by clone id, this one included)."""

    taken: frozenset[str]
    claims: dict[str, str]
    others: int
    rank: int = 0

    @property
    def slot(self) -> tuple[int, int]:
        """(rank, clones) for the claim's pick (ops.claim_plan._slot_pick)."""
        return self.rank, self.others + 1


class _Over:
    """The claim records known to be over, {"<task> <commit>": [finished, moment]}
    (`moment`: when it completed, else last changed), in the clone's private directory."""

    def __init__(self, repo: Repo) -> None:
        self.path = repo.handoff_dir / OVER_FILE
        self.seen: set[str] = set()
        self.changed = False
        try:
            data = json.loads(self.path.read_text())
            known = data["over"] if isinstance(data, dict) and data.get("version") == _OVER_VERSION else {}
        except (OSError, ValueError, KeyError):
            known = {}
        self.known: dict[str, tuple[bool, str | None]] = {
            key: (value[0], value[1]) for key, value in (known.items() if isinstance(known, dict) else ())
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], bool)
            and (value[1] is None or isinstance(value[1], str))}

    def get(self, task_id: str, oid: str) -> tuple[bool, str | None] | None:
        key = f"{task_id} {oid}"
        self.seen.add(key)
        return self.known.get(key)

    def learn(self, task_id: str, oid: str, task: Task) -> tuple[bool, str | None] | None:
        """What `get` answers from now on for this record: (finished, moment) when its
        claim is over, else None (a claim in progress is never cached)."""
        if task.status == "in_progress":
            return None
        found = self.known[f"{task_id} {oid}"] = (finished(task), task.completed_at or task.updated_at)
        self.changed = True
        return found

    def save(self) -> None:
        """Keep what the claim refs just read still hold (the rest is gone from the remote)."""
        if not self.changed and self.seen >= set(self.known):
            return
        over = {key: list(value) for key, value in self.known.items() if key in self.seen}
        try:
            atomic_write(self.path, json.dumps({"version": _OVER_VERSION, "over": over}, sort_keys=True))
        except OSError:
            pass  # a cache: the next command reads the commits again


def fleet_view(repo: Repo, remote: Remote, head: str) -> Fleet:
    claims = remote.claim_refs(repo)
    stamp = now_iso()
    taken = set()
    over = _Over(repo)
    merged = integrate.holds(repo, head)
    for task_id, oid in claims.items():
        if over.get(task_id, oid) is not None:
            continue  # a record of a claim that is over holds nothing
        if merged(oid):
            continue  # merged already: the state decides
        task = claim_record(repo, oid, task_id)
        if task is not None:
            over.learn(task_id, oid, task)
        # a claim ref that records no claim (unreadable, the task absent or not in
        # progress there) holds nothing: ignored (and pruned by the next sync)
        if task is not None and task.status == "in_progress" and task.claim.clone != remote.clone \
                and not lease_expired(task, stamp):
            taken.add(task_id)
    over.save()
    # a claim ref that failed the edge (at a blob...) is no claim either; a claim pushes
    # over it by compare-and-swap against what it points at
    claims = {**_quarantined_claims(repo, remote), **claims}
    others = [clone for clone in remote.publishing_clones(repo) if clone != remote.clone]
    rank = sum(1 for clone in others if clone < remote.clone)
    return Fleet(frozenset(taken), claims, len(others), rank)


def _quarantined_claims(repo: Repo, remote: Remote) -> dict[str, str]:
    """{task id: object} of the remote's claim refs that failed the edge (as fetched)."""
    held = quarantine.read(repo, remote.track)
    return {ref[len(transport.CLAIMS):]: item["oid"] for ref, item in held.items() if ref.startswith(transport.CLAIMS)}


def claims_to_prune(repo: Repo, remote: Remote, head: str, snap: Snapshot) -> tuple[dict[str, str], dict[str, str]]:
    """(delete, close): {claim ref: what it points at} for the claims that are over:
    merged here, and the task is no longer in progress under that claim. Only this
    clone's own, or another's whose lease ended more than DEAD_CLAIM_SECONDS ago (so that
    clones do not race to delete). And, whoever made them, the claim refs that record no
    claim at all (failed the edge, or a commit where the task is absent): junk, which
    would otherwise stay on the remote for good.

    A claim whose task is finished here (completed, or failed for good) is not deleted
    but closed: moved to `head`, which records the task finished, and deleted only once
    that is CLOSED_CLAIM_SECONDS old. Deleting it at once would let a claim decided from
    a fetch made before the claim ref existed (its compare-and-swap wants the ref absent)
    pass afterwards and take a finished task again."""
    out = {transport.CLAIMS + task_id: oid for task_id, oid in _quarantined_claims(repo, remote).items()}
    close: dict[str, str] = {}
    stamp = now_iso()
    over = _Over(repo)
    merged = integrate.holds(repo, head)
    for task_id, oid in sorted(remote.claim_refs(repo).items()):
        ref = Remote.claim_ref(task_id)
        known = over.get(task_id, oid)
        claimed = None
        if known is None:
            claimed = claim_record(repo, oid, task_id)
            if claimed is None:
                out[ref] = oid
                continue
            known = over.learn(task_id, oid, claimed)
        if known is not None:  # closed (or released, or a record of no claim)
            done, moment = known
            if not done or _older_than(moment, stamp, CLOSED_CLAIM_SECONDS):
                out[ref] = oid
            continue
        assert claimed is not None  # a record of a claim in progress: the only one not known over
        if not merged(oid):
            continue
        now = snap.task(task_id)
        if now is not None and now.status == "in_progress" and now.claim.claimed_at == claimed.claim.claimed_at:
            continue  # still that claim
        if claimed.claim.clone != remote.clone and not _long_expired(claimed, stamp):
            continue
        if now is not None and finished(now):
            close[ref] = oid
        else:
            out[ref] = oid
    over.save()
    return out, close


def finished(task: Task) -> bool:
    """The task can never be claimed again: completed, or failed with no attempt left."""
    return task.status == "completed" or task.failed_for_good


def _older_than(moment: str | None, stamp: str, seconds: int) -> bool:
    if not moment:
        return True
    try:
        return parse_time(stamp) - parse_time(moment) > timedelta(seconds=seconds)
    except UsageError:
        return True


def _long_expired(task: Task, stamp: str) -> bool:
    if not task.lease_expires_at:
        return True
    try:
        moment = parse_time(stamp)
        deadline = lease_deadline(task, moment) or task.lease_expires_at  # bounded by its own record
        return moment - parse_time(deadline) > timedelta(seconds=DEAD_CLAIM_SECONDS)
    except UsageError:
        return True
