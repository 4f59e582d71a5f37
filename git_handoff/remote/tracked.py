"""What a sync does to this clone's refs around a push, below ops/sync.py: take the
remote's attempts this clone lacks, and keep the remote-tracking refs honest after a push
moved or deleted refs on the remote (without fetching again).
"""

from __future__ import annotations

from git_handoff.infra.gitrepo import Repo
from git_handoff.remote.layout import Remote
from git_handoff.state import quarantine
from git_handoff.state.snapshot import ATTEMPTS_PREFIX


def take_attempts(repo: Repo, remote: Remote, prefix: str = ATTEMPTS_PREFIX) -> tuple[list[str], list[str]]:
    """Create local refs for the remote's refs of a created-once namespace (`prefix`: the
    attempts, or the tasks' work) that we lack; report clashes (both kept: ours here)."""
    fetched, clashing = [], []
    tracking = remote.kept(prefix)
    for name, oid in sorted(remote.refs(repo, tracking).items()):
        local = prefix + name[len(tracking):]
        mine = repo.ref_target(local)
        if mine is None:
            if repo.cas_ref(local, oid, None, f"handoff: {prefix[len('refs/harness/'):-1]} from {remote.spec}"):
                fetched.append(local)
        elif mine != oid:
            clashing.append(local)
    return fetched, clashing


def forget(repo: Repo, remote: Remote, deleted: list[str]) -> None:
    """The remote no longer has the refs `deleted` (this push deleted them): neither
    their tracking refs, nor their quarantine."""
    if not deleted:
        return
    for ref in deleted:
        repo.delete_ref(remote.tracking(ref))
        remote.moved(remote.tracking(ref), None)
    held = quarantine.read(repo, remote.track)
    if any(ref in held for ref in deleted):
        quarantine.write(repo, remote.track, {ref: item for ref, item in held.items() if ref not in deleted})


def track(repo: Repo, remote: Remote, remote_ref: str, oid: str) -> None:
    """The remote has `oid` at `remote_ref` now: keep the tracking ref honest without a fetch."""
    name = remote.tracking(remote_ref)
    repo.cas_ref(name, oid, repo.ref_target(name), "handoff: pushed")
    remote.moved(name, repo.ref_target(name))
