"""core/landing.py: the integration queue's order, and who waits (pure)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core.landing import queue
from git_handoff.core.model import Task
from tests.support.speed import examples

C = "c" * 40


def done(tid: str, *deps: str, priority: str = "P1", at: str = "2026-07-01T10:00:00Z", landed: bool = False,
         status: str = "completed", published: bool = True) -> Task:
    extra: dict[str, object] = {"completed_commit": C}
    if published:
        extra["work_ref"] = f"refs/harness/work/{tid}/1"
    if landed:
        extra["integrated_commit"] = C
    return Task(id=tid, title=tid, status=status, depends_on=deps, priority=priority, completed_at=at,  # type: ignore[arg-type]
                extra=extra)


def test_dependencies_first_then_priority_then_completion_time() -> None:
    tasks = {t.id: t for t in [
        done("late", at="2026-07-01T12:00:00Z"), done("early", at="2026-07-01T09:00:00Z"),
        done("urgent", priority="P0", at="2026-07-01T13:00:00Z"), done("child", "dep", priority="P0"),
        done("dep", priority="P2", at="2026-07-01T14:00:00Z"),
    ]}
    got = queue(tasks)
    assert [t.id for t in got.order] == ["urgent", "early", "late", "dep", "child"]
    assert got.waiting == ()


def test_landed_unpublished_and_unfinished_tasks_are_not_queued_and_dependents_wait() -> None:
    tasks = {t.id: t for t in [
        done("in", landed=True), done("old", published=False), done("open", status="pending"),
        done("needs-open", "open"), done("needs-in", "in"),
    ]}
    got = queue(tasks)
    assert [t.id for t in got.order] == ["needs-in"]  # "old" completed before the queue: no work ref
    assert dict(got.waiting) == {"needs-open": "its dependency open, which is pending and not on the target"}


def test_work_that_holds_another_tasks_work_lands_after_it_whatever_its_priority() -> None:
    """`carried`: B's work holds A's (done before it in one worktree): A first, though B is
    P0; and C, whose work holds the unpublished "old"'s, waits for it."""
    tasks = {t.id: t for t in [done("A", priority="P2"), done("B", priority="P0"), done("old", published=False),
                               done("C", priority="P0")]}
    got = queue(tasks, {"B": frozenset({"A"}), "C": frozenset({"old"})})
    assert [t.id for t in got.order] == ["A", "B"]
    assert dict(got.waiting) == {"C": "its work holds the work of old, which is completed and not on the target "
                                      "(its own check must run there first)"}


@given(st.lists(st.tuples(st.integers(0, 11), st.lists(st.integers(0, 11), max_size=3),
                          st.sampled_from(["P0", "P1", "P2"])),
                max_size=12, unique_by=lambda x: x[0]))
@settings(max_examples=examples(100))
def test_every_task_lands_after_each_of_its_dependencies(spec: list[tuple[int, list[int], str]]) -> None:
    ids = {n for n, _, _ in spec}
    tasks = {f"t{n}": done(f"t{n}", *(f"t{d}" for d in deps if d in ids and d != n), priority=p)
             for n, deps, p in spec}
    got = queue(tasks)
    place = {t.id: i for i, t in enumerate(got.order)}
    for t in got.order:
        assert all(place[d] < place[t.id] for d in t.depends_on)
    assert set(place) | {tid for tid, _ in got.waiting} == set(tasks)  # each once: landed or waiting
    assert not set(place) & {tid for tid, _ in got.waiting}
