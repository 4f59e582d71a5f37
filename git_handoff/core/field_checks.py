"""The checks a record's fields pass: a small library of checkers, and the common ones.

A checker is a function (value, where) that raises InvalidState naming the field and what
is wrong; `opt`, `list_of`, `capped`, `obj`, `either` build checkers from checkers, and
`check_fields` runs a table of them ({field: checker}) over one parsed record. The tables
of each record kind are in git_handoff.core.record_schemas (and the task's in
git_handoff.core.task_file); this module holds what they share: one line of text, a time
a record may hold, an object id, a clock stamp.

Pure: no git, no I/O.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

from git_handoff.core.decoding import problem
from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.model import LIST_LIMITS, MAX_COUNT, MAX_LIST, parse_time
from git_handoff.core.patterns import LazyPattern, lazy

# -- limits (documented in docs/threat-model.md) -------------------------------------------

MAX_TEXT = 2000  # a reason, decision, blocker, checkpoint message, error_log entry
PATH_MAX = 4096  # a path kept as text (a worktree, a spec, a file changed)

_OID = lazy(r"[0-9a-f]{40}|[0-9a-f]{64}")
HEX_DIGITS = lazy(r"[0-9a-f]{8,128}")
_TIME = lazy(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.+Z-]{8,30}")
# Backend session ids go into a command line: letters, digits and `._:@+=-` only.
SAFE_WORD = lazy(r"[A-Za-z0-9._:@+=-]{1,200}")
CONTROL = lazy(r"[\x00-\x1f\x7f\u0085\u2028\u2029]")
CLONE_ID = lazy(r"[0-9a-f]{16}")
HLC_STAMP = lazy(r"[0-9]{13}\.[0-9]{6}\.[0-9a-f]{0,16}")  # git_handoff.core.hlc


# -- one line of text -------------------------------------------------------------------------------


def line_problem(value: str, limit: int) -> str | None:
    """Why `value` is not one line of text (None when it is): control characters,
    newlines, lone surrogates, more than `limit` characters."""
    if len(value) > limit:
        return f"longer than {limit} characters ({len(value)})"
    if CONTROL.search(value):
        return "holds a newline or a control character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (a lone surrogate)"
    return None


def one_line(text: str, what: str, *, empty: str | None = None) -> str:
    """`text` typed for a record, its runs of whitespace made single spaces: UsageError
    (exit 2) naming `what` when nothing is left (`empty`: that message instead) or when
    it is still not one line of text every clone's edge reads (line_problem)."""
    text = " ".join(text.split())
    if not text:
        raise UsageError(empty or f"{what} must not be empty")
    problem = line_problem(text, MAX_TEXT)
    if problem:
        raise UsageError(f"{what} {problem}")
    return text


