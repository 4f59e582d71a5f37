"""The steps of hlc.stamp_write: the clock a write starts from and the entries it adds."""

from __future__ import annotations

from git_handoff.core import hlc

NOW = 1_764_590_354_123
AHEAD = hlc.stamp(NOW + hlc.MAX_SKEW_MS + 1, 0, "aa")
RECENT = hlc.stamp(NOW - 1000, 0, "aa")


def test_the_carried_clock_leaves_out_entries_stamped_beyond_the_skew() -> None:
    clock = {"title": [AHEAD, "d1"], "notes": [RECENT, "d2"], "odd": "not an entry", "empty": []}
    assert hlc._carried_clock(clock, NOW) == {"notes": [RECENT, "d2"], "odd": "not an entry", "empty": []}
    assert hlc._carried_clock(["title"], NOW) == {}
    assert hlc._carried_clock(None, NOW) == {}


def test_a_changed_field_replaces_the_entries_of_its_nested_keys() -> None:
    clock = {"a.b": ["s1", "d"], "a.c.d": ["s1", "d"], "ab": ["s1", "d"]}
    hlc._clock_field(clock, "a", {"b": 1}, "s2")
    assert clock == {"a": ["s2", hlc.digest({"b": 1})], "ab": ["s1", "d"]}


def test_the_claim_fields_of_a_task_take_one_entry_and_the_others_one_each() -> None:
    old = {"id": "t", "title": "x", "status": "pending", "notes": "n"}
    out = {"id": "t", "title": "y", "status": "in_progress", "claimed_by": "w"}
    clock: dict[str, object] = {}
    hlc._clock_changes(clock, old, out, "s", task=True)
    unit = {"status": "in_progress", "claimed_by": "w"}
    assert clock == {"claim": ["s", hlc.digest(unit)], "title": ["s", hlc.digest("y")],
                     "notes": ["s", hlc.digest(hlc.MISSING)]}


def test_a_new_record_is_stamped_without_field_entries_and_keeps_what_it_carries() -> None:
    new = {"id": "t", "title": "x", hlc.CLOCK: {"title": [RECENT, "d"], "notes": [AHEAD, "d"]}}
    out = hlc.stamp_write(None, new, NOW, "cc", task=True)
    assert out[hlc.FIELD] == hlc.stamp(NOW, 0, "cc")
    assert out[hlc.CLOCK] == {"title": [RECENT, "d"]}
    assert hlc.stamp_write(None, {"id": "t"}, NOW, "cc", task=True) == {"id": "t", hlc.FIELD: hlc.stamp(NOW, 0, "cc")}


def test_the_stamp_follows_the_highest_credible_stamp_of_either_record() -> None:
    old = {hlc.FIELD: hlc.stamp(NOW + 5, 3, "bb")}
    new = {hlc.CLOCK: {"x": [AHEAD, "d"]}}
    assert hlc._seen_credible(old, new, NOW) == hlc.stamp(NOW + 5, 3, "bb")
    assert hlc.stamp_write(old, new, NOW, "cc", task=False, fields=False) == {
        hlc.CLOCK: {"x": [AHEAD, "d"]}, hlc.FIELD: hlc.stamp(NOW + 5, 4, "cc")}
