"""The merge on git trees (only changed paths read, objects written by fast-import) gives
exactly what the pure merge gives on whole states, in either order."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from git_handoff.core.merge import merge_states
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.integrate import merge_changes
from tests.core.test_merge import apply_edits, base_state, edit_lists
from tests.support.repo import make_repo
from tests.support.speed import examples


@pytest.fixture(scope="module")
def raw_repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return Repo.discover(make_repo(tmp_path_factory.mktemp("trees") / "r"))


def write_state(repo: Repo, state: dict[str, bytes]) -> str:
    return repo.update_tree(None, {p: repo.write_blob(v) for p, v in state.items()})


def read_state(repo: Repo, tree: str) -> dict[str, bytes]:
    return {p: repo.read_blob(new) for p, (_, new) in repo.tree_diff(None, tree).items() if new}


def commit_of(repo: Repo, tree: str) -> str:
    return repo.create_commit(tree, [], "state\n")


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edit_lists, edit_lists)
def test_tree_merge_matches_pure_merge(raw_repo: Repo, e1: list[tuple[str, str, int]],
                                       e2: list[tuple[str, str, int]]) -> None:
    repo = raw_repo
    base = base_state()
    x = apply_edits(base, e1, 1, 100)
    y = apply_edits(base, e2, 2, 100)
    bt, xt, yt = write_state(repo, base), write_state(repo, x), write_state(repo, y)
    expected, _ = merge_states(base, x, y)
    for ours, theirs in ((xt, yt), (yt, xt)):
        changes, _ = merge_changes(repo, bt, ours, theirs)
        commit = repo.commit_changes_packed([commit_of(repo, ours)], changes, "merge\n")
        assert read_state(repo, repo.commit_tree(commit)) == expected


def test_tree_diff_paths(tmp_path: Path) -> None:
    repo = Repo.discover(make_repo(tmp_path / "r"))
    a = repo.update_tree(None, {"x": repo.write_blob(b"1"), "d/y": repo.write_blob(b"2")})
    b = repo.update_tree(a, {"d/y": None, "d": None, "x": None, "x/z": repo.write_blob(b"3")})
    diff = repo.tree_diff(a, b)
    assert set(diff) == {"x", "d/y", "x/z"}
    assert diff["x"][1] is None and diff["d/y"][1] is None and diff["x/z"][0] is None
