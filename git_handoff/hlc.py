"""Hybrid logical clock: the "written last" of a same-field merge conflict.

A stamp is `<physical ms, 13 digits>.<logical counter, 6 digits>.<node>`, e.g.
`1764590354123.000002.3f9a01c2b7e4d5a6`: wall-clock milliseconds, a counter for
writes within one millisecond (or while the wall clock lags behind a stamp already
seen), and the clone id as the last tie-break. Every write of a record stamps one
more than the highest stamp the record already carries (its own `hlc` and its
`field_clock` entries), or the wall clock when that is later. So a clone that changes
a field after seeing (merging) another clone's change of it always stamps later, even
with a clock an hour behind: the causal order decides, the wall clock only orders
writes that did not see each other.

Pure: plain strings in and out, so the rules are property-tested with the merge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache
from typing import Any

FIELD = "hlc"
_STAMP = re.compile(r"([0-9]{13})\.([0-9]{6})\.([0-9a-f]{0,16})")
_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z")
MAX_LOGICAL = 999_999
PATTERN = _STAMP


def is_stamp(text: Any) -> bool:
    return isinstance(text, str) and _STAMP.fullmatch(text) is not None


def stamp(physical_ms: int, logical: int, node: str) -> str:
    return f"{physical_ms:013d}.{logical:06d}.{node}"


@lru_cache(maxsize=4096)
def key(text: str) -> tuple[int, int, str, str]:
    """A total order over the times a record may carry: HLC stamps by (physical,
    logical, node); an ISO-8601 time of a record from before HLCs as its milliseconds,
    before any stamp of that millisecond; anything else first. The raw text breaks the
    remaining ties, so the order is total and the merge stays order-independent."""
    m = _STAMP.fullmatch(text)
    if m:
        return int(m.group(1)), int(m.group(2)), m.group(3), text
    if _ISO.fullmatch(text):
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return -1, -1, "", text
        return int(moment.timestamp() * 1000), -1, "", text
    return -1, -1, "", text


def highest(times: Iterable[Any]) -> str | None:
    """The latest HLC stamp among `times` (other values ignored)."""
    best: str | None = None
    for t in times:
        if is_stamp(t) and (best is None or key(t) > key(best)):
            best = t
    return best


def seen_in(record: Any) -> str | None:
    """The highest stamp a record carries: its own and its field clock's."""
    if not isinstance(record, dict):
        return None
    times: list[Any] = [record.get(FIELD)]
    clock = record.get("field_clock")
    if isinstance(clock, dict):
        times.extend(entry[0] for entry in clock.values() if isinstance(entry, list) and entry)
    return highest(times)


def next_stamp(previous: str | None, now_ms: int, node: str) -> str:
    """The stamp of a write after `previous` (None: the record is new) at wall-clock
    `now_ms` on clone `node`: later than `previous` whatever the wall clock says."""
    if previous is None or not is_stamp(previous):
        return stamp(now_ms, 0, node)
    ms, logical, _, _ = key(previous)
    if now_ms > ms:
        return stamp(now_ms, 0, node)
    if logical >= MAX_LOGICAL:  # a counter that would overflow moves the physical part on
        return stamp(ms + 1, 0, node)
    return stamp(ms, logical + 1, node)
