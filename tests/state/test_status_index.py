"""`status` from the status index answers what counting and listing every task blob
answers: through random changes (cycles, tasks failed for good, claims, removals, order
changes), from a stale index, from a damaged one."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from git_handoff.core import selection
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import views
from git_handoff.state import status_index
from git_handoff.state.store import StateStore
from tests.support.repo import run
from tests.support.state import fresh_store, random_change, tasks_from_blobs


def _reference(store: StateStore) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Counts and rows of `status`, from every task blob read and sorted, no index."""
    tasks = tasks_from_blobs(store)
    by_id = {t.id: t for t in tasks}
    blocked = selection.blocked_ids(by_id)
    rows = [{"id": t.id, "title": t.title, "status": "blocked" if t.id in blocked else t.status,
             "attempts": t.attempts, "max_attempts": t.max_attempts, "priority": t.priority,
             "claimed_by": t.claimed_by} for t in tasks]
    return selection.counts(by_id, blocked), rows


def _answer(store: StateStore) -> tuple[dict[str, int], list[dict[str, Any]]]:
    out = views.status(store)
    return out["counts"], [dict(r) for r in out["tasks"]]


def test_status_from_the_index_answers_what_every_blob_answers(repo: Path) -> None:
    assert run("init").rc == 0
    rng = random.Random(5)
    serial = [0]
    blocked_seen = False
    for n in range(120):
        store = fresh_store(repo)
        store.transact(lambda tx: random_change(rng, tx, serial))
        expected = _reference(store)
        assert _answer(fresh_store(repo)) == expected, n
        # what the update from the tree diff holds is what building it from the tasks holds
        snap = fresh_store(repo).snapshot()
        kept, built = status_index.summary(snap), status_index._build(snap, snap.tasks_tree() or "")
        assert kept is not None
        assert (kept.rows, kept.order, kept.counts, kept.failing, kept.leaves, kept.top) == (
            built.rows, built.order, built.counts, built.failing, built.leaves, built.top), n
        blocked_seen = blocked_seen or expected[0]["blocked"] > 0
    assert blocked_seen  # the walk did reach states where dependency validation blocks tasks
    assert len(_reference(fresh_store(repo))[1]) > 20


def test_the_index_is_brought_along_the_tree_diff(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After one change the index is updated, not rebuilt: only the changed task is
    parsed, its rows of untouched tasks are the very rows it held. The file is written
    again only once bringing it along parses more than REWRITE_AFTER tasks (a rewrite
    costs more than that; 3 here)."""
    monkeypatch.setattr(status_index, "REWRITE_AFTER", 3)
    assert run("init").rc == 0
    for i in range(30):
        assert run("add", f"T{i}", "--id", f"t{i:02d}").rc == 0
    views.status(fresh_store(repo))
    before = status_index._load(Repo.discover(repo))
    assert before is not None
    assert run("claim", "t07", "--worker", "w").rc == 0
    store = fresh_store(repo)
    assert _answer(store) == _reference(store)
    after = status_index.summary(store.snapshot())
    assert after is not None and after.tree == store.snapshot().tasks_tree() != before.tree
    assert after.reread == 1
    assert after.rows["t07"][status_index.STATUS] == "in_progress"
    assert {k: v for k, v in after.rows.items() if k != "t07"} == {k: v for k, v in before.rows.items() if k != "t07"}
    on_disk = status_index._load(Repo.discover(repo))
    assert on_disk is not None and on_disk.tree == before.tree  # one task to parse: not written
    edited = 7
    while True:
        edited += 1
        assert run("edit", f"t{edited:02d}", "--title", f"edited {edited}").rc == 0
        store = fresh_store(repo)
        assert _answer(store) == _reference(store)
        now = status_index.summary(store.snapshot())
        on_disk = status_index._load(Repo.discover(repo))
        assert now is not None and on_disk is not None
        assert now.reread == edited - 6
        if now.reread > status_index.REWRITE_AFTER:
            assert on_disk.tree == now.tree  # written for the tree it describes
            break
        assert on_disk.tree == before.tree
        assert edited < 29
    assert edited - 7 == 3


def test_a_stale_or_damaged_index_is_not_believed(repo: Path) -> None:
    assert run("init").rc == 0
    for i in range(6):
        assert run("add", f"T{i}", "--id", f"t{i}").rc == 0
    assert run("add", "T9", "--id", "t9", "--after", "t2").rc == 0
    views.status(fresh_store(repo))
    path = repo / ".git" / "handoff" / status_index.FILE
    good = path.read_bytes()
    assert run("edit", "t3", "--title", "renamed").rc == 0
    assert run("claim", "t1", "--worker", "w").rc == 0
    path.write_bytes(good)  # an index of a tree before
    store = fresh_store(repo)
    answer = _answer(store)
    assert answer == _reference(store)
    assert {r["id"]: r["title"] for r in answer[1]}["t3"] == "renamed"
    views.status(fresh_store(repo))
    good = path.read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF
    for bad in (bytes(damaged), good[: len(good) // 3], b"", b"not an index"):
        path.write_bytes(bad)
        store = fresh_store(repo)
        assert _answer(store) == _reference(store)
        assert status_index._load(Repo.discover(repo)) is not None  # rebuilt and written again
    cli = run("status", "--json").json()
    assert cli["counts"] == _reference(fresh_store(repo))[0] and len(cli["tasks"]) == 7
