"""One state commit read (git_handoff.state.snapshot): its format marker, its files, its
tasks and config, each record through its parser."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from git_handoff.core.errors import InvalidState
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.snapshot import FORMAT_PATH, META_PATH, Snapshot, parse_json, task_path
from tests.support.repo import run, state_head


@pytest.fixture
def state(repo: Path) -> Snapshot:
    for args in (("init",), ("add", "First", "--id", "a"), ("add", "Second", "--id", "b", "--after", "a")):
        assert run(*args).rc == 0, args
    head = state_head(repo)
    assert head is not None
    return Snapshot(Repo.discover(repo), head)


def test_a_task_lives_at_its_fanout_path() -> None:
    digest = hashlib.sha1(b"a").hexdigest()
    assert task_path("a") == f"tasks/{digest[0]}/{digest[1]}/a.json"


def test_a_snapshot_reads_its_tasks_config_and_files(state: Snapshot) -> None:
    assert state.read(FORMAT_PATH) == b"git-handoff-state 1\n"
    assert state.read("no/such/file") is None
    task = state.task("b")
    assert task is not None and task.title == "Second" and task.depends_on == ("a",)
    assert state.task("zz") is None
    assert sorted(state.tasks()) == ["a", "b"]
    assert state.config().mode == "exclusive"
    assert isinstance(state.meta(), dict) and state.read_json(META_PATH) == state.meta()
    found = state.repo.tree_lookup(state.tree, "tasks")
    assert found is not None and state.tasks_tree() == found[0]
    digest = hashlib.sha1(b"a").hexdigest()
    assert "a.json" in state.listdir(f"tasks/{digest[0]}/{digest[1]}")
    assert state.listdir("nowhere") == []


def test_a_record_that_does_not_parse_names_its_path() -> None:
    assert parse_json(None, "meta.json") is None
    assert parse_json(b'{"x": [1]}', "other.json") == {"x": [1]}
    with pytest.raises(InvalidState, match="state file meta.json"):
        parse_json(b'{"session_count": "many"}', "meta.json")
    with pytest.raises(InvalidState, match="state file other.json"):
        parse_json(b"{", "other.json")


def test_a_commit_without_the_format_or_of_a_newer_one_is_refused(state: Snapshot) -> None:
    repo = state.repo
    for marker, message in ((None, "is not a git handoff state"), (b"git-handoff-state 99\n", "newer git handoff"),
                            (b"something else\n", "unreadable format marker")):
        blob = None if marker is None else repo.write_blob(marker)
        tree = repo.update_tree(state.tree, {FORMAT_PATH: blob})
        commit = repo.create_commit(tree, [state.commit], "changed format")
        with pytest.raises(InvalidState, match=message):
            Snapshot(repo, commit)
