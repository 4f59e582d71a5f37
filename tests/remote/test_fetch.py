"""What a fetch decides before it reads any object (git_handoff/remote/fetch.py `plan`):
which refs moved and go to the checks of the edge, which stay quarantined without a look,
which tracking refs it writes and deletes. The checks themselves, against a hostile
remote, are tests/hostile/test_shared_remote.py and tests/hostile/test_sync_costs.py."""

from __future__ import annotations

from git_handoff.remote.fetch import plan
from git_handoff.state.quarantine import Held

STAGING = "refs/handoff-incoming/origin/"
TRACKING = "refs/remotes/origin/"
A, B, C, D = "a" * 40, "b" * 40, "c" * 40, "d" * 40
STATE = "harness/clones/0123456789abcdef/state"
CLAIM = "harness/claims/T1"
ATTEMPT = "harness/attempts/T1/1"


def held(rest: str, oid: str) -> Held:
    return {"ref": "refs/" + rest, "oid": oid, "why": f"refs/{rest}: bad"}


def test_only_the_refs_that_moved_are_checked_and_written() -> None:
    listed = {STAGING + STATE: B, STAGING + CLAIM: A, TRACKING + STATE: A, TRACKING + CLAIM: A}
    todo = plan(listed, staging=STAGING, tracking=TRACKING, whole=True, held_before={})
    assert todo.unchecked == {STATE: B}
    assert todo.kept == {}
    updates = todo.updates({STATE: B})
    assert updates == [(TRACKING + STATE, B, A)]
    assert todo.tracked_after(updates) == {TRACKING + STATE: B, TRACKING + CLAIM: A}


def test_a_ref_refused_before_is_not_looked_at_again_until_it_moves() -> None:
    listed = {STAGING + STATE: B, STAGING + CLAIM: C, TRACKING + STATE: A}
    before = {"refs/" + STATE: held(STATE, B), "refs/" + CLAIM: held(CLAIM, D)}
    todo = plan(listed, staging=STAGING, tracking=TRACKING, whole=True, held_before=before)
    assert todo.kept == {"refs/" + STATE: held(STATE, B)}
    assert todo.unchecked == {CLAIM: C}
    # the refused state keeps its tracking ref at the last value that passed
    assert todo.updates({}) == []


def test_a_ref_the_remote_dropped_leaves_its_tracking_ref() -> None:
    listed = {STAGING + STATE: A, TRACKING + STATE: A, TRACKING + CLAIM: B}
    todo = plan(listed, staging=STAGING, tracking=TRACKING, whole=True, held_before={})
    assert todo.unchecked == {}
    updates = todo.updates({})
    assert updates == [(TRACKING + CLAIM, None, B)]
    assert todo.tracked_after(updates) == {TRACKING + STATE: A}


def test_the_staged_notes_are_the_remotes_refs_notes_harness() -> None:
    listed = {STAGING + "harness/notes/harness": A}
    todo = plan(listed, staging=STAGING, tracking=TRACKING, whole=True, held_before={})
    assert todo.unchecked == {"notes/harness": A}
    assert todo.updates({"notes/harness": A}) == [(TRACKING + "notes/harness", A, None)]


def test_a_claims_fetch_leaves_the_attempts_and_notes_as_they_were() -> None:
    """`everything=False` brings the states and the claims only: what it did not bring is
    neither checked, deleted nor let out of the quarantine."""
    listed = {STAGING + STATE: B, STAGING + ATTEMPT: C, TRACKING + STATE: A,
              TRACKING + "harness/attempts/T1/0": A, TRACKING + "notes/harness": A}
    before = {"refs/" + ATTEMPT: held(ATTEMPT, D)}
    todo = plan(listed, staging=STAGING, tracking=TRACKING, whole=False, held_before=before)
    assert todo.unchecked == {STATE: B}
    assert todo.kept == before
    assert todo.updates({STATE: B}) == [(TRACKING + STATE, B, A)]


def test_refs_outside_the_namespaces_read_are_ignored() -> None:
    listed = {STAGING + "harness/other/x": A, TRACKING + "harness/other/y": B}
    todo = plan(listed, staging=STAGING, tracking=TRACKING, whole=True, held_before={})
    assert todo.unchecked == {} and todo.updates({}) == []
    assert todo.tracked == {TRACKING + "harness/other/y": B}
