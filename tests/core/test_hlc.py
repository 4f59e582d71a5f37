"""The hybrid logical clock (git_handoff.core.hlc): its stamps, their total order, the
next stamp of a write, and a write stamped field by field."""

from __future__ import annotations

from git_handoff.core import hlc

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z, in ms


def test_a_stamp_is_fixed_width_and_read_back_by_its_key() -> None:
    text = hlc.stamp(NOW, 7, "ab")
    assert text == "1767225600000.000007.ab"
    assert hlc.is_stamp(text) and not hlc.is_stamp("2026-01-01T00:00:00Z") and not hlc.is_stamp(5)
    assert hlc.key(text) == (NOW, 7, "ab", text)


def test_the_order_is_total_iso_times_before_stamps_of_their_millisecond() -> None:
    iso = "2026-01-01T00:00:00Z"
    ordered = ["junk", iso, hlc.stamp(NOW, 0, "a"), hlc.stamp(NOW, 0, "b"), hlc.stamp(NOW, 1, "a"),
               hlc.stamp(NOW + 1, 0, "a")]
    assert sorted(reversed(ordered), key=hlc.key) == ordered
    assert hlc.highest([iso, hlc.stamp(NOW, 1, "a"), None, hlc.stamp(NOW, 0, "z")]) == hlc.stamp(NOW, 1, "a")
    assert hlc.highest(["x", 3]) is None


def test_a_stamp_too_far_ahead_is_not_credible_nor_followed() -> None:
    ahead = hlc.stamp(NOW + hlc.MAX_SKEW_MS + 1, 0, "0f")
    assert hlc.credible(hlc.stamp(NOW + hlc.MAX_SKEW_MS, 0, "0f"), NOW)
    assert not hlc.credible(ahead, NOW)
    assert hlc.next_stamp(ahead, NOW, "ee") == hlc.stamp(NOW, 0, "ee")


def test_the_next_stamp_is_later_than_the_previous_whatever_the_wall_clock() -> None:
    assert hlc.next_stamp(None, NOW, "ee") == hlc.stamp(NOW, 0, "ee")
    assert hlc.next_stamp(hlc.stamp(NOW - 5, 3, "0f"), NOW, "ee") == hlc.stamp(NOW, 0, "ee")
    assert hlc.next_stamp(hlc.stamp(NOW + 5, 3, "0f"), NOW, "ee") == hlc.stamp(NOW + 5, 4, "ee")
    assert hlc.next_stamp(hlc.stamp(NOW, hlc.MAX_LOGICAL, "0f"), NOW, "ee") == hlc.stamp(NOW + 1, 0, "ee")


def test_seen_in_reads_the_record_stamp_and_its_field_clock() -> None:
    later = hlc.stamp(NOW + 9, 0, "b")
    record = {"hlc": hlc.stamp(NOW, 0, "a"), "field_clock": {"title": [later, "d"], "bad": []}}
    assert hlc.seen_in(record) == later
    assert hlc.seen_in([1]) is None


def test_same_and_digest_tell_types_and_missing_apart() -> None:
    assert hlc.same([1], [1]) and not hlc.same(1, True) and not hlc.same(1, 1.0)
    assert hlc.same(hlc.MISSING, hlc.MISSING) and not hlc.same(hlc.MISSING, None)
    assert hlc.digest({"b": 1, "a": 2}) == hlc.digest({"a": 2, "b": 1}) != hlc.digest({"a": 2})
    assert len(hlc.digest("0f")) == 12 and hlc.canon(hlc.MISSING) != hlc.canon(None)


def test_stamp_write_stamps_the_fields_a_write_changed() -> None:
    first = hlc.stamp_write(None, {"title": "a", "priority": "P1"}, NOW, "cc", task=False)
    assert first == {"title": "a", "priority": "P1", "hlc": hlc.stamp(NOW, 0, "cc")}
    second = hlc.stamp_write(first, {**first, "title": "b"}, NOW, "cc", task=False)
    when = hlc.stamp(NOW, 1, "cc")
    assert second["hlc"] == when
    assert second["field_clock"] == {"title": [when, hlc.digest("b")]}
    meta = hlc.stamp_write(first, {**first, "title": "c"}, NOW, "cc", task=False, fields=False)
    assert "field_clock" not in meta and meta["hlc"] == when
