"""A task file of the state: the edge's rules for a task, its parser, and the one-pass
recognizer of the layout git handoff writes.

`task` parses a task blob into a model.Task and holds it to the edge's rules beyond what
task_from_json checks (check_task_text: one-line capped texts, times, object ids, numbers
in range, the claim bookkeeping well-typed). `written_task_id` answers the same question
for the files git handoff wrote itself, in one regular expression over the text, and None
for anything else, which `task` then parses to word what is wrong.

Pure: no git, no I/O.
"""

from __future__ import annotations

from typing import Any

from git_handoff.core import model
from git_handoff.core.decoding import load_json, problem
from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.field_checks import (
    CONTROL,
    HEX,
    HEX_DIGITS,
    HLC_STAMP,
    LINE,
    MAX_TEXT,
    OID,
    PATH_MAX,
    PATH_TEXT,
    STAMP,
    Check,
    deep_strings_ok,
    integer,
    is_time,
    line_problem,
    obj,
    opt,
    pattern,
    text,
)
from git_handoff.core.model import LIST_LIMITS, MAX_COUNT, MAX_LIST, MAX_SECONDS, MAX_TITLE, Task
from git_handoff.core.patterns import lazy
from git_handoff.core.serialization import TASK_READ_KEYS, TASK_TABLE, task_from_json

# -- tasks: the claim bookkeeping ------------------------------------------------------------------


TASK_EXTRA_FIELDS: dict[str, Check] = {
    "worktree": opt(PATH_TEXT),
    "branch": opt(text(1024)),
    "claimed_at": opt(STAMP),
    "lease_seconds": opt(integer(1, MAX_SECONDS)),
    "claim_session": opt(integer(0)),
    "clone": opt(HEX),
    "clone_seal": opt(HEX),
    "checkpoint_tree": opt(OID),
    "claim_snapshot": opt(OID),
    "failed_at": opt(STAMP),
    "last_attempt_ref": opt(PATH_TEXT),
    "work_ref": opt(PATH_TEXT),
    "work_withheld": opt(text(1024)),
    "integrated_commit": opt(OID),
    "hlc": opt(pattern(HLC_STAMP, "a clock stamp (ms.counter.clone)")),
}
_CHECKPOINT = obj({"step": opt(integer(0)), "total": opt(integer(0)), "description": LINE, "timestamp": opt(STAMP)})
# The task's fields of one line of text and their caps (each entry of error_log too, at
# MAX_TEXT), checked together by lines_problem; its times (ISO-8601 when set) and its
# commands (any text, capped: a command may be a script of several lines).
# Each from its rows' `form` in serialization.TASK_TABLE (the one definition of a field).
TASK_LINES = tuple((row.name, row.cap) for row in TASK_TABLE if row.form == "line")
TASK_TIMES = tuple(row.name for row in TASK_TABLE if row.form == "time")
TASK_COMMANDS = tuple((row.name, row.cap) for row in TASK_TABLE if row.form == "command")


def lines_problem(lines: list[tuple[str, str, int]], *, escapes: bool = True) -> str | None:
    """"field 'NAME' WHY" for the first of `lines` ((name, value, cap) each) that is not one
    line of text by line_problem's rules, None when every one is. One pass over all of
    them: a control character or a lone surrogate in their concatenation is in one of
    them, and one regex search (and at most one encode) over it replaces one per field;
    only a record that fails is asked field by field, to name the field. `escapes=False`:
    the values were decoded from UTF-8 JSON without a `\\u` escape, where no lone surrogate
    can be (only an escape makes one)."""
    joined = "".join([line[1] for line in lines])
    fine = not CONTROL.search(joined)
    for _, value, cap in lines:
        if len(value) > cap:
            fine = False
            break
    if fine and escapes:
        try:
            joined.encode("utf-8")
        except UnicodeEncodeError:
            fine = False
    if fine:
        return None
    for name, value, cap in lines:
        why = line_problem(value, cap)
        if why:
            return f"field {name!r} {why}"
    return None


