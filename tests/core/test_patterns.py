"""Regular expressions compiled on first use (git_handoff/core/patterns.py), and all at
once where a process forks workers (the command server)."""

from __future__ import annotations

import re

from git_handoff.core import patterns


def _compiled(p: patterns.LazyPattern) -> re.Pattern[str] | None:
    """What `p` holds now (read through a call: mypy would keep `p._compiled` narrowed to
    None after the first assert, and skip the rest of the test as unreachable)."""
    return p._compiled


def test_a_lazy_pattern_compiles_on_first_use_and_keeps_it() -> None:
    p = patterns.lazy(r"t(\d+)", re.ASCII)
    assert _compiled(p) is None
    assert p.fullmatch("t12") is not None
    first = _compiled(p)
    assert first is not None and first.flags & re.ASCII
    found = p.search("x t3")
    assert found is not None and found[1] == "3"
    assert _compiled(p) is first


def test_compile_all_compiles_every_pattern_made_so_far() -> None:
    made = [patterns.lazy(rf"a{n}b") for n in range(3)]
    count = patterns.compile_all()
    assert count >= 3
    assert all(p._compiled is not None for p in made)
    # the modules' own patterns too (the task file's checks, imported here if not already)
    import git_handoff.core.task_file  # noqa: F401

    patterns.compile_all()
    assert all(p._compiled is not None for p in patterns._MADE)
