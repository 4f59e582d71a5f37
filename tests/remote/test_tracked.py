"""This clone's refs around a push (git_handoff.remote.tracked): the remote's attempts
taken, the tracking refs kept honest without a fetch, a deleted ref's quarantine dropped."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import tracked
from git_handoff.remote.layout import Remote
from git_handoff.state import quarantine
from tests.support.repo import git


def _setup(repo: Path, tmp_path: Path) -> tuple[Repo, Remote, str, str]:
    git("remote", "add", "origin", str(tmp_path / "bare"), cwd=repo)
    first = git("rev-parse", "HEAD", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=repo)
    r = Repo.discover(repo)
    return r, Remote(r, "origin"), first, git("rev-parse", "HEAD", cwd=repo)


def test_take_attempts_creates_the_missing_and_reports_clashes(repo: Path, tmp_path: Path) -> None:
    r, remote, one, two = _setup(repo, tmp_path)
    r.update_refs([(remote.attempts + "a/1", one, None), (remote.attempts + "b/1", one, None),
                   (remote.attempts + "c/1", two, None), ("refs/harness/attempts/b/1", two, None),
                   ("refs/harness/attempts/c/1", two, None)], "fetched")
    assert tracked.take_attempts(r, remote) == (["refs/harness/attempts/a/1"], ["refs/harness/attempts/b/1"])
    assert r.ref_target("refs/harness/attempts/a/1") == one
    assert r.ref_target("refs/harness/attempts/b/1") == two  # a clash is left as it is


def test_track_and_forget_keep_the_tracking_refs_as_the_push_left_the_remote(repo: Path, tmp_path: Path) -> None:
    r, remote, one, two = _setup(repo, tmp_path)
    remote.tracked = {}
    tracked.track(r, remote, "refs/harness/claims/t1", one)
    tracked.track(r, remote, "refs/harness/claims/t1", two)
    assert r.ref_target(remote.claims + "t1") == two and remote.tracked == {remote.claims + "t1": two}
    why: quarantine.Held = {"ref": "refs/harness/claims/t1", "oid": one, "why": "bad"}
    keep: quarantine.Held = {"ref": "refs/harness/claims/t2", "oid": one, "why": "bad too"}
    quarantine.write(r, remote.track, {why["ref"]: why, keep["ref"]: keep})
    tracked.forget(r, remote, ["refs/harness/claims/t1"])
    assert r.ref_target(remote.claims + "t1") is None and remote.tracked == {}
    assert quarantine.read(r, remote.track) == {keep["ref"]: keep}
