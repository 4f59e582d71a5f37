"""`status` from the status index answers what counting and listing every task blob
answers: through random changes (cycles, tasks failed for good, claims, removals, order
changes), from a stale index, from a damaged one."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from git_handoff.core import selection
from git_handoff.core.model import Task
from git_handoff.infra.fileio import sealed
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import views
from git_handoff.state import status_index
from git_handoff.state.store import StateStore, Tx
from tests.support.repo import run
from tests.support.state import fresh_store, random_change, tasks_from_blobs


def _reference(store: StateStore) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Counts and rows of `status`, from every task blob read and sorted, no index."""
    tasks = tasks_from_blobs(store)
    by_id = {t.id: t for t in tasks}
    blocked = selection.blocked_ids(by_id)
    rows = [{"id": t.id, "title": t.title, "status": "blocked" if t.id in blocked else t.status,
             "attempts": t.attempts, "max_attempts": t.max_attempts, "priority": t.priority,
             "claimed_by": t.claimed_by, **_work_keys(t), **_use_keys(t)} for t in tasks]
    return selection.counts(by_id, blocked), rows


def _work_keys(task: Task) -> dict[str, Any]:
    """The keys `status` adds to a task's row for where its work is (core/selection.work_state)."""
    found = selection.work_state(task)
    if found is None:
        return {}
    key = {selection.LANDED: "integrated_commit", selection.WAITING: "work_ref"}.get(found[0])
    return {"work": found[0], **({key: found[1]} if key else {})}


def _use_keys(task: Task) -> dict[str, Any]:
    """The keys `status` adds to a task's row for what was charged to it (all three, or none)."""
    found = {"tokens": task.tokens, "cost_micro_usd": task.get("cost_micro_usd") or 0,
             "held_seconds": task.get("held_seconds") or 0}
    return found if any(found.values()) else {}


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


def _row(tid: str, *, status: str = "pending", order: int = 0, deps: tuple[str, ...] = (), for_good: bool = False,
         title: str = "T") -> status_index.Row:
    return (tid, title, status, 0, 3, "P1", None, order, "2024-01-01T00:00:00Z", deps, for_good, None, None, None,
            None)


def test_the_blob_plan_parses_only_the_blobs_that_changed() -> None:
    prior = {"3/a/t1.json": ("b1", "t1"), "3/a/t2.json": ("b2", "t2"), "3/a/t3.json": ("b3", "t3")}
    listed = {"3/a": [("t1.json", "b1"), ("t2.json", "b2x"), ("t4.json", "b4")], "5/c": [("t9.json", "b9")]}
    plan = status_index.plan_blobs(prior, listed)
    assert plan.gone == ("t2", "t3")  # changed, went; in the old tree's order
    assert plan.known == {"3/a": ["t1", None, None], "5/c": [None]}  # by blob, in tree order
    assert plan.to_parse == 3


def test_the_blob_plan_of_a_blob_that_moved_leaf_parses_it_again() -> None:
    """An unchanged blob at another path is not known by its oid alone: it is parsed."""
    plan = status_index.plan_blobs({"3/a/t1.json": ("b1", "t1")}, {"4/b": [("t1.json", "b1")]})
    assert (plan.gone, plan.known, plan.to_parse) == (("t1",), {"4/b": [None]}, 1)
    empty = status_index.plan_blobs({}, {})
    assert (empty.gone, empty.known, empty.to_parse) == ((), {}, 0)


def test_the_follow_plan_of_a_change_that_moves_nothing() -> None:
    """A new title, a claim: the same place in creation order, the same standing."""
    before = {"t1": _row("t1"), "t2": _row("t2", status="pending")}
    after = {"t1": _row("t1", title="renamed"), "t2": _row("t2", status="in_progress")}
    plan = status_index.plan_follow(before, after, [])
    assert plan == status_index.FollowPlan(moved=(), resort=False, recheck=False)


def test_the_follow_plan_moves_what_came_went_or_changed_place() -> None:
    before: dict[str, status_index.Row | None] = {"t1": _row("t1"), "t2": _row("t2"), "t3": None}
    after = {"t2": _row("t2", order=5), "t3": _row("t3")}
    plan = status_index.plan_follow(before, after, [])
    assert plan.moved == ("t1", "t2", "t3") and not plan.resort
    assert not plan.recheck  # a pending task went (failing nothing), one came with no dependency


def test_the_follow_plan_sorts_again_past_the_threshold() -> None:
    n = status_index.RESORT_AFTER
    came: dict[str, status_index.Row | None] = {f"t{i}": None for i in range(n)}
    rows = {f"t{i}": _row(f"t{i}") for i in range(n + 1)}
    assert not status_index.plan_follow(came, rows, []).resort
    came[f"t{n}"] = None
    assert status_index.plan_follow(came, rows, []).resort


