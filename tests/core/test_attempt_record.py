"""The record in an attempt commit's message (git_handoff.core.attempt_record): its parser
and the paths it lists as text any output can hold."""

from __future__ import annotations

import json

import pytest

from git_handoff.core.attempt_record import path_text


def test_attempt_parser() -> None:
    from git_handoff.core import attempt_record
    from git_handoff.core.errors import InvalidState

    oid = "a" * 40
    good = {"task": "t", "attempt": 2, "time": "2026-07-01T10:00:00Z", "category": "TASK_EXEC", "reason": "r",
            "base": oid, "head": oid, "branch": "refs/heads/main", "worker": "me@host:/w", "session": 3,
            "files": [{"status": "A", "path": "a b.txt"}], "index": oid, "claim_snapshot": None, "newer": [1]}
    assert attempt_record.attempt(json.dumps(good, indent=2) + "\n", "ref") == good
    assert attempt_record.attempt('{"task": "t", "attempt": 1}', "ref") == {"task": "t", "attempt": 1, "files": []}
    odd = attempt_record.attempt(json.dumps(dict(good, files=[{"status": "A", "path": "a\nb"},
                                                       {"status": "A", "path": "c\udcffd"}])), "ref")
    assert odd["files"] == [{"status": "A", "path": "a\nb"}, {"status": "A", "path": "c\\xffd"}]
    with pytest.raises(InvalidState, match="^ref: holds text that is not valid Unicode"):
        attempt_record.attempt(json.dumps(dict(good, reason="\ud800")), "ref")
    shown = attempt_record.attempt(json.dumps(dict(good, reason="a\nb\x1b[31mc", worker="w\x07")), "ref")
    assert shown["reason"] == "a bc" and shown["worker"] == "w\\x07"
    for bad in ({"files": ["x"]}, {"files": 5}, {"files": [{"path": "x"}]}, {"files": [{"status": "A", "path": 1}]},
                {"reason": 5}, {"time": "yesterday"}, {"base": "HEAD"}, {"session": "1"},
                {"attempt": 0}, {"attempt": True}, {"index": 7}, {"worker": 7}):
        with pytest.raises(InvalidState, match="^ref: field "):
            attempt_record.attempt(json.dumps(dict(good, **bad)), "ref")
    for body in ("", "\n", "[]", "5", "not json", "[" * 50_000 + "]" * 50_000, '{"reason": NaN}', "\ud800"):
        with pytest.raises(InvalidState, match="^ref: "):
            attempt_record.attempt(body, "ref")


def test_a_path_is_kept_when_it_is_utf8_and_escaped_byte_by_byte_when_not() -> None:
    assert path_text("dir/a b.txt") == "dir/a b.txt"
    assert path_text("caf\u00e9\nx") == "caf\u00e9\nx"
    assert path_text("c\udcffd") == "c\\xffd"  # byte 0xff that git gave, surrogateescaped
    assert path_text("\ud800") == "\\xed\\xa0\\x80"  # a surrogate no byte decodes to: its own bytes
