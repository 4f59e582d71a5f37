"""The journal of the claims this worktree holds (git_handoff.state.claim_journal): one
entry a claim, read back only while the state still shows that very claim."""

from __future__ import annotations

import json
from pathlib import Path

from git_handoff.core.model import Task
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import claim_journal
from git_handoff.state.claim_journal import Entry
from tests.support.repo import run


def test_the_claim_journal_lives_exactly_as_long_as_the_claim_here(repo: Path) -> None:
    journal = repo / ".git" / "handoff" / "claims"
    assert run("init").rc == 0
    for task_id in ("a", "b", "c"):
        assert run("add", f"task {task_id}", "--id", task_id, "--check", "true").rc == 0
    for task_id, end in (("a", ("release", "a")), ("a", ("fail", "a", "--reason", "no")), ("b", ("done", "b"))):
        assert run("claim", task_id).rc == 0
        entry = json.loads((journal / f"{task_id}.json").read_text())
        record = run("show", task_id, "--json").json()
        assert (entry["base"], entry["worker"]) == (record["started_at_commit"], record["claimed_by"])
        assert run(*end).rc == 0
        assert sorted(p.name for p in journal.iterdir()) == []
    # a claim the state no longer shows (here: released behind this worktree's back, as a
    # merge would) leaves no entry behind after the next session start
    assert run("claim", "c").rc == 0
    entry = (journal / "c.json").read_text()
    assert run("release", "c").rc == 0
    (journal / "c.json").write_text(entry)
    assert run("session", "start").rc == 0
    assert sorted(p.name for p in journal.iterdir()) == []


def _claimed(task_id: str, claimed_at: str = "2026-01-01T00:00:00Z") -> Task:
    return Task(id=task_id, title=task_id, status="in_progress", started_at_commit="b" * 40, claimed_by="me@host:/w",
                extra={"claimed_at": claimed_at, "branch": "main"})


def test_an_entry_is_written_read_updated_and_dropped(repo: Path) -> None:
    r = Repo.discover(repo)
    task = _claimed("a")
    claim_journal.record_claim(r, task)
    entry = claim_journal.read(r, "a")
    assert entry == Entry(task="a", claimed_at="2026-01-01T00:00:00Z", base="b" * 40, worker="me@host:/w",
                          branch="main")
    assert claim_journal.of_claim(r, task) == entry
    assert claim_journal.of_claim(r, _claimed("a", "2026-02-02T00:00:00Z")) is None  # another claim of it
    claim_journal.update(r, "a", checkpoint_tree="c" * 40)
    assert claim_journal.read(r, "a") == Entry(**{**entry.__dict__, "checkpoint_tree": "c" * 40})
    claim_journal.record_claim(r, _claimed("b"))
    assert [e.task for e in claim_journal.entries(r)] == ["a", "b"]
    claim_journal.drop(r, "a")
    assert claim_journal.read(r, "a") is None and [e.task for e in claim_journal.entries(r)] == ["b"]


def test_what_is_not_an_entry_reads_as_none(repo: Path) -> None:
    r = Repo.discover(repo)
    claim_journal.record_claim(r, Task(id="x", title="x"))  # no claim: nothing journalled
    assert claim_journal.entries(r) == []
    folder = r.worktree_dir / claim_journal.DIRECTORY
    folder.mkdir()
    (folder / "bad.json").write_text("not json")
    (folder / "odd.json").write_text(json.dumps({"task": "other", "claimed_at": "t", "base": "b", "worker": "w"}))
    (folder / "short.json").write_text(json.dumps({"task": "short", "claimed_at": "t"}))
    assert claim_journal.entries(r) == [] and claim_journal.read(r, "../escape") is None
