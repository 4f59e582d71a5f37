"""Property tests of the pure state merge (git_handoff.core.merge)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core import hlc
from git_handoff.core.merge import merge_file, merge_states
from git_handoff.core.model import CLAIM_FIELDS
from tests.support.speed import examples

TASK_IDS = ["a", "b", "c"]


def tpath(task_id: str) -> str:
    return f"tasks/0/0/{task_id}.json"


def ts(n: int) -> str:
    return f"2026-07-01T10:{n // 60:02d}:{n % 60:02d}Z"


def task(task_id: str) -> dict[str, Any]:
    return {
        "id": task_id, "title": f"task {task_id}", "status": "pending", "priority": "P1", "depends_on": [],
        "attempts": 0, "max_attempts": 3, "started_at_commit": None,
        "validation": {"command": "true", "timeout_seconds": 300}, "on_failure": {"cleanup": None},
        "error_log": [], "checkpoints": [], "completed_at": None, "claimed_by": None,
        "lease_expires_at": None, "created_at": ts(0), "spec_ref": None, "order": 1, "updated_at": ts(0),
    }


def dump(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2) + "\n").encode()


def base_state() -> dict[str, bytes]:
    state = {tpath(t): dump(task(t)) for t in TASK_IDS}
    state["meta.json"] = dump({"session_count": 0, "last_session": None})
    state["format"] = b"git-handoff-state 1\n"
    return state


# One edit: (kind, task, value). Applied by a replica with its own clock.
Edit = tuple[str, str, int]  # (kind, task id, value): one step of a replica
EDITS = st.tuples(
    st.sampled_from(["title", "priority", "claim", "release", "complete", "fail", "checkpoint", "timeout",
                     "command", "add", "session", "doc", "dep", "tokens"]),
    st.sampled_from(TASK_IDS),
    st.integers(0, 3),
)


def apply_edits(state: dict[str, bytes], edits: list[Edit], replica: int,
                start: int) -> dict[str, bytes]:
    out = dict(state)
    for step, (kind, tid, value) in enumerate(edits):
        now = ts(start + step * 4 + replica)
        if kind == "session":
            meta = json.loads(out["meta.json"])
            meta["session_count"] += 1
            meta["last_session"] = now
            out["meta.json"] = dump(meta)
            continue
        if kind == "doc":
            path = f"docs/{value}.json"
            doc: dict[str, Any] = json.loads(out[path]) if path in out else {"decisions": [], "created_at": now}
            doc["decisions"].append({"what": f"r{replica} {step}", "at": now})
            doc["updated_at"] = now
            out[path] = dump(doc)
            continue
        if kind == "add":
            new_id = f"n{replica}-{step}"
            t = task(new_id)
            t["created_at"] = t["updated_at"] = now
            out[tpath(new_id)] = dump(t)
            continue
        t = json.loads(out[tpath(tid)])
        if kind == "title":
            t["title"] = f"title {value} by {replica}"
        elif kind == "priority":
            t["priority"] = f"P{value % 3}"
        elif kind == "timeout":
            t["validation"]["timeout_seconds"] = 100 + value
        elif kind == "command":
            t["validation"]["command"] = f"check {value}"
        elif kind == "tokens":  # a session's share charged (ops/usage.py)
            t["tokens"] = t.get("tokens", 0) + 10 * (value + 1)
        elif kind == "dep":
            other = TASK_IDS[value % 3]
            if other != tid and other not in t["depends_on"]:
                t["depends_on"].append(other)
        elif t["status"] == "completed":
            continue
        elif kind == "claim":
            t.update(status="in_progress", claimed_by=f"w{replica}", lease_expires_at=now, started_at_commit="c")
        elif kind == "release":
            t.update(status="pending", claimed_by=None, lease_expires_at=None)
        elif kind == "complete":
            t.update(status="completed", completed_at=now, claimed_by=None, lease_expires_at=None)
        elif kind == "fail":
            t.update(status="failed", claimed_by=None, lease_expires_at=None, attempts=t["attempts"] + 1)
            t["error_log"].append(f"[{now}] [TEST_FAIL] failed by {replica}")
        elif kind == "checkpoint":
            t["checkpoints"].append({"step": value, "total": 3, "description": f"r{replica}", "timestamp": now})
        t["updated_at"] = now
        out[tpath(tid)] = dump(t)
    return out


edit_lists = st.lists(EDITS, max_size=6)


def replicas(base: dict[str, bytes], *edit_sets: list[tuple[str, str, int]]) -> list[dict[str, bytes]]:
    return [apply_edits(base, edits, n + 1, 100) for n, edits in enumerate(edit_sets)]


def merged(base: dict[str, bytes], a: dict[str, bytes], b: dict[str, bytes]) -> dict[str, bytes]:
    return merge_states(base, a, b)[0]


def tasks_of(state: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    return {p: json.loads(v) for p, v in state.items() if p.startswith("tasks/")}


@settings(max_examples=examples(150), deadline=None)
@given(edit_lists, edit_lists)
def test_commutative(e1: list[Edit], e2: list[Edit]) -> None:
    base = base_state()
    x, y = replicas(base, e1, e2)
    assert merged(base, x, y) == merged(base, y, x)


@settings(max_examples=examples(100), deadline=None)
@given(edit_lists, edit_lists)
def test_idempotent(e1: list[Edit], e2: list[Edit]) -> None:
    base = base_state()
    x, y = replicas(base, e1, e2)
    assert merged(base, x, x) == x
    assert merged(base, x, base) == x
    m = merged(base, x, y)
    assert merged(base, m, m) == m
    # merging again what was already merged changes nothing
    assert merged(x, m, x) == m


@settings(max_examples=examples(150), deadline=None)
@given(edit_lists, edit_lists)
def test_nothing_lost(e1: list[Edit], e2: list[Edit]) -> None:
    base = base_state()
    x, y = replicas(base, e1, e2)
    m = tasks_of(merged(base, x, y))
    for side in (tasks_of(x), tasks_of(y)):
        for path, t in side.items():
            assert path in m, "a task disappeared"
            got = m[path]
            if t["status"] == "completed":
                assert got["status"] == "completed", "a completed task was lost"
            assert got["attempts"] >= t["attempts"], "attempts decreased"
            for log in ("error_log", "checkpoints"):
                have = Counter(json.dumps(e, sort_keys=True) for e in got[log])
                for entry, n in Counter(json.dumps(e, sort_keys=True) for e in t[log]).items():
                    assert have[entry] >= n, f"{log} lost an entry"
            # the claim fields move together
            if got["status"] == "in_progress":
                assert got["claimed_by"] is not None
    meta = json.loads(merged(base, x, y)["meta.json"])
    assert meta["session_count"] == max(json.loads(x["meta.json"])["session_count"],
                                        json.loads(y["meta.json"])["session_count"])


@settings(max_examples=examples(200), deadline=None)
@given(edit_lists, edit_lists, edit_lists)
def test_three_replicas_any_order(e1: list[Edit], e2: list[Edit], e3: list[Edit]) -> None:
    base = base_state()
    x, y, z = replicas(base, e1, e2, e3)
    results = [
        merged(base, merged(base, x, y), z),
        merged(base, x, merged(base, y, z)),
        merged(base, merged(base, x, z), y),
        merged(base, z, merged(base, y, x)),
    ]
    for r in results[1:]:
        assert r == results[0]


def test_different_fields_both_survive() -> None:
    base = base_state()
    x = apply_edits(base, [("title", "a", 1)], 1, 100)
    y = apply_edits(base, [("timeout", "a", 2), ("priority", "a", 0)], 2, 100)
    m, conflicts = merge_states(base, x, y)
    t = json.loads(m[tpath("a")])
    assert t["title"] == "title 1 by 1"
    assert t["validation"]["timeout_seconds"] == 102
    assert t["priority"] == "P0"
    assert conflicts == []


def test_tokens_take_the_later_write() -> None:
    """A task's tokens are a plain field: two clones charging one task offline keep the later
    charge (docs/agent-clis.md, "Budgets and cost"), the same whatever the merge's order."""
    base = base_state()
    x = apply_edits(base, [("tokens", "a", 0)], 1, 100)
    y = apply_edits(base, [("tokens", "a", 2)], 2, 100)
    assert json.loads(merge_states(base, x, y)[0][tpath("a")])["tokens"] == 30
    assert json.loads(merge_states(base, y, x)[0][tpath("a")])["tokens"] == 30


