"""The core: state store, model, selection and the task-graph commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from git_handoff.core import errors
from git_handoff.core.model import Task, check_id, new_id
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.snapshot import STATE_REF, task_path
from git_handoff.state.store import StateStore, Tx
from tests.support.repo import git, make_repo, run, run_exe, state_head


@pytest.fixture
def inited(repo: Path) -> Path:
    assert run("init").rc == 0
    return repo


def add(*args: str) -> str:
    r = run("add", *args)
    assert r.rc == 0, r.err
    return r.out.strip()


# -- init ---------------------------------------------------------------------------


def test_init_is_idempotent_and_updates_config(repo: Path) -> None:
    r = run("init", "--json")
    assert r.rc == 0 and r.json()["created"] is True
    head = state_head(repo)
    r = run("init")
    assert r.rc == 0 and "already initialized" in r.out
    assert state_head(repo) == head
    r = run("init", "--mode", "concurrent", "--max-sessions", "7", "--json")
    assert r.rc == 0
    assert r.json()["config"]["mode"] == "concurrent"
    assert r.json()["config"]["max_sessions"] == 7
    cfg = git("show", f"{STATE_REF}:config.toml", cwd=repo)
    assert "# git handoff" in cfg and 'mode = "concurrent"' in cfg
    assert git("show", f"{STATE_REF}:format", cwd=repo) == "git-handoff-state 1"


def test_state_commit_per_transaction_with_log_lines(inited: Path) -> None:
    add("One", "--id", "one")
    add("Two", "--id", "two", "--after", "one")
    messages = git("log", "--format=%s", STATE_REF, cwd=inited).splitlines()
    assert len(messages) == 3
    assert messages[0].endswith("INIT [two] Added Two")
    assert all(m.startswith("[") and "[SESSION-0]" in m for m in messages)
    author = git("log", "-1", "--format=%an <%ae>", STATE_REF, cwd=inited)
    assert author == "Test Author <author@example.com>"
    blob = json.loads(git("show", f"{STATE_REF}:{task_path('two')}", cwd=inited))
    assert blob["depends_on"] == ["one"]


# -- add / show / list / edit ---------------------------------------------------------


def test_add_show_json_has_spec_fields(inited: Path) -> None:
    r = run("add", "Build it", "--id", "b", "-p", "P0", "--check", "true", "--timeout", "12",
            "--max-attempts", "5", "--cleanup", "echo c", "--spec", "docs/spec.md", "--json")
    assert r.rc == 0
    task = r.json()
    for key in ("id", "title", "status", "priority", "depends_on", "attempts", "max_attempts",
                "started_at_commit", "validation", "on_failure", "error_log", "checkpoints",
                "completed_at", "claimed_by", "lease_expires_at", "created_at", "spec_ref"):
        assert key in task
    assert task["validation"] == {"command": "true", "timeout_seconds": 12}
    assert task["on_failure"] == {"cleanup": "echo c"}
    assert task["max_attempts"] == 5 and task["priority"] == "P0" and task["spec_ref"] == "docs/spec.md"
    assert task["created_at"].endswith("Z")
    shown = run("show", "b", "--json").json()
    assert shown["validation"] == task["validation"]
    assert "Build it" in run("show", "b").out


def test_list_line_format_and_filters(inited: Path) -> None:
    add("First", "--id", "a")
    add("Second", "--id", "b", "--after", "a")
    r = run("list")
    assert r.out.splitlines() == ["[pending] a: First (0/3)", "[pending] b: Second (0/3)"]
    assert [t["id"] for t in run("list", "--ready", "--json").json()] == ["a"]
    assert run("list", "--status", "completed", "--json").json() == []
    assert run("list", "--status", "bogus").rc == 2


def test_edit_changes_fields_and_logs(inited: Path) -> None:
    add("First", "--id", "a")
    add("Second", "--id", "b")
    r = run("edit", "b", "--title", "Renamed", "-p", "P0", "--after", "a", "--check", "make test", "--json")
    assert r.rc == 0, r.err
    t = r.json()
    assert t["title"] == "Renamed" and t["priority"] == "P0" and t["depends_on"] == ["a"]
    assert t["validation"]["command"] == "make test"
    assert run("edit", "b", "--no-after", "--json").json()["depends_on"] == []
    assert "Edited" in git("log", "-1", "--format=%s", STATE_REF, cwd=inited)


# -- selection --------------------------------------------------------------------------


def test_next_priority_then_creation_order(inited: Path) -> None:
    add("low", "--id", "low", "-p", "P2")
    add("mid1", "--id", "mid1")
    add("top", "--id", "top", "-p", "P0")
    add("mid2", "--id", "mid2")
    add("dep", "--id", "dep", "-p", "P0", "--after", "mid2")
    assert run("next", "--json").json()["id"] == "top"
    order = [t["id"] for t in run("list", "--ready", "--json").json()]
    assert order == ["top", "mid1", "mid2", "low"]


def test_next_exit_1_when_nothing_eligible(inited: Path) -> None:
    r = run("next")
    assert r.rc == 1 and r.err.startswith("error: nothing eligible")
    assert r.out == ""


def test_auto_ids_sort_by_creation_and_do_not_collide() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == 2000
    assert ids == sorted(ids)
    for i in ids[:20]:
        assert check_id(i) == i


def test_unknown_fields_are_kept(inited: Path) -> None:
    add("x", "--id", "x")
    store = StateStore(Repo.discover(inited))
    repo = store.repo

    def sneak(tx: Tx) -> None:  # a newer writer adds a field we do not know
        stored = tx.read(task_path("x"))
        assert stored is not None
        raw = json.loads(stored)
        raw["future_field"] = {"kept": True}
        tx.put(task_path("x"), json.dumps(raw).encode())
        tx.log("WARN", "future writer")

    store.transact(sneak)
    assert run("edit", "x", "-p", "P2").rc == 0
    found = repo.tree_lookup(store.snapshot().tree, task_path("x"))
    assert found is not None
    blob = json.loads(repo.read_blob(found[0]))
    assert blob["future_field"] == {"kept": True} and blob["priority"] == "P2"


# -- import -------------------------------------------------------------------------------

PLAN = """\
# comments are welcome
[[task]]
id = "schema"                 # optional
title = "Write the schema"
priority = "P0"
depends_on = []
check = "pytest -q tests/test_schema.py"
timeout = 300
max_attempts = 3
cleanup = "docker compose down"
spec = "docs/spec.md"

