"""The recovery protocol at session start: each row of the harness decision matrix."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.ops.payloads import SessionStarted, TaskView
from git_handoff.ops.session_start import decide
from tests.support.repo import git, run


def _interrupted(repo: Path, check: str, *, mode: str = "exclusive") -> str:
    """A task claimed in session 1, which then vanished without ending."""
    assert run("init", "--mode", mode).rc == 0
    assert run("add", "The task", "--id", "t", "--check", check).rc == 0
    assert run("session", "start").rc == 0
    r = run("claim", "t")
    assert r.rc == 0, r.err
    return git("rev-parse", "HEAD", cwd=repo)


def _restart() -> SessionStarted:
    r = run("session", "start", "--json")
    assert r.rc == 0, r.err
    started: SessionStarted = r.json()
    return started


def _task() -> TaskView:
    shown: TaskView = run("show", "t", "--json").json()
    return shown


def _recovery_line(action: str) -> str:
    lines = [line for line in run("log", "--type", "RECOVERY").out.splitlines() if "[t]" in line]
    assert len(lines) == 1, lines
    assert "[SESSION-2] RECOVERY [t]" in lines[0]
    assert f'action="{action}"' in lines[0] and 'reason="' in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "dirty, commits, checkpoints, row",
    [
        (False, False, False, "fail-no-progress"),
        (False, False, True, "check-checkpoints"),
        (False, True, False, "validate"),
        (False, True, True, "validate"),
        (True, False, False, "commit-validate"),
        (True, True, True, "commit-validate"),
    ],
)
def test_matrix_decision(dirty: bool, commits: bool, checkpoints: bool, row: str) -> None:
    assert decide(dirty, commits, checkpoints) == row


def test_row1_no_progress_fails_with_session_timeout(repo: Path) -> None:
    _interrupted(repo, "true")
    out = _restart()
    assert out["session"] == 2
    assert out["recovery"][0]["action"] == "fail"
    t = _task()
    assert t["status"] == "failed" and t["attempts"] == 1
    assert t["error_log"][-1] == "[SESSION_TIMEOUT] No progress detected"
    assert "No progress detected" in _recovery_line("fail")


def test_row2_checkpoint_matching_files_resumes(repo: Path) -> None:
    _interrupted(repo, "true")
    assert run("checkpoint", "t", "read the code, planned the schema", "--step", "1", "--of", "3").rc == 0
    _restart()
    t = _task()
    assert t["status"] == "in_progress" and t["attempts"] == 0
    assert "files match checkpoint step=1/3" in _recovery_line("resume")
    # the resumed task belongs to the new session: it can be completed
    assert run("done", "t").rc == 0


def test_row2_checkpoint_but_files_lost_fails(repo: Path) -> None:
    _interrupted(repo, "true")
    (repo / "work.txt").write_text("progress\n")
    assert run("checkpoint", "t", "wrote work.txt").rc == 0
    (repo / "work.txt").unlink()  # the work vanished with the session
    _restart()
    t = _task()
    assert t["status"] == "failed" and t["attempts"] == 1
    assert t["error_log"][-1].startswith("[SESSION_TIMEOUT] Checkpoints claim progress")
    assert "work was lost" in _recovery_line("fail")


def test_row3_commits_and_passing_check_complete(repo: Path) -> None:
    _interrupted(repo, "test -f done.txt")
    (repo / "done.txt").write_text("ok\n")
    git("add", "done.txt", cwd=repo)
    git("commit", "-qm", "t: the work", cwd=repo)
    _restart()
    t = _task()
    assert t["status"] == "completed"
    assert "validation passed" in _recovery_line("complete")
    assert (repo / "done.txt").exists()


def test_row3_commits_and_failing_check_roll_back(repo: Path) -> None:
    base = _interrupted(repo, "test -f missing.txt")
    (repo / "done.txt").write_text("ok\n")
    git("add", "done.txt", cwd=repo)
    git("commit", "-qm", "t: the work", cwd=repo)
    _restart()
    t = _task()
    assert t["status"] == "failed" and t["attempts"] == 1
    assert git("rev-parse", "HEAD", cwd=repo) == base
    assert not (repo / "done.txt").exists()
    assert git("rev-parse", "refs/harness/attempts/t/1", cwd=repo)  # nothing lost
    assert "validation failed" in _recovery_line("fail")


def test_row4_uncommitted_passing_is_committed_and_completed(repo: Path) -> None:
    base = _interrupted(repo, "test -f new.txt")
    (repo / "new.txt").write_text("work\n")
    _restart()
    assert _task()["status"] == "completed"
    assert git("rev-parse", "HEAD~1", cwd=repo) == base
    assert "recovered by session 2" in git("log", "-1", "--format=%s", cwd=repo)
    assert git("status", "--porcelain", cwd=repo) == ""
    assert "committed the uncommitted changes" in _recovery_line("complete")


def test_row4_uncommitted_failing_is_rolled_back_and_saved(repo: Path) -> None:
    base = _interrupted(repo, "false")
    (repo / "new.txt").write_text("work\n")
    _restart()
    t = _task()
    assert t["status"] == "failed"
    assert git("rev-parse", "HEAD", cwd=repo) == base
    assert not (repo / "new.txt").exists()
    saved = git("show", "refs/harness/attempts/t/1:new.txt", cwd=repo)
    assert saved == "work"
    _recovery_line("fail")


def test_row5_commits_and_uncommitted_passing_complete(repo: Path) -> None:
    base = _interrupted(repo, "test -f a.txt && test -f b.txt")
    (repo / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=repo)
    git("commit", "-qm", "t: part one", cwd=repo)
    (repo / "b.txt").write_text("b\n")
    _restart()
    assert _task()["status"] == "completed"
    assert git("rev-list", "--count", f"{base}..HEAD", cwd=repo) == "2"
    _recovery_line("complete")


def test_row5_commits_and_uncommitted_failing_roll_back(repo: Path) -> None:
    base = _interrupted(repo, "exit 1")
    (repo / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=repo)
    git("commit", "-qm", "t: part one", cwd=repo)
    (repo / "b.txt").write_text("b\n")
    _restart()
    assert _task()["status"] == "failed"
    assert git("rev-parse", "HEAD", cwd=repo) == base
    assert git("status", "--porcelain", cwd=repo) == ""
    assert git("show", "refs/harness/attempts/t/1:b.txt", cwd=repo) == "b"
    _recovery_line("fail")


def test_concurrent_mode_leaves_other_workers_valid_claims(repo: Path) -> None:
    assert run("init", "--mode", "concurrent").rc == 0
    run("add", "Theirs", "--id", "theirs", "--check", "true")
    assert run("claim", "theirs", "--worker", "someone-else", "--lease", "2h").rc == 0
    out = _restart()
    assert out["recovery"] == []
    assert run("show", "theirs", "--json").json()["status"] == "in_progress"


def test_missing_check_is_skipped_and_logged(repo: Path) -> None:
    run("init")
    run("add", "No check", "--id", "t")
    run("session", "start")
    assert run("claim", "t").rc == 0
    (repo / "x.txt").write_text("x\n")
    git("add", "x.txt", cwd=repo)
    git("commit", "-qm", "x", cwd=repo)
    out = _restart()
    assert out["recovery"][0]["action"] == "skip"
    assert "validation.command" in _recovery_line("skip")


def test_commits_noted_for_another_task_do_not_count(repo: Path) -> None:
    _interrupted(repo, "true")
    (repo / "other.txt").write_text("o\n")
    git("add", "other.txt", cwd=repo)
    git("commit", "-qm", "someone else's work", cwd=repo)
    git("notes", "--ref=harness", "add", "-m", "task: other\nsession: 1", "HEAD", cwd=repo)
    _restart()
    assert _task()["error_log"][-1] == "[SESSION_TIMEOUT] No progress detected"
    assert "task_commits=0" in _recovery_line("fail")