def check_task_text(task: Any, where: str, *, escapes: bool = True) -> None:
    """The edge's rules for a task beyond what task_from_json checks: every text a person
    reads or a command line gets is one line and capped (TASK_LINES, and each error_log
    entry), times are times, the base is an object id, numbers in range, the claim
    bookkeeping (TASK_EXTRA_FIELDS) well-typed. `escapes=False`: the task was parsed from
    UTF-8 JSON without a `\\u` escape, so no text in it can be a lone surrogate."""
    why = _lists_problem(task) or _lines_problem(task, escapes) or _values_problem(task) or _extra_problem(task)
    if why:
        raise problem(where, why)
    if escapes:  # the text no rule above encodes: the commands, every checkpoint field, the rest
        deep_strings_ok([task.check, task.cleanup, list(task.checkpoints), task.extra], where)


def _lists_problem(task: Any) -> str | None:
    for name, limit in _TASK_LISTS:
        if len(getattr(task, name)) > limit:
            return f"field {name!r} holds {len(getattr(task, name))} entries, more than {limit}"
    return None


def _lines_problem(task: Any, escapes: bool) -> str | None:
    """The one-line capped texts, then the checkpoints."""
    # The usual task has one line field set (its title): asked directly. Several (error
    # log entries, a claim) are asked together, in one pass (lines_problem).
    if task.error_log or task.claimed_by is not None or task.spec_ref is not None:
        lines = [(name, value, cap) for name, cap in TASK_LINES if (value := getattr(task, name)) is not None]
        lines += [(f"error_log[{i}]", entry, MAX_TEXT) for i, entry in enumerate(task.error_log)]
        why = lines_problem(lines, escapes=escapes)
    else:
        why = line_problem(task.title, MAX_TITLE)
        why = f"field 'title' {why}" if why else None
    if why:
        return why
    for i, cp in enumerate(task.checkpoints):
        try:
            _CHECKPOINT(cp, f"checkpoints[{i}]")
        except InvalidState as exc:
            return f"field {exc.message}"
    return None


def _values_problem(task: Any) -> str | None:
    """The base, the times, the commands' lengths and the numbers."""
    base = task.started_at_commit  # a full or abbreviated object id: never a revision expression
    if base is not None and not _BASE.fullmatch(base):
        return "field 'started_at_commit' must be an object id (hexadecimal)"
    for name in TASK_TIMES:
        value = getattr(task, name)
        if value and not is_time(value):
            return f"field {name!r} must be an ISO-8601 time"
    for name, cap in TASK_COMMANDS:
        value = getattr(task, name)
        if value is not None and len(value) > cap:
            return f"field {name!r} is too long"
    if task.timeout_seconds > MAX_SECONDS:
        return f"field 'validation.timeout_seconds' must be at most {MAX_SECONDS}"
    if not (0 <= task.attempts <= MAX_COUNT and 1 <= task.max_attempts <= model.MAX_ATTEMPTS):
        return "field 'attempts' or 'max_attempts' is out of range"
    if isinstance(task.order, int) and not 0 <= task.order <= 2**64:
        return "field 'order' is out of range"
    return None


def _extra_problem(task: Any) -> str | None:
    """The claim bookkeeping (TASK_EXTRA_FIELDS), usually one or two: the table of each asked."""
    for name, value in task.extra.items():
        check = TASK_EXTRA_FIELDS.get(name)
        if check is not None:
            try:
                check(value, name)
            except InvalidState as exc:
                return f"field {exc.message}"
    return None


_BASE = lazy(r"[0-9a-f]{4,64}")  # a full or abbreviated object id
_TASK_LISTS = tuple(LIST_LIMITS["task"].items())


def task(raw: bytes, where: str, expected_id: str | None = None) -> Task:
    """A task blob as a model.Task (checked as `load_task` does, plus the edge's rules)."""
    data = load_json(raw, where)
    try:
        parsed = task_from_json(data, source=where)
    except UsageError as exc:
        raise InvalidState(exc.message) from None
    check_task_text(parsed, where, escapes=b"\\u" in raw)
    if expected_id is not None and parsed.id != expected_id:
        raise problem(where, f"holds task {parsed.id!r}")
    return parsed


# -- tasks: the layout git handoff writes, recognized in one pass ------------------------------
#
# A fetched state of 10,000 tasks is 10,000 task files, nearly all written by git handoff
# itself (dump_task: json.dumps(indent=2) of task_to_json). written_task_id recognizes
# that layout, field by field in its order, with every value inside the edge's rules, by
# one regular expression over the text (C, ~3 us for a pending task's 600 bytes, against
# ~30 us for json + task_from_json + check_task_text). It accepts only what `task` accepts
# (tests/core/test_task_file.py: a property over canonical and mutated files), and answers
# None for anything else — an escape in a string, a field out of order, a number it does
# not bound, a key it does not know the rules of — which then goes to `task`, the parser
# that words what is wrong. Possessive and bounded throughout: linear in the text.