@pytest.mark.parametrize(("was", "now", "failing", "recheck"), [
    (None, _row("t1", deps=("t0",)), [], True),  # came with a dependency: may close a cycle
    (None, _row("t1", for_good=True), [], True),  # came failed for good: what hangs off it fails
    (_row("t1"), None, ["t1"], True),  # a task dependency validation failed went
    (_row("t1"), None, [], False),  # one it did not fail went
    (_row("t1", deps=("t0",)), _row("t1", deps=("t0",), status="done"), [], False),  # closed, failing nothing
    (_row("t1", deps=("t0",)), _row("t1", deps=("t2",)), [], True),  # its dependencies changed
    (_row("t1", status="failed"), _row("t1", status="failed", for_good=True), [], True),  # failed for good now
])
def test_the_follow_plan_checks_dependencies_again_only_when_a_change_can_matter(
        was: status_index.Row | None, now: status_index.Row | None, failing: list[str], recheck: bool) -> None:
    after = {} if now is None else {"t1": now}
    assert status_index.plan_follow({"t1": was}, after, failing).recheck is recheck


def _older_index(repo: Path, version: int, fields: int) -> tuple[Path, bytes]:
    """The index of the state as it stands, written as version `version` wrote it (each row's
    first `fields` fields, the ones that version had); its path and bytes."""
    snap = fresh_store(repo).snapshot()
    current = status_index._build(snap, snap.tasks_tree() or "")
    old = sealed(f"git-handoff-status-index {version}\n".encode(), {
        "v": version, "tree": current.tree, "top": current.top, "leaves": current.leaves,
        "rows": {tid: r[:fields] for tid, r in current.rows.items()}, "order": current.order,
        "counts": current.counts, "failing": current.failing})
    path = repo / ".git" / "handoff" / status_index.FILE
    path.write_bytes(old)
    status_index._seen.clear()
    return path, old


def test_an_index_an_older_version_wrote_is_built_again_with_where_the_work_is(repo: Path) -> None:
    """Version 3 rows had no WORK: such a file, even one describing the current tree, is not
    believed; the first reader builds the index again and writes it in the current format."""
    assert run("init").rc == 0
    for tid in ("a", "b", "c"):
        assert run("add", tid, "--id", tid, "--check", "true").rc == 0

    def finish(tx: Tx) -> None:
        tx.put_task(tx.task("a").evolve(status="completed").with_extra(  # type: ignore[union-attr]
            completed_commit="c" * 40, work_ref="refs/harness/work/a/1", integrated_commit="d" * 40))
        tx.put_task(tx.task("b").evolve(status="completed").with_extra(  # type: ignore[union-attr]
            completed_commit="c" * 40, work_ref="refs/harness/work/b/1"))

    fresh_store(repo).transact(finish)
    path, old = _older_index(repo, 3, status_index.WORK)
    store = fresh_store(repo)
    assert _answer(store) == _reference(store)
    rows = {r["id"]: r for r in views.status(fresh_store(repo))["tasks"]}
    assert (rows["a"].get("work"), rows["a"].get("integrated_commit")) == ("landed", "d" * 40)
    assert (rows["b"].get("work"), rows["b"].get("work_ref")) == ("waiting", "refs/harness/work/b/1")
    assert "work" not in rows["c"]
    written = status_index._load(Repo.discover(repo))
    assert written is not None and path.read_bytes() != old and written.rows["a"][status_index.WORK] == (
        "landed", "d" * 40)
    cli = run("status", "--json").json()
    assert cli["work"] == {"landed": 1, "waiting": 1, "withheld": 0, "sent_back": 0}


def test_an_index_an_older_version_wrote_is_built_again_with_what_each_task_used(repo: Path) -> None:
    """Version 4 rows had no USE: such a file is not believed; the rows built again carry each
    task's tokens, cost and held time (`show`'s fields), a task with none of them no keys."""
    assert run("init").rc == 0
    for tid in ("a", "b", "c"):
        assert run("add", tid, "--id", tid, "--check", "true").rc == 0

    def charge(tx: Tx) -> None:
        tx.put_task(tx.task("a").evolve(tokens=1234).with_extra(  # type: ignore[union-attr]
            cost_micro_usd=5600, held_seconds=75))
        tx.put_task(tx.task("b").evolve(tokens=9))  # type: ignore[union-attr]

    fresh_store(repo).transact(charge)
    path, old = _older_index(repo, 4, status_index.USE)
    store = fresh_store(repo)
    assert _answer(store) == _reference(store)
    rows = {r["id"]: dict(r) for r in views.status(fresh_store(repo))["tasks"]}
    assert {k: rows["a"].get(k) for k in ("tokens", "cost_micro_usd", "held_seconds")} == {
        "tokens": 1234, "cost_micro_usd": 5600, "held_seconds": 75}
    assert (rows["b"]["tokens"], rows["b"]["cost_micro_usd"], rows["b"]["held_seconds"]) == (9, 0, 0)
    assert "tokens" not in rows["c"]
    written = status_index._load(Repo.discover(repo))
    assert written is not None and written.rows["a"][status_index.USE] == (1234, 5600, 75)
    assert run("status", "--json").json()["tasks"][0]["held_seconds"] == 75
    text = run("status").out
    assert "] a: a (0/3)  used: 1234 tokens, $0.0056, held 75s\n" in text
    assert "] b: b (0/3)  used: 9 tokens\n" in text and "] c: c (0/3)\n" in text
