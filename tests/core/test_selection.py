"""Selection on big dependency cycles stays linear, and its shortcuts answer exactly
what the full selection answers."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core import selection
from git_handoff.core.model import Status, Task
from git_handoff.core.serialization import dump_task, load_task, task_to_json
from tests.support.speed import examples

NOW = "2026-07-01T12:00:00Z"


STATUSES: list[Status] = ["pending", "pending", "completed", "failed", "in_progress"]


@st.composite
def graphs(draw: st.DrawFn) -> dict[str, Task]:
    """Tasks whose dependencies go anywhere: cycles, self-references, missing ids,
    expired and live leases, tasks failed for good."""
    n = draw(st.integers(min_value=0, max_value=12))
    ids = [f"t{i}" for i in range(n)]
    tasks: dict[str, Task] = {}
    for i, tid in enumerate(ids):
        status: Status = draw(st.sampled_from(STATUSES))
        deps = tuple(draw(st.lists(st.sampled_from([*ids, "gone"]), max_size=3, unique=True))) if ids else ()
        max_attempts = draw(st.integers(1, 3))
        attempts = draw(st.integers(0, max_attempts)) if status in ("failed", "in_progress") else 0
        error_log: tuple[str, ...] = ()
        if status == "failed":
            error_log = (draw(st.sampled_from(["[DEPENDENCY] Blocked by failed x", "[TEST_FAIL] no"])),)
        lease = None
        if status == "in_progress":
            lease = draw(st.sampled_from(["2026-07-01T11:00:00Z", "2099-01-01T00:00:00Z"]))
        tasks[tid] = Task(
            id=tid, title=tid, status=status, priority=draw(st.sampled_from(["P0", "P1", "P2"])),
            depends_on=deps, attempts=attempts, max_attempts=max_attempts, error_log=error_log,
            claimed_by="w" if status == "in_progress" else None, lease_expires_at=lease,
            created_at="2026-07-01T10:00:00Z", order=i,
            extra={"failed_at": f"2026-07-01T10:0{i % 10}:00Z"} if status == "failed" else {},
        )
    return tasks


@settings(max_examples=examples(400), deadline=None)
@given(graphs())
def test_next_eligible_is_the_full_selection(tasks: dict[str, Task]) -> None:
    prepared, _ = selection.prepare(tasks, NOW)
    full = selection.eligible(prepared)
    found = selection.next_eligible(tasks, NOW)
    assert (found.id if found else None) == (full[0].id if full else None)
    if found is not None:
        assert found == prepared[found.id]


@settings(max_examples=examples(200), deadline=None)
@given(graphs())
def test_prepare_fails_what_dependency_validation_names(tasks: dict[str, Task]) -> None:
    prepared, changes = selection.prepare(tasks, NOW)
    expired = {t.id for t, category, _ in changes if category == "SESSION_TIMEOUT"}
    for tid, message in selection.dependency_failures({**tasks, **{t.id: t for t, c, _ in changes
                                                                  if c == "SESSION_TIMEOUT"}}):
        task = prepared[tid]
        assert task.status == "failed" and task.error_log[-1] == message and task.failed_for_good
        assert task.get("failed_at") == NOW
        base = tasks[tid]
        attempts = base.attempts + (1 if tid in expired else 0)
        assert task.attempts == attempts
        assert task.error_log[:len(base.error_log)] == base.error_log


def test_evolve_is_replace() -> None:
    task = Task(id="a1", title="one", depends_on=("b",), extra={"k": 1})
    for changes in ({"status": "failed"}, {"error_log": ("x",), "attempts": 2}, {"extra": {"k": 2}}, {}):
        assert task.evolve(**changes) == dataclasses.replace(task, **changes)
    assert task.status == "pending"
    try:
        task.evolve(colour="red")
    except TypeError as exc:
        assert "colour" in str(exc)
    else:
        raise AssertionError("an unknown field was accepted")


def test_parsed_task_equals_constructed_task() -> None:
    task = Task(id="a1", title="one", depends_on=("b",), error_log=("e",), order=3, created_at="c",
                extra={"failed_at": "x"})
    again = load_task(dump_task(task))
    assert again == task and dump_task(again) == dump_task(task)
    assert dataclasses.asdict(again) == dataclasses.asdict(task)


@pytest.mark.slow  # a scale test: 50,000 tasks built and selected twice
def test_a_50000_task_cycle_is_selected_in_linear_work() -> None:
    n = 50_000
    tasks = {f"c{i}": Task(id=f"c{i}", title="t", depends_on=(f"c{(i + 1) % n}",), order=i) for i in range(n)}
    tasks["free"] = Task(id="free", title="t", order=n)
    tasks["after"] = Task(id="after", title="t", depends_on=("c7",), order=n + 1)
    assert selection.next_eligible(tasks, NOW) == tasks["free"]
    prepared, changes = selection.prepare(tasks, NOW)
    assert len(changes) == n + 1
    assert prepared["after"].error_log == ("[DEPENDENCY] Blocked by failed c7",)
    assert max(len(m) for _, _, m in changes) < 300
    assert prepared["c3"].error_log[0].startswith("[DEPENDENCY] Circular dependency detected: c3 -> c4 -> ")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(500), deadline=None)
@given(json_values)
def test_task_files_are_laid_out_exactly_as_json_dumps_does(value: object) -> None:
    import json

    from git_handoff.core.serialization import json_indented

    assert json_indented(value) == json.dumps(value, indent=2, ensure_ascii=False)
    task = Task(id="a1", title="one", extra={"x": value, "y": [value, {"z": value}]})
    assert dump_task(task) == (json.dumps(task_to_json(task), indent=2, ensure_ascii=False) + "\n").encode()


def test_the_tasks_blocked_by_a_failed_one_are_its_transitive_dependents_and_the_argument_stays() -> None:
    deps = {"a": ("f",), "b": ("a",), "c": ("b", "x"), "d": ("x",), "e": ()}
    failed = {"f"}
    assert selection._blocked_by(deps, failed) == {"a", "b", "c"}
    assert failed == {"f"}


def test_every_task_on_a_ring_gets_its_own_rotation_of_the_cycle() -> None:
    deps = {"a": ("b",), "b": ("c",), "c": ("a",), "s": ("s",)}
    messages = selection._cycle_messages(deps, {"a", "b", "c", "s"})
    assert messages == {
        "a": "[DEPENDENCY] Circular dependency detected: a -> b -> c -> a",
        "b": "[DEPENDENCY] Circular dependency detected: b -> c -> a -> b",
        "c": "[DEPENDENCY] Circular dependency detected: c -> a -> b -> c",
        "s": "[DEPENDENCY] Circular dependency detected: s -> s",
    }


def _finished(status: Status = "completed", errors: tuple[str, ...] = (), **extra: object) -> Task:
    return Task(id="t", title="t", status=status, error_log=errors, extra={"completed_commit": "c" * 40, **extra})


def test_where_the_work_is_landed_waiting_withheld_or_sent_back() -> None:
    ref = "refs/harness/work/t/1"
    assert selection.work_state(_finished(work_ref=ref, integrated_commit="d" * 40)) == ("landed", "d" * 40)
    assert selection.work_state(_finished(work_ref=ref)) == ("waiting", ref)
    assert selection.work_state(_finished(work_withheld="a secret in abc (github-token)")) == ("withheld", None)
    # on the target already (a worktree without a remote, `done` records it): landed wins
    assert selection.work_state(_finished(work_withheld="a secret", integrated_commit="d" * 40))[0] == "landed"  # type: ignore[index]
    assert selection.work_state(_finished()) is None  # completed before work refs: nothing to say
    refused = f"[CONFLICT] its work ({ref}) does not merge onto origin/main at abc1234: conflicts in a.txt"
    for status in ("pending", "failed"):
        assert selection.work_state(_finished(status, ("[TEST_FAIL] earlier", refused))) == ("sent_back", None)
    # claimed again, failed since, another task's ref, never refused: not sent back
    assert selection.work_state(_finished("in_progress", (refused,))) is None
    assert selection.work_state(_finished("pending", (refused, "[TEST_FAIL] red"))) is None
    assert selection.work_state(_finished("pending", (refused.replace("work/t/", "work/u/"),))) is None
    assert selection.work_state(_finished("pending")) is None


def test_a_tasks_held_time_counts_its_claim_until_now_or_until_its_lease_ran_out() -> None:
    """task-time (ops/budgets.py): the ended claims' seconds (held_seconds) plus the current
    claim's, up to now or its lease's end, whichever came first; nothing for a task not held."""
    held = Task(id="t1", title="T", status="in_progress", claimed_by="w", lease_expires_at="2026-12-07T10:30:00Z",
                extra={"claimed_at": "2026-12-07T10:00:00Z", "held_seconds": 40})
    assert selection.held_through(held, "2026-12-07T10:01:00Z") == 100
    assert selection.held_through(held, "2026-12-07T12:00:00Z") == 40 + 1800  # a lapsed claim: to its lease's end
    assert selection.held_through(dataclasses.replace(held, status="pending"), "2026-12-07T12:00:00Z") == 40
    assert selection.held_through(held.with_extra(claimed_at="soon"), "2026-12-07T12:00:00Z") == 40
    assert selection.held_through(held.with_extra(held_seconds=True), "2026-12-07T10:01:00Z") == 60
    # a lease found expired fails the task: its claim's time is added to it, up to the lease's end
    ((failed, category, _),) = selection.prepare_leases({"t1": held}, "2026-12-07T12:00:00Z")
    assert category == "SESSION_TIMEOUT" and failed.get("held_seconds") == 1840


def test_a_held_time_fetched_at_the_cap_stays_at_the_cap() -> None:
    """Another clone may push held_seconds at the state's integer cap: a claim's time added
    to it stays at the cap, a value every clone's checks still take."""
    from git_handoff.core.model import MAX_COUNT

    held = Task(id="t1", title="T", status="in_progress", claimed_by="w", lease_expires_at="2026-12-07T10:30:00Z",
                extra={"claimed_at": "2026-12-07T10:00:00Z", "held_seconds": MAX_COUNT})
    assert selection.held_through(held, "2026-12-07T10:01:00Z") == MAX_COUNT
