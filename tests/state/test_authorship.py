"""Who wrote each record, judged through the history (git_handoff.state.authorship): the
commit that introduced a task's content is its writer, not the commit that carried it.

One real repository and the real CLI. Its writers, without keys: this clone (its own
state commits, written with handoff.allowedSigners on), an unapproved one (commits
written with the setting off: unsigned, not this clone's) and an approved machine that
does not enforce the setting (commits written with it off, then approved as this clone's
own). tests/hostile/test_writer_content.py runs the same rules across a fleet of signing
clones and both ways of joining it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_handoff.infra import signing
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import authorship, writers
from tests.support.repo import git, run


@pytest.fixture
def allowed(repo: Path, tmp_path: Path) -> Path:
    """The setting on, with no key listed, and no baseline: everything is judged."""
    path = tmp_path / "allowed_signers"
    path.write_text("")
    git("config", "handoff.allowedSigners", str(path), cwd=repo)
    private = repo / ".git" / "handoff"
    private.mkdir(parents=True, exist_ok=True)
    (private / writers.APPROVALS_FILE).write_text(json.dumps({"version": 1, "baseline": None, "keys": {}}))
    return path


def _ok(*args: str) -> None:
    res = run(*args)
    assert res.rc == 0, (args, res.err)


def _as(who: str, repo: Path, allowed: Path, *args: str) -> None:
    """`git handoff ARGS` written by `who`: "here" (this clone), "mallory" (unapproved) or
    "alice" (approved, not enforcing the setting)."""
    if who == "here":
        _ok(*args)
        return
    before = _head(repo)
    git("config", "--unset", "handoff.allowedSigners", cwd=repo)
    try:
        _ok(*args)
    finally:
        git("config", "handoff.allowedSigners", str(allowed), cwd=repo)
    if who == "alice":
        after = _head(repo)
        assert after is not None
        new = git("rev-list", after, *([f"^{before}"] if before else []), cwd=repo).split()
        with open(repo / ".git" / "handoff" / signing.OWN_FILE, "a") as fh:
            fh.write("".join(f"{c}\n" for c in new))


def _head(repo: Path) -> str | None:
    return git("rev-parse", "-q", "--verify", "refs/harness/state", cwd=repo, check=False) or None


def _marks(repo: Path) -> dict[str, str]:
    return writers.unapproved(Repo.discover(repo), _head(repo))


def test_an_approved_writers_run_of_a_task_leaves_it_its_writers_and_an_edit_makes_it_its(
        repo: Path, allowed: Path) -> None:
    _as("mallory", repo, allowed, "init")
    _as("mallory", repo, allowed, "add", "M", "--id", "m", "--check", "true", "--max-attempts", "3")
    assert _marks(repo) == {"m": "unsigned"}
    for args in (("claim", "m"), ("renew", "m"), ("checkpoint", "m", "half way"), ("release", "m"),
                 ("claim", "m"), ("fail", "m", "--reason", "no luck")):
        _as("alice", repo, allowed, *args)
        assert _marks(repo) == {"m": "unsigned"}, args
    _as("alice", repo, allowed, "edit", "m", "--title", "M, read and rewritten")
    assert _marks(repo) == {}


def test_an_unapproved_writers_run_of_an_approved_task_marks_it(repo: Path, allowed: Path) -> None:
    """The rule keeps a writer: it never clears a mark, and never lets an unapproved
    writer's bytes in unmarked (a claim's branch, a checkpoint's text)."""
    _ok("init")
    _ok("add", "A", "--id", "a", "--check", "true")
    _as("mallory", repo, allowed, "claim", "a")
    _as("mallory", repo, allowed, "release", "a")
    assert _marks(repo) == {"a": "unsigned"}


def test_a_rename_here_keeps_the_renamed_tasks_writer_and_its_dependents(repo: Path, allowed: Path) -> None:
    _as("mallory", repo, allowed, "init")
    _as("mallory", repo, allowed, "add", "M", "--id", "m")
    _as("mallory", repo, allowed, "add", "D", "--id", "d", "--after", "m")
    _ok("add", "Mine", "--id", "mine", "--after", "m")
    _ok("rename", "m", "m2")
    assert _marks(repo) == {"m2": "unsigned", "d": "unsigned"}  # `mine` stays this clone's
    _ok("rm", "m2", "--force")
    assert _marks(repo) == {"d": "unsigned"}
    _ok("edit", "d", "--after", "mine")  # a dependency chosen here, not followed: an edit
    assert _marks(repo) == {}


def test_a_commit_at_a_shallow_cut_is_never_approved(repo: Path, allowed: Path) -> None:
    """This clone's commit at the cut carried Mallory's task: what it holds came from
    history not here, so it is unknown, not this clone's; with the history here, it is
    Mallory's again (the cache is keyed by the cut)."""
    _as("mallory", repo, allowed, "init")
    _as("mallory", repo, allowed, "add", "M", "--id", "m")
    _ok("add", "Mine", "--id", "mine")
    at_cut = _head(repo)
    _ok("add", "Later", "--id", "later")
    full = _marks(repo)
    assert full == {"m": "unsigned"}
    (repo / ".git" / "shallow").write_text(f"{at_cut}\n")
    assert _marks(repo) == {"m": authorship.UNKNOWN, "mine": authorship.UNKNOWN}
    assert "unapproved_writer" in json.loads(run("show", "m", "--json").out)
    (repo / ".git" / "shallow").unlink()
    assert _marks(repo) == full
