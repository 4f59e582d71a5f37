"""The HANDOFF_* variables the tests set mean something: each is read by the package, by
a test's own command, or documented (a variable set and read nowhere tests nothing and
misleads the reader of the test)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\bHANDOFF_[A-Z0-9_]*[A-Z0-9]\b")


def _texts(*globs: str) -> dict[Path, str]:
    return {p: p.read_text(errors="replace") for g in globs for p in ROOT.glob(g)
            if p.is_file() and "__pycache__" not in p.parts}


def test_every_handoff_variable_a_test_names_is_read_or_documented() -> None:
    tests = _texts("tests/**/*.py", "bench/**/*.py")
    meaning = "\n".join(_texts("git_handoff/**/*", "docs/*.md", "README.md", "CONTRIBUTING.md").values())
    reads = "\n".join(text for text in tests.values())
    unread: dict[str, list[str]] = {}
    for path, text in tests.items():
        for name in set(NAME.findall(text)):
            read_by_a_test = re.search(rf"\${{?{name}\b|environ\.get\(\"{name}\"|getenv\(\"{name}\"", reads)
            if name not in meaning and not read_by_a_test:
                unread.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert unread == {}, unread
