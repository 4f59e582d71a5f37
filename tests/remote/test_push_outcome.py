"""What git's porcelain answer to a push says of each ref (the transport's real pushes are
tested in tests/remote/test_claim_race.py and tests/ops/test_sync*.py; these pin the
reading of git's lines themselves)."""

from __future__ import annotations

import pytest

from git_handoff.remote import push_outcome
from git_handoff.remote.push_outcome import ACCEPTED, ATOMIC, LOCKED, MOVED, REFUSED


@pytest.mark.parametrize(
    ("flag", "summary", "outcome"),
    [
        ("*", "[new reference]", ACCEPTED),
        ("=", "[up to date]", ACCEPTED),
        (" ", "abc..def", ACCEPTED),
        ("!", "[rejected] (stale info)", MOVED),
        ("!", "[rejected] (fetch first)", MOVED),
        ("!", "[remote rejected] (failed to update ref)", LOCKED),
        ("!", "[remote rejected] (cannot lock ref 'refs/harness/claims/t1')", LOCKED),
        ("!", "[rejected] (atomic push failed)", ATOMIC),
        ("!", "[remote rejected] (atomic push failure)", ATOMIC),  # the server's word for it
        ("!", "[remote rejected] (hook declined)", REFUSED),
    ],
)
def test_each_summary_is_classified(flag: str, summary: str, outcome: str) -> None:
    assert push_outcome.classify(flag, summary) == outcome


def test_the_porcelain_lines_are_read_ref_by_ref() -> None:
    stdout = (b"To /srv/remote.git\n"
              b"*\trefs/harness/clones/c1/state:refs/harness/clones/c1/state\t[new reference]\n"
              b"!\trefs/harness/clones/c1/state:refs/harness/claims/t1\t[remote rejected] (hook declined)\n"
              b"Done\n")
    stderr = (b"remote: FATAL: W refs/harness/claims/t1 repo alice DENIED by fallthru\n"
              b"remote: \n"
              b"error: failed to push some refs to '/srv/remote.git'\n")
    pushed = push_outcome.read(stdout, stderr, failed=True)
    assert pushed.ok("refs/harness/clones/c1/state")
    assert pushed.outcome("refs/harness/claims/t1") == REFUSED
    assert pushed.outcome("refs/harness/claims/t2") is None
    assert pushed.said == ("FATAL: W refs/harness/claims/t1 repo alice DENIED by fallthru",)
    assert pushed.refused() == ('refs/harness/claims/t1: [remote rejected] (hook declined), the server says '
                                '"FATAL: W refs/harness/claims/t1 repo alice DENIED by fallthru"')
    assert pushed.refused(among=("refs/harness/clones/",)) is None


def test_a_push_that_succeeded_keeps_no_server_lines() -> None:
    pushed = push_outcome.read(b"=\trefs/a:refs/a\t[up to date]\nDone\n", b"remote: hello\n", failed=False)
    assert pushed.ok("refs/a") and pushed.said == ()
