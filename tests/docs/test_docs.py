"""The docs a user reads: a short README, and no link in README.md or docs/*.md that
leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 200
# [text](target) and ![alt](target); a target may carry a "#fragment" or a "title"
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(path: Path) -> list[str]:
    """The targets of every link of a Markdown file that points into the repository
    (code blocks and code spans left out: they show text, not links)."""
    text = _FENCE.sub("", path.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = [m.group(1) for m in _LINK.finditer(text)]
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in relative_links(path):
        file = (path.parent / target.split("#", 1)[0]).resolve()
        if not file.is_file() or root.resolve() not in file.parents:
            broken.append(target)
    return broken


def test_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference to docs/"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file_of_the_repository(path: Path) -> None:
    assert broken_links(path) == []


def test_the_link_checker_sees_links_and_refuses_broken_ones(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x\n")
    page.write_text("See [there](there.md#part), ![pic](missing.png), [web](https://example.org),\n"
                    "[top](#top), [out](../../etc/hostname) and `[not a link](nowhere.md)`.\n\n"
                    "```\n[in code](gone.md)\n```\n")
    assert relative_links(page) == ["there.md#part", "missing.png", "../../etc/hostname"]
    assert broken_links(page, root=tmp_path) == ["missing.png", "../../etc/hostname"]


def test_readme_links_to_the_docs() -> None:
    """Where to go next: every page under docs/ is one link away from the README."""
    linked = {(ROOT / t.split("#")[0]).resolve() for t in relative_links(ROOT / "README.md")}
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md") if p.name != "architecture.md"}
    assert pages - linked == set()
