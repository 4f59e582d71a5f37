"""The two test speeds (CONTRIBUTING.md): a run whose `-m` expression leaves out
the `slow` tests (`pytest -m "not slow"`) is the fast layer; any other run is the full
suite.

A property test states the number of examples the full suite runs,
`@settings(max_examples=examples(300))`; the fast layer runs a fifth of it (never
fewer than 20), the full suite exactly that number. So the full suite tests as much as
it ever did, and the fast layer still runs every property. `tests/conftest.py` tells
this module which run it is (in `pytest_configure`, before any test module is
imported, so the decorators see it).
"""

from __future__ import annotations

FAST_SHARE = 5  # the fast layer runs 1/FAST_SHARE of a property's examples
FAST_FLOOR = 20

_fast = False


def leaves_out_slow(markexpr: str) -> bool:
    """Whether the `-m` expression deselects a test marked only `slow`."""
    if not markexpr.strip():
        return False
    try:
        from _pytest.mark.expression import Expression
    except ImportError:  # pytest moved it: read the expression the way people write it
        return "not slow" in " ".join(markexpr.split())

    def slow_only(name: str, /, **_: str | int | bool | None) -> bool:
        return name == "slow"

    return not Expression.compile(markexpr).evaluate(slow_only)


def configure(markexpr: str) -> None:
    global _fast
    _fast = leaves_out_slow(markexpr)


def fast_layer() -> bool:
    return _fast


def examples(full: int) -> int:
    """Hypothesis examples for a property: `full` in the full suite, a fifth of it (at
    least 20, at most `full`) in the fast layer."""
    if not _fast:
        return full
    return min(full, max(FAST_FLOOR, full // FAST_SHARE))
