"""The edge check of fetched state trees (git_handoff/remote/incoming.py) across the heads
of a fleet: a head is parsed only where it differs from the heads checked before it, and
that never lets through a record that was not checked at its own path."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from git_handoff.core import state_tree
from git_handoff.core.errors import InvalidState
from git_handoff.core.model import Task, now_iso
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import tasks as ops
from git_handoff.remote import incoming
from git_handoff.state.snapshot import task_path
from git_handoff.state.store import StateStore

N = 300


@pytest.fixture
def state(repo: Path) -> Iterator[tuple[Repo, str]]:
    """(the repository, the tree of a state of N tasks); no verdict remembered."""
    store = StateStore(Repo.discover(repo))
    ops.init(store, mode="concurrent")
    stamp = now_iso()

    def apply(tx: object) -> None:
        for n in range(N):
            tx.put_task(Task(id=f"t{n:05d}", title=f"task {n}", created_at=stamp, order=n + 1))  # type: ignore[attr-defined]

    store.transact(apply)
    head = store.head()
    assert head is not None
    incoming.forget_checked()
    yield store.repo, store.repo.commit_tree(head)
    incoming.forget_checked()


def _with_task(repo: Repo, tree: str, task_id: str, title: str = "new") -> str:
    """`tree` with one more task record (as `add` writes it, one task of another tree)."""
    sample = json.loads(repo.read_blob(repo.tree_lookup(tree, task_path("t00000"))[0]))  # type: ignore[index]
    sample.update(id=task_id, title=title)
    blob = repo.write_blob(json.dumps(sample, indent=2, sort_keys=True).encode() + b"\n")
    return repo.update_tree(tree, {task_path(task_id): blob})


def test_each_head_is_parsed_only_where_it_differs_from_the_heads_checked_before(state: tuple[Repo, str]) -> None:
    repo, tree = state
    first = incoming.check_state(repo, tree)
    assert first >= N  # a clone with no state of its own: every record of the first head
    heads = [_with_task(repo, tree, f"c{i}") for i in range(6)]
    assert [incoming.check_state(repo, h) for h in heads] == [1] * 6
    assert incoming.check_state(repo, heads[-1]) == 0  # checked already


def test_a_bad_record_in_a_later_head_is_still_refused(state: tuple[Repo, str]) -> None:
    repo, tree = state
    incoming.check_state(repo, tree)
    bad = repo.update_tree(tree, {task_path("t00007"): repo.write_blob(b"{not json")})
    with pytest.raises(InvalidState, match="t00007"):
        incoming.check_state(repo, bad)
    with pytest.raises(InvalidState, match="t00007"):  # a refused tree is not remembered as good
        incoming.check_state(repo, bad)


def test_a_checked_record_moved_to_another_path_is_checked_there(state: tuple[Repo, str]) -> None:
    repo, tree = state
    incoming.check_state(repo, tree)
    good = repo.tree_lookup(tree, task_path("t00001"))
    assert good is not None
    moved = repo.update_tree(tree, {task_path("t00002"): good[0]})  # t00001's record under t00002's name
    with pytest.raises(InvalidState, match="holds task 't00001'"):
        incoming.check_state(repo, moved)


def test_a_good_tree_of_another_repository_is_no_help_and_no_harm(state: tuple[Repo, str], tmp_path: Path) -> None:
    repo, tree = state
    incoming.check_state(repo, tree)
    other = Repo.discover(Path(repo.common_dir).parent)  # the same repository, opened again: trees present
    assert incoming.check_state(other, _with_task(other, tree, "x1")) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q", str(empty)], check=True)
    there = Repo.discover(empty)  # none of the trees checked so far is in this one
    lone = there.update_tree(None, {"tasks/0/0/placeholder.json": there.write_blob(b"{}")})
    with pytest.raises(InvalidState):
        incoming.check_state(there, lone)


def test_a_fetched_head_is_parsed_only_where_it_differs_from_where_it_meets_ours(
        state: tuple[Repo, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A head that forked from our state and changed one task parses that one record,
    though ours has moved on since (its newer records differ from the head's older ones
    but were checked when they came); a head ours holds parses nothing; a bad record
    is still refused, under the head's label, and nothing else is."""
    repo, _tree = state
    store = StateStore(repo)
    fork = store.head()
    assert fork is not None
    theirs = repo.create_commit(_with_task(repo, repo.commit_tree(fork), "c1"), [fork], "another clone\n")
    bad = repo.create_commit(repo.update_tree(repo.commit_tree(fork), {task_path("t00003"): repo.write_blob(b"{")}),
                             [fork], "a bad clone\n")

    def edit(tx: object) -> None:
        for n in range(20):
            task = tx.require_task(f"t{n:05d}")  # type: ignore[attr-defined]
            tx.put_task(dataclasses.replace(task, title=f"edited {n}"))  # type: ignore[attr-defined]

    store.transact(edit)
    parsed: list[str] = []
    real = state_tree.check_record

    def counted(path: str, raw: bytes, kind: str | None = None) -> None:
        parsed.append(path)
        real(path, raw, kind)

    monkeypatch.setattr(state_tree, "check_record", counted)
    assert incoming.state_problems(repo, [("theirs", theirs)]) == {}
    assert parsed == [task_path("c1")]
    parsed.clear()
    assert incoming.state_problems(repo, [("an old head", fork)]) == {}
    assert parsed == []
    problems = incoming.state_problems(repo, [("fine", theirs), ("bad", bad)])
    assert list(problems) == ["bad"] and "t00003" in problems["bad"]
    with pytest.raises(InvalidState, match="the state on bad has an unreadable file.*nothing was changed"):
        incoming.check_incoming_states(repo, [("fine", theirs), ("bad", bad)])


def test_a_fetched_notes_tree_is_read_only_where_it_differs_from_ours(
        state: tuple[Repo, str], monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _tree = state

    def notes_tree(texts: dict[str, bytes]) -> str:
        return repo.update_tree(None, {f"{obj[:2]}/{obj[2:]}": repo.write_blob(text) for obj, text in texts.items()})

    texts = {f"{n:040x}": f"note {n}\n".encode() for n in range(0, 300 * 7919, 7919)}
    ours = notes_tree(texts)
    one = next(iter(texts))
    theirs = notes_tree({**texts, one: b"another text\n", "ab" * 20: b"a new note\n"})
    read: list[str] = []
    real = Repo.object_kind

    def counted(self: Repo, oid: str) -> tuple[str, int] | None:
        read.append(oid)
        return real(self, oid)

    monkeypatch.setattr(Repo, "object_kind", counted)
    assert incoming.notes_problems(repo, {"notes/harness": theirs}, ours, "origin") == {}
    assert len(read) == 2  # the changed note and the new one, of 301
    huge = notes_tree({**texts, one: b"x" * (incoming.MAX_NOTE_BYTES + 1)})
    problems = incoming.notes_problems(repo, {"notes/harness": huge}, ours, "origin")
    assert list(problems) == ["notes/harness"] and "is not a text of at most" in problems["notes/harness"]
