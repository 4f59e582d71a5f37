"""Signing this clone's state commits and checking fetched ones (git_handoff.infra.signing),
with real ssh keys made by ssh-keygen."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra import signing
from git_handoff.infra.gitrepo import Repo
from tests.support.repo import git

pytestmark = pytest.mark.needs("ssh-keygen")


def _key(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True)
    return path


def test_without_settings_a_commit_is_left_as_it_is(repo: Path) -> None:
    r = Repo.discover(repo)
    head = r.head()
    assert head is not None
    assert signing.signing_key(r) is None and signing.allowed_signers(r) is None
    assert signing.seal(r, head) == head
    assert signing.own_commits(r) == set()


def test_the_settings_name_the_key_and_the_allowed_signers_file(repo: Path, tmp_path: Path) -> None:
    git("config", "gpg.format", "ssh", cwd=repo)
    git("config", "user.signingKey", " ~/.ssh/k ", cwd=repo)
    r = Repo.discover(repo)
    assert signing.signing_key(r) is None  # asked for by neither handoff.signState nor commit.gpgSign
    git("config", "commit.gpgSign", "true", cwd=repo)
    assert signing.signing_key(Repo.discover(repo)) == "~/.ssh/k"
    git("config", "handoff.signState", "false", cwd=repo)
    assert signing.signing_key(Repo.discover(repo)) is None
    git("config", "handoff.allowedSigners", "keys/allowed", cwd=repo)
    assert signing.allowed_signers(Repo.discover(repo)) == repo.resolve() / "keys" / "allowed"


def test_a_sealed_commit_is_signed_remembered_and_verifies(repo: Path, tmp_path: Path) -> None:
    key = _key(tmp_path / "me")
    allowed = tmp_path / "allowed"
    allowed.write_text("me@example " + (tmp_path / "me.pub").read_text())
    for name, value in (("gpg.format", "ssh"), ("user.signingKey", str(key)), ("handoff.signState", "true"),
                        ("handoff.allowedSigners", str(allowed))):
        git("config", name, value, cwd=repo)
    r = Repo.discover(repo)
    head = r.head()
    assert head is not None
    sealed = signing.seal(r, head)
    assert sealed != head and r.commit_tree(sealed) == r.commit_tree(head)
    assert signing.own_commits(r) == {sealed}
    other = tmp_path / "other-allowed"
    other.write_text("")
    verified = signing.verify(r, [sealed, head], allowed)
    assert verified[head] == (signing.UNSIGNED, "")
    assert verified[sealed][0] == signing.GOOD and verified[sealed][1].startswith("SHA256:")
    assert signing.verify(r, [sealed], other)[sealed][0] == signing.UNKNOWN
    assert signing.verify(r, [], allowed) == {}


def test_a_key_that_cannot_sign_is_a_usage_error(repo: Path, tmp_path: Path) -> None:
    r = Repo.discover(repo)
    head = r.head()
    assert head is not None
    with pytest.raises(UsageError, match="signing the state commit with user.signingKey failed"):
        signing.sign_commit(r, head, str(tmp_path / "no-such-key"))
