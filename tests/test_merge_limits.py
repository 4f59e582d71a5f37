"""The merge never makes a record this version's own parsers refuse.

Two records the edge accepts (each within every limit of git_handoff.records) merge into
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

from tests.hostile import BLOB, Attacker, World, jbytes, make_world, put, task_path
from tests.support.repo import git, run
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
