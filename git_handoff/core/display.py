"""The one way text that came from another clone is shown (docs/threat-model.md): in the agent's
prompt (the CLI, every agent's SessionStart hook, the MCP `prompt` tool), in a terminal
(`status`, `log`, `show`, `list`, `trust`, `attempts`) and on the dashboard.

Fetched text is data: a title, a check, a reason, a decision, a commit's message or
author, a worker's name, a file name. Shown as it is, it could redraw a terminal (an
escape sequence: `ESC[2J`, an OSC 52 clipboard write; a carriage return), reorder what a
person reads (bidi overrides and isolates: "Trojan Source"), or open a line, a section
or an instruction of git handoff's own text in a prompt (`## Protocol`, `git handoff: ...`).
So it is shown as ONE line, every C0 and C1 control character, line and paragraph
separator and bidi formatting character replaced by its visible escape (`\\x1b`,
`\\n`, `\\u202e`), and placed after a prefix of git handoff's own on that line. A
command goes in a Markdown code span whose fence no backtick inside can close.

Pure: no imports of the package, no git, no output.
"""

from __future__ import annotations

import re

from git_handoff.core.patterns import lazy

# C0 controls (tab and newline too: shown text is one line), DEL, C1 controls, the
# Unicode line and paragraph separators, the bidi formatting characters (embeddings and
# overrides U+202A-202E, isolates U+2066-2069, the marks U+200E/U+200F and U+061C), the
# byte-order mark / zero-width no-break space, and lone surrogates (text that is not
# Unicode). Everything else, any script of any language, shows as it is.
UNSEEN = lazy("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")

BACKTICKS = lazy(r"`+")

# what `lines` puts before each line of a text after its first, so a line of a script
# can not pass for a line of the listing around it
CONTINUED = "\n    | "


def _escape(match: re.Match[str]) -> str:
    return ascii(match.group())[1:-1]


def line(text: str) -> str:
    """`text` as one line with every unseen character (UNSEEN) shown as its escape."""
    if text.isascii() and text.isprintable():  # the common case, ~10x cheaper than the scan
        return text
    return UNSEEN.sub(_escape, text)


def lines(text: str) -> str:
    """`text` (a script a person reviews) keeping its lines, each escaped as by `line`,
    every line after the first marked CONTINUED."""
    return CONTINUED.join(line(part) for part in text.split("\n"))


def code(text: str) -> str:
    """`text` as one Markdown code span: escaped as by `line`, between runs of backticks
    longer than any run inside it (CommonMark), so nothing in it can end the span."""
    shown = line(text)
    runs = BACKTICKS.findall(shown)
    fence = "`" * (max((len(r) for r in runs), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") or (shown.startswith(" ") and shown.endswith(" ")) \
        else ""
    return f"{fence}{pad}{shown}{pad}{fence}"
