"""The cheaper edge check of a fetched state asks what it asked before.

The line fields of a task are checked in one pass (task_file.lines_problem), a tree entry
name of plain characters by one match, and a blob's header and data come from one call
(Repo.small_blob): each answers exactly as the field-by-field rules do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core import field_checks, model, state_tree, task_file
from git_handoff.core.errors import InvalidState
from git_handoff.core.model import Task
from git_handoff.infra.gitrepo import Repo
from tests.support.repo import make_repo, run, state_head
from tests.support.speed import examples

_texts = st.lists(st.sampled_from(["a", "b", " ", "\n", "\x00", "\x7f", "\u2028", "\ud800", "é", "x" * 200]),
                  max_size=12).map("".join)


def _first_problem(lines: list[tuple[str, str, int]]) -> str | None:
    for name, value, cap in lines:
        why = field_checks.line_problem(value, cap)
        if why:
            return f"field {name!r} {why}"
    return None


@settings(max_examples=examples(300), deadline=None)
@given(lines=st.lists(st.tuples(st.sampled_from(["title", "reason", "spec_ref"]), _texts,
                                st.integers(min_value=0, max_value=600)), max_size=5))
def test_one_pass_over_the_lines_answers_as_one_field_at_a_time(lines: list[tuple[str, str, int]]) -> None:
    assert task_file.lines_problem(lines) == _first_problem(lines)


def test_a_long_line_past_the_smallest_cap_is_still_found() -> None:
    lines = [("title", "t", model.MAX_TITLE), ("claimed_by", "w" * 600, 4096), ("error_log[0]", "e" * 2001, 2000)]
    assert task_file.lines_problem(lines) == "field 'error_log[0]' longer than 2000 characters (2001)"


@pytest.mark.parametrize(("fields", "named"), [
    ({"title": "ok", "error_log": ["fine", "bad\nline"]}, "field 'error_log[1]' holds a newline"),
    ({"title": "ok", "claimed_by": "w\x1b[2J"}, "field 'claimed_by' holds a newline or a control character"),
    ({"title": "x" * 501}, "field 'title' longer than 500 characters (501)"),
    ({"title": "ok", "spec_ref": "s" * 4097, "error_log": ["e"]}, "field 'spec_ref' longer than 4096"),
    ({"title": "ok", "extra": {"hlc": "soon"}}, "field hlc must be a clock stamp (ms.counter.clone), not 'soon'"),
    ({"title": "ok", "extra": {"lease_seconds": "abc"}}, "field lease_seconds must be a whole number"),
])
def test_a_task_that_fails_names_its_field(fields: dict[str, object], named: str) -> None:
    task = Task(id="t1", **fields)  # type: ignore[arg-type]
    with pytest.raises(InvalidState) as exc:
        task_file.check_task_text(task, "tasks/x/y/t1.json")
    assert exc.value.message.startswith(f"tasks/x/y/t1.json: {named}"), exc.value.message


def test_a_lone_surrogate_in_a_line_is_found_only_where_an_escape_could_make_one() -> None:
    task = Task(id="t1", title="ok", error_log=("a", "b\ud800"))
    with pytest.raises(InvalidState, match=r"error_log\[1\]' is not valid Unicode"):
        task_file.check_task_text(task, "where")
    raw = b'{"id": "t1", "title": "ok", "error_log": ["a", "b\\ud800"]}'
    with pytest.raises(InvalidState, match=r"error_log\[1\]' is not valid Unicode"):
        task_file.task(raw, "where")


@settings(max_examples=examples(300), deadline=None)
@given(name=st.text(alphabet=st.sampled_from(["a", "Z", "0", ".", "_", "-", "@", "/", "\\", "\x00", "\n", "é",
                                              "g", "t"]),
                    max_size=8) | st.sampled_from([".git", ".GIT", ".git.", ".git~1", "..", ".", "a" * 256, "a" * 255]))
def test_the_plain_name_shortcut_accepts_only_what_every_rule_accepts(name: str) -> None:
    if state_tree._PLAIN_NAME.fullmatch(name):
        assert state_tree._name_rules(name) is None
    assert (state_tree.name_problem(name) is None) == (state_tree._name_rules(name) is None)


def test_small_blob_reads_a_small_blob_and_only_the_header_of_a_large_one(tmp_path: Path) -> None:
    make_repo(tmp_path / "r")
    repo = Repo.discover(tmp_path / "r")
    small = str(repo.raw.create_blob(b"hello"))
    large = str(repo.raw.create_blob(b"z" * 5000))
    tree = repo.commit_tree(str(repo.raw.head.target))
    assert repo.small_blob(small, 4096) == ("blob", 5, b"hello")
    assert repo.small_blob(large, 4096) == ("blob", 5000, None)
    found = repo.small_blob(tree, 4096)
    assert found is not None and found[0] == "tree" and found[2] is None
    assert repo.small_blob("0" * 40, 4096) is None


@pytest.mark.parametrize("task", [
    '{"id": "a", "title": "A", "validation": {"command": "echo \\ud800"}}',
    '{"id": "a", "title": "A", "on_failure": {"cleanup": "rm \\udfff"}}',
    '{"id": "a", "title": "A", "checkpoints": [{"step": 1, "description": "ok", "note": "\\ud83d"}]}',
], ids=["command", "cleanup", "checkpoint field"])
def test_a_lone_surrogate_in_a_command_or_a_checkpoint_is_refused_on_import(repo: Path, task: str) -> None:
    """Not a line, so no line rule asked it; writing the task failed (`unexpected
    UnicodeEncodeError`), and fetched, printing it did (tests/hostile/test_shared_remote.py)."""
    assert run("init").rc == 0
    before = state_head(repo)
    (repo / "tasks.json").write_text('{"version": 2, "tasks": [' + task + "]}")
    res = run("import", "tasks.json")
    assert res.rc == 2, res.err
    assert res.err.strip() == "error: tasks.json: task #1: holds text that is not valid Unicode (a lone surrogate)"
    assert state_head(repo) == before


def test_a_check_with_colored_output_fails_into_records_every_clone_reads(repo: Path) -> None:
    """A test runner's colors (and a tab, a bell) in a failing check's output went into
    the error log entry and the attempt's reason as they were: every other clone's edge
    then refused this clone's state (`error_log[0]` holds a control character), and the
    attempt was unreadable here."""
    import json
    import subprocess

    from git_handoff.state.snapshot import task_path

    assert run("init").rc == 0
    check = "printf '\\033[31mFAIL\\033[0m\\ttest_x\\a\\n'; exit 1"
    assert run("add", "colored", "--id", "c1", "--check", check).rc == 0
    assert run("claim", "c1").rc == 0
    res = run("done", "c1")
    assert res.rc == 1, res.err
    path = task_path("c1")
    raw = subprocess.run(["git", "show", f"refs/harness/state:{path}"], cwd=repo, capture_output=True,
                         check=True).stdout
    state_tree.check_record(path, raw, "task")  # what another clone's sync asks
    assert json.loads(raw)["error_log"] == ["[TEST_FAIL] Validation failed: exit 1: FAIL test_x\\x07"]
    [attempt] = run("attempts", "c1", "--json").json()
    assert attempt["unreadable"] is None and attempt["reason"] == "Validation failed: exit 1: FAIL test_x\\x07"


def test_a_handoff_document_written_before_any_session_is_a_record_other_clones_read(repo: Path) -> None:
    """`doc write` before any session started wrote docs/0@<clone>.json, a name (and a
    session 0) the edge refused: every other clone's sync refused this clone's state."""
    import subprocess

    assert run("init").rc == 0
    assert run("doc", "write").rc == 0
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", "refs/harness/state"], cwd=repo,
                           capture_output=True, text=True, check=True).stdout.split()
    [doc] = [name for name in names if name.startswith("docs/")]
    assert doc.startswith("docs/0@")
    for name in names:
        raw = subprocess.run(["git", "show", f"refs/harness/state:{name}"], cwd=repo, capture_output=True,
                             check=True).stdout
        state_tree.check_record(name, raw)
