"""Regular expressions compiled on first use (git_handoff/core/patterns.py), and all at
once where a process forks workers (the command server)."""

from __future__ import annotations

import re

from git_handoff.core import patterns


def test_a_lazy_pattern_compiles_on_first_use_and_keeps_it() -> None:
    p = patterns.lazy(r"t(\d+)", re.ASCII)
    assert p._compiled is None
    assert p.fullmatch("t12") is not None
    first = p._compiled
    assert first is not None and first.flags & re.ASCII
    assert p.search("x t3")[1] == "3"  # type: ignore[index]
    assert p._compiled is first


def test_compile_all_compiles_every_pattern_made_so_far() -> None:
    made = [patterns.lazy(rf"a{n}b") for n in range(3)]
    count = patterns.compile_all()
    assert count >= 3
    assert all(p._compiled is not None for p in made)
    # the modules' own patterns too (the task file's checks, imported here if not already)
    import git_handoff.core.task_file  # noqa: F401

    patterns.compile_all()
    assert all(p._compiled is not None for p in patterns._MADE)
