# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""rm, rename, reopen: logged plan changes that sync, refusing bad input unchanged."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.remotes import clones, ok, remote_url, shared_pair, task  # noqa: F401
from tests.support.repo import git, run, state_head


def refs(path: Path) -> str:
    return git("for-each-ref", "--format=%(refname) %(objectname)", cwd=path)


def refused(*args: str, cwd: Path | None = None, says: str) -> None:
    """`git handoff ARGS` exits 2 with one error line saying `says`, and changes no ref."""
    where = cwd or Path.cwd()
    before = refs(where)
    res = run(*args, cwd=cwd)
    assert res.rc == 2, (args, res.rc, res.out, res.err)
    assert res.err.startswith("error: ") and says in res.err and res.err.count("\n") == 1, res.err
    assert refs(where) == before
    res = run(*args, "--json", cwd=cwd)
    assert res.rc == 2 and says in res.err
    assert refs(where) == before


def ids(cwd: Path | None = None) -> list[str]:
    res = run("list", "--json", cwd=cwd)
    assert res.rc == 0, res.err
    return [t["id"] for t in res.json()]


def log_of(*args: str, cwd: Path | None = None) -> list[str]:
    res = run("log", *args, cwd=cwd)
    assert res.rc == 0, res.err
    return res.out.splitlines()


def fail_once(repo: Path, tid: str) -> None:
    assert run("claim", tid).rc == 0
    (repo / f"{tid}-work.txt").write_text("work of the attempt\n")
    assert run("fail", tid, "--reason", "wrong approach").rc == 0


@pytest.fixture
def plan(repo: Path) -> Path:
    assert run("init").rc == 0
    for args in (("Schema", "--id", "schema", "--check", "true"),
                 ("API", "--id", "api", "--after", "schema", "--check", "true"),
                 ("Docs", "--id", "docs", "--after", "api", "--after", "schema"),
                 ("Loose", "--id", "loose", "--check", "false", "--max-attempts", "1")):
        assert run("add", *args).rc == 0
    return repo


# -- rm -----------------------------------------------------------------------------------


def test_rm_removes_a_task_and_logs_it(plan: Path) -> None:
    res = run("rm", "docs")
    assert res.rc == 0 and "Removed docs" in res.out
    assert ids() == ["schema", "api", "loose"]
    assert run("show", "docs").rc == 2
    assert any("INIT [docs] Removed Docs (was pending" in line for line in log_of("--task", "docs"))


def test_rm_refuses_bad_input_and_changes_nothing(plan: Path) -> None:
    refused("rm", "schema", says="needed by api, docs")
    refused("rm", "nope", says="no task 'nope'")
    refused("rm", "../x", says="invalid")
    assert run("claim", "schema").rc == 0
    assert run("rm", "loose").rc == 0
    refused("rm", "schema", says="in progress")
    assert ids() == ["schema", "api", "docs"]


def test_rm_refuses_a_claimed_task_without_force(plan: Path) -> None:
    assert run("claim", "loose").rc == 0
    refused("rm", "loose", says="in progress")


def test_rm_force_detaches_dependents_and_keeps_attempts(plan: Path) -> None:
    fail_once(plan, "schema")
    res = run("rm", "schema", "--force", "--json")
    assert res.rc == 0, res.err
    out = res.json()
    assert out["detached"] == ["api", "docs"] and out["attempts_kept"] == ["refs/harness/attempts/schema/1"]
    assert run("show", "api", "--json").json()["depends_on"] == []
    assert run("show", "docs", "--json").json()["depends_on"] == ["api"]
    assert git("rev-parse", "-q", "--verify", "refs/harness/attempts/schema/1", cwd=plan)
    lines = log_of()
    assert any("INIT [api] Dropped dependency on removed schema" in line for line in lines)


