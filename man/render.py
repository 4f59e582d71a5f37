"""Render the manual's one source, docs/git-handoff.md, to man/git-handoff.1 (groff -man).

    python man/render.py            # rewrite man/git-handoff.1
    python man/render.py --check    # exit 1 when the committed page differs from the source

The source is Markdown restricted to what this script knows, so that it reads well on a
forge and as a man page: `## SECTION` (.SH), `### Subsection` (.SS), paragraphs, `- `
items (an item's further lines and paragraphs indented by two spaces, nested items by
two more), fenced code blocks (indented like the item they belong to), tables (each row
a .TP entry: the first cell as its tag) and inline `code`, **bold**, *italic* and
[links](target) (a link into the repository shows its text only). An image line is left out. Anything else is an error, so the page never
silently loses text.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "docs" / "git-handoff.md"
PAGE = ROOT / "man" / "git-handoff.1"

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*\\])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _chars(text: str) -> str:
    """groff's spelling of plain text: backslashes, minus signs and non-ASCII escaped."""
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in out)


def inline(text: str) -> str:
    """One line of Markdown text as groff text (font changes, escapes)."""
    spans: list[str] = []

    def keep(match: re.Match[str]) -> str:
        spans.append("\\fB" + _chars(match.group(1)) + "\\fR")
        return f"\0{len(spans) - 1}\0"

    text = _CODE.sub(keep, text)
    text = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})" if "://" in m.group(2) else m.group(1), text)
    text = _chars(text)
    text = _BOLD.sub(r"\\fB\1\\fR", text)
    text = _ITALIC.sub(r"\\fI\1\\fR", text)
    text = re.sub("\0(\\d+)\0", lambda m: spans[int(m.group(1))], text)
    return "\\&" + text if text.startswith((".", "'")) else text


def _indent(line: str) -> int:
    return (len(line) - len(line.lstrip(" "))) // 2


def render(source: str, version: str) -> str:
    lines = source.splitlines()
    out = [f'.TH GIT-HANDOFF 1 "" "git-handoff {version}" "Git Manual"']
    depth = 0  # .RS blocks open

    def margin(level: int) -> None:
        nonlocal depth
        while depth > level:
            out.append(".RE")
            depth -= 1
        while depth < level:
            out.append(".RS 2")
            depth += 1

    i = 0
    if not lines or not lines[0].startswith("# "):
        raise ValueError("line 1: the source starts with its '# title' line")
    i = 1
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        level = _indent(line)
        if not stripped or stripped.startswith("!["):
            i += 1
        elif line.startswith("## "):
            margin(0)
            out.append(".SH " + line[3:].strip().upper())
            i += 1
        elif line.startswith("### "):
            margin(0)
            out.append('.SS "' + _chars(line[4:].strip()) + '"')
            i += 1
        elif line.startswith("#"):
            raise ValueError(f"line {i + 1}: only '##' and '###' headings: {line!r}")
        elif stripped.startswith("```"):
            margin(level)
            out += [".PP", ".RS 4", ".nf"]
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body = lines[i][2 * level:] if lines[i].startswith("  " * level) else lines[i].lstrip()
                body = _chars(body)
                out.append("\\&" + body if body.startswith((".", "'")) else body)
                i += 1
            if i == len(lines):
                raise ValueError("a code block is not closed")
            out += [".fi", ".RE"]
            i += 1
        elif stripped.startswith("|"):
            margin(level)
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if not all(set(c) <= set("-: ") for c in cells):
                    rows.append(cells)
                i += 1
            head, body = rows[0], rows[1:]
            for cells in body:
                rest = cells[1:] if len(cells) == 2 else [f"{h}: {c}" for h, c in zip(head[1:], cells[1:], strict=True)]
                out += [".TP", inline(cells[0]), inline("; ".join(rest))]
        else:
            item = stripped.startswith("- ")
            if item:
                margin(level)
                out.append(".IP \\(bu 2")
                text = [stripped[2:]]
            elif level == 0:
                margin(0)
                out.append(".PP")
                text = [stripped]
            else:
                margin(level - 1)
                out.append('.IP "" 2')
                text = [stripped]
            i += 1
            while i < len(lines):
                more = lines[i].strip()
                if (not more or more.startswith(("- ", "```", "|", "![")) or lines[i].startswith("#")
                        or (item and _indent(lines[i]) <= level) or (not item and _indent(lines[i]) < level)):
                    break
                text.append(more)
                i += 1
            out += [inline(t) for t in text]
    margin(0)
    return "\n".join(out) + "\n"


def version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def main(argv: list[str]) -> int:
    page = render(SOURCE.read_text(), version())
    if argv[1:] == ["--check"]:
        if PAGE.read_text() != page:
            print("man/git-handoff.1 differs from docs/git-handoff.md: run python man/render.py", file=sys.stderr)
            return 1
        return 0
    if argv[1:]:
        print("usage: python man/render.py [--check]", file=sys.stderr)
        return 2
    PAGE.write_text(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
