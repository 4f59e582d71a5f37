"""The pure rules field_merge's record merge is made of: which rule a key takes, and
how two changed values merge without a winner."""

from __future__ import annotations

import pytest

from git_handoff.core import field_merge as fm
from git_handoff.core import hlc


@pytest.mark.parametrize(("key", "o", "t", "numbers_max", "rule"), [
    ("updated_at", "2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z", False, "updated_at"),
    ("updated_at", "2025-01-01T00:00:00Z", 3, False, "union"),
    (hlc.FIELD, "a", "b", True, "hlc"),
    ("next", 1, 2, True, "max"),
    ("next", 1, True, True, "union"),
    ("sessions_by_clone", {}, {"c": 1}, True, "max"),
    ("sessions_by_clone", {}, {"c": 1}, False, "union"),
    ("notes", ["a"], ["b"], True, "union"),
])
def test_the_rule_of_a_top_level_key(key: str, o: object, t: object, numbers_max: bool, rule: str) -> None:
    assert fm._object_rule(key, o, t, numbers_max=numbers_max) == rule


def test_only_unions_and_maxima_go_down_to_an_objects_keys() -> None:
    assert [fm._nested_rule(how) for how in ("union", "max", "log", "set", "lww")] == \
        ["union", "max", "lww", "lww", "lww"]


def test_two_changed_values_combine_by_their_rule_or_leave_it_to_the_written_last() -> None:
    assert fm._combined(["a"], ["a", "b"], [], "set", None) == ["b"]
    assert fm._combined(None, ["b"], ["a"], "union", None) == ["a", "b"]
    assert fm._combined([], ["b", "c"], ["a"], "log", 2) == ["b", "c"]
    assert fm._combined(0, 2, 5, "max", None) == 5
    assert fm._combined(0, 2, True, "max", None) is hlc.MISSING
    assert fm._combined([], ["a"], ["b"], "lww", None) is hlc.MISSING
    assert fm._combined("x", "y", "z", "union", None) is hlc.MISSING


def test_the_sessions_counted_never_go_down_when_clones_are_left_out() -> None:
    out = {"sessions_by_clone": {"a": 4}, "sessions_legacy": 1}
    ours = {"sessions_by_clone": {"a": 4, "b": 3}}
    fm._keep_sessions_counted(out, ours, {"sessions_by_clone": {"a": 2}}, 3, numbers_max=True)
    assert out["sessions_legacy"] == 4
    assert fm._sessions_counted(out) >= fm._sessions_counted(ours)
