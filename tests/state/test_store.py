"""The transaction engine, called directly (no CLI): follow-ups after a commit, what
they swallow, and the one path every state commit takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.core.errors import GitFailure, UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import tasks, work
from git_handoff.ops.claim import claim
from git_handoff.state.snapshot import STATE_REF
from git_handoff.state.store import StateStore, Tx
from tests.support.repo import git


@pytest.fixture
def store(repo: Path) -> StateStore:
    s = StateStore(Repo.discover(repo))
    tasks.init(s)
    return s


def test_follow_ups_run_once_after_the_commit_in_order(store: StateStore) -> None:
    seen: list[tuple[str, str | None]] = []

    def apply(tx: Tx) -> None:
        tx.log("INIT", "one")
        tx.after_commit("first", lambda: seen.append(("first", store.head())))
        tx.after_commit("second", lambda: seen.append(("second", store.head())))
        assert seen == []  # nothing runs inside the transaction

    before = store.head()
    store.transact(apply)
    assert store.head() != before
    assert seen == [("first", store.head()), ("second", store.head())]
    assert store.swallowed == []


def test_follow_ups_of_a_refused_transaction_never_run(store: StateStore) -> None:
    ran: list[str] = []

    def apply(tx: Tx) -> None:
        tx.after_commit("x", lambda: ran.append("x"))
        raise UsageError("no")

    with pytest.raises(UsageError):
        store.transact(apply)
    assert ran == []


def test_follow_ups_of_a_lost_compare_and_swap_are_dropped(store: StateStore) -> None:
    """apply runs again after a lost swap; only the committed run's follow-ups run."""
    runs: list[int] = []
    ran: list[int] = []

    def apply(tx: Tx) -> None:
        n = len(runs)
        runs.append(n)
        if n == 0:  # another clone's commit lands between our read and our swap
            head = store.head()
            other = Tx(store, store.snapshot())
            other.log("INIT", "meanwhile")
            assert store.publish(store.build_commit(other, [head] if head else []), head, "test")
        tx.log("INIT", f"run {n}")
        tx.after_commit("x", lambda: ran.append(n))

    store.transact(apply)
    assert runs == [0, 1] and ran == [1]


def test_a_failing_follow_up_is_recorded_not_raised(store: StateStore) -> None:
    def boom() -> None:
        raise GitFailure("notes ref is locked")

    def apply(tx: Tx) -> str:
        tx.log("INIT", "x")
        tx.after_commit("notes", boom)
        tx.after_commit("after", lambda: None)
        return "done"

    assert store.transact(apply) == "done"
    assert store.swallowed == ["notes: notes ref is locked"]


def test_a_follow_up_may_run_its_own_transaction(store: StateStore) -> None:
    """Follow-ups run after the state lock is released (done writes the handoff document)."""
    def apply(tx: Tx) -> None:
        tx.log("INIT", "outer")
        tx.after_commit("inner", lambda: store.transact(lambda t: t.log("INIT", "inner")))

    store.transact(apply)
    assert store.swallowed == []
    message = git("log", "-1", "--format=%B", STATE_REF, cwd=store.repo.root())
    assert message.endswith("INIT inner")


def test_done_writes_notes_and_document_as_follow_ups(store: StateStore) -> None:
    root = store.repo.root()
    git("config", "handoff.tasksPerSession", "1", cwd=root)
    task = tasks.add(store, title="T", task_id="t", check="true")
    claim(store, task.id)
    (root / "f").write_text("x\n")
    git("add", "f", cwd=root)
    git("commit", "-q", "-m", "work", cwd=root)
    store.session = 0  # no session: the document trigger has nothing to do, the notes do
    work.done(store, "t")
    assert store.swallowed == []
    note = git("notes", "--ref=harness", "show", "HEAD", cwd=root)
    assert "task: t" in note and "outcome: completed" in note
