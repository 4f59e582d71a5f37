"""The persistent task index answers exactly what reading every task blob answers: after
any change, from a stale index, from a damaged one; and `next` through the claim index
answers what the full selection answers."""

from __future__ import annotations

import random
from pathlib import Path

from git_handoff.core import selection
from git_handoff.core.model import Task, now_iso
from git_handoff.core.serialization import task_to_json
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import views
from git_handoff.state import claim_index
from git_handoff.state.store import StateStore
from git_handoff.state.task_index import OrderPlan, TaskIndex, plan_order
from tests.support.repo import run
from tests.support.state import fresh_store, random_change, tasks_from_blobs


def _from_blobs(store: StateStore) -> list[tuple[str, dict[str, object]]]:
    """Every task read from its blob and sorted into creation order, without the index."""
    return [(t.id, task_to_json(t)) for t in tasks_from_blobs(store)]


def _through_index(store: StateStore) -> list[tuple[str, dict[str, object]]]:
    return [(tid, task_to_json(t)) for tid, t in store.snapshot().tasks().items()]


def _index_file(repo: Path) -> Path:
    return repo / ".git" / "handoff" / TaskIndex.FILE


def test_the_index_answers_what_the_blobs_answer_through_changes(repo: Path) -> None:
    assert run("init").rc == 0
    rng = random.Random(7)
    serial = [0]
    for n in range(40):
        store = fresh_store(repo) if n % 3 == 0 else StateStore(Repo.discover(repo), session=0)
        store.transact(lambda tx: random_change(rng, tx, serial))
        assert _through_index(store) == _from_blobs(store), n
    assert len(_from_blobs(fresh_store(repo))) > 10


def test_a_stale_index_is_brought_up_to_date_not_believed(repo: Path) -> None:
    assert run("init").rc == 0
    for i in range(6):
        assert run("add", f"T{i}", "--id", f"t{i}").rc == 0
    store = fresh_store(repo)
    store.snapshot().tasks()  # the index now holds this tree
    stale = _index_file(repo).read_bytes()
    assert run("edit", "t3", "--title", "renamed").rc == 0
    assert run("add", "T9", "--id", "t9").rc == 0
    _index_file(repo).write_bytes(stale)  # an index of the tree before
    store = fresh_store(repo)
    answer = _through_index(store)
    assert answer == _from_blobs(store)
    assert dict(answer)["t3"]["title"] == "renamed" and "t9" in dict(answer)


def test_a_damaged_index_is_rebuilt_with_the_same_answers(repo: Path) -> None:
    assert run("init").rc == 0
    for i in range(5):
        assert run("add", f"T{i}", "--id", f"t{i}", "--priority", "P0" if i == 3 else "P1").rc == 0
    reference = _from_blobs(fresh_store(repo))
    _through_index(fresh_store(repo))
    good = _index_file(repo).read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF  # one flipped byte in the middle
    for bad in (bytes(damaged), good[: len(good) // 3], b"", b"not an index at all"):
        _index_file(repo).write_bytes(bad)
        assert _through_index(fresh_store(repo)) == reference
        rebuilt = TaskIndex(Repo.discover(repo))  # rebuilt, whole again: it loads, for the tree now
        rebuilt._load()
        assert rebuilt.tree == fresh_store(repo).snapshot().tasks_tree() and len(rebuilt.order) == 5
        assert run("next", "--json").json()["id"] == "t3"


def test_next_through_the_claim_index_answers_the_full_selection(repo: Path) -> None:
    assert run("init").rc == 0
    rng = random.Random(11)
    serial = [0]
    for n in range(30):
        store = fresh_store(repo)
        store.transact(lambda tx: random_change(rng, tx, serial))
        snap = store.snapshot()
        expected = selection.next_eligible(snap.tasks(), now_iso())
        if rng.random() < 0.3:  # a damaged claim index is not believed either
            path = repo / ".git" / "handoff" / claim_index.INDEX_FILE
            if path.exists():
                path.write_bytes(path.read_bytes()[:-7] + b"garbage")
        for _ in range(2):  # the first may build the claim index, the second reads it
            try:
                got: Task | None = views.next_task(fresh_store(repo).snapshot())
            except Exception:  # noqa: BLE001 - Negative: nothing eligible
                got = None
            assert (got.id if got else None) == (expected.id if expected else None), n


def _leaf(*ids: str) -> list[dict[str, object]]:
    return [{"id": tid, "order": 0, "created_at": "2024-01-01T00:00:00Z"} for tid in ids]


def test_the_order_plan_patches_the_order_after_a_small_change() -> None:
    used = {"L1": _leaf("a", "b"), "L2": _leaf("c", "d"), "L3new": _leaf("e")}
    plan = plan_order(used, {"L1", "L2", "L3"}, fresh=1, known=5)
    assert plan == OrderPlan("patch", frozenset({"a", "b", "c", "d"}))


def test_the_order_plan_sorts_again_after_many_parses_or_few_kept() -> None:
    used = {"L1": _leaf("a"), "L2new": _leaf(*(f"n{i}" for i in range(65)))}
    assert plan_order(used, {"L1"}, fresh=65, known=1).how == "sort"
    assert plan_order(used, {"L1"}, fresh=64, known=1).how == "patch"
    few = {"L1": _leaf("a"), "L2new": _leaf("b", "c")}
    assert plan_order(few, {"L1"}, fresh=2, known=3).how == "patch"  # kept 1, not under 3 // 2
    assert plan_order(few, {"L1"}, fresh=2, known=4).how == "sort"  # kept 1 of 4: most went
    assert plan_order({}, set(), fresh=0, known=0).how == "patch"  # an empty tree


def test_the_order_plan_of_one_id_in_two_leaves_takes_the_plain_path() -> None:
    used = {"L1": _leaf("a", "b"), "L2": _leaf("b")}
    plan = plan_order(used, {"L1"}, fresh=1, known=2)
    assert plan.how == "unique" and plan.kept == frozenset({"a", "b"})