def test_rm_survives_sync_to_another_clone(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("add", "Keep", "--id", "keep"), ("add", "Drop", "--id", "drop"),
                       ("add", "Needs drop", "--id", "needs", "--after", "drop"))
    ok("rm", "drop", "--force", cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    assert ids(b) == ["keep", "needs"]
    assert task(b, "needs")["depends_on"] == []
    assert any("Removed Drop" in line for line in log_of("--task", "drop", cwd=b))


# -- rename ---------------------------------------------------------------------------------


def test_rename_moves_dependents_attempts_and_notes(plan: Path) -> None:
    # a completed task with noted commits, and a failed attempt saved for another
    assert run("claim", "schema").rc == 0
    (plan / "schema.sql").write_text("create table t;\n")
    git("add", "schema.sql", cwd=plan)
    git("commit", "-q", "-m", "schema", cwd=plan)
    noted = git("rev-parse", "HEAD", cwd=plan)
    assert run("done", "schema").rc == 0
    assert "task: schema" in git("notes", "--ref=harness", "show", noted, cwd=plan)
    res = run("rename", "schema", "db-schema", "--json")
    assert res.rc == 0, res.err
    assert res.json()["dependents"] == ["api", "docs"] and res.json()["notes"] >= 1
    assert ids() == ["db-schema", "api", "docs", "loose"]
    shown = run("show", "db-schema", "--json").json()
    assert shown["status"] == "completed" and shown["title"] == "Schema"
    assert run("show", "api", "--json").json()["depends_on"] == ["db-schema"]
    assert run("show", "docs", "--json").json()["depends_on"] == ["api", "db-schema"]
    assert "task: db-schema" in git("notes", "--ref=harness", "show", noted, cwd=plan)

    fail_once(plan, "loose")
    assert run("rename", "loose", "tight").rc == 0
    assert git("for-each-ref", "--format=%(refname)", "refs/harness/attempts/", cwd=plan) == \
        "refs/harness/attempts/tight/1"
    assert [a["attempt"] for a in run("attempts", "tight", "--json").json()] == [1]
    assert any("INIT [tight] Renamed loose to tight" in line for line in log_of("--task", "tight"))
    assert run("next", "--json").json()["id"] == "api"  # the renamed dependency still counts as completed


def test_rename_refuses_bad_input_and_changes_nothing(plan: Path) -> None:
    refused("rename", "schema", "api", says="already exists")
    refused("rename", "nope", "other", says="no task 'nope'")
    refused("rename", "schema", "bad..id", says="invalid")
    refused("rename", "schema", "x.lock", says="invalid")
    refused("rename", "schema", "schema", says="already the task's id")
    assert run("claim", "schema").rc == 0
    refused("rename", "schema", "other", says="in progress")
    assert run("release", "schema").rc == 0
    fail_once(plan, "loose")
    assert run("rm", "loose").rc == 0
    refused("rename", "schema", "loose", says="attempts of a task 'loose'")
    assert ids() == ["schema", "api", "docs"]


def test_rename_survives_sync_to_another_clone(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("add", "Base", "--id", "base"), ("add", "Top", "--id", "top", "--after", "base"))
    ok("rename", "base", "bottom", cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    assert ids(b) == ["bottom", "top"]
    assert task(b, "top")["depends_on"] == ["bottom"]
    assert any("Renamed base to bottom" in line for line in log_of(cwd=b))


# -- reopen ------------------------------------------------------------------------------------


def test_reopen_a_completed_task(plan: Path) -> None:
    assert run("claim", "schema").rc == 0
    assert run("checkpoint", "schema", "half way", "--step", "1", "--of", "2").rc == 0
    assert run("done", "schema").rc == 0
    res = run("reopen", "schema", "--reason", "the check was too weak")
    assert res.rc == 0, res.err
    assert "was completed" in res.out
    shown = run("show", "schema", "--json").json()
    assert shown["status"] == "pending" and shown["completed_at"] is None and shown["claimed_by"] is None
    assert len(shown["checkpoints"]) == 1 and shown["reopened"][0]["reason"] == "the check was too weak"
    assert run("next", "--json").json()["id"] == "schema"
    assert any("INIT [schema] Reopened (was completed, attempts 0/3): the check was too weak" in line
               for line in log_of("--type", "INIT"))
    assert "lease until" not in run("show", "schema").out


def test_reopen_a_failed_task_keeps_its_attempts_and_frees_the_blocked(plan: Path) -> None:
    assert run("add", "After loose", "--id", "after", "--after", "loose").rc == 0
    fail_once(plan, "loose")  # max_attempts 1: failed for good
    assert run("next").rc == 0  # selection fails `after` with [DEPENDENCY] Blocked by failed loose
    claimed = run("claim", "--json").json()["id"]
    assert run("release", claimed).rc == 0
    assert run("show", "after", "--json").json()["status"] == "failed"
    res = run("reopen", "loose", "--reason", "the failure was the network", "--json")
    assert res.rc == 0, res.err
    assert res.json()["also_reopened"] == ["after"]
    loose = run("show", "loose", "--json").json()
    assert loose["status"] == "pending" and loose["attempts"] == 1 and loose["error_log"]
    assert [a["attempt"] for a in run("attempts", "loose", "--json").json()] == [1]
    assert run("show", "after", "--json").json()["status"] == "pending"


def test_reopen_refuses_bad_input_and_changes_nothing(plan: Path) -> None:
    refused("reopen", "schema", "--reason", "why not", says="is pending")
    refused("reopen", "nope", "--reason", "x", says="no task 'nope'")
    refused("reopen", "schema", "--reason", "  ", says="--reason must say why")
    refused("reopen", "schema", "--reason", "two\nlines", says="one line")
    head = state_head(plan)
    res = run("reopen", "schema")
    assert res.rc == 2 and "--reason" in res.err and state_head(plan) == head
    assert run("claim", "schema").rc == 0
    refused("reopen", "schema", "--reason", "x", says="is in_progress")


def test_reopen_survives_sync_to_another_clone(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("add", "Done by mistake", "--id", "oops", "--check", "true"))
    ok("claim", "oops", cwd=a)
    ok("done", "oops", cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    assert task(b, "oops")["status"] == "completed"
    ok("reopen", "oops", "--reason", "not really done", cwd=b)
    ok("sync", cwd=b)
    ok("sync", cwd=a)
    assert task(a, "oops")["status"] == "pending"
    assert any("Reopened (was completed" in line for line in log_of("--task", "oops", cwd=a))