def deep_strings_ok(value: Any, where: str) -> None:
    """Every string anywhere in a record encodes as UTF-8 (no lone surrogates)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise problem(where, "holds text that is not valid Unicode (a lone surrogate)") from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# -- field checkers --------------------------------------------------------------------------------

Check = Callable[[Any, str], None]


def opt(check: Check) -> Check:
    def run(value: Any, at: str) -> None:
        if value is not None:
            check(value, at)

    return run


def integer(minimum: int = 0, maximum: int = MAX_COUNT) -> Check:
    def run(value: Any, at: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidState(f"{at} must be a whole number, not {shown(value)}")
        if not minimum <= value <= maximum:
            raise InvalidState(f"{at} must be between {minimum} and {maximum}, not {value}")

    return run


def text(limit: int = MAX_TEXT, *, one_line: bool = True) -> Check:
    def run(value: Any, at: str) -> None:
        if not isinstance(value, str):
            raise InvalidState(f"{at} must be text, not {shown(value)}")
        why = line_problem(value, limit) if one_line else (
            f"longer than {limit} characters" if len(value) > limit else None)
        if why:
            raise InvalidState(f"{at} {why}")

    return run


def pattern(regex: LazyPattern, what: str) -> Check:
    def run(value: Any, at: str) -> None:
        if not isinstance(value, str) or not regex.fullmatch(value):
            raise InvalidState(f"{at} must be {what}, not {shown(value)}")

    return run


def one_of(*choices: Any) -> Check:
    def run(value: Any, at: str) -> None:
        if value not in choices:
            raise InvalidState(f"{at} must be one of {', '.join(map(str, choices))}, not {shown(value)}")

    return run


def boolean(value: Any, at: str) -> None:
    if not isinstance(value, bool):
        raise InvalidState(f"{at} must be true or false, not {shown(value)}")


def list_of(check: Check, limit: int = MAX_LIST) -> Check:
    def run(value: Any, at: str) -> None:
        if not isinstance(value, list):
            raise InvalidState(f"{at} must be a list, not {shown(value)}")
        if len(value) > limit:
            raise InvalidState(f"{at} holds {len(value)} entries, more than {limit}")
        for i, item in enumerate(value):
            check(item, f"{at}[{i}]")

    return run


def capped(kind: str, name: str, check: Check) -> Check:
    """A list of `check`s holding at most LIST_LIMITS[kind][name] entries: the cap the merge
    (git_handoff.core.field_merge) keeps a union of two sides to."""
    return list_of(check, LIST_LIMITS[kind][name])


def obj(fields: Mapping[str, Check]) -> Check:
    def run(value: Any, at: str) -> None:
        if not isinstance(value, dict):
            raise InvalidState(f"{at} must be an object, not {shown(value)}")
        for name, check in fields.items():
            if name in value:
                check(value[name], f"{at}.{name}")

    return run


def either(*checks: Check) -> Check:
    def run(value: Any, at: str) -> None:
        errors = []
        for check in checks:
            try:
                check(value, at)
                return
            except InvalidState as exc:
                errors.append(exc.message)
        raise InvalidState(errors[0])

    return run


def shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def check_fields(data: Any, fields: Mapping[str, Check], where: str) -> dict[str, Any]:
    """`data` as an object whose known fields pass their checks; InvalidState naming the
    path and the field otherwise."""
    if not isinstance(data, dict):
        raise problem(where, f"must be a JSON object, not {type(data).__name__}")
    for name, check in fields.items():
        if name in data:
            try:
                check(data[name], name)
            except InvalidState as exc:
                raise problem(where, f"field {exc.message}") from None
    stamp = data.get("hlc")
    if stamp is not None and not (isinstance(stamp, str) and HLC_STAMP.fullmatch(stamp)):
        raise problem(where, f"field hlc must be a clock stamp (ms.counter.clone), not {shown(stamp)}")
    deep_strings_ok(data, where)
    return data


# A time is ISO-8601 text (_TIME's characters) that names an instant, read as every reader
# reads it (model.parse_time), from 1970 to 9000 in UTC: a month 13 or a day 45 passed the
# characters and then made every scheduling command exit 2; a year near 9999 would
# overflow when a lease (ten years at most) is added to it.
FIRST_YEAR, LAST_YEAR = 1970, 9000


def is_time(value: Any) -> bool:
    """Whether `value` is a time a record may hold (see FIRST_YEAR)."""
    if not isinstance(value, str) or not _TIME.fullmatch(value):
        return False
    try:
        year = parse_time(value).astimezone(datetime.UTC).year
    except (UsageError, ValueError, OverflowError):
        return False
    return FIRST_YEAR <= year <= LAST_YEAR


def _stamp(value: Any, at: str) -> None:
    if not is_time(value):
        raise InvalidState(f"{at} must be an ISO-8601 time from {FIRST_YEAR} to {LAST_YEAR}, not {shown(value)}")


STAMP: Check = _stamp
OID = pattern(_OID, "an object id")
HEX = pattern(HEX_DIGITS, "hexadecimal")
LINE = text()
WORKER = text(MAX_TEXT)
PATH_TEXT = text(PATH_MAX)
