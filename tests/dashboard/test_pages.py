"""dashboard/pages.py's fragments from plain records (no repository, no server); the pages
over HTTP and in a browser are in tests/dashboard/test_server.py."""

from __future__ import annotations

from typing import Any, cast

from git_handoff.core.record_schemas import RelayRecord
from git_handoff.dashboard import pages
from git_handoff.ops.payloads import Attempt


def test_relay_failures_lists_the_last_ten_records_escaped() -> None:
    failures: list[Any] = [{"at": f"t{n}", "what": f"w{n}"} for n in range(12)]
    failures[-1] = {"at": "late", "what": "<script>"}
    failures[-2] = "not a record"
    html = pages._relay_failures(cast(RelayRecord, {"failures": failures}))
    assert html.startswith('<h2>Failures</h2><ul class="s-failed">') and html.count("<li>") == 9
    assert "[t2] w2" in html and "[t1] w1" not in html and "&lt;script&gt;" in html and "<script>" not in html


def test_relay_failures_none_or_not_a_list_is_nothing() -> None:
    records: list[dict[str, object]] = [{}, {"failures": []}, {"failures": "many"}, {"failures": None}]
    for record in records:
        assert pages._relay_failures(cast(RelayRecord, record)) == ""


def test_relay_rows_without_a_session_stopped() -> None:
    record = cast(RelayRecord, {"state": "stopped", "agent": "claude", "stopped_at": "2026-07-01T10:00:00Z"})
    rows = pages._relay_rows(cast(Any, None), record, "stopped")  # no session: the snapshot is not read
    assert rows == [("state", "stopped"), ("session", "-"), ("agent", "claude"), ("ACK", "-"), ("started", "-"),
                    ("stopped", "2026-07-01T10:00:00Z (-)")]


def test_attempt_row_says_why_an_attempt_is_unreadable() -> None:
    row = pages._attempt_row(cast(Attempt,
                                  {"attempt": 3, "ref": "refs/harness/attempts/a/3", "unreadable": "bad <json>"}))
    assert row.startswith('<tr class="attempt" data-attempt="3"><td>#3</td><td>-</td><td>-</td>')
    assert "<td>unreadable: bad &lt;json&gt;</td>" in row and "<td>0 file(s)</td>" in row


def test_relay_rows_name_the_agent_its_last_switch_and_the_agents_limited() -> None:
    record = cast(RelayRecord, {
        "state": "running", "agent": "codex exec x", "agent_name": "codex",
        "switches": [{"at": "2026-07-01T10:00:00Z", "session": 3, "from": "claude", "to": "codex", "reason": "why"}],
        "limited": [{"agent": "claude", "until": "2026-07-01T15:00:00Z"}]})
    rows = dict(pages._relay_rows(cast(Any, None), record, "running"))
    assert rows["agent"] == "codex: codex exec x"
    assert rows["switched"] == ("codex (switched from claude at 2026-07-01T10:00:00Z, session 3; "
                                "1 switch(es) this run): why")
    assert rows["limited"] == "claude until 2026-07-01T15:00:00Z"
