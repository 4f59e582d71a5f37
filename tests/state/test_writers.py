"""Who wrote the state's records, and whose writes are offered to agents
(git_handoff.state.writers): off without handoff.allowedSigners; with it, the keys approved
here, a missing file named, the refusal of an unapproved task. tests/hostile/
test_allowed_signers.py runs a fleet of signing clones."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import writers
from tests.support.repo import git, run

KEY = "SHA256:" + "A" * 43


def test_without_the_setting_every_writer_is_offered(repo: Path) -> None:
    assert run("init").rc == 0 and run("add", "A", "--id", "a").rc == 0
    r = Repo.discover(repo)
    assert not writers.enabled(r)
    assert writers.unapproved_at_head(r) == {} and writers.pending_writers(r) == []
    assert writers.file_note(r) is None
    with pytest.raises(UsageError, match="handoff.allowedSigners is not set"):
        writers.approve_keys(r, [KEY])


def test_with_the_setting_keys_are_approved_here_and_a_missing_file_is_named(repo: Path, tmp_path: Path) -> None:
    assert run("init").rc == 0 and run("add", "A", "--id", "a").rc == 0
    git("config", "handoff.allowedSigners", str(tmp_path / "allowed"), cwd=repo)
    r = Repo.discover(repo)
    assert writers.enabled(r)
    assert f"names {tmp_path / 'allowed'}, which is not a readable file" in (writers.file_note(r) or "")
    assert writers.unapproved_at_head(r) == {}  # this clone's own writes
    assert writers.approve_keys(r, [KEY, f" {KEY} "]) == [KEY]
    data = writers.approvals(r)
    assert list(data["keys"]) == [KEY] and data["baseline"] == git("rev-parse", "refs/harness/state", cwd=repo)
    with pytest.raises(UsageError, match="not a key fingerprint: 'md5:00'"):
        writers.approve_keys(r, ["md5:00"])
    (tmp_path / "allowed").write_text("")
    assert writers.file_note(r) is None


def test_the_refusal_of_an_unapproved_task_says_how_to_approve() -> None:
    error = writers.refuse("a", "x (key SHA256:k)")
    assert error.exit_code == 2
    assert error.message.startswith("task a was last written by an unapproved writer (x (key SHA256:k))")
    assert "git handoff trust --writer KEY" in error.message
