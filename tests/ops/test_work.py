"""The work cycle: each transition, each illegal transition, rollback that loses nothing."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from git_handoff.mcp import tools as mcp_tools
from git_handoff.ops.payloads import TaskView
from git_handoff.ops.work import SYNCED_AFTER
from tests.support.remotes import clones, remote_state, remote_url  # noqa: F401 (fixtures)
from tests.support.repo import Result, git, run, state_head


def handoff(*args: str, cwd: Path | None = None, rc: int = 0) -> Result:
    result = run(*args, cwd=cwd)
    assert result.rc == rc, f"git handoff {' '.join(args)}: rc={result.rc}\nout={result.out}\nerr={result.err}"
    return result


def task(task_id: str, cwd: Path | None = None) -> TaskView:
    shown: TaskView = handoff("show", task_id, "--json", cwd=cwd).json()
    return shown


def log_lines(cwd: Path | None = None) -> list[str]:
    return handoff("log", cwd=cwd).out.splitlines()


@pytest.fixture
def ready(repo: Path) -> Path:
    """An initialized repo with tasks t1 (check passes when `ok` exists) and t2 (after t1)."""
    (repo / ".gitignore").write_text("*.log\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore logs", cwd=repo)
    handoff("init")
    handoff("add", "First task", "--id", "t1", "--check", "test -f ok")
    handoff("add", "Second task", "--id", "t2", "--after", "t1", "--check", "true")
    return repo


# -- transitions ----------------------------------------------------------------------------


def test_claim_takes_next_eligible_and_records_the_claim(ready: Path) -> None:
    head = git("rev-parse", "HEAD", cwd=ready)
    out = handoff("claim", "--json").json()
    assert out["id"] == "t1"
    assert out["status"] == "in_progress"
    assert out["started_at_commit"] == head
    assert out["claimed_by"].endswith(str(ready))
    assert out["lease_expires_at"].endswith("Z")
    assert out["worktree"] == str(ready)
    assert out["branch"] == "refs/heads/main"
    assert any(f"Starting [t1] First task (base={head[:7]})" in line for line in log_lines())


def test_claim_named_task_and_worker_and_lease(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    handoff("add", "Third", "--id", "t3", "--check", "true")
    out = handoff("claim", "t3", "--worker", "alice", "--lease", "90s", "--json").json()
    assert out["id"] == "t3"
    assert out["claimed_by"] == "alice"
    assert out["lease_expires_at"] == "2026-07-01T10:01:30Z"


def test_claim_uses_configured_worker(ready: Path) -> None:
    git("config", "handoff.worker", "bob", cwd=ready)
    assert handoff("claim", "--json").json()["claimed_by"] == "bob"


def test_claim_nothing_eligible_exits_1_and_changes_nothing(ready: Path) -> None:
    handoff("claim")
    before = state_head(ready)
    result = handoff("claim", "--force", rc=1)  # t2 waits on t1
    assert "nothing eligible" in result.err
    assert state_head(ready) == before


def test_renew_pushes_the_lease(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    handoff("claim", "--lease", "10m")
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:05:00Z")
    assert handoff("renew", "t1", "--json").json()["lease_expires_at"] == "2026-07-01T10:15:00Z"
    assert handoff("renew", "t1", "--lease", "2h", "--json").json()["lease_expires_at"] == "2026-07-01T12:05:00Z"
    assert any("LOCK [t1] lease renewed" in line for line in log_lines())


def test_release_returns_to_pending_without_an_attempt(ready: Path) -> None:
    handoff("claim")
    (ready / "keep.txt").write_text("work in progress\n")
    out = handoff("release", "t1", "--json").json()
    assert out["status"] == "pending"
    assert out["attempts"] == 0
    assert out["claimed_by"] is None and out["lease_expires_at"] is None
    assert (ready / "keep.txt").read_text() == "work in progress\n"
    assert handoff("claim", "--json").json()["id"] == "t1"


def test_checkpoint_appends_logs_and_renews(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    handoff("claim", "--lease", "10m")
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:08:00Z")
    out = handoff("checkpoint", "t1", "routes created, tests pending", "--step", "2", "--of", "4", "--json").json()
    assert out["checkpoints"] == [
        {"step": 2, "total": 4, "description": "routes created, tests pending", "timestamp": "2026-07-01T10:08:00Z"}
    ]
    assert out["lease_expires_at"] == "2026-07-01T10:18:00Z"
    out = handoff("checkpoint", "t1", "tests written", "--json").json()
    assert out["checkpoints"][-1]["step"] == 3 and out["checkpoints"][-1]["total"] == 4
    lines = log_lines()
    assert '[SESSION-0] CHECKPOINT [t1] step=2/4 "routes created, tests pending"' in lines[-2]
    assert "CHECKPOINT [t1] step=3/4 \"tests written\"" in lines[-1]


def test_verify_runs_the_check_and_changes_nothing(ready: Path) -> None:
    before = state_head(ready)
    result = handoff("verify", "t1", rc=1)
    assert "TEST_FAIL" in result.out
    (ready / "ok").write_text("")
    assert handoff("verify", "t1", "--json").json()["ok"] is True
    assert state_head(ready) == before


def test_done_completes_when_the_check_passes(ready: Path) -> None:
    handoff("claim")
    (ready / "ok").write_text("yes\n")
    git("add", "ok", cwd=ready)
    git("commit", "-q", "-m", "work for t1", cwd=ready)
    head = git("rev-parse", "HEAD", cwd=ready)
    out = handoff("done", "t1", "--json").json()
    assert out["status"] == "completed"
    assert out["completed_at"].endswith("Z")
    assert out["completed_commit"] == head
    assert f"Completed [t1] (commit {head[:7]})" in log_lines()[-1]
    assert handoff("claim", "--json").json()["id"] == "t2"


def test_done_with_uncommitted_work_says_so(ready: Path) -> None:
    handoff("claim")
    (ready / "ok").write_text("not committed\n")
    out = handoff("done", "t1", "--json").json()
    assert out["status"] == "completed"
    assert out["uncommitted_at_completion"] == ["ok"]
    lines = log_lines()
    assert "WARN [t1] completed with 1 uncommitted file(s)" in lines[-2] and "Completed [t1]" in lines[-1]


def test_done_without_check_is_a_config_error_and_changes_nothing(ready: Path) -> None:
    handoff("add", "No check", "--id", "nc", "--priority", "P0")
    handoff("claim", "nc")
    before = state_head(ready)
    result = handoff("done", "nc", rc=2)
    assert "[CONFIG] Missing validation.command" in result.err
    # as the harness skill does: the refusal is logged, so `log --type ERROR` finds it; that
    # log line is the only change: one commit on top, the same tree
    after = state_head(ready)
    assert after is not None
    assert git("rev-parse", f"{after}^", cwd=ready) == before
    assert git("rev-parse", f"{after}^{{tree}}", cwd=ready) == git("rev-parse", f"{before}^{{tree}}", cwd=ready)
    assert "ERROR [nc] [CONFIG] Missing validation.command" in git("log", "-1", "--format=%B", after, cwd=ready)
    assert task("nc")["status"] == "in_progress"


def test_fail_counts_saves_rolls_back_and_cleans_up(ready: Path, tmp_path: Path) -> None:
    marker = tmp_path / "cleanup-saw"
    handoff("edit", "t1", "--cleanup", f"ls > {marker}")
    base = git("rev-parse", "HEAD", cwd=ready)
    handoff("claim")
    (ready / "new.txt").write_text("new\n")
    result = handoff("fail", "t1", "--reason", "Redis connection refused", "--json").json()
    assert result["task"]["status"] == "failed"
    assert result["task"]["attempts"] == 1
    assert result["task"]["error_log"] == ["[TASK_EXEC] Redis connection refused"]
    assert result["attempt"] == 1 and result["attempt_ref"] == "refs/harness/attempts/t1/1"
    assert result["rolled_back"] is True
    assert not (ready / "new.txt").exists()
    assert "new.txt" not in marker.read_text()  # cleanup ran after the rollback
    assert result["cleanup"]["ok"] is True
    lines = log_lines()
    assert "ERROR [t1] [TASK_EXEC] Redis connection refused" in lines[-2]
    assert f"ROLLBACK [t1] git reset --hard {base[:7]}" in lines[-1]


def test_fail_with_category(ready: Path) -> None:
    handoff("claim")
    out = handoff("fail", "t1", "--reason", "npm missing", "--category", "ENV_SETUP", "--json").json()
    assert out["task"]["error_log"] == ["[ENV_SETUP] npm missing"]


def test_failed_task_is_retried_until_max_attempts(ready: Path) -> None:
    handoff("edit", "t1", "--max-attempts", "2")
    handoff("claim")
    handoff("fail", "t1", "--reason", "one")
    assert handoff("claim", "--json").json()["id"] == "t1"
    handoff("fail", "t1", "--reason", "two")
    assert task("t1")["attempts"] == 2
    handoff("claim", rc=1)  # t1 failed for good; t2 is blocked by it
    assert task("t2")["status"] == "failed"


def test_fail_keep_worktree_saves_but_does_not_roll_back(ready: Path) -> None:
    handoff("claim")
    (ready / "new.txt").write_text("keep me\n")
    out = handoff("fail", "t1", "--reason", "stuck", "--keep-worktree", "--json").json()
    assert out["rolled_back"] is False
    assert out["attempt_ref"] == "refs/harness/attempts/t1/1"
    assert (ready / "new.txt").read_text() == "keep me\n"
    assert not any("ROLLBACK" in line for line in log_lines())


def test_fail_with_missing_base_commit_sets_attempts_to_max_without_reset(repo: Path) -> None:
    git("config", "handoff.worker", "w1", cwd=repo)
    handoff("init")
    plan = {
        "version": 2,
        "tasks": [{
            "id": "lost", "title": "Lost base", "status": "in_progress", "claimed_by": "w1",
            "started_at_commit": "0123456789abcdef0123456789abcdef01234567",
            "validation": {"command": "true", "timeout_seconds": 30},
        }],
    }
    (repo / "tasks.json").write_text(json.dumps(plan))
    handoff("import", "tasks.json")
    out = handoff("fail", "lost", "--reason", "gave up", "--json").json()
    assert out["task"]["attempts"] == 3 and out["task"]["status"] == "failed"
    assert out["rolled_back"] is False and out["attempt_ref"] is None
    assert (repo / "tasks.json").exists()  # no reset, no clean
    assert any("started_at_commit 0123456789abcdef0123456789abcdef01234567 is missing" in line for line in log_lines())


def test_fail_refuses_a_different_branch_unless_forced(ready: Path) -> None:
    handoff("claim")
    git("checkout", "-q", "-b", "elsewhere", cwd=ready)
    before = state_head(ready)
    result = handoff("fail", "t1", "--reason", "x", rc=2)
    assert "claimed on refs/heads/main" in result.err
    assert state_head(ready) == before
    handoff("fail", "t1", "--reason", "x", "--force")
    assert task("t1")["status"] == "failed"


def test_a_claim_belongs_to_its_worktree_whatever_the_worker_name(ready: Path) -> None:
    handoff("claim", "--worker", "someone-else")
    git("config", "handoff.worker", "me", cwd=ready)
    # same worktree: the claim is ours even under another name
    handoff("checkpoint", "t1", "fine")


def test_recovery_can_finish_a_claim_of_an_earlier_session(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFF_SESSION", "1")
    handoff("claim")
    monkeypatch.setenv("HANDOFF_SESSION", "2")
    (ready / "ok").write_text("")
    handoff("done", "t1")
    assert "[SESSION-2] Completed [t1]" in log_lines()[-1]


# -- illegal transitions: exit 2, state unchanged ---------------------------------------------------


def _complete_t1(repo: Path) -> None:
    handoff("claim", "t1")
    (repo / "ok").write_text("")
    handoff("done", "t1")


def _fail_t1(repo: Path) -> None:
    handoff("claim", "t1")
    handoff("fail", "t1", "--reason", "x")


SETUPS = {"pending": lambda repo: None, "completed": _complete_t1, "failed": _fail_t1}


@pytest.mark.parametrize("state", ["pending", "completed", "failed"])
@pytest.mark.parametrize(
    "args",
    [
        ("done", "t1"),
        ("fail", "t1", "--reason", "x"),
        ("checkpoint", "t1", "msg"),
        ("renew", "t1"),
        ("release", "t1"),
    ],
    ids=["done", "fail", "checkpoint", "renew", "release"],
)
def test_acting_on_a_task_not_in_progress_is_refused(ready: Path, state: str, args: tuple[str, ...]) -> None:
    SETUPS[state](ready)
    before = state_head(ready)
    result = handoff(*args, rc=2)
    assert f"it is {state}, not in progress" in result.err
    assert result.err.count("\n") == 1 and result.err.startswith("error: ")
    assert state_head(ready) == before


def test_claiming_a_completed_task_is_refused(ready: Path) -> None:
    _complete_t1(ready)
    before = state_head(ready)
    assert "already completed" in handoff("claim", "t1", rc=2).err
    assert state_head(ready) == before


def test_claiming_a_task_failed_for_good_is_refused(ready: Path) -> None:
    handoff("edit", "t1", "--max-attempts", "1")
    _fail_t1(ready)
    before = state_head(ready)
    assert "failed for good" in handoff("claim", "t1", rc=2).err
    assert state_head(ready) == before


def test_claiming_a_task_whose_dependencies_are_open_is_negative(ready: Path) -> None:
    before = state_head(ready)
    assert "waits on t1" in handoff("claim", "t2", rc=1).err
    assert state_head(ready) == before


def test_claiming_twice_from_one_worktree_is_refused_unless_forced(ready: Path) -> None:
    handoff("add", "Other", "--id", "t3", "--check", "true")
    handoff("claim", "t1")
    before = state_head(ready)
    assert "already claimed by this worktree" in handoff("claim", "t1", rc=2).err
    assert "already holds task t1" in handoff("claim", rc=2).err
    assert state_head(ready) == before
    assert handoff("claim", "--force", "--json").json()["id"] == "t3"


@pytest.mark.parametrize(
    "args",
    [
        ("claim", "no-such-task"),
        ("claim", "bad..id"),
        ("claim", "--lease", "10x"),
        ("done", "no-such-task"),
        ("fail", "t1", "--reason", "x", "--category", "NOPE"),
        ("fail", "t1", "--reason", "   "),
        ("checkpoint", "t1", "msg", "--step", "5", "--of", "4"),
        ("checkpoint", "t1", "msg", "--step", "0"),
        ("checkpoint", "t1", ""),
        ("renew", "t1", "--lease", "0s"),
        ("restore", "t1", "1"),
        ("restore", "t1", "0"),
        ("attempts", "nope"),
        ("verify", "nope"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(ready: Path, args: tuple[str, ...]) -> None:
    if args[0] in ("fail", "checkpoint", "renew"):
        handoff("claim", "t1")
    before = state_head(ready)
    result = handoff(*args, rc=2)
    assert result.err.startswith("error: ")
    assert state_head(ready) == before


def test_verify_without_check_is_a_config_error(ready: Path) -> None:
    handoff("add", "No check", "--id", "nc")
    assert "[CONFIG] Missing validation.command" in handoff("verify", "nc", rc=2).err


def test_untrusted_check_is_refused(ready: Path) -> None:
    trusted = ready / ".git" / "handoff" / "trusted.json"
    trusted.unlink()
    handoff("claim")
    before = state_head(ready)
    result = handoff("done", "t1", rc=2)
    assert "git handoff trust" in result.err
    assert state_head(ready) == before


# -- nothing lost -------------------------------------------------------------------------------


def test_failed_done_loses_nothing_and_restore_brings_every_byte_back(ready: Path) -> None:
    base = git("rev-parse", "HEAD", cwd=ready)
    handoff("claim")
    # a commit after the claim
    committed = bytes(range(256)) * 3
    (ready / "committed.bin").write_bytes(committed)
    git("add", "committed.bin", cwd=ready)
    git("commit", "-q", "-m", "work in progress", cwd=ready)
    # a modified tracked file, a new untracked file (executable, in a new directory), an ignored file
    tracked = b"hello\nmodified \xff\xfe line\n"
    (ready / "README").write_bytes(tracked)
    (ready / "sub").mkdir()
    untracked = b"#!/bin/sh\necho new\n"
    (ready / "sub" / "new.sh").write_bytes(untracked)
    (ready / "sub" / "new.sh").chmod(0o755)
    (ready / "debug.log").write_bytes(b"ignored stays\n")

    result = handoff("done", "t1", rc=1)
    assert "[TEST_FAIL]" in result.err and "attempt 1 saved" in result.err

    assert git("rev-parse", "HEAD", cwd=ready) == base
    assert git("status", "--porcelain", "--untracked-files=all", cwd=ready) == ""
    assert not (ready / "committed.bin").exists() and not (ready / "sub").exists()
    assert (ready / "README").read_text() == "hello\n"
    assert (ready / "debug.log").read_bytes() == b"ignored stays\n"
    t1 = task("t1")
    assert t1["status"] == "failed" and t1["attempts"] == 1
    assert t1["error_log"][0].startswith("[TEST_FAIL] Validation failed: exit 1")

    listed = handoff("attempts", "t1", "--json").json()
    assert len(listed) == 1
    entry = listed[0]
    assert entry["attempt"] == 1 and entry["category"] == "TEST_FAIL" and entry["time"].endswith("Z")
    assert entry["reason"].startswith("Validation failed")
    assert sorted(f["path"] for f in entry["files"]) == ["README", "committed.bin", "sub/new.sh"]
    assert "ignored" not in json.dumps(entry)
    assert "#1" in handoff("attempts", "t1").out

    handoff("restore", "t1", "1")
    assert (ready / "committed.bin").read_bytes() == committed
    assert (ready / "README").read_bytes() == tracked
    assert (ready / "sub" / "new.sh").read_bytes() == untracked
    assert os.stat(ready / "sub" / "new.sh").st_mode & stat.S_IXUSR
    assert (ready / "debug.log").read_bytes() == b"ignored stays\n"
    assert git("rev-parse", "HEAD", cwd=ready) == base
    assert any('RECOVERY [t1] action="restore attempt 1"' in line for line in log_lines())


def test_restore_refuses_uncommitted_changes_without_force(ready: Path) -> None:
    handoff("claim")
    (ready / "README").write_text("attempt\n")
    handoff("fail", "t1", "--reason", "x")
    (ready / "README").write_text("mine now\n")
    before = state_head(ready)
    assert "uncommitted changes" in handoff("restore", "t1", "1", rc=2).err
    assert (ready / "README").read_text() == "mine now\n"
    assert state_head(ready) == before
    handoff("restore", "t1", "1", "--force")
    assert (ready / "README").read_text() == "attempt\n"


def test_restore_removes_files_the_attempt_deleted(ready: Path) -> None:
    handoff("claim")
    (ready / ".gitignore").unlink()
    handoff("fail", "t1", "--reason", "x")
    assert (ready / ".gitignore").exists()
    out = handoff("restore", "t1", "1", "--json").json()
    assert out["deleted"] == [".gitignore"]
    assert not (ready / ".gitignore").exists()


def test_attempts_are_numbered_per_task(ready: Path) -> None:
    for n in (1, 2):
        handoff("claim", "t1")
        (ready / f"try{n}.txt").write_text(f"{n}\n")
        handoff("fail", "t1", "--reason", f"try {n}")
    listed = handoff("attempts", "t1", "--json").json()
    assert [a["attempt"] for a in listed] == [1, 2]
    assert [a["reason"] for a in listed] == ["try 1", "try 2"]
    assert [a["files"] for a in listed] == [[{"status": "A", "path": "try1.txt"}],
                                            [{"status": "A", "path": "try2.txt"}]]


def test_a_failing_cleanup_is_logged_as_a_warning(ready: Path) -> None:
    handoff("edit", "t1", "--cleanup", "echo cannot stop redis; exit 3")
    handoff("claim")
    out = handoff("fail", "t1", "--reason", "x", "--json").json()
    assert out["cleanup"]["ok"] is False and out["cleanup"]["exit_code"] == 3
    assert "WARN [t1] on_failure.cleanup failed (TEST_FAIL): exit 3: cannot stop redis" in log_lines()[-1]


def test_an_untrusted_cleanup_is_refused_before_anything_changes(ready: Path) -> None:
    handoff("edit", "t1", "--cleanup", "echo cleaning")
    (ready / ".git" / "handoff" / "trusted.json").unlink()
    handoff("claim")
    (ready / "new.txt").write_text("work\n")
    before = state_head(ready)
    assert "cleanup command" in handoff("fail", "t1", "--reason", "x", rc=2).err
    assert state_head(ready) == before
    assert (ready / "new.txt").exists()
    assert git("for-each-ref", "refs/harness/attempts", cwd=ready) == ""


# -- autoSync: one table, both adapters ------------------------------------------------------

# The work cycle, each step as `git handoff ARGS` and as the MCP tool of that name with these
# arguments ({p}: the adapter's own tasks, as both clones share the remote): (label, command,
# CLI args, MCP arguments, exit code).
SYNC_STEPS: list[tuple[str, str, tuple[str, ...], dict[str, str], int]] = [
    ("claim", "claim", ("{p}t",), {"id": "{p}t"}, 0),
    ("renew", "renew", ("{p}t",), {"id": "{p}t"}, 0),
    ("checkpoint", "checkpoint", ("{p}t", "half way"), {"id": "{p}t", "message": "half way"}, 0),
    ("release", "release", ("{p}t",), {"id": "{p}t"}, 0),
    ("claim again", "claim", ("{p}t",), {"id": "{p}t"}, 0),
    ("done", "done", ("{p}t",), {"id": "{p}t"}, 0),
    ("add", "add", ("z", "--id", "{p}z"), {"title": "z", "id": "{p}z"}, 0),
    ("claim u", "claim", ("{p}u",), {"id": "{p}u"}, 0),
    ("fail", "fail", ("{p}u", "--reason", "no"), {"id": "{p}u", "reason": "no"}, 0),
    ("claim w", "claim", ("{p}w",), {"id": "{p}w"}, 0),
    ("done, its check failing", "done", ("{p}w",), {"id": "{p}w"}, 1),
]


def _synced_after(path: Path, adapter: str) -> set[str]:
    """The steps after which this clone's state on the remote moved, each run through `adapter`."""
    moved: set[str] = set()
    for label, command, args, arguments, rc in SYNC_STEPS:
        before = remote_state(path)
        if adapter == "cli":
            handoff(command, *(a.format(p=adapter) for a in args), cwd=path, rc=rc)
        else:
            answer = mcp_tools.call(mcp_tools.Workspace(str(path)), command,
                                    {k: v.format(p=adapter) for k, v in arguments.items()})
            assert answer.exit_code == rc, (label, answer.error, answer.value)
            assert not answer.warnings, answer.warnings
        if remote_state(path) != before:
            assert remote_state(path) == state_head(path), label  # a sync pushes all of it
            moved.add(label)
    return moved


