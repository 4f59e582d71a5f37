"""The two test speeds themselves (tests/support/speed.py): which runs are the fast
layer, and how many examples a property runs in each."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import speed
from tests.support.remotes import Clones, clones, ok, remote_state, remote_url, shared_pair, task  # noqa: F401
from tests.support.repo import git

TESTS = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("markexpr", "fast"), [
    ("not slow", True), ("not  slow", True), ("not slow and not x", True), ("(not slow)", True),
    ("", False), ("slow", False), ("x", True), ("not x", False), ("slow or not slow", False),
    ("not slowish", False),
])
def test_a_run_is_the_fast_layer_when_its_marks_leave_out_slow(markexpr: str, fast: bool) -> None:
    assert speed.leaves_out_slow(markexpr) is fast


def test_the_full_suite_keeps_every_count_and_the_fast_layer_runs_a_fifth() -> None:
    was = speed.fast_layer()
    try:
        speed.configure("")
        assert [speed.examples(n) for n in (10, 40, 150, 500)] == [10, 40, 150, 500]
        speed.configure("not slow")
        assert [speed.examples(n) for n in (10, 40, 150, 500)] == [10, 20, 30, 100]
    finally:
        speed.configure("not slow" if was else "")
    assert speed.fast_layer() is was


def _marked_slow(decorators: list[ast.expr]) -> bool:
    return any(ast.unparse(d) in ("pytest.mark.slow", "slow") for d in decorators)


def _literal_counts(tree: ast.Module) -> list[str]:
    """The properties of a module that state a literal `max_examples` and are not slow."""
    module_slow = any(isinstance(node, ast.Assign) and any(ast.unparse(t) == "pytestmark" for t in node.targets)
                      and "pytest.mark.slow" in ast.unparse(node.value) for node in tree.body)
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or module_slow or _marked_slow(node.decorator_list):
            continue
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call) and ast.unparse(dec.func) == "settings":
                for kw in dec.keywords:
                    if kw.arg == "max_examples" and isinstance(kw.value, ast.Constant):
                        found.append(f"{node.name} (max_examples={kw.value.value!r})")  # an int: !r reads the same
    return found


def test_every_property_of_the_fast_layer_states_its_count_through_examples() -> None:
    """A property with a literal count would run it in full in the fast layer too."""
    offenders = {path.name: found for path in sorted(TESTS.rglob("test_*.py"))
                 if (found := _literal_counts(ast.parse(path.read_text(), str(path))))}
    assert offenders == {}


def test_the_count_check_sees_a_literal_and_lets_slow_ones_pass() -> None:
    source = ("@settings(max_examples=50)\ndef test_a(): pass\n"
              "@pytest.mark.slow\n@settings(max_examples=50)\ndef test_b(): pass\n"
              "@settings(max_examples=examples(50))\ndef test_c(): pass\n")
    assert _literal_counts(ast.parse(source)) == ["test_a (max_examples=50)"]
    assert _literal_counts(ast.parse("pytestmark = pytest.mark.slow\n" + source)) == []


def test_a_copied_pair_is_a_world_of_its_own(clones: Clones, tmp_path: Path) -> None:  # noqa: F811
    """shared_pair on a bare remote copies a world built once: the copy syncs with this
    test's remote only, and the world itself stays as it was built. A served remote is
    never copied."""
    a, b = shared_pair(clones, ("add", "One", "--id", "one"))
    assert (a, b) == (tmp_path / "a", tmp_path / "b")
    world = clones.copied_from
    bare = clones.bare()
    if bare is None:  # git daemon
        assert world is None
    else:
        assert world is not None and not world.is_relative_to(tmp_path)
        for where in (a, b):
            assert git("config", "remote.origin.url", cwd=where) == str(bare)
    refs_before = git("for-each-ref", cwd=world / "remote.git") if world else ""
    for where in (a, b):
        assert task(where, "one")["title"] == "One"
    ok("add", "Two", "--id", "two", cwd=a)
    ok("sync", cwd=a)
    assert remote_state(a) == git("rev-parse", "refs/harness/state", cwd=a)  # on this test's remote
    ok("sync", cwd=b)
    assert task(b, "two")["title"] == "Two"
    if world is not None:
        assert git("for-each-ref", cwd=world / "remote.git") == refs_before
