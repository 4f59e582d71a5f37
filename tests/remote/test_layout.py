"""Where the state lives on a remote and here (git_handoff.remote.layout): a remote named or
given as a path, the names of its refs and of their tracking refs, and the refspecs."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import layout
from git_handoff.remote.layout import Remote
from git_handoff.state import identity
from tests.support.repo import git


def test_a_named_remote_and_its_refs(repo: Path, tmp_path: Path) -> None:
    git("remote", "add", "origin", str(tmp_path / "bare"), cwd=repo)
    r = Repo.discover(repo)
    remote = Remote(r, None)
    clone = identity.clone_id(r)
    assert (remote.spec, remote.named, remote.track) == ("origin", True, "origin")
    assert remote.my_state == f"refs/harness/clones/{clone}/state"
    assert remote.my_notes == f"refs/harness/clones/{clone}/notes"
    assert Remote.claim_ref("t1") == "refs/harness/claims/t1"
    assert remote.tracking("refs/harness/claims/t1") == "refs/remotes/origin/harness/claims/t1"
    assert remote.tracking("refs/notes/harness") == remote.notes == "refs/remotes/origin/notes/harness"
    assert remote.staging == "refs/handoff-incoming/origin/"
    assert remote.refspecs() == layout.fetch_specs("refs/handoff-fetched/origin/")


def test_a_path_is_tracked_under_a_name_of_its_own_and_nonsense_is_refused(repo: Path, tmp_path: Path) -> None:
    r = Repo.discover(repo)
    by_path = Remote(r, str(tmp_path))
    assert not by_path.named and by_path.track.startswith("handoff-") and len(by_path.track) == 18
    assert Remote(r, str(tmp_path)).track == by_path.track
    with pytest.raises(UsageError, match="no remote 'origin'"):
        Remote(r, None)
    with pytest.raises(UsageError, match="invalid remote '-x'"):
        Remote(r, "-x")
    with pytest.raises(UsageError, match="unknown remote 'nosuch'"):
        Remote(r, "nosuch")


def test_the_heads_a_fetch_left_are_read_in_a_fixed_order(repo: Path, tmp_path: Path) -> None:
    git("remote", "add", "origin", str(tmp_path / "bare"), cwd=repo)
    r = Repo.discover(repo)
    remote = Remote(r, "origin")
    head = r.head()
    assert head is not None
    refs = [remote.state, remote.clones + "bbbb/state", remote.clones + "aaaa/state", remote.clones + "aaaa/notes",
            remote.claims + "t1"]
    r.update_refs([(name, head, None) for name in refs], "fetched")
    assert remote.state_heads(r) == [("origin", head), ("origin (clone aaaa)", head), ("origin (clone bbbb)", head)]
    assert remote.publishing_clones(r) == ["aaaa", "bbbb"]
    assert remote.notes_heads(r) == [head]
    assert remote.claim_refs(r) == {"t1": head}
    remote.tracked = dict(r.refs_in(remote.tracking_prefix))
    remote.moved(remote.claims + "t1", None)
    assert remote.claim_refs(r) == {}  # as the push left it, without a fetch


def test_the_refspecs_and_what_they_read() -> None:
    specs = layout.fetch_specs("refs/x/")
    assert "+refs/harness/claims/*:refs/x/harness/claims/*" in specs
    assert "+refs/notes/harness*:refs/x/harness/notes/harness*" in specs
    assert [s for s in layout.state_specs("refs/x/") if "attempts" in s] == []
    assert len(layout.claim_specs("refs/x/")) == 3
    assert layout.remote_rest("harness/notes/harness") == "notes/harness"
    assert layout.remote_rest("harness/claims/a") == "harness/claims/a"
    assert layout.is_read("harness/state") and layout.is_read("harness/attempts/a/1")
    assert not layout.is_read("harness/other") and not layout.is_read("heads/main")
    assert layout.is_state("harness/clones/c/state") and not layout.is_state("harness/clones/c/notes")
    assert layout.is_notes("notes/harness") and layout.is_notes("harness/clones/c/notes")
    assert layout.in_claim_specs("harness/claims/t") and not layout.in_claim_specs("harness/attempts/t/1")