def test_the_cli_and_the_mcp_tools_sync_after_the_same_commands(clones: Callable[[str], Path]) -> None:  # noqa: F811
    """handoff.autoSync: ops/work.py's SYNCED_AFTER alone says which commands push; both
    adapters push after exactly those (done whose check failed too: its attempt was recorded)."""
    a = clones("a")
    handoff("init", cwd=a)
    for prefix in ("cli", "mcp"):
        for tid, check in (("t", "true"), ("u", "true"), ("w", "false")):
            handoff("add", tid, "--id", prefix + tid, "--check", check, cwd=a)
    handoff("sync", cwd=a)
    b = clones("b")
    handoff("sync", cwd=b)
    handoff("trust", "--all", cwd=b)  # the checks came from clone a
    for path in (a, b):
        git("config", "handoff.autoSync", "true", cwd=path)
    commands = {command for _, command, _, _, _ in SYNC_STEPS}
    assert SYNCED_AFTER <= commands  # a command added to the table needs its step here
    by_cli, by_mcp = _synced_after(a, "cli"), _synced_after(b, "mcp")
    assert by_cli == by_mcp
    assert by_cli == {label for label, command, _, _, _ in SYNC_STEPS if command in SYNCED_AFTER}
    assert "done, its check failing" in by_cli and "claim" not in by_cli and "add" not in by_cli
