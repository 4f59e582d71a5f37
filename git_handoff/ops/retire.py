"""Clones retire (docs/fleet.md): the state and notes refs of a clone that has not
published for a while, and whose published state this clone's own published state
already contains, are deleted from the remote by this clone's next push. The rule is
one every clone can check on the remote itself: the retired head is an ancestor of the
deleting clone's refs/harness/clones/<id>/state, and its commit is older than
handoff.retireAfter seconds (default 7 days). Nothing is lost (the work is in that
state), each delete is a compare-and-swap against the head that was checked (a clone
that pushed meanwhile keeps its ref), and a clone that comes back simply publishes its
ref again at its next sync, which merges as any other.
"""

from __future__ import annotations

import time

from git_handoff.infra.gitrepo import Repo
from git_handoff.remote.transport import CLONES, Remote
from git_handoff.state.fold_heads import HeadsCache
from git_handoff.state.snapshot import NOTES_REF

RETIRE_AFTER_SECONDS = 7 * 24 * 3600
# Clones retired by one push at most: git matches each ref of a push against every
# --force-with-lease given (quadratic), so 10,000 retirements in one push took minutes;
# a fleet's backlog of idle clones goes in slices of this size, one per sync.
MAX_RETIRED_PER_PUSH = 500


def retirable(repo: Repo, remote: Remote, local: str, published: str | None) -> dict[str, str]:
    """{remote ref: the oid it must still have} of the clone refs to delete with this
    push: only when the remote already has our state as it is here (`published` ==
    `local`), so what the deleted refs held is on the remote in our ref; the heads our
    state contains are those the merge remembered (HeadsCache), so this asks no
    ancestry walk per clone."""
    if published is None or published != local:
        return {}
    after = repo.config_int("handoff.retireAfter")
    after = RETIRE_AFTER_SECONDS if after is None or after < 0 else after
    contained = HeadsCache(repo, "state").known(local)
    notes = repo.ref_target(NOTES_REF)
    notes_published = notes is not None and notes == repo.ref_target(remote.tracking(remote.my_notes))
    notes_contained = HeadsCache(repo, "notes").known(notes) if notes_published else set()
    now = time.time()
    out: dict[str, str] = {}
    tracked = remote.refs(repo, remote.clones)
    for name, oid in sorted(tracked.items()):
        clone, _, kind = name[len(remote.clones):].partition("/")
        if kind != "state" or clone == remote.clone or oid not in contained:
            continue
        if now - repo.commit_info(oid)[2] < after:
            continue
        if len(out) >= 2 * MAX_RETIRED_PER_PUSH:
            break
        out[f"{CLONES}{clone}/state"] = oid
        their_notes = tracked.get(f"{remote.clones}{clone}/notes")
        if their_notes is not None and their_notes in notes_contained:
            out[f"{CLONES}{clone}/notes"] = their_notes
    return out
