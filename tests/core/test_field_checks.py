"""The checks a record's fields pass (git_handoff.core.field_checks): one line of text,
the checkers and what builds them, a table run over a record, a time a record may hold."""

from __future__ import annotations

import pytest

from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.field_checks import (
    OID,
    STAMP,
    boolean,
    check_fields,
    deep_strings_ok,
    either,
    integer,
    is_time,
    line_problem,
    list_of,
    obj,
    one_line,
    one_of,
    opt,
    shown,
    text,
)


def test_line_problem_names_what_is_not_one_line() -> None:
    assert line_problem("fine text", 20) is None
    assert line_problem("x" * 21, 20) == "longer than 20 characters (21)"
    assert line_problem("a\nb", 20) == "holds a newline or a control character"
    assert line_problem("a\u2028b", 20) == "holds a newline or a control character"
    assert line_problem("a\ud800", 20) == "is not valid Unicode text (a lone surrogate)"


def test_one_line_squeezes_whitespace_and_refuses_what_is_left_bad() -> None:
    assert one_line("  a \t b  ", "reason") == "a b"
    assert one_line("a\nb", "reason") == "a b"
    with pytest.raises(UsageError, match="^reason must not be empty$"):
        one_line(" \n ", "reason")
    with pytest.raises(UsageError, match="^say something$"):
        one_line("", "reason", empty="say something")
    with pytest.raises(UsageError, match="^reason holds a newline or a control character$"):
        one_line("a\x07b", "reason")


def test_each_checker_refuses_naming_the_field() -> None:
    cases = [
        (integer(1, 3), 4, "n must be between 1 and 3, not 4"),
        (integer(), True, "n must be a whole number, not True"),
        (text(3), "long", "n longer than 3 characters (4)"),
        (text(3, one_line=False), "lo\nng", "n longer than 3 characters"),
        (one_of("a", "b"), "c", "n must be one of a, b, not 'c'"),
        (boolean, 1, "n must be true or false, not 1"),
        (list_of(integer(), 1), [1, 2], "n holds 2 entries, more than 1"),
        (list_of(integer()), [1, "x"], "n[1] must be a whole number, not 'x'"),
        (obj({"k": integer()}), {"k": "x"}, "n.k must be a whole number, not 'x'"),
        (OID, "HEAD", "n must be an object id, not 'HEAD'"),
        (either(integer(), text()), [], "n must be a whole number, not []"),
    ]
    for check, value, message in cases:
        with pytest.raises(InvalidState) as caught:
            check(value, "n")
        assert caught.value.message == message


def test_the_checkers_accept_good_values() -> None:
    for check, value in [(integer(1, 3), 3), (opt(integer()), None), (text(), "ok"), (boolean, False),
                         (list_of(text()), ["a"]), (obj({"k": integer()}), {"k": 1, "other": "x"}),
                         (OID, "a" * 40), (OID, "b" * 64), (either(integer(), text()), "s"),
                         (STAMP, "2026-01-01T00:00:00Z")]:
        check(value, "n")


def test_check_fields_names_the_record_and_the_field() -> None:
    table = {"n": integer(), "s": text()}
    record = {"n": 1, "s": "x", "unknown": [1]}
    assert check_fields(record, table, "tasks/a.json") is record
    with pytest.raises(InvalidState, match=r"^tasks/a.json: field n must be a whole number, not 'x'$"):
        check_fields({"n": "x"}, table, "tasks/a.json")
    with pytest.raises(InvalidState, match="^tasks/a.json: must be a JSON object, not list$"):
        check_fields([], table, "tasks/a.json")
    with pytest.raises(InvalidState, match="field hlc must be a clock stamp"):
        check_fields({"hlc": "now"}, table, "tasks/a.json")
    with pytest.raises(InvalidState, match="not valid Unicode"):
        check_fields({"deep": {"k": ["\ud800"]}}, table, "tasks/a.json")


def test_deep_strings_ok_looks_into_keys_too() -> None:
    deep_strings_ok({"a": [{"b": "c"}]}, "w")
    with pytest.raises(InvalidState, match="^w: holds text that is not valid Unicode"):
        deep_strings_ok({"\udcff": 1}, "w")


def test_a_time_a_record_may_hold_is_iso_and_between_1970_and_9000() -> None:
    assert is_time("2026-01-01T00:00:00Z") and is_time("2026-01-01T00:00:00+02:00")
    for bad in ("2026-13-01T00:00:00Z", "1969-12-31T23:59:59Z", "9001-01-01T00:00:00Z", "yesterday", 5):
        assert not is_time(bad), bad


def test_shown_cuts_long_values() -> None:
    assert shown("x") == "'x'"
    assert shown("y" * 100) == "'" + "y" * 36 + "..."
