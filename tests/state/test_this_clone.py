"""What belongs to this clone and worktree only (git_handoff.state.this_clone): who the
worker is, the per-worktree files, the handoff.* settings, the post-commit hook's state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import this_clone
from tests.support.repo import git


def test_the_worker_is_the_option_then_the_environment_then_git_config(repo: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANDOFF_WORKER", raising=False)
    monkeypatch.delenv("HARNESS_WORKER_ID", raising=False)
    r = Repo.discover(repo)
    assert this_clone.worker_identity(r).endswith(f":{repo.resolve()}")
    git("config", "handoff.worker", "configured", cwd=repo)
    assert this_clone.worker_identity(Repo.discover(repo)) == "configured"
    monkeypatch.setenv("HARNESS_WORKER_ID", "harness")
    assert this_clone.worker_from_env() == ("HARNESS_WORKER_ID", "harness")
    monkeypatch.setenv("HANDOFF_WORKER", " agent-1 ")
    assert this_clone.declared_worker() == "agent-1"
    assert this_clone.worker_identity(r) == "agent-1"
    assert this_clone.worker_identity(r, " given ") == "given"


def test_a_worker_name_that_is_not_one_line_is_refused(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = Repo.discover(repo)
    with pytest.raises(UsageError, match="--worker must be non-empty text on one line"):
        this_clone.worker_identity(r, "a\nb")
    monkeypatch.setenv("HANDOFF_WORKER", "bell\x07")
    with pytest.raises(UsageError, match="the worker name from HANDOFF_WORKER holds a newline or a control"):
        this_clone.declared_worker()


def test_the_open_session_file(repo: Path) -> None:
    r = Repo.discover(repo)
    assert this_clone.open_session(r) is None
    this_clone.write_private(r, this_clone.SESSION_FILE, json.dumps({"session": 4}))
    assert this_clone.open_session(r) == {"session": 4}
    this_clone.write_private(r, this_clone.SESSION_FILE, json.dumps({"session": 4, "ended_at": "t"}))
    assert this_clone.open_session(r) is None
    this_clone.remove_private(r, this_clone.SESSION_FILE)
    this_clone.remove_private(r, this_clone.SESSION_FILE)  # gone already: fine
    assert not (r.worktree_dir / this_clone.SESSION_FILE).exists()
    assert this_clone.here(r) == str(repo.resolve())


def test_settings_per_session_and_the_default_remote(repo: Path, tmp_path: Path) -> None:
    r = Repo.discover(repo)
    assert this_clone.commits_per_session(r) is None and this_clone.default_remote_name(r) is None
    git("config", "handoff.commitsPerSession", "5", cwd=repo)
    git("config", "handoff.tasksPerSession", "0", cwd=repo)
    git("remote", "add", "origin", str(tmp_path / "nowhere"), cwd=repo)
    r = Repo.discover(repo)
    assert this_clone.commits_per_session(r) == 5 and this_clone.tasks_per_session(r) is None
    assert this_clone.default_remote_name(r) == "origin"


def test_the_hook_state_counts_commits_since_the_base(repo: Path) -> None:
    r = Repo.discover(repo)
    base = r.head()
    path = r.worktree_dir / this_clone.HOOK_STATE_FILE
    this_clone.write_hook_state(r, base)
    assert not path.exists()  # no threshold set
    git("config", "handoff.commitsPerSession", "3", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "one", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "two", cwd=repo)
    r = Repo.discover(repo)
    this_clone.write_hook_state(r, base)
    assert path.read_text() == f"{base} 3 2\n"
    this_clone.write_hook_state(r, base, seen=7)
    assert path.read_text() == f"{base} 3 7\n"
    this_clone.clear_hook_state(r)
    assert not path.exists()
