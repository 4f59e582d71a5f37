"""The merge of one record's fields (git_handoff.core.field_merge): lists by union in time
order, sets, the time a field was written, whole records and tasks."""

from __future__ import annotations

from git_handoff.core.field_merge import (
    created_time,
    item_time,
    list_limits,
    merge_objects,
    merge_task,
    record_time,
    set_merge,
    union_in_time_order,
)


def test_union_keeps_duplicates_and_time_order() -> None:
    base = ["[2026-01-01T00:00:01Z] x"]
    ours = base + ["[2026-01-01T00:00:05Z] y", "[2026-01-01T00:00:05Z] y"]
    theirs = base + ["[2026-01-01T00:00:03Z] z", "[2026-01-01T00:00:05Z] y"]
    assert union_in_time_order(base, ours, theirs) == [
        "[2026-01-01T00:00:01Z] x", "[2026-01-01T00:00:03Z] z", "[2026-01-01T00:00:05Z] y", "[2026-01-01T00:00:05Z] y"
    ]


def test_union_keeps_the_last_entries_within_its_limit_whichever_side_is_ours() -> None:
    base = ["[2026-01-01T00:00:01Z] x"]
    ours = base + ["[2026-01-01T00:00:04Z] o"]
    theirs = base + ["[2026-01-01T00:00:02Z] t"]
    kept = ["[2026-01-01T00:00:02Z] t", "[2026-01-01T00:00:04Z] o"]
    assert union_in_time_order(base, ours, theirs, limit=2) == kept
    assert union_in_time_order(base, theirs, ours, limit=2) == kept


def test_set_merge_keeps_additions_and_honours_removals() -> None:
    base = ["a", "b", "c"]
    assert set_merge(base, ["a", "b", "d"], ["a", "c", "e"]) == ["a", "d", "e"]
    assert set_merge(base, base, base) == base
    assert set_merge([], ["x", "y"], ["z"], limit=2) == ["x", "y"]


def test_the_time_of_a_record_and_of_an_entry() -> None:
    assert record_time({"created_at": "c", "updated_at": "u"}) == "u"
    assert record_time({"updated_at": "", "at": "a"}) == "a"
    assert record_time({"other": "x"}) == ""
    assert item_time({"time": "t", "note": "n"}) == "t"
    assert item_time("[2026-01-01T00:00:03Z] z") == "2026-01-01T00:00:03Z"
    assert item_time("no time here") == "" and item_time(5) == ""


def test_a_creation_is_never_later_than_the_records_own_stamp() -> None:
    stamp = "1767225600000.000000.aa"  # 2026-01-01T00:00:00Z
    assert created_time({"created_at": "2026-01-01T00:00:00Z", "hlc": stamp}) == "2026-01-01T00:00:00Z"
    assert created_time({"created_at": "2999-01-01T00:00:00Z", "hlc": stamp}) == stamp
    assert created_time({}) == ""


def test_merge_objects_unions_lists_and_keeps_the_later_write_of_a_field_reporting_it() -> None:
    merged, conflicts = merge_objects(
        "x.json", {"a": 1, "b": [1]},
        {"a": 2, "b": [1, 2], "updated_at": "2026-01-01T00:00:02Z"},
        {"a": 3, "b": [1, 3], "updated_at": "2026-01-01T00:00:01Z"})
    assert merged == {"a": 2, "b": [1, 2, 3], "updated_at": "2026-01-01T00:00:02Z"}
    assert [(c.field, c.kept, c.dropped) for c in conflicts] == [("a", 2, 3)]
    counters, none = merge_objects("meta.json", {"n": 1}, {"n": 5}, {"n": 3}, numbers_max=True)
    assert counters == {"n": 5} and none == []


def test_merge_task_keeps_the_later_title_and_names_the_task_in_the_conflict() -> None:
    merged, conflicts = merge_task("tasks/a.json", None,
                                   {"id": "a", "title": "x", "updated_at": "2026-01-01T00:00:02Z"},
                                   {"id": "a", "title": "y", "updated_at": "2026-01-01T00:00:01Z"})
    assert merged["title"] == "x" and merged["updated_at"] == "2026-01-01T00:00:02Z"
    assert [(c.field, c.kept, c.dropped, c.record) for c in conflicts] == [("title", "x", "y", "a")]


def test_list_limits_are_the_parsers_caps_for_the_records_kind() -> None:
    assert list_limits("tasks/ab/a.json")["error_log"] > 0
    assert list_limits("nothing.json") == {}
