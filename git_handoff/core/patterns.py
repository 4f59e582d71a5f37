"""Regular expressions compiled on first use, not at import.

A module-level `re.compile` runs at import, in every process that imports the module,
whether or not the process ever matches anything: about 0.5 ms per pattern, and the
records' checks alone hold dozens. `lazy(...)` gives an object with the methods of a
compiled pattern that compiles it the first time one is called.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

_MADE: list[LazyPattern] = []  # every pattern made, for compile_all


class LazyPattern:
    """A regular expression compiled the first time it is used."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None
        _MADE.append(self)

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def match(self, string: str, pos: int = 0, endpos: int = 2**63 - 1) -> re.Match[str] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = 2**63 - 1) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = 2**63 - 1) -> re.Match[str] | None:
        return self.compiled.search(string, pos, endpos)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)

    def subn(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> tuple[str, int]:
        return self.compiled.subn(repl, string, count)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        return self.compiled.split(string, maxsplit)

    def findall(self, string: str, pos: int = 0, endpos: int = 2**63 - 1) -> list[Any]:
        return self.compiled.findall(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = 2**63 - 1) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string, pos, endpos)


def lazy(pattern: str, flags: int = 0) -> LazyPattern:
    """`re.compile(pattern, flags)`, deferred to the first use."""
    return LazyPattern(pattern, flags)


def compile_all() -> int:
    """Compile every pattern made so far (by the modules imported so far); how many. For a
    process that forks workers (the command server): compiled once before the fork, never
    again in each worker."""
    for pattern in _MADE:
        pattern.compiled  # noqa: B018 - compiles it
    return len(_MADE)
