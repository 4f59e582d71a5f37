"""The prompt read from the indexes (the status and claim indexes, only the tasks a
rendering shows read) is, byte for byte, the prompt composed from every task."""

from __future__ import annotations

from pathlib import Path

from git_handoff.core.model import now_iso
from git_handoff.ops import handoff, prompt
from git_handoff.state import writers
from git_handoff.state.session_records import current_number
from tests.support.repo import run
from tests.support.state import fresh_store, tasks_from_blobs


def _from_every_task(repo: Path) -> str:
    store = fresh_store(repo)
    snap = store.snapshot()
    tasks = {t.id: t for t in tasks_from_blobs(store)}
    shown = writers.for_prompt(snap, snap.commit)
    spec = handoff.spec_ref_of(snap, {i: t for i, t in tasks.items() if i not in shown.tasks},
                               use_config=shown.use_config)
    return prompt.compose(tasks, shown.doc, number=current_number(store), spec=spec,
                          approved=prompt.approval(store), hidden=shown.tasks, left_out=shown.notes)


def _check(repo: Path) -> str:
    expected = _from_every_task(repo)
    assert prompt.render_prompt(fresh_store(repo)) == expected
    assert prompt.render_prompt(fresh_store(repo)) == expected  # the indexes as written by the first
    return expected


def test_the_prompt_from_the_indexes_is_the_prompt_from_every_task(repo: Path) -> None:
    assert run("init").rc == 0
    _check(repo)
    assert run("add", "Root", "--id", "root", "--priority", "P0", "--check", "true", "--spec", "docs/a.md").rc == 0
    assert run("add", "After root", "--id", "after", "--after", "root", "--check", "make test").rc == 0
    assert run("add", "Pair A", "--id", "ca", "--check", "true").rc == 0
    assert run("add", "Pair B", "--id", "cb", "--after", "ca", "--check", "true").rc == 0
    assert run("add", "Doomed", "--id", "doomed", "--check", "false", "--max-attempts", "1").rc == 0
    assert run("add", "Waits on doomed", "--id", "waits", "--after", "doomed", "--check", "true").rc == 0
    for i in range(60):  # enough lines that the ladder has to shorten the listing
        assert run("add", f"Filler task {i} " + "x" * 120, "--id", f"f{i:02d}",
                   "--priority", ("P0", "P1", "P2")[i % 3], "--check", f"echo {i}").rc == 0
    text = _check(repo)
    assert "Remaining tasks" in text and len(text.encode()) < prompt.PROMPT_LIMIT
    assert run("session", "start", "--worker", "w").rc == 0
    assert run("claim", "root", "--worker", "w").rc == 0
    _check(repo)
    assert run("done", "root").rc == 0
    assert run("claim", "doomed", "--worker", "w").rc == 0
    assert run("done", "doomed").rc == 1  # failed for good: `waits` is blocked
    _check(repo)
    assert run("claim", "--worker", "w").rc == 0
    assert run("edit", "f07", "--title", "Renamed " + now_iso()).rc == 0
    _check(repo)
