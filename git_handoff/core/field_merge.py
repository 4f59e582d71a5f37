"""Two sides of one JSON record merged against their base, field by field.

The rules of one record; git_handoff.core.merge chooses, path by path, which record
kind a file holds and calls these (and merges what is not a JSON object itself):

- a task (merge_task): per field. The claim fields (status, claimed_by, lease,
  started_at_commit, completed_at, ...) move together as one unit, so a task never
  ends up with one side's status and the other's claimer: `completed` wins, else the
  unit written last (ties by a stable order of the values). `attempts` takes the
  maximum; `error_log` and `checkpoints` are unions in time order; `depends_on` is a
  set merge; any other field: written last wins.
- meta.json (merge_objects, numbers_max): numbers take the maximum, the rest as any record.
- any other JSON object (merge_objects): per key, recursively for objects, lists are
  unions in time order, other values: written last wins.

Limits: a union of a capped list (model.LIST_LIMITS: relay failures, a task's error_log
and checkpoints, a session's decisions, ...) keeps the newest `limit` entries, a set
merge (depends_on) the first `limit`, meta.json's counters by clone the `limit` largest
(the rest counted in `sessions_legacy`, so the sum never goes down). Each bound depends
only on the merged values, so the merge stays symmetric.

"Written last" uses the record's hybrid logical clock stamp `hlc` (git_handoff.core.hlc:
a write stamps later than everything the record carried, so a change made after
seeing another clone's change wins whatever the wall clocks say); records from
before HLCs fall back to `updated_at` (or another timestamp they carry), ordered
with the stamps by milliseconds. When a field was decided by a merge, the record
keeps `field_clock` {field: [time, digest]} so that the decision survives later
merges in any order. The merged record's `hlc` is the later of the two.

Pure: plain data in and out, no git, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from git_handoff.core import hlc, model

META_PATH = "meta.json"
# The record-write stamp and the field names it treats apart live in git_handoff.core.hlc (a
# command that writes records but never merges does not import this module).
CLOCK = hlc.CLOCK
CLAIM_UNIT = hlc.CLAIM_UNIT
TASK_LOGS = hlc.TASK_LOGS
TASK_SETS = hlc.TASK_SETS
TASK_MAX = hlc.TASK_MAX
NOT_TIMED = hlc.NOT_TIMED
TASK_ORDER = (
    "id", "title", "status", "priority", "depends_on", "attempts", "max_attempts",
    "started_at_commit", "validation", "on_failure", "error_log", "checkpoints", "completed_at",
    "claimed_by", "lease_expires_at", "created_at", "spec_ref", "order", "updated_at", hlc.FIELD,
)
RECORD_TIME_KEYS = (hlc.FIELD, "updated_at", "ended_at", "written_at", "created_at", "started_at",
                    "timestamp", "ts", "at")
ITEM_TIME_KEYS = ("timestamp", "ts", "at", "time", "created_at", "started_at", "updated_at", "written_at")
_TS = re.compile(r"\[?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)")

_MISSING = hlc.MISSING


class ConflictJson(TypedDict):
    """A conflict as `sync --json` shows it."""

    path: str
    record: str | None
    field: str
    kept: Any
    dropped: Any


@dataclass(frozen=True)
class Conflict:
    """A field both sides changed differently, and what the merge kept."""

    path: str
    field: str
    kept: Any
    dropped: Any
    record: str | None = None  # task id, for tasks

    def to_json(self) -> ConflictJson:
        return {"path": self.path, "record": self.record, "field": self.field, "kept": self.kept,
                "dropped": self.dropped}


# -- helpers --------------------------------------------------------------------------


canonical = hlc.canonical


def record_time(record: Mapping[str, Any]) -> str:
    for key in RECORD_TIME_KEYS:
        value = record.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def item_time(item: Any) -> str:
    if isinstance(item, dict):
        for key in ITEM_TIME_KEYS:
            value = item.get(key)
            if isinstance(value, str) and value:
                return value
        return ""
    if isinstance(item, str):
        m = _TS.match(item)
        return m.group(1) if m else ""
    return ""


def union_in_time_order(base: list[Any], ours: list[Any], theirs: list[Any], limit: int | None = None
                        ) -> list[Any]:
    """Multiset union (an entry kept as often as the side having it most often): the
    base's entries in base order, then the new ones by (time, text); at most `limit`
    entries, the last ones."""
    counts_o = Counter(canonical(x) for x in ours)
    counts_t = Counter(canonical(x) for x in theirs)
    wanted = {k: max(counts_o.get(k, 0), counts_t.get(k, 0)) for k in set(counts_o) | set(counts_t)}
    values = {canonical(x): x for x in (*ours, *theirs)}
    out: list[Any] = []
    emitted: Counter[str] = Counter()
    for item in base:
        key = canonical(item)
        if emitted[key] < wanted.get(key, 0):
            out.append(values[key])
            emitted[key] += 1
    rest: list[tuple[str, str]] = []
    for key, n in wanted.items():
        rest.extend([(item_time(values[key]), key)] * (n - emitted[key]))
    rest.sort()
    out.extend(values[key] for _, key in rest)
    if limit is not None and len(out) > limit:
        # Two sides within the limit can hold up to twice it together, which the edge would
        # refuse (and every clone after this one with it). The entries are in time order
        # (the base's, which both sides had, then the new ones by time): the oldest go, as
        # each writer of a capped log drops its oldest (relay failures[-N:]). The order is
        # the same whichever side is ours, so the result is too.
        out = out[len(out) - limit:]
    return out


def set_merge(base: list[Any], ours: list[Any], theirs: list[Any], limit: int | None = None) -> list[Any]:
    """3-way set merge: an entry of the base stays unless a side removed it; an entry
    either side added is kept; at most `limit` entries, the first ones (those of the
    base, then the added ones in their stable order)."""
    b = {canonical(x) for x in base}
    o = {canonical(x): x for x in ours}
    t = {canonical(x): x for x in theirs}
    keep_base = [x for x in base if canonical(x) in o and canonical(x) in t]
    added = sorted((set(o) | set(t)) - b)
    values = {**o, **t}
    seen: set[str] = set()
    out = []
    for x in keep_base:
        k = canonical(x)
        if k not in seen:
            seen.add(k)
            out.append(x)
    out.extend(values[k] for k in added)
    if limit is not None and len(out) > limit:
        out = out[:limit]  # what the edge accepts; the order is the same from either side
    return out


def _largest_counts(counts: dict[str, Any], limit: int) -> tuple[dict[str, Any], int]:
    """`counts` ({key: count}) bounded to its `limit` largest counts (ties: the larger key),
    in key order, and the sum of the counts left out."""
    ranked = sorted(counts.items(), key=lambda kv: (_is_num(kv[1]), kv[1] if _is_num(kv[1]) else 0, kv[0]),
                    reverse=True)
    dropped = sum(v for _, v in ranked[limit:] if _is_num(v))
    return dict(sorted(ranked[:limit])), int(dropped)


def _later(a: str, b: str) -> str:
    return a if hlc.key(a) >= hlc.key(b) else b


def _updated_at(ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> str:
    """The merged record's `updated_at` (both sides have one): the side stamped later by
    the hybrid clock (what a fast-forward would keep), else the later time."""
    o, t = ours.get(hlc.FIELD), theirs.get(hlc.FIELD)
    if hlc.is_stamp(o) and hlc.is_stamp(t) and o != t:
        return str(ours["updated_at"] if hlc.key(o) > hlc.key(t) else theirs["updated_at"])
    return str(max(ours["updated_at"], theirs["updated_at"]))


def _pick(ours_val: Any, ours_time: str, theirs_val: Any, theirs_time: str) -> tuple[Any, str]:
    """Written last wins; a tie goes to the larger canonical value (a stable order)."""
    ko = (hlc.key(ours_time), _canon(ours_val))
    kt = (hlc.key(theirs_time), _canon(theirs_val))
    return (ours_val, ours_time) if ko >= kt else (theirs_val, theirs_time)


_canon = hlc.canon
_eq = hlc.same
_digest = hlc.digest


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- records --------------------------------------------------------------------------


class _RecordMerge:
    """Merge of one JSON object record, field by field (nested objects key by key)."""

    def __init__(self, path: str, base: dict[str, Any] | None, ours: dict[str, Any], theirs: dict[str, Any],
                 record: str | None = None) -> None:
        self.path = path
        self.limits = list_limits(path)  # {field: most entries} the edge allows this record
        self.dropped = 0  # counts left out of a counters object bounded to its limit
        self.base = base or {}
        self.ours = ours
        self.theirs = theirs
        self.record = record
        self.conflicts: list[Conflict] = []
        self.clock: dict[str, list[str]] = {}
        self.top = max(record_time(ours), record_time(theirs))
        self.counters = False  # numbers are counters (meta.json): the maximum, not decided by time
        self.stamped = hlc.is_stamp(ours.get(hlc.FIELD)) and hlc.is_stamp(theirs.get(hlc.FIELD))
        # every write of such a record stamps the fields it changed (hlc.stamp_write; not
        # meta.json's, stamped as a whole): a field without an entry still has the value
        # the record was created with
        self.tracked = self.stamped and path != META_PATH

    def stamp(self, name: str, when: str, value: Any) -> None:
        self.clock[name] = [when, _digest(value)]

    def lww(self, name: str, o: Any, t: Any, prefer: Any = None) -> Any:
        to = field_time(self.ours, name, o, self.tracked)
        tt = field_time(self.theirs, name, t, self.tracked)
        if prefer is not None and prefer(o) != prefer(t):
            chosen, when = (o, to) if prefer(o) > prefer(t) else (t, tt)
        else:
            chosen, when = _pick(o, to, t, tt)
        dropped = t if chosen is o else o
        self.stamp(name, when, chosen)
        self.conflicts.append(Conflict(
            self.path, name,
            None if chosen is _MISSING else chosen,
            None if dropped is _MISSING else dropped,
            self.record,
        ))
        return chosen

    def unit(self, name: str, keys: Iterable[str], *, prefer: Any = None) -> dict[str, Any]:
        """Merge `keys` as one unit; returns the chosen {key: value} (missing keys left out)."""
        keys = tuple(keys)

        def take(rec: Mapping[str, Any]) -> dict[str, Any]:
            return {k: rec[k] for k in keys if k in rec}

        b, o, t = take(self.base), take(self.ours), take(self.theirs)
        if o == t or t == b or o == b:
            return dict(self.keep(name, b, o, t))
        return dict(self.lww(name, o, t, prefer))

    def keep(self, name: str, b: Any, o: Any, t: Any) -> Any:
        """The value when at most one side changed it; remembers when it was written,
        so that a later merge with a third replica decides as if it saw all three.
        (Records stamped by the hybrid clock carry their writes' field times already.)"""
        if self.stamped:
            return o if _eq(o, t) or _eq(t, b) else t
        if _eq(o, t):
            if not _eq(o, b):
                self.stamp(name, _later(field_time(self.ours, name, o), field_time(self.theirs, name, t)), o)
            return o
        if _eq(t, b):
            self.stamp(name, field_time(self.ours, name, o), o)
            return o
        self.stamp(name, field_time(self.theirs, name, t), t)
        return t

    def key(self, name: str, b: Any, o: Any, t: Any, how: str) -> Any:
        """Merge one value; returns _MISSING when the result has none."""
        ot, ob = _eq(o, t), _eq(o, b)
        if ot and ob:
            return o
        if isinstance(o, dict) and isinstance(t, dict):
            return self.object(name, b, o, t, how)
        if ot or ob or _eq(t, b):
            return self.keep(name, b, o, t)
        return self.both_changed(name, b, o, t, how)

    def object(self, name: str, b: Any, o: dict[str, Any], t: dict[str, Any], how: str) -> dict[str, Any]:
        """Two objects merged key by key (what the edge allows of them)."""
        bd = b if isinstance(b, dict) else {}
        inner = _nested_rule(how)
        out = {}
        for k in sorted(set(o) | set(t)):
            v = self.key(f"{name}.{k}", bd.get(k, _MISSING), o.get(k, _MISSING), t.get(k, _MISSING), inner)
            if v is not _MISSING:
                out[k] = v
        limit = self.limits.get(name)
        if limit is not None and len(out) > limit:  # counters by clone: see _largest_counts
            out, dropped = _largest_counts(out, limit)
            self.dropped += dropped
        return out

    def both_changed(self, name: str, b: Any, o: Any, t: Any, how: str) -> Any:
        """A value both sides changed, differently, and not two objects."""
        merged = _combined(b, o, t, how, self.limits.get(name))
        return self.lww(name, o, t) if merged is _MISSING else merged

    def finish(self, out: dict[str, Any]) -> dict[str, Any]:
        clock: dict[str, list[str]] = {}
        for rec in (self.ours, self.theirs):
            old = rec.get(CLOCK)
            if not isinstance(old, dict):
                continue
            for name, entry in old.items():
                if not (isinstance(entry, list) and len(entry) == 2):
                    continue
                if name in self.clock:
                    continue
                if entry[1] == _digest(_lookup(out, name)):
                    if name not in clock or hlc.key(str(entry[0])) > hlc.key(clock[name][0]):
                        clock[name] = [str(entry[0]), str(entry[1])]
        clock.update(self.clock)
        # fields not decided by time (unions, maxima) need no entry; a record stamped by
        # a hybrid clock keeps every entry (each local write adds one per field it changed,
        # git_handoff.core.hlc.stamp_write), so a field's time stays exact when the record's
        # time moves on; a record from before HLCs leaves out what its own time says
        top = record_time(out)
        top_key = hlc.key(top)
        stamped = hlc.is_stamp(out.get(hlc.FIELD))
        clock = {k: v for k, v in clock.items() if (stamped or hlc.key(v[0]) < top_key)
                 and k.split(".")[0] not in NOT_TIMED
                 and not (self.counters and isinstance(_lookup(out, k.split(".")[0]), (int, float, dict)))}
        if clock:
            out[CLOCK] = dict(sorted(clock.items()))
        else:
            out.pop(CLOCK, None)
        return out


def _nested_rule(how: str) -> str:
    """The rule of the keys of an object merged by `how`: unions and maxima go down
    to the keys, any other rule is written-last-wins there."""
    return how if how in ("union", "max") else "lww"


def _combined(b: Any, o: Any, t: Any, how: str, limit: int | None) -> Any:
    """Two changed values that `how` merges without a winner (lists as sets or unions,
    numbers by maximum), or _MISSING: written last wins."""
    if isinstance(o, list) and isinstance(t, list):
        bl = b if isinstance(b, list) else []
        if how == "set":
            return set_merge(bl, o, t, limit)
        if how in ("log", "union", "max"):
            return union_in_time_order(bl, o, t, limit)
    if how == "max" and _is_num(o) and _is_num(t):
        return max(o, t)
    return _MISSING


def field_time(record: Mapping[str, Any], name: str, value: Any, tracked: bool = False) -> str:
    """When `record` got this value of field (or unit) `name`: its clock entry if the
    value is still the one the clock recorded, else the record's own time; or, for a
    record whose writes stamp each field they change (`tracked`), when it was created.

    That last case matters when two sides merge without the record in their base (a
    criss-cross history whose chosen merge base predates the record): a field one side
    never changed must lose to the other side's change of it, however late the first
    side wrote some other field."""
    clock = record.get(CLOCK)
    if isinstance(clock, dict):
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            prefix = ".".join(parts[:n])
            entry = clock.get(prefix)
            current = value if n == len(parts) else _lookup(record, prefix)
            if isinstance(entry, list) and len(entry) == 2 and entry[1] == _digest(current):
                return str(entry[0])
    return created_time(record) if tracked else record_time(record)


def created_time(record: Mapping[str, Any]) -> str:
    """When a stamped record was created, as best it says: its `created_at`, unless that
    is later than its own stamp (a creation is never later than any write of the record:
    a crafted far-future `created_at` is not believed); "" (before everything) if it
    carries no time."""
    times = [t for t in (record.get("created_at"), record.get(hlc.FIELD)) if isinstance(t, str) and t]
    return min(times, key=hlc.key) if times else ""


def _lookup(rec: Mapping[str, Any], name: str) -> Any:
    if name == "claim":
        return {k: rec[k] for k in CLAIM_UNIT if k in rec}
    value: Any = rec
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def merge_objects(path: str, base: dict[str, Any] | None, ours: dict[str, Any], theirs: dict[str, Any],
                  *, numbers_max: bool = False) -> tuple[dict[str, Any], list[Conflict]]:
    """Any JSON object: per key; objects recursively, lists as unions, numbers of
    counters the maximum, the rest written-last-wins."""
    m = _RecordMerge(path, base, ours, theirs)
    m.counters = numbers_max
    b = base or {}
    out: dict[str, Any] = {}
    for key in sorted((set(ours) | set(theirs)) - {CLOCK}):
        o, t = ours.get(key, _MISSING), theirs.get(key, _MISSING)
        rule = _object_rule(key, o, t, numbers_max=numbers_max)
        if rule == "updated_at":
            out[key] = _updated_at(ours, theirs)
        elif rule == "hlc":
            out[key] = _later(o, t)
        else:
            v = m.key(key, b.get(key, _MISSING), o, t, rule)
            if v is not _MISSING:
                out[key] = v
    if path == META_PATH:
        _keep_sessions_counted(out, ours, theirs, m.dropped, numbers_max=numbers_max)
    return m.finish(out), m.conflicts


def _object_rule(key: str, o: Any, t: Any, *, numbers_max: bool) -> str:
    """How merge_objects merges the top-level `key` of two objects: "updated_at" and
    "hlc" (the record's own times: the later), else the rule for _RecordMerge.key."""
    if key == "updated_at" and isinstance(o, str) and isinstance(t, str):
        return "updated_at"
    if key == hlc.FIELD and isinstance(o, str) and isinstance(t, str):
        return "hlc"
    # meta.json: counters, and counters by clone (sessions_by_clone), take the maximum
    counters = (_is_num(o) and _is_num(t)) or (isinstance(o, dict) and isinstance(t, dict))
    return "max" if numbers_max and counters else "union"


def _keep_sessions_counted(out: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any], dropped: int,
                           *, numbers_max: bool) -> None:
    """meta.json merged: its `sessions_legacy` raised so that the sessions counted (the
    next session's number) never go down, in either order of the sides."""
    if dropped:
        # the sessions of clones left out of sessions_by_clone still count: the sum (the
        # next session's number) never goes down, so no clone mints a number twice
        legacy = out.get("sessions_legacy")
        legacy = legacy if isinstance(legacy, int) and not isinstance(legacy, bool) else 0
        out["sessions_legacy"] = min(model.MAX_COUNT, legacy + dropped)
    if numbers_max:
        # per-key maxima can still sum to less than one side (a clone counted in one side's
        # sessions_by_clone and, dropped at its cap, in the other's sessions_legacy): the
        # difference goes to sessions_legacy, so the sum never goes down, in either order
        floor = max(_sessions_counted(ours), _sessions_counted(theirs))
        short = floor - _sessions_counted(out)
        if short > 0:
            out["sessions_legacy"] = min(model.MAX_COUNT, _count(out.get("sessions_legacy")) + short)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _sessions_counted(meta: dict[str, Any]) -> int:
    by_clone = meta.get("sessions_by_clone")
    clones = sum(_count(v) for v in by_clone.values()) if isinstance(by_clone, dict) else 0
    return _count(meta.get("sessions_legacy")) + clones