_JSON_NOT_IN_STRING = r'"\\\x00-\x1f'  # what a JSON string holds only escaped (or ends at)


def _string(cap: int | None = None) -> str:
    """A JSON string without escapes (any text JSON holds raw), of at most `cap` characters."""
    return f'"[^{_JSON_NOT_IN_STRING}]' + ("*+" if cap is None else f"{{0,{cap}}}+") + '"'


def _line_string(cap: int) -> str:
    """A JSON string that is one line of text by line_problem's rules, at most `cap` long."""
    return rf'"[^{_JSON_NOT_IN_STRING}\x7f\u0085\u2028\u2029]{{0,{cap}}}+"'


def _whole(minimum: int, maximum: int) -> str:
    """Whole numbers from `minimum` (0 or 1) that have fewer digits than `maximum`: all of
    them inside [minimum, maximum] (a larger one in range goes to the full parse)."""
    digits = len(str(maximum)) - 1
    return ("(?:0|" if minimum == 0 else "(?:") + f"[1-9][0-9]{{0,{digits - 1}}}+)"


def _null_or(pattern_: str) -> str:
    return f"(?:null|{pattern_})"


def _json_list(item: str, indent: int, limit: int = MAX_LIST) -> str:
    """`[]`, or 1..limit items laid out one per line as json.dumps(indent=2) does."""
    inner, outer = "\n" + " " * (indent + 2), "\n" + " " * indent
    return rf"(?:\[\]|\[{inner}{item}(?:,{inner}{item}){{0,{limit - 1}}}+{outer}\])"


# model.is_task_id: no `..` and no `.lock` end within an id's 64 characters (the lookaheads look no
# further: an id longer than that is refused by the match itself)
_W_ID = r'(?![A-Za-z0-9._-]{0,64}?\.\.)(?![A-Za-z0-9._-]{0,64}?\.lock")[A-Za-z0-9][A-Za-z0-9._-]{0,63}+'
# is_time, in the layout now_iso writes (and with a fraction, an offset): a day that every
# month has (or 29 and 30 outside February, 31 in the months that have it), the years
# 2000-2999 (any offset keeps them inside FIRST_YEAR..LAST_YEAR); February 29 and any
# other form go to the full parse
_W_DAY = (r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
          r"|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_W_TIME = (r'"2[0-9]{3}-' + _W_DAY + r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
           r'(?:Z|[+-](?:0[0-9]|1[0-3]):[0-5][0-9])"')
_W_TIME_OR_EMPTY = f'(?:null|""|{_W_TIME})'  # TASK_TIMES: check_task_text asks only a time that is set
_W_COUNT = _whole(0, MAX_COUNT)
_W_SECONDS = _whole(1, MAX_SECONDS)
_W_CHECKPOINT = (  # _CHECKPOINT, as the checkpoint verb writes one
    r'\{\n      "step": ' + _null_or(_W_COUNT) + r',\n      "total": ' + _null_or(_W_COUNT)
    + r',\n      "description": ' + _line_string(MAX_TEXT) + r',\n      "timestamp": ' + _null_or(_W_TIME)
    + r"\n    \}")
