"""The one rule for a path from the state or a fetched commit (git_handoff.infra.paths):
it stays inside the work tree on every file system git runs on.
tests/hostile/test_paths.py runs `restore` against each way of breaking it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra.paths import confine, confine_all, path_problem


@pytest.mark.parametrize(("path", "why"), [
    ("", "is not a relative path"),
    ("/etc/passwd", "is not a relative path"),
    ("a\0b", "is not a relative path"),
    ("a\\b", "holds a backslash (a directory separator on Windows)"),
    ("a/../../b", "steps outside the work tree"),
    ("a//b", "steps outside the work tree"),
    ("a/. /b", "steps outside the work tree"),
    (".git/config", "is inside a .git directory"),
    ("x/.GIT./hooks/pre-commit", "is inside a .git directory"),
    ("x/git~1/config", "is inside a .git directory"),
    (".git::$INDEX_ALLOCATION/x", "is inside a .git directory"),
    (".g\u200cit/x", "is inside a .git directory"),
    ("a\nb", "holds a control or bidi formatting character"),
    ("a\u202eb", "holds a control or bidi formatting character"),
])
def test_path_problem_names_what_is_wrong(path: str, why: str) -> None:
    assert path_problem(path) == why


def test_this_clones_own_names_may_hold_controls_others_may_not() -> None:
    assert path_problem("line\nbreak.txt", foreign=False) is None
    for fine in ("a/b.txt", ".gitignore", "sub/.github/x", "git~x", "a.b./c"):
        assert path_problem(fine) is None, fine


def test_confine_refuses_a_step_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert confine(tmp_path, "real/file") == tmp_path / "real" / "file"
    assert confine(tmp_path, "link") == tmp_path / "link"  # the link itself may be written
    with pytest.raises(UsageError, match="^refusing path 'link/file': link is a symlink$"):
        confine(tmp_path, "link/file")
    with pytest.raises(UsageError, match=r"^refusing path '\.git/x': it is inside a \.git directory$"):
        confine_all(tmp_path, ["fine", ".git/x"])
    assert confine_all(tmp_path, ["a", "b/c"]) == [tmp_path / "a", tmp_path / "b" / "c"]