def test_same_field_latest_wins_and_is_reported() -> None:
    base = base_state()
    x = apply_edits(base, [("title", "a", 1)], 1, 100)  # written at 100+1
    y = apply_edits(base, [("title", "a", 2)], 2, 100)  # written at 100+2: later
    m, conflicts = merge_states(base, x, y)
    assert json.loads(m[tpath("a")])["title"] == "title 2 by 2"
    assert [(c.field, c.kept, c.dropped) for c in conflicts] == [("title", "title 2 by 2", "title 1 by 1")]


def test_two_claims_one_winner_completed_beats_claim() -> None:
    base = base_state()
    x = apply_edits(base, [("claim", "a", 0)], 1, 100)
    y = apply_edits(base, [("claim", "a", 0)], 2, 100)
    t = json.loads(merged(base, x, y)[tpath("a")])
    assert t["status"] == "in_progress" and t["claimed_by"] == "w2"
    late = apply_edits(base, [("claim", "a", 0), ("claim", "b", 0), ("title", "c", 0)], 2, 200)
    done = apply_edits(base, [("complete", "a", 0)], 1, 100)
    t = json.loads(merged(base, late, done)[tpath("a")])
    assert t["status"] == "completed" and t["claimed_by"] is None


def test_delete_vs_change_keeps_change() -> None:
    base = base_state()
    x = dict(base)
    del x[tpath("a")]
    y = apply_edits(base, [("title", "a", 3)], 2, 100)
    assert merged(base, x, y)[tpath("a")] == y[tpath("a")]
    assert tpath("a") not in merged(base, x, base)