# TASK_EXTRA_FIELDS, each as a pattern of its value. A field of that table missing here is
# left to the full parse (the negative lookahead below keeps it out of `_W_ANY_EXTRA`).
_W_EXTRA_VALUES = {
    "worktree": _null_or(_line_string(PATH_MAX)),
    "branch": _null_or(_line_string(1024)),
    "claimed_at": _null_or(_W_TIME),
    "lease_seconds": _null_or(_W_SECONDS),
    "claim_session": _null_or(_W_COUNT),
    "clone": _null_or(rf'"{HEX_DIGITS.pattern}+"'),
    "clone_seal": _null_or(rf'"{HEX_DIGITS.pattern}+"'),
    "checkpoint_tree": _null_or(r'"[0-9a-f]{40}(?:[0-9a-f]{24})?"'),
    "claim_snapshot": _null_or(r'"[0-9a-f]{40}(?:[0-9a-f]{24})?"'),
    "failed_at": _null_or(_W_TIME),
    "last_attempt_ref": _null_or(_line_string(PATH_MAX)),
    "work_ref": _null_or(_line_string(PATH_MAX)),
    "work_withheld": _null_or(_line_string(1024)),
    "integrated_commit": _null_or(r'"[0-9a-f]{40}(?:[0-9a-f]{24})?"'),
    "hlc": _null_or(rf'"{HLC_STAMP.pattern}+"'),
}
_W_RULED_KEYS = sorted(TASK_READ_KEYS | TASK_EXTRA_FIELDS.keys(), key=len, reverse=True)
# A key no rule reads (completed_commit, field_clock, ...): a plain value, or the
# {field: [stamp, digest]} table of git_handoff.core.hlc; anything else goes to the full parse.
_W_PLAIN = r"(?:null|true|false|-?(?:0|[1-9][0-9]{0,18}+)|" + _string() + ")"
_W_TABLE_ENTRY = _string() + ": " + _json_list(_string(), 4)
_W_TABLE = r"(?:\{\}|\{\n    " + _W_TABLE_ENTRY + r"(?:,\n    " + _W_TABLE_ENTRY + r")*+\n  \})"
_W_ANY_EXTRA = r'"(?!(?:' + "|".join(_W_RULED_KEYS) + r')")[A-Za-z0-9_]{1,64}+": (?:' + _W_PLAIN + "|" + _W_TABLE + ")"
_W_EXTRA = "(?:" + "|".join(f'"{key}": {value}' for key, value in _W_EXTRA_VALUES.items()
                            if key in TASK_EXTRA_FIELDS) + "|" + _W_ANY_EXTRA + ")"
_WRITTEN_TASK = lazy(
    r'\{\n  "id": "(?P<id>' + _W_ID + ')"'
    + r',\n  "title": "(?=\s*+[^\s"])' + _line_string(MAX_TITLE)[1:]  # not blank (task_from_json)
    + r',\n  "status": "(?:' + "|".join(model.STATUSES) + ')"'
    + r',\n  "priority": "(?:' + "|".join(model.PRIORITIES) + ')"'
    + r',\n  "depends_on": ' + _json_list(f'"{_W_ID}"', 2, LIST_LIMITS["task"]["depends_on"])
    + r',\n  "attempts": ' + _W_COUNT
    + r',\n  "max_attempts": ' + _whole(1, model.MAX_ATTEMPTS)
    + r',\n  "started_at_commit": ' + _null_or(rf'"{_BASE.pattern}+"')
    + r',\n  "validation": \{\n    "command": ' + _null_or(_string(TASK_COMMANDS[0][1]))
    + r',\n    "timeout_seconds": ' + _W_SECONDS + r"\n  \}"
    + r',\n  "on_failure": \{\n    "cleanup": ' + _null_or(_string(TASK_COMMANDS[1][1])) + r"\n  \}"
    + r',\n  "error_log": ' + _json_list(_line_string(MAX_TEXT), 2, LIST_LIMITS["task"]["error_log"])
    + r',\n  "checkpoints": ' + _json_list(_W_CHECKPOINT, 2, LIST_LIMITS["task"]["checkpoints"])
    + r',\n  "completed_at": ' + _W_TIME_OR_EMPTY
    + r',\n  "claimed_by": ' + _null_or(_line_string(dict(TASK_LINES)["claimed_by"]))
    + r',\n  "lease_expires_at": ' + _W_TIME_OR_EMPTY
    + r',\n  "created_at": ' + _W_TIME_OR_EMPTY
    + r',\n  "spec_ref": ' + _null_or(_line_string(dict(TASK_LINES)["spec_ref"]))
    + r'(?:,\n  "tokens": ' + _W_COUNT + ")?"  # absent from the files of earlier versions
    + r',\n  "order": ' + _whole(0, 2**64)
    + r',\n  "updated_at": ' + _W_TIME_OR_EMPTY
    + r"(?:,\n  " + _W_EXTRA + r")*+\n\}\n?")


def written_task_id(raw: bytes) -> str | None:
    """The id of the task file `raw` when it is laid out as git handoff writes it and every
    field is inside the edge's rules (then `task(raw, ...)` accepts it too); None for any
    other text, which `task` must then parse."""
    try:
        found = _WRITTEN_TASK.fullmatch(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None
    return found["id"] if found else None
