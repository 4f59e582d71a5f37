"""The merge never makes a record this version's own parsers refuse.

Two records the edge accepts (each within every limit of git_handoff.core.state_tree) merge into
a record the edge accepts: a union of two capped lists keeps the newest `limit` entries,
a record that would still break a rule (its size) is decided whole, written last wins.
End to end (two divergent hostile heads on a bare remote, as a security review found
them) and as properties of the pure merge.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core import state_tree
from git_handoff.core.errors import InvalidState
from git_handoff.core.field_merge import union_in_time_order
from git_handoff.core.merge import merge_file
from git_handoff.core.model import LIST_LIMITS, MAX_RECORD_BYTES
from git_handoff.state.session_records import sessions_started
from tests.support.hostile import BLOB, Attacker, World, jbytes, make_world, put, task_path
from tests.support.repo import git, run
from tests.support.speed import examples
from tests.support.templates import Templates

CLONE_HEAD = "refs/harness/clones/0123456789abcdef/state"
# a relay that reads relay.json, runs one session whose agent only acknowledges, and stops
RELAY = ("relay", "--agent", "git handoff ack", "--max-idle-sessions", "1", "--ack-timeout", "10",
         "--max-launch-failures", "1", "-q")


@pytest.fixture
def world(tmp_path: Path, templates: Templates) -> Iterator[World]:
    yield from make_world(tmp_path, templates)


def _read(a: Attacker, node: dict[str, Any], path: str) -> dict[str, Any]:
    for part in path.split("/")[:-1]:
        node = node[part]
    _, oid = node[path.rsplit("/", 1)[1]]
    return json.loads(a.repo[oid].data)  # type: ignore[attr-defined, no-any-return]


def _relay(tag: str) -> tuple[str, bytes]:
    return "relay.json", jbytes({
        "state": "stopped", "host": "elsewhere", "pid": 4242, "started_at": "2026-07-01T09:00:00Z",
        "stopped_at": "2026-07-01T09:30:00Z", "reason": "x",
        "failures": [{"at": "2026-07-01T09:00:00Z", "what": f"{tag} {i}"} for i in range(100)],
        "updated_at": "2026-07-01T09:30:00Z"})


def _error_log(entries: int, width: int) -> Callable[[Attacker, dict[str, Any], str], tuple[str, bytes]]:
    def make(a: Attacker, node: dict[str, Any], tag: str) -> tuple[str, bytes]:
        path = task_path("schema")
        record = _read(a, node, path)
        record["error_log"] = [f"[2026-07-01T09:{i % 60:02d}:00Z] {tag} {i} ".ljust(width, "x")
                               for i in range(entries)]
        return path, jbytes(record)
    return make


CASES: dict[str, Callable[[Attacker, dict[str, Any], str], tuple[str, bytes]]] = {
    # 100 relay failures on each side (the limit): the union held 200
    "relay-failures": lambda a, node, tag: _relay(tag),
    # MAX_LIST error_log entries on each side: the union held 20,000
    "task-error-log": _error_log(10_000, 40),
    # few entries, but each side's record 600 KB: the union was more than a record may hold
    "task-record-bytes": _error_log(300, 2000),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_divergent_heads_within_limits_merge_into_a_readable_state(world: World, name: str) -> None:
    a = world.attacker
    base = a.state()
    heads = []
    for tag in ("one", "two"):
        node = a.state_node()
        path, raw = CASES[name](a, node, tag)
        put(node, path, (BLOB, a.blob(raw)))
        heads.append(a.commit(a.raw_tree(node), [base], f"[2026-07-01T10:00:00Z] [SESSION-0] INIT {tag}\n"))
    a.push(heads[0], "refs/harness/state")
    a.push(heads[1], CLONE_HEAD)

    res = run("sync", cwd=world.victim)
    assert res.rc == 0, res.err
    for args in (("status",), ("status", "--json"), ("list", "--json"), ("show", "schema"), RELAY):
        res = run(*args, cwd=world.victim)
        assert res.rc in (0, 1), (args, res.err)
        assert "more than" not in res.err, (args, res.err)
    # the victim pushed the merged state: an honest third clone takes it
    carol = world.root / "carol"
    git("clone", "-q", str(world.remote), str(carol), cwd=world.root)
    res = run("sync", cwd=carol)
    assert res.rc == 0, res.err
    res = run("status", "--json", cwd=carol)
    assert res.rc in (0, 1), res.err


# -- the pure merge: records within every limit on each side -------------------------------------

SESSION_PATH = "sessions/1.json"
DOC_PATH = "docs/1.json"
TASK_PATH = task_path("t1")
PATHS = {"task": TASK_PATH, "meta": "meta.json", "session": SESSION_PATH, "doc": DOC_PATH, "relay": "relay.json"}


def _ts(n: int) -> str:
    return f"2026-07-{1 + n // 86400 % 28:02d}T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"


def _entry(kind: str, name: str, tag: str, i: int, width: int) -> Any:
    """Entry `i` of list `name` of a `kind` record, written by `tag`, its text `width` long."""
    at = _ts(i * 7 + ord(tag[0]))
    words = f"{tag} {i} ".ljust(width, "w")
    if name == "depends_on":
        return f"d-{tag}-{i}"
    if name == "error_log":
        return f"[{at}] {words}"
    if name == "checkpoints":
        return {"step": i, "total": None, "description": words, "timestamp": at}
    if name == "failures":
        return {"at": at, "what": words}
    if name == "decisions":
        return {"what": words, "why": "because", "at": at}
    if name in ("failed",) or name.startswith("status."):
        return {"id": f"{tag}-{i}", "title": words[:500]}
    if name == "rejections":
        return {"session": i, "reason": words, "at": at}
    if name == "switches":
        return {"at": at, "session": i, "from": f"{tag}-{i}", "to": "codex", "reason": words}
    if name == "limited":
        return {"agent": f"{tag}-{i}", "until": at}
    return words  # completed, blockers, completed_this_session, files_changed


def _record(kind: str, lists: dict[str, list[Any]], when: int) -> dict[str, Any]:
    record: dict[str, Any]
    if kind == "task":
        record = {"id": "t1", "title": "task t1", "status": "pending", "priority": "P1", "depends_on": [],
                  "attempts": 0, "max_attempts": 3, "started_at_commit": None,
                  "validation": {"command": None, "timeout_seconds": 300}, "on_failure": {"cleanup": None},
                  "error_log": [], "checkpoints": [], "completed_at": None, "claimed_by": None,
                  "lease_expires_at": None, "created_at": _ts(0), "spec_ref": None, "order": 1,
                  "updated_at": _ts(when)}
    elif kind == "meta":
        record = {"created": _ts(0), "session_count": 3, "sessions_legacy": 1, "last_session": _ts(when)}
    elif kind == "relay":
        record = {"state": "stopped", "host": "h", "started_at": _ts(0), "updated_at": _ts(when)}
    else:
        record = {"session": 1, "worker": "w", "updated_at": _ts(when)}
    for name, entries in lists.items():
        if kind == "meta":  # sessions_by_clone: {clone: count}
            record[name] = {clone: count for clone, count in entries}
        elif "." in name:
            outer, inner = name.split(".")
            record.setdefault(outer, {})[inner] = entries
        else:
            record[name] = entries
    return record


def _counts(tag: str, i: int) -> tuple[str, int]:
    return f"{ord(tag[0]):08x}{i:08x}", 1 + (i * 31 + ord(tag[0])) % 97


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@st.composite
def _sides(draw: st.DrawFn) -> tuple[str, bytes | None, bytes, bytes]:
    """A path and its base, ours and theirs: records of one kind, each within every limit
    (lists up to their cap, texts up to what keeps the record within MAX_RECORD_BYTES)."""
    kind = draw(st.sampled_from(sorted(LIST_LIMITS)))
    names = draw(st.lists(st.sampled_from(sorted(LIST_LIMITS[kind])), min_size=1, max_size=2, unique=True))
    width = draw(st.sampled_from([8, 60, 1900]))  # every text within MAX_TEXT (2000)
    lists: dict[str, list[Any]] = {"b": [], "o": [], "t": []}
    built: dict[str, dict[str, list[Any]]] = {"b": {}, "o": {}, "t": {}}
    for name in names:
        limit = LIST_LIMITS[kind][name]
        # each record under the size limit, whatever the width of its entries
        fits = min(limit, (MAX_RECORD_BYTES // len(names) - 4000) // (width + 120))
        size = st.integers(0, fits) | st.just(fits)

        def make(tag: str, n: int, start: int = 0, name: str = name) -> list[Any]:
            if kind == "meta":
                return [_counts(tag, i) for i in range(start, start + n)]
            return [_entry(kind, name, tag, i, width) for i in range(start, start + n)]

        base = make("b", draw(size))
        for side in ("o", "t"):
            dropped = draw(st.integers(0, len(base)))  # the oldest the side let go of
            new = make(draw(st.sampled_from([side, "x"])), draw(size), draw(st.integers(0, 3)))
            entries = base[dropped:] + new
            lists[side] = entries[len(entries) - fits:] if len(entries) > fits else entries
            built[side][name] = lists[side]
        built["b"][name] = base
    times = draw(st.lists(st.integers(1, 10**6), min_size=3, max_size=3))
    raw = {side: _compact(_record(kind, built[side], when)) for side, when in zip("bot", times, strict=True)}
    return PATHS[kind], (raw["b"] if draw(st.booleans()) else None), raw["o"], raw["t"]


@settings(max_examples=examples(40), deadline=None)
@given(_sides())
def test_a_merge_of_records_within_the_limits_passes_the_edge_and_is_symmetric(
        sides: tuple[str, bytes | None, bytes, bytes]) -> None:
    path, base, ours, theirs = sides
    for raw in (ours, theirs) + ((base,) if base is not None else ()):
        state_tree.check_record(path, raw)  # the sides are within the limits
    one = merge_file(path, base, ours, theirs)
    other = merge_file(path, base, theirs, ours)
    assert one.data == other.data
    assert one.data is not None
    state_tree.check_record(path, one.data)
    if path == "meta.json":  # the sessions counted never go down
        merged = json.loads(one.data)
        assert sessions_started(merged) >= max(sessions_started(json.loads(ours)), sessions_started(json.loads(theirs)))


@pytest.mark.parametrize(("kind", "name"),
                         [(k, n) for k, fields in sorted(LIST_LIMITS.items()) for n in sorted(fields)])
def test_the_parser_keeps_each_list_to_the_cap_the_merge_keeps_to(kind: str, name: str) -> None:
    """model.LIST_LIMITS is the parsers' own table: a record of `limit` entries passes, one
    more is refused, by name."""
    limit = LIST_LIMITS[kind][name]
    entries = [_counts("a", i) if kind == "meta" else _entry(kind, name, "a", i, 4) for i in range(limit + 1)]
    state_tree.check_record(PATHS[kind], _compact(_record(kind, {name: entries[:limit]}, 1)))
    with pytest.raises(InvalidState, match=f"{limit + 1} entries, more than {limit}"):
        state_tree.check_record(PATHS[kind], _compact(_record(kind, {name: entries}, 1)))


def test_a_union_past_its_limit_keeps_the_newest_entries_whichever_side_is_ours() -> None:
    ours = [{"at": _ts(i), "what": f"o{i}"} for i in range(0, 200, 2)]
    theirs = [{"at": _ts(i), "what": f"t{i}"} for i in range(1, 200, 2)]
    merged = union_in_time_order([], ours, theirs, 100)
    assert merged == union_in_time_order([], theirs, ours, 100)
    assert [e["what"] for e in merged] == [("o" if i % 2 == 0 else "t") + str(i) for i in range(100, 200)]
