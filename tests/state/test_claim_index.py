"""The claim index picks exactly what the full selection picks, and is only ever a shortcut."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core import selection
from git_handoff.core.model import Status, Task
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import claim
from git_handoff.state import claim_index
from git_handoff.state.store import StateStore
from tests.support.repo import run
from tests.support.speed import examples

STATUSES: list[Status] = ["pending", "pending", "completed", "failed", "in_progress"]


@st.composite
def task_sets(draw: st.DrawFn) -> dict[str, Task]:
    n = draw(st.integers(min_value=0, max_value=12))
    tasks: dict[str, Task] = {}
    ids = [f"t{i}" for i in range(n)]
    for i, tid in enumerate(ids):
        status: Status = draw(st.sampled_from(STATUSES))
        deps = tuple(draw(st.lists(st.sampled_from(ids[:i]), max_size=3, unique=True))) if i else ()
        max_attempts = draw(st.integers(1, 3))
        attempts = draw(st.integers(0, max_attempts)) if status == "failed" else 0
        error_log: tuple[str, ...] = ()
        if status == "failed":
            error_log = ("[DEPENDENCY] Blocked by failed x",) if draw(st.booleans()) else ("[TEST_FAIL] no",)
        extra = {}
        if status == "failed":
            extra["failed_at"] = f"2026-07-01T10:0{draw(st.integers(0, 9))}:00Z"
        if status == "in_progress":
            extra["worktree"] = draw(st.sampled_from(["/a", "/b"]))
        tasks[tid] = Task(
            id=tid,
            title=tid,
            status=status,
            priority=draw(st.sampled_from(["P0", "P1", "P2"])),
            depends_on=deps,
            attempts=attempts,
            max_attempts=max_attempts,
            error_log=error_log,
            lease_expires_at="2099-01-01T00:00:00Z" if status == "in_progress" else None,
            created_at="2026-07-01T10:00:00Z",
            order=draw(st.integers(0, 3)) * 1000 + i,
            extra=extra,
        )
    return dict(sorted(tasks.items(), key=lambda kv: (kv[1].order, kv[1].created_at, kv[0])))


def _three_tasks() -> None:
    assert run("init").rc == 0
    for i in range(3):
        assert run("add", f"T{i}", "--id", f"t{i}", "--check", "true").rc == 0


def _three_tasks_and_an_index() -> None:
    """t0, t1, t2 and the claim index a claim and a release of t0 left, at the state's tree."""
    _three_tasks()
    assert run("claim").rc == 0 and run("release", "t0").rc == 0


@settings(max_examples=examples(300), deadline=None)
@given(task_sets())
def test_first_eligible_agrees_with_schedule(tasks: dict[str, Task]) -> None:
    if selection.dependency_failures(tasks):
        return
    full = selection.eligible(tasks)
    assert claim_index.first_eligible(claim_index.rows_of(tasks.values())) == (full[0].id if full else None)


def _index_tree(repo: Path) -> str | None:
    try:
        data = claim_index.decode((repo / ".git" / "handoff" / claim_index.INDEX_FILE).read_bytes())
    except OSError:
        return None
    tree: str | None = data["tree"]
    return tree


def _state_tasks_tree(repo: Path) -> str:
    store = StateStore(Repo.discover(repo))
    tree = claim_index.tasks_tree(store, store.snapshot().tree)
    assert tree is not None, "no state yet"  # every test here has run init
    return tree