def merge_task(path: str, base: dict[str, Any] | None, ours: dict[str, Any], theirs: dict[str, Any]
               ) -> tuple[dict[str, Any], list[Conflict]]:
    task_id = ours.get("id") or theirs.get("id")
    m = _RecordMerge(path, base, ours, theirs, str(task_id) if task_id is not None else None)
    b = base or {}
    out: dict[str, Any] = {}
    out.update(m.unit("claim", CLAIM_UNIT, prefer=lambda u: u.get("status") == "completed"))
    for key in (set(ours) | set(theirs)) - set(CLAIM_UNIT) - {CLOCK, "updated_at", hlc.FIELD}:
        if key in TASK_MAX:
            how = "max"
        elif key in TASK_LOGS:
            how = "log"
        elif key in TASK_SETS:
            how = "set"
        else:
            how = "lww"
        v = m.key(key, b.get(key, _MISSING), ours.get(key, _MISSING), theirs.get(key, _MISSING), how)
        if v is not _MISSING:
            out[key] = v
    times = [x for x in (ours.get("updated_at"), theirs.get("updated_at")) if isinstance(x, str)]
    if times:
        out["updated_at"] = max(times) if len(times) == 1 else _updated_at(ours, theirs)
    stamps = [x for x in (ours.get(hlc.FIELD), theirs.get(hlc.FIELD)) if isinstance(x, str)]
    if stamps:
        out[hlc.FIELD] = stamps[0] if len(stamps) == 1 else _later(stamps[0], stamps[1])
    out = m.finish(out)
    order = {k: n for n, k in enumerate(TASK_ORDER)}
    ordered = dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
    return ordered, m.conflicts


def list_limits(path: str) -> Mapping[str, int]:
    """The capped lists of the record at `path` and their caps (model.LIST_LIMITS, the
    parsers' own table): {field or dotted field: most entries}."""
    kind = _KINDS.get(path) or _KINDS.get(path.split("/", 1)[0] + "/")
    return model.LIST_LIMITS.get(kind, {}) if kind else {}


# a path of the state and the kind of record it holds (state_tree.kind_of, by its first part)
_KINDS = {"meta.json": "meta", "relay.json": "relay", "tasks/": "task", "sessions/": "session", "docs/": "doc"}
