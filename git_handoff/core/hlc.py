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

`stamp_write` stamps a record being written (its `hlc` and `field_clock`): every state
write needs it and most commands never merge, so it lives here rather than in
git_handoff.core.merge (whose import every command would otherwise pay).

Pure: plain data in and out, so the rules are property-tested with the merge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from git_handoff.core.model import CLAIM_FIELDS
from git_handoff.core.patterns import lazy

FIELD = "hlc"
CLOCK = "field_clock"  # {field: [stamp, digest of the value]}: when each field was written

# Fields of a task that change together when it is claimed, released, failed or completed:
# a merge takes them all from one side (the claim's clone and seal with its worker and
# lease), and one clock entry ("claim") says when they were written. The claim's own
# fields come from model.CLAIM_FIELDS, so a field added to the claim travels with it.
CLAIM_UNIT = (
    "status",
    "claimed_by",
    "lease_expires_at",
    "started_at_commit",
    *CLAIM_FIELDS,
    "completed_at",
    "completed_commit",
    "work_ref",
    "work_withheld",
    "completed_session",
    "uncommitted_at_completion",
    "failed_at",
    "last_attempt_ref",
    "held_seconds",
)
TASK_LOGS = ("error_log", "checkpoints")
TASK_SETS = ("depends_on",)
TASK_MAX = ("attempts",)
NOT_TIMED = (*TASK_LOGS, *TASK_SETS, *TASK_MAX)
MISSING = object()  # a field a record does not have
_STAMP = lazy(r"([0-9]{13})\.([0-9]{6})\.([0-9a-f]{0,16})")
_ISO = lazy(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z")
MAX_LOGICAL = 999_999
# How far ahead of this clone's clock a stamp it reads may be and still count: a stamp
# beyond it (a clock set wrong, or crafted: 9999999999999 ms is the year 2286) is not
# adopted, so this clone's own stamps stay near its clock and within what every peer reads.
MAX_SKEW_MS = 24 * 3600 * 1000


def credible(text: Any, now_ms: int) -> bool:
    """A stamp no further ahead of `now_ms` than MAX_SKEW_MS."""
    return is_stamp(text) and key(text)[0] <= now_ms + MAX_SKEW_MS


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
    `now_ms` on clone `node`: later than `previous` whatever the wall clock says, unless
    `previous` is further ahead of the wall clock than MAX_SKEW_MS: such a stamp is not
    adopted (following it would carry it into this clone's stamps, up to a 14-digit one
    that every peer refuses)."""
    if previous is None or not credible(previous, now_ms):
        return stamp(now_ms, 0, node)
    ms, logical, _, _ = key(previous)
    if now_ms > ms:
        return stamp(now_ms, 0, node)
    if logical >= MAX_LOGICAL:  # a counter that would overflow moves the physical part on
        return stamp(ms + 1, 0, node)
    return stamp(ms, logical + 1, node)


# -- stamping a write ---------------------------------------------------------------------


# json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")), without
# building a new encoder per call (a claim that fails 50,000 tasks digests each one)
canonical = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode


def canon(value: Any) -> str:
    return "\x00missing" if value is MISSING else canonical(value)


def same(a: Any, b: Any) -> bool:
    """Equal values of the same type (MISSING equals only itself)."""
    if a is MISSING or b is MISSING:
        return a is b
    return type(a) is type(b) and bool(a == b)


def digest(value: Any) -> str:
    return hashlib.sha1(canon(value).encode()).hexdigest()[:12]


_UNTIMED = frozenset({CLOCK, FIELD, "updated_at", *NOT_TIMED})
_CLAIM_SET = frozenset(CLAIM_UNIT)


def stamp_write(old: Mapping[str, Any] | None, new: dict[str, Any], now_ms: int, node: str,
                *, task: bool, fields: bool = True) -> dict[str, Any]:
    """`new` (a record replacing `old`) stamped for the merge: `hlc` one later than any
    stamp `old` or `new` carries (or the wall clock), and a `field_clock` entry for each
    field the write changed, so that a later merge knows when *that field* was written,
    not only when the record last changed. `fields=False` (meta.json, whose numbers are
    counters merged by maximum): the stamp only."""
    when = next_stamp(_seen_credible(old, new, now_ms), now_ms, node)
    out = dict(new)
    out[FIELD] = when
    if not fields:
        return out
    clock = _carried_clock(out.get(CLOCK), now_ms)
    if old is not None:  # a new record has no entries: each field has the value it was created with
        _clock_changes(clock, old, out, when, task=task)
    if clock:
        out[CLOCK] = dict(sorted(clock.items()))
    else:
        out.pop(CLOCK, None)
    return out


def _seen_credible(old: Mapping[str, Any] | None, new: Mapping[str, Any], now_ms: int) -> str | None:
    """The highest stamp `old` or `new` carries that is within the skew of `now_ms`."""
    return highest(t for t in (seen_in(old), seen_in(new)) if credible(t, now_ms))


def _beyond_skew(entry: Any, now_ms: int) -> bool:
    """A field clock entry stamped further ahead of `now_ms` than MAX_SKEW_MS."""
    return isinstance(entry, list) and bool(entry) and is_stamp(entry[0]) and not credible(entry[0], now_ms)


def _carried_clock(clock: Any, now_ms: int) -> dict[str, Any]:
    """The field clock a write starts from: the record's, less the entries stamped
    beyond the skew (not carried into this clone's write)."""
    if not isinstance(clock, dict):
        return {}
    return {k: v for k, v in clock.items() if not _beyond_skew(v, now_ms)}


def _clock_changes(clock: dict[str, Any], old: Mapping[str, Any], out: Mapping[str, Any], when: str,
                   *, task: bool) -> None:
    """Enter in `clock` the fields `out` changed from `old` (written at `when`); for a
    task the claim fields as one entry, "claim"."""
    names = set(out) | set(old)
    if task:
        names -= _CLAIM_SET
        _clock_claim(clock, old, out, when)
    for name in names - _UNTIMED:
        value = out.get(name, MISSING)
        if not same(old.get(name, MISSING), value):
            _clock_field(clock, name, value, when)  # a removal too: when it was removed


def _clock_claim(clock: dict[str, Any], old: Mapping[str, Any], out: Mapping[str, Any], when: str) -> None:
    unit_old = {k: old[k] for k in CLAIM_UNIT if k in old}
    unit_new = {k: out[k] for k in CLAIM_UNIT if k in out}
    if unit_old != unit_new:
        clock["claim"] = [when, digest(unit_new)]


def _clock_field(clock: dict[str, Any], name: str, value: Any, when: str) -> None:
    clock[name] = [when, digest(value)]
    # entries of a nested key of a changed field no longer describe it
    for key in [k for k in clock if k.startswith(name + ".")]:
        del clock[key]