[[task]]
title = "No id given"
depends_on = ["schema"]
"""


def test_import_toml_plan(inited: Path) -> None:
    (inited / "plan.toml").write_text(PLAN)
    r = run("import", "plan.toml", "--json")
    assert r.rc == 0, r.err
    tasks = r.json()
    assert tasks[0]["id"] == "schema"
    assert tasks[0]["validation"] == {"command": "pytest -q tests/test_schema.py", "timeout_seconds": 300}
    assert tasks[0]["on_failure"] == {"cleanup": "docker compose down"}
    assert tasks[0]["spec_ref"] == "docs/spec.md"
    assert tasks[1]["depends_on"] == ["schema"] and tasks[1]["id"].startswith("t-")


def harness_tasks_json() -> dict[str, Any]:
    return {
        "version": 2,
        "created": "2025-07-01T10:00:00Z",
        "session_config": {"concurrency_mode": "concurrent", "max_tasks_per_session": 4, "max_sessions": 9},
        "tasks": [
            {"id": "task-001", "title": "Auth", "status": "completed", "priority": "P0", "depends_on": [],
             "attempts": 1, "max_attempts": 3, "started_at_commit": "def5678",
             "validation": {"command": "npm test", "timeout_seconds": 300}, "on_failure": {"cleanup": None},
             "error_log": [], "checkpoints": [], "completed_at": "2025-07-01T10:15:30Z", "owner_note": "x"},
            {"id": "task-002", "title": "Rate limit", "status": "failed", "priority": "P1", "depends_on": [],
             "attempts": 1, "max_attempts": 3, "started_at_commit": "abc1234",
             "validation": {"command": "npm test -- rl", "timeout_seconds": 120},
             "on_failure": {"cleanup": "docker compose down redis"},
             "error_log": ["[TASK_EXEC] Redis connection refused"],
             "checkpoints": [{"step": 1, "total": 2, "description": "d", "timestamp": "2025-07-01T10:16:00Z"}],
             "completed_at": None},
            {"id": "task-003", "title": "OAuth", "status": "pending", "priority": "P1", "depends_on": ["task-001"],
             "attempts": 0, "max_attempts": 3, "started_at_commit": None,
             "validation": {"command": "npm test -- oauth", "timeout_seconds": 180}, "on_failure": {"cleanup": None},
             "error_log": [], "checkpoints": [], "completed_at": None},
        ],
        "session_count": 1,
        "last_session": "2025-07-01T10:20:02Z",
    }


def test_import_harness_tasks_json_keeps_every_field(inited: Path) -> None:
    data = harness_tasks_json()
    (inited / "tasks.json").write_text(json.dumps(data))
    r = run("import", "tasks.json")
    assert r.rc == 0, r.err
    for original in data["tasks"]:
        got = run("show", original["id"], "--json").json()
        for key, value in original.items():
            assert got[key] == value, (original["id"], key)
    meta = json.loads(git("show", f"{STATE_REF}:meta.json", cwd=inited))
    assert meta["imported"]["last_session"] == "2025-07-01T10:20:02Z"
    status = run("status", "--json").json()
    assert status["config"]["mode"] == "concurrent" and status["config"]["max_tasks_per_session"] == 4
    # the failed task is retried after the pending one whose dependency is complete
    assert [t["id"] for t in run("list", "--ready", "--json").json()] == ["task-003", "task-002"]


def test_import_with_cycle_is_accepted_and_selection_fails_it(inited: Path) -> None:
    from git_handoff.core import selection
    from git_handoff.core.model import now_iso

    (inited / "plan.toml").write_text(
        '[[task]]\nid="a"\ntitle="A"\ndepends_on=["b"]\n'
        '[[task]]\nid="b"\ntitle="B"\ndepends_on=["a"]\n'
        '[[task]]\nid="c"\ntitle="C"\ndepends_on=["a"]\n'
        '[[task]]\nid="d"\ntitle="D"\n'
    )
    assert run("import", "plan.toml").rc == 0
    tasks = StateStore(Repo.discover(inited)).snapshot().tasks()
    updated, changes = selection.prepare(tasks, now_iso())
    messages = {t.id: (cat, msg) for t, cat, msg in changes}
    assert messages["a"] == ("DEPENDENCY", "Circular dependency detected: a -> b -> a")
    assert messages["b"] == ("DEPENDENCY", "Circular dependency detected: b -> a -> b")
    assert messages["c"] == ("DEPENDENCY", "Blocked by failed a")
    assert updated["c"].error_log[-1] == "[DEPENDENCY] Blocked by failed a"
    assert [t.id for t in selection.eligible(updated)] == ["d"]
    status = run("status", "--json").json()
    assert status["counts"]["blocked"] == 3 and status["counts"]["pending"] == 1


def test_compact_status_json_is_the_text_of_the_status_view(inited: Path) -> None:
    """`status --json` away from a terminal writes its rows without building them as dicts:
    byte for byte what encoding the view gives, whatever the titles hold, with blocked,
    claimed and failed rows; and for a state without tasks."""
    from git_handoff.ops import views

    def encoded() -> str:
        return json.dumps(views.status(StateStore(Repo.discover(inited))), ensure_ascii=False, default=str)

    empty = run("status", "--json")
    assert empty.rc == 0 and empty.out == encoded() + "\n"
    (inited / "plan.toml").write_text(
        '[[task]]\nid="a"\ntitle="quote \\" back\\\\slash"\ndepends_on=["b"]\n'
        '[[task]]\nid="b"\ntitle="ünïcödé ✓ 😀 and ÿ"\ndepends_on=["a"]\n'
        '[[task]]\nid="c"\ntitle="{\\"json\\": [1, 2]}"\npriority="P0"\n'
        '[[task]]\nid="d"\ntitle="</script><b>"\ndepends_on=["a"]\n'
    )
    assert run("import", "plan.toml").rc == 0
    out = run("status", "--json")
    assert out.rc == 0 and out.out == encoded() + "\n"
    assert [t["status"] for t in json.loads(out.out)["tasks"]] == ["blocked", "blocked", "pending", "blocked"]
    assert run("claim", "c", "--worker", "w \" 1").rc == 0
    out = run("status", "--json")
    assert out.rc == 0 and out.out == encoded() + "\n"
    shown = {t["id"]: t for t in json.loads(out.out)["tasks"]}
    assert [shown[t]["status"] for t in "abcd"] == ["failed", "failed", "in_progress", "failed"]
    assert shown["c"]["claimed_by"] == 'w " 1'
    assert shown["a"]["title"] == 'quote " back\\slash' and shown["b"]["title"].startswith("ünïcödé ✓ 😀")
    # a task something was charged to: its tokens, cost and held time
    store = StateStore(Repo.discover(inited))
    store.transact(lambda tx: tx.put_task(tx.task("c").evolve(tokens=77).with_extra(  # type: ignore[union-attr]
        cost_micro_usd=12, held_seconds=3)))
    out = run("status", "--json")
    assert out.rc == 0 and out.out == encoded() + "\n"
    shown = {t["id"]: t for t in json.loads(out.out)["tasks"]}
    assert (shown["c"]["tokens"], shown["c"]["cost_micro_usd"], shown["c"]["held_seconds"]) == (77, 12, 3)
    assert "tokens" not in shown["a"]


# -- bad input: exit 2, one line on stderr, state unchanged ------------------------------------

BAD_INPUTS = [
    ("id ../x", ["add", "T", "--id", "../x"]),
    ("id a..b", ["add", "T", "--id", "a..b"]),
    ("id x.lock", ["add", "T", "--id", "x.lock"]),
    ("id empty", ["add", "T", "--id", ""]),
    ("id 65 chars", ["add", "T", "--id", "a" * 65]),
    ("id leading -", ["add", "T", "--id=-abc"]),
    ("id with spaces", ["add", "T", "--id", "a b"]),
    ("id with slash", ["add", "T", "--id", "a/b"]),
    ("unknown dependency", ["add", "T", "--after", "nope"]),
    ("self dependency", ["add", "T", "--id", "self", "--after", "self"]),
    ("cycle via edit", ["edit", "a", "--after", "b"]),
    ("self cycle via edit", ["edit", "a", "--after", "a"]),
    ("bad priority", ["add", "T", "--priority", "P9"]),
    ("negative timeout", ["add", "T", "--timeout", "-5"]),
    ("zero timeout", ["add", "T", "--timeout", "0"]),
    ("zero max-attempts", ["add", "T", "--max-attempts", "0"]),
    ("non-numeric max-attempts", ["add", "T", "--max-attempts", "many"]),
    ("empty title", ["add", ""]),
    ("blank title", ["add", "   "]),
    ("duplicate id", ["add", "T", "--id", "a"]),
    ("unknown task: show", ["show", "nope"]),
    ("unknown task: edit", ["edit", "nope", "--title", "x"]),
    ("edit nothing", ["edit", "a"]),
    ("edit empty title", ["edit", "a", "--title", ""]),
    ("bad id: show", ["show", "../x"]),
    ("import missing file", ["import", "missing.toml"]),
    ("import malformed toml", ["import", "bad.toml"]),
    ("import malformed json", ["import", "bad.json"]),
    ("import binary", ["import", "binary.toml"]),
    ("import wrong version", ["import", "v1.json"]),
    ("import bad id", ["import", "badid.toml"]),
    ("import unknown key", ["import", "typo.toml"]),
    ("import unknown dependency", ["import", "unknown_dep.toml"]),
    ("import duplicate ids", ["import", "dupes.toml"]),
    ("import existing id", ["import", "existing.toml"]),
    ("import empty plan", ["import", "empty.toml"]),
    ("import directory", ["import", "."]),
    ("bad init mode", ["init", "--mode", "chaos"]),
    ("bad init max sessions", ["init", "--max-sessions", "0"]),
    ("log negative -n", ["log", "-n", "-1"]),
    ("graph bad format", ["graph", "--format", "png"]),
    ("unknown option", ["list", "--frobnicate"]),
]


def write_bad_files(path: Path) -> None:
    (path / "bad.toml").write_text("[[task]\ntitle = \n")
    (path / "bad.json").write_text("{not json")
    (path / "binary.toml").write_bytes(b"\x00\x01\x02\xff\xfe")
    (path / "v1.json").write_text(json.dumps({"version": 1, "tasks": []}))
    (path / "badid.toml").write_text('[[task]]\nid = "../escape"\ntitle = "x"\n')
    (path / "typo.toml").write_text('[[task]]\ntitle = "x"\nchek = "true"\n')
    (path / "unknown_dep.toml").write_text('[[task]]\ntitle = "x"\ndepends_on = ["ghost"]\n')
    (path / "dupes.toml").write_text('[[task]]\nid="d"\ntitle="x"\n[[task]]\nid="d"\ntitle="y"\n')
    (path / "existing.toml").write_text('[[task]]\nid="a"\ntitle="again"\n')
    (path / "empty.toml").write_text("# nothing here\n")


@pytest.mark.parametrize("case,args", BAD_INPUTS, ids=[c for c, _ in BAD_INPUTS])
def test_bad_input_exit_2_one_line_state_unchanged(inited: Path, case: str, args: list[str]) -> None:
    add("A", "--id", "a")
    add("B", "--id", "b", "--after", "a")
    write_bad_files(inited)
    before = state_head(inited)
    r = run(*args)
    assert r.rc == 2, (case, r.rc, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (case, r.err)
    assert "Traceback" not in r.err
    assert state_head(inited) == before


def test_not_a_git_repository(tmp_path: Path) -> None:
    for args in (["status"], ["init"], ["add", "x"], ["list"]):
        r = run(*args, cwd=tmp_path)
        assert r.rc == 2 and r.err.startswith("error: not a git repository")


def test_not_initialized(repo: Path) -> None:
    for args in (["status"], ["add", "x"], ["list"], ["next"], ["show", "a"], ["log"], ["graph"]):
        r = run(*args)
        assert r.rc == 2, args
        assert "not initialized" in r.err and "git handoff init" in r.err
    assert state_head(repo) is None


def test_newer_format_is_refused(inited: Path) -> None:
    store = StateStore(Repo.discover(inited))

    def from_the_future(tx: Tx) -> None:
        tx.put("format", b"git-handoff-state 99\n")
        tx.log("WARN", "from the future")

    store.transact(from_the_future)
    head = state_head(inited)
    for args in (["status"], ["add", "x"], ["list"]):
        r = run(*args)
        assert r.rc == 2 and "newer git handoff" in r.err
    assert state_head(inited) == head


def test_corrupt_task_blob_is_invalid_state(inited: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add("A", "--id", "a")
    monkeypatch.delenv("HANDOFF_CHECK_WRITES")  # this test writes a broken record on purpose
    store = StateStore(Repo.discover(inited))

    def corrupt(tx: Tx) -> None:
        tx.put(task_path("a"), b"{broken")
        tx.log("WARN", "corrupt")

    store.transact(corrupt)
    r = run("list")
    assert r.rc == 2 and r.err.count("\n") == 1 and "not valid JSON" in r.err


def test_exit_codes_mapped_in_one_place() -> None:
    assert errors.HandoffError("x").exit_code == 2
    assert errors.UsageError("x").exit_code == 2
    assert errors.NotInitialized("x").exit_code == 2
    assert errors.InvalidState("x").exit_code == 2
    assert errors.Negative("x").exit_code == 1
    assert errors.Contention("x").exit_code == 3
    assert errors.EXIT_INTERRUPTED == 130


# -- log and graph ----------------------------------------------------------------------------


def test_log_filters(inited: Path) -> None:
    add("A", "--id", "a")
    add("B", "--id", "b")
    assert len(run("log").out.splitlines()) == 3
    assert run("log", "--task", "b").out.strip().endswith("INIT [b] Added B")
    assert run("log", "-n", "1").out.strip().endswith("INIT [b] Added B")
    assert len(run("log", "--type", "INIT", "--json").json()) == 3
    assert run("log", "--session", "4").out == ""


def test_graph_formats(inited: Path) -> None:
    add("A", "--id", "a")
    add("B", "--id", "b", "--after", "a")
    add("C", "--id", "c", "--after", "a", "--after", "b")
    text = run("graph").out
    assert text.splitlines()[0] == "[pending] a: A"
    assert "(see above)" in text
    dot = run("graph", "--format", "dot").out
    assert dot.startswith("digraph") and '"a" -> "b";' in dot and '"b" -> "c";' in dot
    mermaid = run("graph", "--format", "mermaid").out
    assert mermaid.startswith("graph TD") and "n0 --> n1" in mermaid


# -- the store ----------------------------------------------------------------------------------


def test_one_task_change_rewrites_few_objects(inited: Path) -> None:
    store = StateStore(Repo.discover(inited))

    def many(tx: Tx) -> None:
        for n in range(600):
            tx.put_task(Task(id=f"t{n}", title=f"task {n}", created_at="2026-01-01T00:00:00Z", order=n))
        tx.log("INIT", "bulk")

    store.transact(many)
    before = set(git("rev-list", "--objects", "--all", cwd=inited).split())
    assert run("edit", "t5", "-p", "P0").rc == 0
    after = set(git("rev-list", "--objects", "--all", cwd=inited).split())
    # commit, root tree, tasks/, tasks/<h>, tasks/<h>/<h>, the blob
    assert len(after - before) <= 6


def test_fresh_ref_lock_means_contention(inited: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import git_handoff.state.store as store_mod

    monkeypatch.setattr(store_mod, "CAS_RETRIES", 3)
    lock = inited / ".git" / "refs" / "harness" / "state.lock"
    lock.write_bytes(b"")
    before = state_head(inited)
    r = run("add", "Blocked", "--id", "blocked")
    lock.unlink()
    assert r.rc == 3 and r.err.startswith("error: ")
    assert state_head(inited) == before


def test_state_is_shared_by_linked_worktrees(inited: Path, tmp_path: Path) -> None:
    add("A", "--id", "a")
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), cwd=inited)
    assert run("list", cwd=wt).out.startswith("[pending] a: A")
    assert run("add", "From the worktree", "--id", "w", cwd=wt).rc == 0
    assert "w: From the worktree" in run("list", cwd=inited).out


# -- the real executable -------------------------------------------------------------------------


def test_executable_end_to_end(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "exe")
    assert run_exe("init", cwd=repo).rc == 0
    r = run_exe("add", "Real", "--id", "real", "--check", "true", cwd=repo)
    assert r.rc == 0 and r.out.strip() == "real"
    r = run_exe("next", "--json", cwd=repo)
    assert r.rc == 0 and json.loads(r.out)["id"] == "real"
    r = run_exe("status", "--json", cwd=repo)
    assert json.loads(r.out)["counts"]["pending"] == 1
    r = run_exe("show", "nope", cwd=repo)
    assert r.rc == 2 and r.err.strip().startswith("error: no task") and "Traceback" not in r.err
    proc = subprocess.run([sys.executable, "-m", "git_handoff", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and "git handoff" in proc.stdout


def test_help_teaches(repo: Path) -> None:
    r = run("--help")
    assert r.rc == 0
    for word in ("claim", "checkpoint", "Exit codes"):
        assert word in r.out
    assert "--after" in run("add", "--help").out


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
