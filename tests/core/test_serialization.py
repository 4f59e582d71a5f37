"""The stored form of a task and of the config (git_handoff.core.serialization): a task
to its file and back, the checks of a task's fields, the layout of the file, the config."""

from __future__ import annotations

import dataclasses
import json

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.core.model import Config, Task
from git_handoff.core.serialization import (
    TASK_READ_KEYS,
    TASK_TABLE,
    config_from_dict,
    dump_task,
    json_indented,
    load_task,
    task_from_json,
    task_to_json,
)


def test_a_task_round_trips_through_its_file_unknown_fields_too() -> None:
    task = Task(id="a", title="A task", status="in_progress", priority="P0", depends_on=("b",), attempts=1,
                check="make test", timeout_seconds=60, cleanup="git clean -fd", error_log=("[X] e",),
                checkpoints=({"message": "m"},), created_at="2026-01-01T00:00:00Z", order=3,
                extra={"worktree": "/w", "future_field": [1, 2]})
    raw = dump_task(task)
    assert raw.endswith(b"}\n")
    assert load_task(raw) == task
    data = json.loads(raw)
    assert data["validation"] == {"command": "make test", "timeout_seconds": 60}
    assert data["on_failure"] == {"cleanup": "git clean -fd"}
    assert list(data)[-2:] == ["worktree", "future_field"]  # unknown fields after the known ones


def test_task_to_json_names_the_harness_fields_in_their_order() -> None:
    keys = list(task_to_json(Task(id="a", title="A")))
    assert keys[:4] == ["id", "title", "status", "priority"]
    assert keys[-2:] == ["order", "updated_at"]


def test_task_to_json_writes_the_table_of_fields_and_nothing_else() -> None:
    # task_to_json is the table written out (a loop over it cost twice the time): a row
    # added to TASK_TABLE and not to the writer, or the reverse, fails here
    data = task_to_json(Task(id="a", title="A"))
    assert list(data) == list(dict.fromkeys(row.key for row in TASK_TABLE))
    assert set(data) == TASK_READ_KEYS
    for row in TASK_TABLE:
        stored = data[row.key] if row.sub is None else data[row.key][row.sub]
        assert stored == row.default or row.kind in ("id", "title") or (row.kind in ("ids", "texts", "objects")
                                                                        and stored == [])
    assert {row.key: sorted(data[row.key]) for row in TASK_TABLE if row.sub is not None} == {
        key: sorted(row.sub for row in TASK_TABLE if row.key == key and row.sub)
        for key in ("validation", "on_failure")}
    assert [f.name for f in dataclasses.fields(Task)] == [row.name for row in TASK_TABLE] + ["extra"]


def test_task_from_json_fills_defaults() -> None:
    task = task_from_json({"id": "a", "title": "A"})
    assert (task.status, task.priority, task.depends_on, task.attempts, task.check) == ("pending", "P1", (), 0, None)


@pytest.mark.parametrize(("change", "message"), [
    ({"id": 5}, "src: missing or non-text task id"),
    ({"id": "a..b"}, "invalid task id"),
    ({"title": " "}, "src: task a: title must be non-empty text"),
    ({"status": "lost"}, "src: task a: status must be one of"),
    ({"priority": "P7"}, "invalid priority 'P7'"),
    ({"depends_on": "b"}, "depends_on must be a list of task ids"),
    ({"depends_on": ["../x"]}, "invalid task id"),
    ({"attempts": -1}, "attempts must be at least 0"),
    ({"validation": "make"}, "validation must be an object"),
    ({"validation": {"command": 5}}, "validation.command must be text"),
    ({"on_failure": {"cleanup": 1}}, "on_failure.cleanup must be text"),
    ({"error_log": [1]}, "error_log must be a list of text"),
    ({"checkpoints": ["x"]}, "checkpoints must be a list of objects"),
    ({"claimed_by": 3}, "claimed_by must be text"),
])
def test_task_from_json_refuses_a_bad_field_naming_it(change: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        task_from_json({"id": "a", "title": "A", **change}, source="src")


def test_load_task_refuses_what_is_not_json() -> None:
    with pytest.raises(UsageError, match=r"^f: not valid JSON \(not UTF-8 at byte 1\)$"):
        load_task(b"{\xff}", source="f")
    with pytest.raises(UsageError, match="^f: not valid JSON"):
        load_task(b"{", source="f")
    with pytest.raises(UsageError, match="^f: a task must be an object$"):
        load_task(b"[]", source="f")


@pytest.mark.parametrize("value", [
    {"a": [1, "x", None, True, False, 1.5], "b": {}, "c": [], "d": {"e": ["f", "g"]}},
    [float("nan"), float("inf"), -float("inf"), "é\u2028", {"k": [[]]}],
    "plain", 7, None,
])
def test_json_indented_is_json_dumps_with_an_indent(value: object) -> None:
    assert json_indented(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_config_from_dict_checks_each_setting() -> None:
    assert config_from_dict({}) == Config()
    assert config_from_dict({"mode": "concurrent", "max_sessions": "4"}).max_sessions == 4
    with pytest.raises(UsageError, match="config: mode must be exclusive or concurrent, not 'solo'"):
        config_from_dict({"mode": "solo"})
    with pytest.raises(UsageError, match="config: max_tasks_per_session must be at least 1"):
        config_from_dict({"max_tasks_per_session": 0})
    with pytest.raises(UsageError, match="config: spec_ref must be text"):
        config_from_dict({"spec_ref": 1})
