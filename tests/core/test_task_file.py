"""The edge's one-pass recognizer of task files as git handoff writes them (docs/performance.md, the bulk paths).

`task_file.written_task_id` accepts a task file only when `task_file.task` (the full parser)
accepts it too, with the same id; everything else goes to the full parser, which words
the error. Shown here: every file the verbs write is recognized (so the fast path does not
rot when the writer changes), a property over canonical files with one or two fields
pushed to or past their limits, a property over byte-level mutations of canonical files,
and named examples on both sides of each limit.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from git_handoff.core import field_checks, model, serialization, state_tree, task_file
from git_handoff.core.errors import InvalidState
from git_handoff.state.snapshot import task_path
from tests.support.repo import run
from tests.support.speed import examples

STAMP = "2026-12-01T22:20:13Z"
HLC = "1796163613801.000000.8d8538a9bdecdba3"
# times on both sides of field_checks.is_time (a day of the month, the years, the forms)
BAD_TIMES = ["2026-13-45T99:99:99Z", "2026-02-30T00:00:00Z", "2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
             "2026-12-01T24:00:00Z", "2026-12-01T22:60:00Z", "0000-01-01T00:00:00Z", "1969-12-31T23:59:59Z",
             "1970-01-01T00:00:00+13:59", "9001-01-01T00:00:00Z", "9999-12-31T23:59:59-14:00",
             "2026-12-01T22:20:13+24:00", "2026-12-01T22:20:13ZZ", "2026-12-01T22:20:13+00:00+00:00",
             "2026-12-01T22:20Z"]
GOOD_TIMES = [STAMP, "2026-12-01T22:20:13.123456+00:00", "2000-01-01T00:00:00+13:59", "2999-12-31T23:59:59-13:59",
              "2024-02-29T00:00:00Z", "2026-01-31T00:00:00Z", "1970-01-01T13:59:00+13:59",
              "9000-12-31T23:59:59Z", "2026-12-01T22:20:13.1234567Z"]


def _full_parse(raw: bytes) -> str | None:
    """The id the full parser finds, or None when it refuses the file."""
    try:
        return task_file.task(raw, "tasks/x/y/t.json").id
    except InvalidState:
        return None


def _assert_sound(raw: bytes) -> bool:
    """The recognizer accepts only what the full parser accepts, with the same id."""
    found = task_file.written_task_id(raw)
    if found is not None:
        assert _full_parse(raw) == found, raw.decode("utf-8", "replace")[:2000]
    return found is not None


def _doc(**changes: Any) -> dict[str, Any]:
    """A task as Task.to_json lays it out (a claimed one, with the bookkeeping a claim adds)."""
    doc: dict[str, Any] = {
        "id": "t1", "title": "First task", "status": "in_progress", "priority": "P1",
        "depends_on": ["t0"], "attempts": 1, "max_attempts": 3,
        "started_at_commit": "17b72fdbce431024dc1ba85fba9339548bea2c4e",
        "validation": {"command": "make test", "timeout_seconds": 300},
        "on_failure": {"cleanup": None},
        "error_log": ["[TASK_EXEC] it broke"],
        "checkpoints": [{"step": 1, "total": 2, "description": "halfway", "timestamp": STAMP}],
        "completed_at": None, "claimed_by": "root@vm:/tmp/w", "lease_expires_at": STAMP,
        "created_at": STAMP, "spec_ref": "docs/t1.md", "order": 1796163601137021930, "updated_at": STAMP,
        "hlc": HLC, "worktree": "/tmp/w", "branch": "refs/heads/main", "claimed_at": STAMP,
        "lease_seconds": 1800, "claim_session": 0, "clone": "8d8538a9bdecdba3",
        "clone_seal": "3561fc6e087ac0055c8855c8ad90adb3",
        "field_clock": {"claim": [HLC, "e198a5bfba0c"], "clone": [HLC, "7d22dba2459f"]},
        "completed_commit": "17b72fdbce431024dc1ba85fba9339548bea2c4e",
    }
    for key, value in changes.items():
        if key.startswith("validation.") or key.startswith("on_failure."):
            outer, inner = key.split(".")
            doc[outer] = {**doc[outer], inner: value}
        elif value is _DROP:
            doc.pop(key)
        else:
            doc[key] = value
    return doc


_DROP = object()


def _file(doc: dict[str, Any]) -> bytes:
    return serialization.task_file(doc)  # the writer dump_task uses


# -- what the verbs write is recognized -----------------------------------------------------


def test_every_task_file_the_verbs_write_is_recognized(repo: Path) -> None:
    assert run("init").rc == 0
    first = run("add", "First task", "--check", "true", "--spec", "docs/first.md").out.strip()
    assert run("add", "Depends on the first — é ü 漢字", "--after", first, "--check", "true").rc == 0
    failing = run("add", "Will fail", "--id", "will-fail", "--check", "false", "-p", "P0").out.strip()
    assert run("add", "Waits", "--after", failing, "--max-attempts", "9").rc == 0
    assert run("claim", failing).rc == 0
    assert run("fail", failing, "--reason", "the check broke").rc == 0
    assert run("claim", first).rc == 0
    assert run("checkpoint", first, "halfway there", "--of", "2").rc == 0
    assert run("checkpoint", first, "nearly").rc == 0
    assert run("done", first).rc == 0
    assert run("claim").rc == 0  # the next one: claimed, with its lease and clone bookkeeping
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", "refs/harness/state", "tasks"],
                           cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    assert len(names) == 4
    statuses = set()
    for name in names:
        raw = subprocess.run(["git", "show", f"refs/harness/state:{name}"], cwd=repo,
                             capture_output=True, check=True).stdout
        task = task_file.task(raw, name)
        statuses.add(task.status)
        assert task_file.written_task_id(raw) == task.id, raw.decode()
    assert {"completed", "in_progress", "pending"} <= statuses


def test_a_claimed_task_with_every_field_set_is_recognized() -> None:
    raw = _file(_doc())
    assert task_file.written_task_id(raw) == "t1"
    assert _full_parse(raw) == "t1"
    state_tree.check_record(task_path("t1"), raw, "task")


def test_a_recognized_file_under_the_wrong_path_is_refused_as_before() -> None:
    raw = _file(_doc())
    assert task_file.written_task_id(raw) == "t1"
    with pytest.raises(InvalidState, match="holds task 't1'"):
        state_tree.check_record(task_path("t2"), raw, "task")
    with pytest.raises(InvalidState, match="holds task 't1'"):
        state_tree.check_record("tasks/0/0/t1.json", raw, "task")


# -- both sides of each limit, by name --------------------------------------------------------

# One field at (recognized) or just past (refused by both) its limit.
AT_THE_LIMIT = [
    {"title": "x" * model.MAX_TITLE},
    {"title": " padded "},
    {"title": "\u00a0nbsp inside\u00a0ok"},
    {"id": "a" * 64},
    {"id": "a.b-c_d"},
    {"depends_on": []},
    {"attempts": 10**18 - 1},
    {"max_attempts": 1},
    {"max_attempts": 9999},
    {"validation.timeout_seconds": 1},
    {"validation.timeout_seconds": 99_999_999},
    {"validation.command": None},
    {"validation.command": "c" * 4096},
    {"started_at_commit": "abcd"},
    {"started_at_commit": None},
    {"created_at": ""},
    {"completed_at": STAMP},
    {"claimed_by": "w" * 4096},
    {"error_log": ["e" * field_checks.MAX_TEXT]},
    {"checkpoints": [{"step": None, "total": None, "description": "", "timestamp": None}]},
    {"order": 0},
    {"order": 10**19 - 1},
    {"lease_seconds": 1},
    {"held_seconds": 0},
    {"held_seconds": 10**12},
    {"cost_micro_usd": 1_250_000},
    {"cost_micro_usd": None},
    {"hlc": None},
    {"checkpoint_tree": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"},
    {"checkpoint_tree": "a" * 64},
    {"claim_snapshot": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"},
    {"claim_snapshot": None},
    {"field_clock": {}},
    {"anything_new": True},
    {"lease_expires_at": "2026-12-01T22:20:13.123456+13:59"},
    {"claimed_at": "2999-12-31T23:59:59-13:59"},
    {"created_at": "2000-01-31T00:00:00Z"},
    {"depends_on": [f"d{i}" for i in range(model.MAX_LIST)]},
    {"error_log": ["e"] * model.MAX_LIST},
]
PAST_THE_LIMIT = [
    {"title": "x" * (model.MAX_TITLE + 1)},
    {"title": "   "},
    {"title": ""},
    {"title": "a\u2028b"},
    {"title": "bell\x7f"},
    {"title": "next\u0085line"},
    {"id": "a" * 65},
    {"id": "a..b"},
    {"id": "x.lock"},
    {"id": "-x"},
    {"depends_on": ["a..b"]},
    {"depends_on": ["ok", "y.lock"]},
    {"status": "done"},
    {"priority": "P3"},
    {"max_attempts": 0},
    {"max_attempts": model.MAX_ATTEMPTS + 1},
    {"attempts": model.MAX_COUNT + 1},
    {"attempts": -1},
    {"validation.timeout_seconds": 0},
    {"validation.timeout_seconds": model.MAX_SECONDS + 1},
    {"validation.command": "c" * 4097},
    {"on_failure.cleanup": "c" * 4097},
    {"started_at_commit": "abc"},
    {"started_at_commit": "HEAD~1"},
    {"created_at": "yesterday"},
    {"lease_expires_at": "2026-12-01"},
    {"updated_at": STAMP + "0" * 30},
    {"claimed_by": "w" * 4097},
    {"spec_ref": "docs/a\u2029b"},
    {"error_log": ["e" * (field_checks.MAX_TEXT + 1)]},
    {"error_log": ["two\u2028lines"]},
    {"checkpoints": [{"step": -1, "total": None, "description": "d", "timestamp": None}]},
    {"checkpoints": [{"step": 1, "total": 2, "description": "d\x7f", "timestamp": None}]},
    {"checkpoints": [{"step": 1, "total": 2, "description": "d", "timestamp": "noon"}]},
    {"order": -1},
    {"order": 2**64 + 1},
    {"lease_seconds": 0},
    {"lease_seconds": model.MAX_SECONDS + 1},
    {"claim_session": -1},
    {"clone": "XYZ"},
    {"clone_seal": "abc"},
    {"checkpoint_tree": "a" * 41},
    {"claim_snapshot": "HEAD"},
    {"claim_snapshot": {"commit": "4b825dc642cb6eb9a060e54bf8d69288fbee4904"}},
    {"claim_snapshot": "a" * 1_000_000},
    {"failed_at": "soon"},
    {"held_seconds": -1},
    {"held_seconds": "1h"},
    {"held_seconds": 1.5},
    {"cost_micro_usd": -5},
    {"cost_micro_usd": 0.25},
    {"cost_micro_usd": model.MAX_COUNT + 1},
    {"hlc": "soon"},
    {"worktree": "/tmp/a\u2028b"},
    {"branch": "b" * 1025},
    {"last_attempt_ref": "r" * (field_checks.PATH_MAX + 1)},
    {"depends_on": [f"d{i}" for i in range(model.MAX_LIST + 1)]},
    {"error_log": ["e"] * (model.MAX_LIST + 1)},
    {"checkpoints": [{"step": 1, "total": 2, "description": "d", "timestamp": None}] * (model.MAX_LIST + 1)},
]


@pytest.mark.parametrize("changes", AT_THE_LIMIT, ids=lambda c: repr(c)[:60])
def test_at_the_limit_both_accept(changes: dict[str, Any]) -> None:
    raw = _file(_doc(**changes))
    task_id = changes.get("id", "t1")
    assert task_file.written_task_id(raw) == task_id
    assert _full_parse(raw) == task_id


PAST_THE_LIMIT += [{"lease_expires_at": t} for t in BAD_TIMES] + [{"claimed_at": BAD_TIMES[0]},
                                                                  {"failed_at": BAD_TIMES[1]}]


@pytest.mark.parametrize("value", GOOD_TIMES)
def test_a_good_time_the_parser_accepts_and_the_recognizer_accepts_or_leaves_to_it(value: str) -> None:
    raw = _file(_doc(lease_expires_at=value))
    assert _full_parse(raw) == "t1"
    _assert_sound(raw)


@pytest.mark.parametrize("changes", PAST_THE_LIMIT, ids=lambda c: repr(c)[:60])
def test_past_the_limit_the_recognizer_declines_and_the_parser_refuses(changes: dict[str, Any]) -> None:
    raw = _file(_doc(**changes))
    assert task_file.written_task_id(raw) is None
    task_id = changes.get("id", "t1")
    with pytest.raises(InvalidState):
        state_tree.check_record(task_path(task_id) if model.is_task_id(task_id) else "tasks/0/0/x.json", raw, "task")


@pytest.mark.parametrize("raw", [
    _file(_doc()).replace(b'"title": "First task"', b'"title": "First \\"quoted\\" task"'),  # an escape
    _file(_doc()).replace(b'"completed_commit"', b'"title"'),  # a second title, later: JSON keeps it
    _file(_doc()).replace(b'"completed_commit"', b'"hlc"'),  # a ruled key again, as a plain value
    _file(_doc(order=1.5)),
    _file(_doc(extra_table={"a": {"b": 1}})),
    _file(_doc()).replace(b"  ", b"   "),  # another layout
    _file(_doc()).rstrip(b"\n") + b"\n\n",
    b"\xef\xbb\xbf" + _file(_doc()),  # a byte-order mark
    _file(_doc()).replace(b"First task", b"First \xed\xa0\x80 task"),  # an encoded surrogate
], ids=["escape", "second title", "hlc again", "float", "nested", "layout", "blank line", "bom", "surrogate"])
def test_anything_else_goes_to_the_full_parser(raw: bytes) -> None:
    assert task_file.written_task_id(raw) is None
    _assert_sound(raw)


def test_a_second_title_later_in_the_file_is_what_json_keeps_and_is_checked() -> None:
    raw = _file(_doc()).replace(b'"completed_commit": "17b72fdbce431024dc1ba85fba9339548bea2c4e"',
                                b'"title": "forged\\n[completed] t9"')
    assert task_file.written_task_id(raw) is None
    with pytest.raises(InvalidState, match="'title' holds a newline"):
        state_tree.check_record(task_path("t1"), raw, "task")


# -- properties -------------------------------------------------------------------------------

_chars = st.sampled_from(["a", "Z", "0", " ", ".", "-", "_", "/", "é", "漢", "\u00a0", "\u3000", "\u2028",
                          "\u0085", "\x7f", "\x1f", "\t", "\n", '"', "\\", "𝄞"])


def _text(cap: int) -> st.SearchStrategy[str]:
    """Text near `cap` characters long, from characters on both sides of the line rules."""
    return st.tuples(st.text(_chars, max_size=6), st.sampled_from([0, 1, cap - 8, cap - 1, cap, cap + 1]),
                     st.text(_chars, max_size=3)).map(lambda t: t[0] + "x" * max(t[1] - len(t[0]) - len(t[2]), 0)
                                                      + t[2])


_ids = st.sampled_from(["t1", "a.b", "x-y_z", "a" * 64, "a" * 65, "a..b", "x.lock", "x.locks", "-x", ".x",
                        "", "é", "a/b", "a\n", "9"]) | st.text(st.sampled_from("ab.-_9"), min_size=1, max_size=6)
_numbers = st.sampled_from([0, 1, -1, 2, 9999, 10_000, 10_001, 99_999_999, 100_000_000, model.MAX_SECONDS,
                            model.MAX_SECONDS + 1, 10**17, 10**18 - 1, 10**18, model.MAX_COUNT,
                            model.MAX_COUNT + 1, 10**19 - 1, 10**19, 2**64, 2**64 + 1, True, False, 1.5,
                            "3", None])
_times = st.sampled_from([None, "", *GOOD_TIMES, *BAD_TIMES, "2026-12-01", "noon", 5, STAMP + "0" * 30,
                          "2026-12-01T22:20:13Z\n"])
_hex = st.sampled_from([0, 3, 4, 7, 8, 16, 39, 40, 41, 63, 64, 65, 128, 129]).flatmap(
    lambda n: st.text(st.sampled_from("0123456789abcdef"), min_size=n, max_size=n)) | st.sampled_from(
    ["ABCDEF12", "g" * 16, "0123456789abcdef\n", None, 16])
_checkpoint = st.fixed_dictionaries({"step": _numbers, "total": _numbers, "description": _text(field_checks.MAX_TEXT),
                                     "timestamp": _times})
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "id": _ids,
    "title": _text(model.MAX_TITLE),
    "status": st.sampled_from([*model.STATUSES, "done", "", None, 1]),
    "priority": st.sampled_from([*model.PRIORITIES, "P3", None]),
    "depends_on": st.lists(_ids, max_size=3) | st.sampled_from([None, "t0", [1]]),
    "attempts": _numbers,
    "max_attempts": _numbers,
    "started_at_commit": _hex | st.sampled_from([None, "HEAD", "ABCD"]),
    "validation.command": _text(4096) | st.sampled_from([None, 7]),
    "validation.timeout_seconds": _numbers,
    "on_failure.cleanup": _text(4096) | st.sampled_from([None, []]),
    "error_log": st.lists(_text(field_checks.MAX_TEXT), max_size=2) | st.sampled_from([None, [1]]),
    "checkpoints": st.lists(_checkpoint, max_size=2) | st.sampled_from([[{}], [1], [{"step": 1}]]),
    "completed_at": _times, "lease_expires_at": _times, "created_at": _times, "updated_at": _times,
    "claimed_by": _text(4096) | st.none(),
    "spec_ref": _text(4096) | st.none(),
    "order": _numbers,
    "worktree": _text(field_checks.PATH_MAX) | st.none(),
    "branch": _text(1024) | st.none(),
    "claimed_at": _times, "failed_at": _times,
    "lease_seconds": _numbers, "claim_session": _numbers,
    "clone": _hex, "clone_seal": _hex, "checkpoint_tree": _hex, "claim_snapshot": _hex,
    "last_attempt_ref": _text(field_checks.PATH_MAX),
    "hlc": st.sampled_from([HLC, None, "soon", "1796163613801.000000.", "1796163613801.0.x"]),
    "field_clock": st.sampled_from([{}, {"claim": []}, {"claim": [HLC, "e1"]}, {"a": {"b": 1}}, [], "x"]),
    "completed_commit": st.sampled_from(["abc", 1, -1, True, None, 1.5, [1], {"k": "v"}]),
}


def _sound_if_writable(changes: dict[str, Any]) -> None:
    try:
        raw = _file(_doc(**changes))
    except UnicodeEncodeError:  # a value the writer cannot write
        return
    _assert_sound(raw)


@pytest.mark.parametrize("field", sorted(FIELDS))
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_a_canonical_file_with_one_field_at_its_limit_is_recognized_only_when_the_parser_accepts(
        field: str, data: st.DataObject) -> None:
    _sound_if_writable({field: data.draw(FIELDS[field], label=field)})


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), fields=st.lists(st.sampled_from(sorted(FIELDS)), min_size=2, max_size=4, unique=True),
       dropped=st.lists(st.sampled_from(["hlc", "worktree", "field_clock", "checkpoints", "order"]), max_size=2))
def test_canonical_files_with_fields_at_their_limits_are_recognized_only_when_the_parser_accepts(
        data: st.DataObject, fields: list[str], dropped: list[str]) -> None:
    changes: dict[str, Any] = {name: data.draw(FIELDS[name], label=name) for name in fields}
    changes.update({name: _DROP for name in dropped if name not in changes})
    _sound_if_writable(changes)


_snippets = st.sampled_from(['"', "\\", "\\n", "\\u0041", "\\ud800", ".", "..", ",", " ", "\n", "0", "9", "-",
                             "x", "\x7f", "\u2028", ":", "{", "}", "[", "]", "null", "1e5", ".lock",
                             ',\n  "title": "x"', ',\n  "hlc": "x"', ',\n  "lease_seconds": 0', "\x00"])


@settings(max_examples=examples(600), deadline=None)
@given(base=st.sampled_from([
    _file(_doc()),
    _file(_doc(depends_on=[], error_log=[], checkpoints=[], field_clock=_DROP, completed_commit=_DROP)),
    _file({k: v for k, v in _doc(status="pending").items() if k in serialization.TASK_READ_KEYS or k == "hlc"}),
]), edits=st.lists(st.tuples(st.floats(0, 1), st.sampled_from(["insert", "delete", "replace"]), _snippets,
                             st.integers(1, 3)), min_size=1, max_size=3))
def test_mutated_canonical_files_are_recognized_only_when_the_parser_accepts(
        base: bytes, edits: list[tuple[float, str, str, int]]) -> None:
    text = base.decode()
    for where, how, snippet, width in edits:
        at = int(where * len(text))
        if how == "insert":
            text = text[:at] + snippet + text[at:]
        elif how == "delete":
            text = text[:at] + text[at + width:]
        else:
            text = text[:at] + snippet + text[at + len(snippet):]
    _assert_sound(text.encode("utf-8", "surrogatepass"))


def test_the_extra_field_rules_all_have_a_pattern() -> None:
    """A rule added to TASK_EXTRA_FIELDS without its pattern would only send every file
    holding that field to the full parser (never accept it unchecked): still, say so."""
    assert task_file._W_EXTRA_VALUES.keys() == task_file.TASK_EXTRA_FIELDS.keys()
