"""The numbers a command line gives: one click type for counts, one for seconds.

Every numeric option and argument of every command uses these, so the rule is one
rule: finite, positive where it must be, inside TOML's integer
range, durations at most ten years. A number outside its range is refused while the
command line is parsed, before anything is read or written: exit 2, one line, and
`{"error", "exit_code"}` under `--json`.
"""

from __future__ import annotations

import math
from typing import Any

import click

from git_handoff.core.model import MAX_ATTEMPTS, MAX_COUNT, MAX_SECONDS
from git_handoff.core.patterns import lazy

_WHOLE = lazy(r"[+-]?[0-9]{1,30}")


class Count(click.ParamType):  # type: ignore[type-arg, unused-ignore]  # generic in click 8.2+ (1 or 2 args)
    """A whole number between `minimum` and `maximum` (both included)."""

    name = "integer"

    def __init__(self, minimum: int = 1, maximum: int = MAX_COUNT) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
            number = int(value.strip())
        else:
            self.fail(f"{_shown(value)} is not a whole number {self._range()}", param, ctx)
        if not self.minimum <= number <= self.maximum:
            self.fail(f"{_shown(value)} is out of range: use a whole number {self._range()}", param, ctx)
        return number

    def _range(self) -> str:
        top = f"{self.maximum} (TOML's integer range)" if self.maximum == MAX_COUNT else f"{self.maximum}"
        return f"from {self.minimum} to {top}"


class Seconds(click.ParamType):  # type: ignore[type-arg, unused-ignore]  # as Count
    """A finite number of seconds: above zero (or zero itself with `zero=True`), at most
    ten years."""

    name = "seconds"

    def __init__(self, *, zero: bool = False, maximum: float = MAX_SECONDS) -> None:
        self.zero = zero
        self.maximum = maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{_shown(value)} is not a number of seconds", param, ctx)
        low_ok = number >= 0 if self.zero else number > 0
        if not math.isfinite(number) or not low_ok or number > self.maximum:
            bound = "from 0" if self.zero else "above 0"
            self.fail(f"{_shown(value)} is out of range: use a finite number of seconds {bound} "
                      f"up to {self.maximum:.0f} (ten years)", param, ctx)
        return number


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


# The shapes the commands use
POSITIVE = Count(1)
NATURAL = Count(0)
ATTEMPTS = Count(1, MAX_ATTEMPTS)
TIMEOUT = Count(1, MAX_SECONDS)  # a task's validation.timeout_seconds: whole seconds
RELAY_COUNT = Count(1, 1_000_000)
SECONDS = Seconds()
GRACE = Seconds(zero=True)
LOCK_LEASE = Count(1, 24 * 3600)  # the fleet relay lock's lease: whole seconds, at most a day (its record's bound)
PORT = Count(0, 65535)  # a TCP port; 0: the system picks a free one
