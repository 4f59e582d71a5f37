"""Bytes and text read as JSON or TOML, inside the size and nesting limits of a record.

Every record of the state, every object of a fetched ref, and every JSON or TOML text a
person or another program hands in (a plan file, a hook payload, a backend's report) is
read here first: at most so many bytes, UTF-8, no NaN/Infinity, nesting at most
MAX_JSON_DEPTH levels, in time linear in the text. What is wrong is an InvalidState
(a stored record: exit 2 naming the path) or a UsageError (text given on the command line).

Pure: no git, no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.model import MAX_RECORD_BYTES
from git_handoff.core.patterns import lazy

MAX_JSON_DEPTH = 32  # levels of lists and tables inside one record (documented in docs/threat-model.md)


def problem(where: str, message: str) -> InvalidState:
    return InvalidState(f"{where}: {message}")


# -- JSON -----------------------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


# json.loads(text, parse_constant=_no_constant), without building a decoder per record
_decode = json.JSONDecoder(parse_constant=_no_constant).decode


def load_json(raw: bytes, where: str, limit: int = MAX_RECORD_BYTES) -> Any:
    """Parse a JSON record: at most `limit` bytes, UTF-8, no NaN/Infinity, nesting at most
    MAX_JSON_DEPTH. InvalidState naming `where` otherwise."""
    if len(raw) > limit:
        raise problem(where, f"{len(raw)} bytes, more than the {limit} a record may hold")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise problem(where, f"not valid JSON: not UTF-8 at byte {exc.start}") from None
    if _depth_over(text, MAX_JSON_DEPTH):
        raise problem(where, f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return _decode(text)
    except (ValueError, RecursionError) as exc:
        raise problem(where, f"not valid JSON: {exc}") from None


def _depth_over(text: str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than `limit` (linear, no recursion)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def nested_deeper(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether lists and tables inside a parsed value nest deeper than `limit` (iterative:
    a TOML file of dotted keys parses into a structure too deep for any recursive walk)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def load_json_text(text: str, where: str) -> Any:
    """Parse JSON text a person or another program gave (a plan file, a payload): nesting at
    most MAX_JSON_DEPTH, no NaN/Infinity. UsageError (exit 2) naming `where` otherwise."""
    if _depth_over(text, MAX_JSON_DEPTH):
        raise UsageError(f"{where}: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return _decode(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{where}: not valid JSON ({exc})") from None


# The pieces of TOML text a dotted key is made of, and those it cannot cross: comments and
# strings are skipped whole, an unterminated one to the end of its line (or of the text).
# Possessive, so no piece is ever scanned twice: linear in the text, whatever it holds.
_TOML_PIECE = lazy("|".join((
    r"(?P<skip>#[^\n]*+"  # a comment
    r'|"""(?:[^"\\]|\\[\s\S]|"{1,2}+(?!"))*+(?:"{3,5}|\Z)'  # a multi-line basic string
    r"|'{3}(?:[^']|'{1,2}+(?!'))*+(?:'{3,5}|\Z))",  # a multi-line literal string
    r'(?P<part>[A-Za-z0-9_-]++|"(?:[^"\\\n]|\\.)*+"?|' r"'[^'\n]*+'?)",  # a key part
    r"(?P<dot>[ \t]*+\.[ \t]*+)",
    r"(?P<other>[^A-Za-z0-9_\-" r'"' r"'#. \t]++|[ \t]++|.)",
)), re.DOTALL)


def _dotted_key_over(text: str, limit: int) -> bool:
    """Whether a dotted key in `text` has more than `limit` parts (one linear scan).
    tomllib spends time quadratic in a key's parts (here a 20,000-part `a.a.a…` took 11 s,
    one of 100,000 exhausted memory); a key of more than MAX_JSON_DEPTH parts nests its
    value deeper than a record may be, refused after parsing anyway, so it is refused
    before. Only a key makes such a run: a value's dotted run is a number or a time (one
    or two dots), and strings and comments are skipped whole."""
    if text.count(".") < limit:  # a key of limit + 1 parts has limit dots
        return False
    run, dotted = 0, False  # parts of the current run; whether a dot ends it (a part must follow)
    for piece in _TOML_PIECE.finditer(text):
        group = piece.lastgroup
        if group == "part":
            run = run + 1 if dotted else 1
            if run > limit:
                return True
            dotted = False
        elif group == "dot" and run and not dotted:
            dotted = True
        else:
            run, dotted = 0, False
    return False


def parse_toml(text: str) -> tuple[dict[str, Any] | None, str | None, bool]:
    """(table, None, False) for TOML text nesting at most MAX_JSON_DEPTH levels of tables
    and arrays; else (None, what is wrong, whether it is the nesting). One parser for the
    plan files and config people give (UsageError) and the state's config.toml (InvalidState)."""
    import tomllib
    if _dotted_key_over(text, MAX_JSON_DEPTH):
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels (a dotted key of more than " \
                     f"{MAX_JSON_DEPTH} parts)", True
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except RecursionError:
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels", True
    except ValueError as exc:
        return None, str(exc), False
    if nested_deeper(data):
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels", True
    return data, None, False


def load_toml_text(text: str, where: str) -> dict[str, Any]:
    """Parse TOML text (a plan file, a config): nesting at most MAX_JSON_DEPTH levels of
    tables and arrays. UsageError (exit 2) naming `where` otherwise."""
    data, why, deep = parse_toml(text)
    if data is None:
        raise UsageError(f"{where}: {why}" if deep else f"{where}: not valid TOML ({why})")
    return data