def test_unknown_kinds() -> None:
    assert merge_file("format", b"git-handoff-state 1\n", b"git-handoff-state 1\n", b"git-handoff-state 2\n").data \
        == b"git-handoff-state 2\n"
    out = merge_file("blob.bin", b"a", b"b", b"c")
    assert out.data == b"c" and out.conflicts
    toml = merge_file("config.toml", b"mode = 'exclusive'\nmax_sessions = 5\n",
                      b"mode = 'concurrent'\nmax_sessions = 5\n",
                      b"# keep me\nmode = 'exclusive'\nmax_sessions = 9\n")
    assert toml.data is not None
    text = toml.data.decode()
    assert "concurrent" in text and "9" in text


# -- concurrent claims: the claim's fields travel together ------------------------------------

CLAIM_KEYS = ("status", "claimed_by", "lease_expires_at", "started_at_commit", *CLAIM_FIELDS)


def _claimed(side: str, lease: int) -> dict[str, Any]:
    """Task `a` as clone `side` claims it (every field of the claim its own)."""
    return {**task("a"), "status": "in_progress", "claimed_by": f"w-{side}", "lease_expires_at": ts(lease),
            "started_at_commit": side * 40, "claimed_at": ts(1), "worktree": f"/work/{side}",
            "branch": f"branch-{side}", "lease_seconds": 600, "claim_session": 1 if side == "a" else 2,
            "claim_snapshot": side * 40, "clone": side * 16, "clone_seal": f"seal-{side}"}


def _claim_and_renew(side: str, base: dict[str, Any], at: int, renewals: list[int]) -> dict[str, Any]:
    """Clone `side` claims task `a` at `at` ms and renews its lease at each of `renewals`
    (later), every write stamped by the hybrid clock as the store stamps it."""
    rec = hlc.stamp_write(base, _claimed(side, 0), at, side * 16, task=True)
    for n, when in enumerate(renewals, 1):
        rec = hlc.stamp_write(rec, {**rec, "lease_expires_at": ts(n)}, at + when, side * 16, task=True)
    return rec


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), st.lists(st.integers(1, 100), max_size=3),
       st.lists(st.integers(1, 100), max_size=3))
def test_two_concurrent_claims_merge_to_the_whole_claim_of_one_side(at_a: int, at_b: int, renew_a: list[int],
                                                                   renew_b: list[int]) -> None:
    """Two clones claim the same task without seeing each other, one perhaps renewing its
    lease after the other's claim: the merged task holds one side's claim whole (its
    clone, seal and snapshot with its worker and lease), whichever side wins, in either
    order of the merge."""
    base = task("a")
    a = _claim_and_renew("a", base, 1_764_590_354_000 + at_a, sorted(renew_a))
    b = _claim_and_renew("b", base, 1_764_590_354_000 + at_b, sorted(renew_b))
    states = [{tpath("a"): dump(rec)} for rec in (base, a, b)]
    for ours, theirs in ((states[1], states[2]), (states[2], states[1])):
        got = json.loads(merge_states(states[0], ours, theirs)[0][tpath("a")])
        winner = a if got["claimed_by"] == "w-a" else b
        assert {k: got.get(k) for k in CLAIM_KEYS} == {k: winner.get(k) for k in CLAIM_KEYS}


def test_a_renewal_after_the_other_claim_keeps_the_renewed_claim_whole() -> None:
    """Clone a claims, clone b claims later, clone a renews later still: a's claim wins,
    with a's clone and seal, not b's (written later than a's claim, earlier than its renewal)."""
    base = task("a")
    a = _claim_and_renew("a", base, 1_764_590_354_000, [30])
    b = _claim_and_renew("b", base, 1_764_590_354_010, [])
    got = json.loads(merge_states({tpath("a"): dump(base)}, {tpath("a"): dump(a)}, {tpath("a"): dump(b)})[0]
                     [tpath("a")])
    assert (got["claimed_by"], got["clone"], got["clone_seal"], got["claim_snapshot"]) == \
        ("w-a", "a" * 16, "seal-a", "a" * 40)
