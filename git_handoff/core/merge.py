"""Pure 3-way merge of two state snapshots against their common base, path by path.

Everything here takes and returns plain data (paths, bytes, JSON values), so the
rules can be checked with property tests. The rules are chosen so that the result
does not depend on which side is "ours": merge(b, x, y) == merge(b, y, x), and
replicas forked from one base merge to the same state in any order.

Per path (one blob per record):
- changed on one side only: that side's version (a delete included);
- deleted on one side, changed on the other: the changed record survives;
- changed on both: merged by kind, chosen by path prefix:
  - tasks/...json, meta.json and any other JSON object: field by field, by the rules
    of git_handoff.core.field_merge;
  - config.toml: per key, written last wins (ties by value), comments of one side kept;
  - format: the higher version;
  - anything else: the larger blob (a stable rule), reported.

Limits: the merge never makes a record the edge (git_handoff.core.state_tree) refuses when
both sides pass it. The field rules keep every capped list to its cap; a record that
would still be larger than a record may be (MAX_RECORD_BYTES: each side's fields kept,
but together too big) is decided whole, written last wins (pick_record). Each bound
depends only on the merged values, so the merge stays symmetric.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from git_handoff.core import hlc, model
from git_handoff.core.field_merge import (
    META_PATH,
    Conflict,
    merge_objects,
    merge_task,
    record_time,
    union_in_time_order,
)

TASK_PREFIX = "tasks/"
CONFIG_PATH = "config.toml"
FORMAT_PATH = "format"

_MISSING = hlc.MISSING


class LostClaim(TypedDict):
    """A claim this side held that a merge gave to someone else or took away."""

    task: str
    worker: Any  # claimed_by as this side had it
    now: Any  # the task's status after the merge
    claimed_by: Any  # and its claimer, if any


@dataclass
class MergedFile:
    """Result of merging one path."""

    data: bytes | None
    conflicts: list[Conflict] = field(default_factory=list)


# -- a local write -------------------------------------------------------------------


stamp_write = hlc.stamp_write  # where it always was, for callers that merge too


# -- non-JSON kinds -------------------------------------------------------------------


def _merge_format(ours: bytes, theirs: bytes) -> bytes:
    def version(raw: bytes) -> int:
        tail = raw.decode(errors="replace").strip().rpartition(" ")[2]
        return int(tail) if tail.isdigit() else -1

    return max((ours, theirs), key=lambda raw: (version(raw), raw))


def _merge_toml(path: str, base: bytes | None, ours: bytes, theirs: bytes) -> MergedFile:
    import tomllib
    try:
        b = tomllib.loads(base.decode()) if base else {}
        o = tomllib.loads(ours.decode())
        t = tomllib.loads(theirs.decode())
    except (ValueError, UnicodeDecodeError):
        return _merge_opaque(path, ours, theirs)
    merged, conflicts = merge_objects(path, b, o, t)
    import tomlkit

    # The larger text is the template (a stable choice), so comments of one side survive.
    template = max(ours, theirs)
    doc = tomlkit.parse(template.decode())
    for key in list(doc.keys()):
        if key not in merged:
            del doc[key]
    for key, value in merged.items():
        if doc.get(key) != value:
            doc[key] = value
    return MergedFile(tomlkit.dumps(doc).encode(), conflicts)


def _merge_opaque(path: str, ours: bytes, theirs: bytes) -> MergedFile:
    kept, dropped = max(ours, theirs), min(ours, theirs)
    return MergedFile(kept, [Conflict(path, "*", _show(kept), _show(dropped))])


def _show(raw: bytes) -> str:
    text = raw.decode(errors="replace")
    return text if len(text) <= 80 else text[:77] + "..."


def _load_json(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return _MISSING



def pick_record(path: str, ours: bytes, theirs: bytes) -> MergedFile:
    """The whole record of one side, for a merge whose result the edge would refuse
    (too large, or any other rule two sides broke together): the one written last (its
    hybrid clock stamp, else its time), a tie to the larger blob; symmetric, as the
    field-by-field merge is, and each side passed the edge when it came."""
    def rank(raw: bytes) -> tuple[tuple[int, int, str, str], bytes]:
        data = _load_json(raw)
        when = record_time(data) if isinstance(data, dict) else ""
        return hlc.key(when), raw

    kept, dropped = (ours, theirs) if rank(ours) >= rank(theirs) else (theirs, ours)
    return MergedFile(kept, [Conflict(path, "*", _show(kept), _show(dropped))])


def _bounded(path: str, ours: bytes, theirs: bytes, outcome: MergedFile) -> MergedFile:
    """`outcome`, unless its record is larger than a record may be (two sides' fields,
    each side within the size, together beyond it): then pick_record."""
    if outcome.data is not None and len(outcome.data) > model.MAX_RECORD_BYTES:
        return pick_record(path, ours, theirs)
    return outcome


def dump_task(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()


def dump_record(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode()


# -- one path, a whole state ----------------------------------------------------------


def merge_file(path: str, base: bytes | None, ours: bytes | None, theirs: bytes | None) -> MergedFile:
    """Merge one path of the state tree (None: absent on that side)."""
    if ours == theirs:
        return MergedFile(ours)
    if ours == base:
        return MergedFile(theirs)
    if theirs == base:
        return MergedFile(ours)
    if ours is None or theirs is None:
        # deleted on one side, changed on the other: the change survives
        return MergedFile(ours if ours is not None else theirs)
    if path == FORMAT_PATH:
        return MergedFile(_merge_format(ours, theirs))
    if path.endswith(".toml"):
        return _bounded(path, ours, theirs, _merge_toml(path, base, ours, theirs))
    b, o, t = _load_json(base), _load_json(ours), _load_json(theirs)
    if o is _MISSING or t is _MISSING:
        return _merge_opaque(path, ours, theirs)
    if b is _MISSING:
        b = None
    if isinstance(o, dict) and isinstance(t, dict):
        bd = b if isinstance(b, dict) else None
        if path.startswith(TASK_PREFIX):
            merged, conflicts = merge_task(path, bd, o, t)
            return _bounded(path, ours, theirs, MergedFile(dump_task(merged), conflicts))
        merged, conflicts = merge_objects(path, bd, o, t, numbers_max=path == META_PATH)
        return _bounded(path, ours, theirs, MergedFile(dump_record(merged), conflicts))
    if isinstance(o, list) and isinstance(t, list):
        merged_list = union_in_time_order(b if isinstance(b, list) else [], o, t)
        return _bounded(path, ours, theirs, MergedFile(dump_record(merged_list)))
    return _merge_opaque(path, ours, theirs)


def merge_states(base: Mapping[str, bytes], ours: Mapping[str, bytes], theirs: Mapping[str, bytes]
                 ) -> tuple[dict[str, bytes], list[Conflict]]:
    """Merge two whole states ({path: bytes}) against their base."""
    out: dict[str, bytes] = {}
    conflicts: list[Conflict] = []
    for path in sorted(set(base) | set(ours) | set(theirs)):
        result = merge_file(path, base.get(path), ours.get(path), theirs.get(path))
        conflicts.extend(result.conflicts)
        if result.data is not None:
            out[path] = result.data
    return out, conflicts


def lost_claims(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[LostClaim]:
    """Tasks (as JSON objects, by id) this side held in progress that the merge gave to
    someone else or took away: [{task, worker, now}]."""
    out: list[LostClaim] = []
    for task_id, old in before.items():
        if old.get("status") != "in_progress" or not old.get("claimed_by"):
            continue
        new = after.get(task_id)
        if new is None:
            continue
        if new.get("status") == "in_progress" and new.get("claimed_by") == old.get("claimed_by"):
            continue
        if new.get("status") == "completed" and new.get("claimed_by") == old.get("claimed_by"):
            continue
        out.append({"task": task_id, "worker": old.get("claimed_by"), "now": new.get("status"),
                    "claimed_by": new.get("claimed_by")})
    return out