def test_claims_follow_the_full_selection_through_a_random_run(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run("init").rc == 0
    rng = random.Random(7)
    for i in range(24):
        deps = [f"r{j}" for j in rng.sample(range(i), min(i, rng.randint(0, 2)))] if i else []
        args = ["add", f"Random {i}", "--id", f"r{i}", "--priority",
                rng.choice(["P0", "P1", "P2"]), "--check", "test -f pass", "--max-attempts", "2"]
        for d in deps:
            args += ["--after", d]
        assert run(*args).rc == 0, args
    used: list[bool] = []
    real_pick = claim._quick_pick

    def spy(*a: Any, **k: Any) -> tuple[Task, dict[str, Any]] | None:
        found = real_pick(*a, **k)
        used.append(found is not None)
        return found

    monkeypatch.setattr(claim, "_quick_pick", spy)
    steps = 0
    while True:
        expected = run("next", "--json")
        claimed = run("claim", "--json")
        if expected.rc == 1:
            assert claimed.rc == 1
            break
        assert claimed.rc == 0, claimed.err
        tid = claimed.json()["id"]
        assert tid == expected.json()["id"]
        action = rng.choice(["done", "done", "fail", "release"])
        if action == "done":
            (repo / "pass").write_text("")
            assert run("done", tid).rc == 0
            (repo / "pass").unlink()
        elif action == "fail":
            assert run("done", tid).rc == 1
        else:
            assert run("release", tid).rc == 0
        steps += 1
        # carried forward: the rows, or (a change the head follows alone) the head, whose
        # rows the next claim brings along the tree diff
        state = _state_tasks_tree(repo)
        head = claim_index.load_head(Repo.discover(repo), state)
        assert _index_tree(repo) == state or (head is not None and action == "done")
    assert steps > 20
    assert sum(used) > steps // 2  # the index decided most claims


def test_a_stale_index_is_not_used(repo: Path) -> None:
    _three_tasks_and_an_index()
    assert _index_tree(repo) == _state_tasks_tree(repo)
    assert run("add", "Urgent", "--id", "urgent", "--priority", "P0", "--check", "true").rc == 0
    assert _index_tree(repo) != _state_tasks_tree(repo)
    assert run("claim", "--json").json()["id"] == "urgent"


def test_a_wrong_or_damaged_index_falls_back_to_the_full_selection(repo: Path) -> None:
    _three_tasks_and_an_index()
    path = repo / ".git" / "handoff" / claim_index.INDEX_FILE
    data = claim_index.decode(path.read_bytes())
    # the index claims t2 is the P0 task: the row check against t2's blob catches the lie
    row = list(data["rows"]["t2"])
    row[claim_index.RANK] = 0
    data["rows"]["t2"] = tuple(row)
    path.write_bytes(claim_index.encode(data))  # a lie with a valid digest: the row check catches it
    assert run("claim", "--json").json()["id"] == "t0"
    assert run("release", "t0").rc == 0
    path.write_bytes(b"not marshal")
    assert run("claim", "--json").json()["id"] == "t0"


def _head(repo: Path) -> Path:
    return repo / ".git" / "handoff" / claim_index.HEAD_FILE


def _write_head(repo: Path, head: dict[str, Any]) -> None:
    import hashlib
    import marshal

    body = marshal.dumps(head)
    _head(repo).write_bytes(claim_index.HEAD_MAGIC + hashlib.sha256(body).digest() + body)


def test_next_answers_from_the_head_and_a_damaged_or_wrong_head_is_not_believed(repo: Path) -> None:
    _three_tasks_and_an_index()
    head = claim_index.load_head(Repo.discover(repo), _state_tasks_tree(repo))
    assert head is not None and head["first"] == "t0" and head["lease"] is None
    good = _head(repo).read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF
    for bad in (bytes(damaged), good[: len(good) // 3], b"", b"not a head"):
        _head(repo).write_bytes(bad)
        assert claim_index.load_head(Repo.discover(repo), _state_tasks_tree(repo)) is None
        assert run("next", "--json").json()["id"] == "t0"
    # a head with a valid digest whose row is not the task's blob: the row check catches it
    row = list(head["row"])
    row[claim_index.RANK] = 0
    _write_head(repo, {**head, "first": "t2", "row": tuple(row)})
    assert run("next", "--json").json()["id"] == "t0"
    assert run("claim", "--json").json()["id"] == "t0"


def test_a_stale_head_is_not_used(repo: Path) -> None:
    _three_tasks_and_an_index()
    stale = _head(repo).read_bytes()
    assert run("add", "Urgent", "--id", "urgent", "--priority", "P0", "--check", "true").rc == 0
    _head(repo).write_bytes(stale)  # the head of the tree before the add
    assert claim_index.load_head(Repo.discover(repo), _state_tasks_tree(repo)) is None
    assert run("next", "--json").json()["id"] == "urgent"


def test_a_head_past_its_earliest_lease_is_not_used(repo: Path) -> None:
    _three_tasks()
    assert run("claim", "t0", "--worker", "w").rc == 0
    tree = _state_tasks_tree(repo)
    head = claim_index.load_head(Repo.discover(repo), tree)
    assert head is not None and head["first"] == "t1" and head["lease"] is not None
    _write_head(repo, {**head, "lease": "2000-01-01T00:00:00Z"})  # t0's lease ran out: the full selection decides
    assert claim_index.load_head(Repo.discover(repo), tree) is not None
    assert run("next", "--json").json()["id"] == "t1"


def test_a_stale_index_is_brought_along_the_tree_diff_only_when_the_diff_allows(repo: Path) -> None:
    _three_tasks_and_an_index()
    path = repo / ".git" / "handoff" / claim_index.INDEX_FILE
    stale = path.read_bytes()
    assert run("add", "Urgent", "--id", "urgent", "--priority", "P0", "--check", "true").rc == 0
    state = _state_tasks_tree(repo)
    assert _index_tree(repo) != state
    store = StateStore(Repo.discover(repo))
    rows = claim_index.load_rows(store.repo, state)
    urgent = store.snapshot().task("urgent")
    assert rows is not None and urgent is not None and rows["urgent"] == claim_index.row(urgent)
    assert run("next", "--json").json()["id"] == "urgent"
    assert _index_tree(repo) == state  # `next` wrote the rows it brought along
    # a diff that changes a dependency (a task added after another) is not followed: the rows
    # of the tree before are not believed, and the full selection decides
    assert run("add", "Blocked", "--id", "later", "--priority", "P0", "--after", "t2", "--check", "true").rc == 0
    path.write_bytes(stale)
    assert claim_index.load_rows(Repo.discover(repo), _state_tasks_tree(repo)) is None
    assert run("claim", "--json").json()["id"] == "urgent"
    assert _index_tree(repo) == _state_tasks_tree(repo)


def test_done_carries_the_head_alone_and_the_next_claim_follows_the_diff(repo: Path) -> None:
    assert run("init").rc == 0
    for i in range(4):
        assert run("add", f"T{i}", "--id", f"t{i}", "--check", "true").rc == 0
    assert run("add", "Then", "--id", "then", "--after", "t3", "--check", "true").rc == 0
    assert run("claim", "--json").json()["id"] == "t0"
    assert run("done", "t0").rc == 0  # nothing waits on t0: the head follows alone
    state = _state_tasks_tree(repo)
    head = claim_index.load_head(Repo.discover(repo), state)
    assert head is not None and head["first"] == "t1" and _index_tree(repo) != state
    assert run("next", "--json").json()["id"] == "t1"
    assert run("claim", "--json").json()["id"] == "t1"
    assert _index_tree(repo) == _state_tasks_tree(repo)
    assert run("done", "t1").rc == 0 and run("claim", "t3").rc == 0
    assert run("done", "t3").rc == 0  # `then` waits on t3: the rows are carried, not the head alone
    assert _index_tree(repo) == _state_tasks_tree(repo)
    assert run("claim", "--json").json()["id"] == "t2"
    assert run("claim", "--json", "--force").json()["id"] == "then"
