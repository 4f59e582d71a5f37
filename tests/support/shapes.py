"""Checking a command's `--json` against the type its use case declares
(git_handoff/ops/payloads.py and the TypedDicts it names): keys, required and optional,
and value types."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin


def shape_problems(value: object, kind: object, where: str) -> list[str]:
    """Where `value` does not have type `kind` (a TypedDict, list[...], dict[str, ...], a
    union, a Literal, or a plain type)."""
    origin = get_origin(kind)
    if kind is Any or kind is object:
        return []
    if origin in (Required, NotRequired):
        return shape_problems(value, get_args(kind)[0], where)
    if origin in (Union, types.UnionType):
        options = get_args(kind)
        return [] if any(not shape_problems(value, k, where)
                         for k in options) else [f"{where}: {value!r} is not {kind}"]
    if origin is Literal:
        return [] if value in get_args(kind) else [f"{where}: {value!r} not in {get_args(kind)}"]
    if kind is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if typing.is_typeddict(kind):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        hints = typing.get_type_hints(kind, include_extras=True)
        # NotRequired[...] read from the hints: under postponed annotations Python 3.11
        # counts such keys in __required_keys__
        declared: frozenset[str] = kind.__required_keys__  # type: ignore[attr-defined]  # a TypedDict (is_typeddict above) has it; mypy does not narrow `object` by is_typeddict
        required = {k for k in declared if get_origin(hints[k]) is not NotRequired}
        required |= {k for k, h in hints.items() if get_origin(h) is Required}
        out = [f"{where}: missing {k!r}" for k in sorted(required - value.keys())]
        out += [f"{where}: unexpected {k!r}" for k in sorted(value.keys() - hints.keys())]
        for k in value.keys() & hints.keys():
            out += shape_problems(value[k], hints[k], f"{where}.{k}")
        return out
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        (item,) = get_args(kind)
        return [p for n, v in enumerate(value) for p in shape_problems(v, item, f"{where}[{n}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        _, item = get_args(kind)
        return [p for k, v in value.items() for p in shape_problems(v, item, f"{where}.{k}")]
    assert isinstance(kind, type), kind
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    return [] if ok else [f"{where}: {value!r} is not {kind.__name__}"]
