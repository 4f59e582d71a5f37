"""The two test speeds themselves (tests/support/speed.py): which runs are the fast
layer, and how many examples a property runs in each."""

from __future__ import annotations

import pytest

from tests.support import speed


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
