"""The session records and what counts sessions (git_handoff.state.session_records): the
count of sessions started, a start counted per clone, the records read back from a real
state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from git_handoff.infra.gitrepo import Repo
from git_handoff.state import session_records as records
from git_handoff.state.snapshot import Snapshot
from tests.support.repo import lived_in_state, run, state_head


def test_sessions_started_counts_legacy_and_per_clone() -> None:
    assert records.sessions_started({}) == 0
    assert records.sessions_started({"session_count": 4}) == 4
    assert records.sessions_started({"sessions_legacy": 2, "sessions_by_clone": {"a": 3, "b": -1, "c": True}}) == 5


def test_a_session_start_is_counted_for_its_clone() -> None:
    meta: dict[str, Any] = {"session_count": 2}
    assert records.count_session_start(meta, "c1") == 3
    assert meta == {"session_count": 3, "sessions_legacy": 2, "sessions_by_clone": {"c1": 1}}
    assert records.count_session_start(meta, "c0") == 4
    assert meta["sessions_by_clone"] == {"c0": 1, "c1": 1}


def test_an_imported_count_raises_the_count_never_lowers_it() -> None:
    meta: dict[str, Any] = {"sessions_by_clone": {"a": 2}}
    records.carry_session_count(meta, 5)
    assert records.sessions_started(meta) == 5 and meta["session_count"] == 5
    records.carry_session_count(meta, 1)
    assert records.sessions_started(meta) == 5


def test_the_records_of_a_lived_in_state(repo: Path) -> None:
    lived_in_state(repo)
    assert run("session", "start").rc == 0
    head = state_head(repo)
    assert head is not None
    snap = Snapshot(Repo.discover(repo), head)
    assert records.sessions_started(snap.meta(), snap) == 2
    first = records.read_session(snap, 1)
    assert first is not None and first.get("ended_at")
    assert records.read_session(snap, 99) is None
    assert [number for number, _, _ in records.session_keys(snap)] == [1, 2]
    assert records.doc_numbers(snap) == [1]
    doc = records.read_doc(snap, 1)
    assert doc is not None and records.pending_doc(snap) is not None
    assert records.completed_ids(snap, 1) == [] and records.completed_in(None) == []
    assert records.read_relay(snap) is None and records.relay_status_lines(snap) == []
    assert not records.limit_reached(snap, 2)


def test_switch_lines_name_the_last_switch_and_the_agents_limited_now() -> None:
    """What `status` and the dashboard say of the relay's switches of agents (ops/relay_agents.py)."""
    record: Any = {
        "switches": [{"at": "2026-07-01T10:00:00Z", "session": 3, "from": "claude", "to": "codex", "reason": "r1"},
                     {"at": "2026-07-01T11:00:00Z", "session": 4, "from": "codex", "to": "gemini", "reason": "r2"}],
        "limited": [{"agent": "claude", "until": "2026-07-01T15:00:00Z"},
                    {"agent": "codex", "until": "2026-07-02T09:00:00Z"}],
    }
    assert records.switch_lines(record) == [
        "relay: agent gemini (switched from codex at 2026-07-01T11:00:00Z, session 4; 2 switch(es) this run): r2",
        "relay: limited agents: claude until 2026-07-01T15:00:00Z, codex until 2026-07-02T09:00:00Z"]
    assert records.switch_lines({"switches": [], "limited": []}) == [] and records.switch_lines({}) == []
    assert records.switch_lines({"limited": [{"agent": "claude", "until": "2026-07-01T15:00:00Z"}]}) == [
        "relay: limited agents: claude until 2026-07-01T15:00:00Z"]
