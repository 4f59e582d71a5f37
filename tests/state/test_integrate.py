"""Integrating fetched states (git_handoff.state.integrate): the changes a merge makes to
our tree, and integrate.holds: whether our state holds a commit (a live claim ref's, in a
fleet), known without a walk for what is near the head or a remote head remembered as
merged, and asked of the history otherwise - the same answers either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import tasks
from git_handoff.state import integrate
from git_handoff.state.fold_heads import HeadsCache
from git_handoff.state.store import StateStore, Tx


def _history(repo_path: Path, n: int) -> tuple[StateStore, list[str]]:
    store = StateStore(Repo.discover(repo_path))
    tasks.init(store)
    commits = []
    for k in range(n):
        def step(tx: Tx, k: int = k) -> None:
            tx.log("INIT", f"step {k}")

        store.transact(step)
        head = store.head()
        assert head is not None
        commits.append(head)
    return store, commits


def test_a_remembered_head_is_held_without_a_walk_and_the_answers_match_the_walks(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, commits = _history(repo, integrate.NEAR_DEPTH + 6)
    repo_obj = store.repo
    head, deep = commits[-1], commits[0]  # deeper than the first-parent line holds() looks down
    aside = repo_obj.create_commit(repo_obj.commit_tree(deep), [deep], "another clone's head\n")
    HeadsCache(repo_obj, "state").remember(head, [deep])
    walks: list[tuple[str, str]] = []
    real = Repo.is_ancestor

    def counted(self: Repo, ancestor: str, descendant: str) -> bool:
        walks.append((ancestor, descendant))
        return real(self, ancestor, descendant)

    monkeypatch.setattr(Repo, "is_ancestor", counted)
    held = integrate.holds(repo_obj, head)
    assert held(deep) and held(commits[-2]) and held(head)
    assert walks == []  # remembered, or near the head
    assert held(commits[2])  # neither: a walk says so
    assert not held(aside)
    assert len(walks) == 2
    # a cache written for a commit our state does not hold is not believed
    HeadsCache(repo_obj, "state").remember(aside, [deep, aside])
    walks.clear()
    held = integrate.holds(repo_obj, head)
    assert not held(aside) and held(deep)
    assert walks  # asked of the history


def test_the_commits_near_the_head_are_its_own(repo: Path) -> None:
    store, commits = _history(repo, 3)
    other = store.repo.create_commit(store.repo.commit_tree(commits[0]), [], "unrelated\n")
    held = integrate.holds(store.repo, commits[-1])
    assert all(held(c) for c in commits) and not held(other)
    assert not integrate.holds(store.repo, commits[0])(commits[-1])  # a later commit is not held by an earlier one




def test_merge_changes_takes_their_changes_and_merges_a_record_both_changed(repo: Path) -> None:
    r = Repo.discover(repo)
    base = r.update_tree(None, {"meta.json": r.write_blob(b'{"n": 1}'), "gone.json": r.write_blob(b"{}")})
    ours = r.update_tree(base, {"mine.json": r.write_blob(b"{}"), "meta.json": r.write_blob(b'{"n": 1, "a": [1]}')})
    theirs = r.update_tree(base, {"gone.json": None, "theirs.json": r.write_blob(b'{"t": 1}'),
                                  "meta.json": r.write_blob(b'{"n": 1, "a": [2]}')})
    changes, conflicts = integrate.merge_changes(r, base, ours, theirs)
    assert sorted(changes) == ["gone.json", "meta.json", "theirs.json"]  # not mine.json: only ours changed it
    assert changes["gone.json"] is None
    found = r.tree_lookup(theirs, "theirs.json")
    assert found is not None and changes["theirs.json"] == found[0]
    merged = changes["meta.json"]
    assert isinstance(merged, bytes) and json.loads(merged)["a"] == [1, 2] and conflicts == []
    assert integrate.merge_changes(r, base, ours, ours) == ({}, [])
