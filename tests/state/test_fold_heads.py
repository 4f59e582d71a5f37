"""Folding fetched heads into our state (git_handoff.state.fold_heads), its parts: a task
record read leniently, a tree with changes not written yet, the heads a state is known
to contain. tests/state/test_integrate.py and the sync tests run the fold itself."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra.gitrepo import Repo
from git_handoff.state.fold_heads import HeadsCache, View, short, task_record
from tests.support.repo import git


def test_task_record_is_an_object_with_an_id_or_none() -> None:
    assert task_record(b'{"id": "a", "title": "A"}') == {"id": "a", "title": "A"}
    assert task_record(None) is None and task_record(b"{") is None
    assert task_record(b'{"title": "no id"}') is None and task_record(b"[1]") is None
    assert short("x" * 10) == "x" * 10 and short({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
    assert short("y" * 100) == "y" * 57 + "..."


def test_a_view_answers_its_changes_before_writing_them(repo: Path) -> None:
    r = Repo.discover(repo)
    tree = r.update_tree(None, {"a.json": r.write_blob(b"A"), "b.json": r.write_blob(b"B")})
    view = View(r, tree)
    view.changes.update({"a.json": b"new A", "b.json": None, "c.json": r.write_blob(b"C")})
    assert view.get("a.json") == b"new A" and view.get("b.json") is None
    assert view.data(view.get("c.json")) == b"C" and view.get("missing") is None
    written = view.write()
    assert view.changes == {} and view.tree == written != tree
    assert r.tree_files(written) == [("a.json", b"new A"), ("c.json", b"C")]
    assert view.write() == written  # nothing more to write


def test_the_heads_cache_holds_while_our_state_only_moves_forward(repo: Path) -> None:
    r = Repo.discover(repo)
    first = r.head()
    git("commit", "-q", "--allow-empty", "-m", "later", cwd=repo)
    later = git("rev-parse", "HEAD", cwd=repo)
    git("checkout", "-q", "--orphan", "other", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "unrelated", cwd=repo)
    unrelated = git("rev-parse", "HEAD", cwd=repo)
    cache = HeadsCache(r, "origin")
    assert cache.known(first) == set()
    cache.remember(first, ["h2", "h1", "h1"])
    cache.remember(None, ["ignored"])
    assert cache.known(first) == cache.known(later) == {"h1", "h2"}
    assert cache.known(unrelated) == set() and cache.known(None) == set()
    cache.path.write_text("{broken")
    assert cache.known(first) == set()
