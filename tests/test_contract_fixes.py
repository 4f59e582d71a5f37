"""Small contract fixes of issue 14: show's lease line, edit's help, log -n 0, dispatch
run's exit status."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import git, run


def test_show_prints_a_lease_only_for_a_live_claim(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "One", "--id", "one", "--check", "true").rc == 0
    assert "claimed by" not in run("show", "one").out
    assert run("claim", "one", "--lease", "1h").rc == 0
    lease = run("show", "one", "--json").json()["lease_expires_at"]
    assert f"(lease until {lease})" in run("show", "one").out
    assert run("done", "one").rc == 0
    shown = run("show", "one").out
    assert "lease until" not in shown and "None" not in shown
    assert "last claimed:" in shown


def test_edit_help_shows_no_defaults_it_does_not_apply() -> None:
    edit = run("edit", "-h").out
    assert "[default:" not in edit
    assert "kept unless given" in edit
    add = run("add", "-h").out
    assert "[default: 300]" in add and "[default: 3]" in add


def test_log_n_0_prints_nothing(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "One", "--id", "one").rc == 0
    res = run("log", "-n", "0")
    assert res.rc == 0 and res.out == ""
    assert run("log", "-n", "0", "--json").json() == []
    assert len(run("log", "-n", "1").out.splitlines()) == 1
    assert run("log", "-n", "-1").rc == 2


def test_dispatch_run_of_a_failing_backend_exits_1_with_its_status(repo: Path) -> None:
    assert run("init").rc == 0
    for status in (2, 3, 130):
        git("config", "handoff.backend.bad.command", f"cat >/dev/null; echo boom; exit {status}", cwd=repo)
        for extra in ([], ["--json"]):
            run_id = run("dispatch", "new", "--backend", "bad", "--slug", "boom", stdin="x\n").out.strip()
            r = run("dispatch", "run", run_id, *extra)
            assert r.rc == 1, r
            assert r.err.startswith("error: ") and len(r.err.splitlines()) == 1
            assert f"backend exit status {status}" in r.err
            if extra:
                record = json.loads(r.out)
                assert record["status"] == "failed" and record["exit_status"] == status
                assert r.out.count("\n") == 1  # one JSON document, printed once
