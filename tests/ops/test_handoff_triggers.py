"""Triggers inside the work cycle: handoff.tasksPerSession on done, max_tasks_per_session on claim."""

from __future__ import annotations

from pathlib import Path

from tests.support.repo import git, run, state_head


def _plan(n: int) -> None:
    assert run("init").rc == 0
    for i in range(n):
        assert run("add", f"Task {i}", "--id", f"t{i}", "--check", "true").rc == 0


def _complete(task_id: str) -> None:
    r = run("claim", task_id)
    assert r.rc == 0, r.err
    r = run("done", task_id)
    assert r.rc == 0, r.err


def test_done_writes_the_document_at_tasks_per_session(repo: Path) -> None:
    _plan(4)
    git("config", "handoff.tasksPerSession", "2", cwd=repo)
    run("session", "start")
    _complete("t0")
    assert run("doc", "list", "--json").json() == []
    _complete("t1")
    docs = run("doc", "list", "--json").json()
    assert [d["session"] for d in docs] == [1] and docs[0]["trigger"] == "tasks"
    doc = run("doc", "show", "--json").json()
    assert doc["completed_this_session"] == ["t0", "t1"]
    assert [c["id"] for c in doc["status"]["completed"]] == ["t0", "t1"]
    assert [p["id"] for p in doc["status"]["pending"]] == ["t2", "t3"]
    # once per session: a third completion does not write another
    _complete("t2")
    assert len([x for x in run("log", "--type", "HANDOFF").out.splitlines() if x]) == 1


def test_done_without_threshold_writes_nothing(repo: Path) -> None:
    _plan(2)
    run("session", "start")
    _complete("t0")
    _complete("t1")
    assert run("doc", "list", "--json").json() == []


def test_claim_refused_after_max_tasks_per_session(repo: Path) -> None:
    _plan(3)
    run("init", "--max-tasks-per-session", "2")
    run("session", "start")
    _complete("t0")
    _complete("t1")
    before = state_head(repo)
    r = run("claim")
    assert r.rc == 1
    assert "max_tasks_per_session (2)" in r.err and "hand off" in r.err
    assert state_head(repo) == before
    assert run("claim", "t2").rc == 1
    # a new session may claim again
    run("session", "end")
    run("session", "start")
    r = run("claim")
    assert r.rc == 0, r.err


def test_max_tasks_per_session_counts_only_this_session(repo: Path) -> None:
    _plan(3)
    run("init", "--max-tasks-per-session", "1")
    _complete("t0")  # outside any session: no limit applies
    run("session", "start")
    _complete("t1")
    assert run("claim").rc == 1
    assert run("session", "show", "--json").json()["completed"] == ["t1"]
