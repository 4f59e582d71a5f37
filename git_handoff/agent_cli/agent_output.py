"""What an agent CLI's exit and output say: a usage limit, a rate limit, an outage, or a
screen waiting for a person.

The relay launches real agent CLIs (Claude Code, Codex, Gemini CLI). When one stops on
a plan's usage limit, an API rate limit (HTTP 429) or an API outage (529 overloaded,
5xx), the right answer is to wait, not to count a failed launch. This module reads the
texts each CLI prints in those cases (captured from the real binaries against a loopback
model stub; see docs/agent-limits.md) and says which case it is and, where the text told
it, when the limit resets. The texts themselves are each CLI's own knowledge, in its
module (`LIMITS`, `BUSY`, `person_prompt`: the `AgentCli` protocol, agent_cli/protocol.py);
this module is the one engine that reads them, for every CLI of the registry.

Pure: no printing, no clock (the caller passes `now`), no I/O but the IANA zone
database (`zoneinfo`) for a zone a CLI printed ("resets 3pm (Europe/Berlin)").
"""

from __future__ import annotations

import datetime
import math
import re
import zoneinfo
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from git_handoff.agent_cli import registry
from git_handoff.agent_cli.hook_data import OUTAGE as OUTAGE
from git_handoff.agent_cli.hook_data import RATE_LIMIT as RATE_LIMIT
from git_handoff.agent_cli.hook_data import USAGE_LIMIT as USAGE_LIMIT

if TYPE_CHECKING:
    from git_handoff.agent_cli.protocol import LimitRule

MAX_LINE = 300  # characters of the recognized line kept in a Limit
MAX_OUTPUT = 64 * 1024  # only the output's tail is read: the CLI's last words
FINAL_LINES = 30  # non-blank lines from the end that hold a CLI's final error (Gemini CLI dumps ~15)
MIN_FOREIGN = 8  # characters a foreign text needs to rule a line out (not a single word)


@dataclass(frozen=True)
class Limit:
    kind: str  # USAGE_LIMIT | RATE_LIMIT | OUTAGE
    resets_at: str | None  # ISO-8601 UTC "...Z" when the output told when it resets
    line: str  # the recognized line, one printable line


def cli_of(agent_command: str) -> str:
    """Which CLI an agent command runs: a registered CLI's name ("claude", "codex",
    "gemini") or "other".

    The first word that names one of their programs (a path's last part, an `npx`/`env`
    prefix skipped) decides.
    """
    for word in agent_command.split():
        name = word.strip("'\"").rsplit("/", 1)[-1]
        for cli in registry.CLIS.values():
            for program in cli.PROGRAMS:
                if name == program or name.startswith((program + "-", program + "@", program + ".")):
                    return cli.NAME
        if name in ("npx", "env", "exec", "nice", "nohup", "timeout", "stdbuf", "command") or "=" in word:
            continue
        if word.startswith("-") or word.isdigit():
            continue
        return "other"
    return "other"


# -- times printed by the CLIs -------------------------------------------------------------------

_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                         "nov", "dec"), start=1)}
# "8pm", "3:03pm", "11:01 PM", "20:00"; optionally after "Dec 5, " or "Dec 5th, 2026 "; then "(Europe/Berlin)"
_WHEN = re.compile(
    r"(?i)(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?"
    r",?(?:\s+(?P<year>\d{4}))?,?\s+(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<half>am|pm)?\b"
    r"(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*)\))?"
)
_SECONDS = re.compile(r"(?i)(?:retry|try again|retry after)\s+(?:in\s+|after\s+)?"
                      r"(?:(\d+)h)?(?:(\d+)m(?!s))?([\d.]+)s\b")


# A reset printed to the minute ("resets 12:01pm") when it falls within that very minute
# reads as a moment just past: it is now, not the same time tomorrow (a 24-hour wait).
_JUST_NOW = datetime.timedelta(minutes=2)


def _utc(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _zone(name: str | None, now: datetime.datetime) -> datetime.tzinfo:
    """The named IANA zone the CLI printed, else now's own zone."""
    if name:
        if name.upper() == "UTC":
            return datetime.UTC
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    return now.tzinfo if now.tzinfo is not None else datetime.UTC


def _when_after(text: str, now: datetime.datetime) -> str | None:
    """A printed reset time ("8pm", "3:03pm (Europe/Berlin)", "Dec 5, 5:53pm",
    "Dec 5th, 2026 11:01 PM") as the first such moment after `now`, in UTC."""
    for match in _WHEN.finditer(text):
        hour, minute, half = int(match["hour"]), int(match["minute"] or 0), (match["half"] or "").lower()
        if not half and match["minute"] is None:
            continue  # a bare number is not a time
        if half:
            if not 1 <= hour <= 12:
                continue
            hour = hour % 12 + (12 if half == "pm" else 0)
        if hour > 23 or minute > 59:
            continue
        local_now = now.astimezone(_zone(match["zone"], now))
        try:
            if match["mon"]:
                year = int(match["year"]) if match["year"] else local_now.year
                moment = local_now.replace(year=year, month=_MONTHS[match["mon"][:3].lower()], day=int(match["day"]),
                                           hour=hour, minute=minute, second=0, microsecond=0)
                if moment < local_now - datetime.timedelta(days=1) and not match["year"]:
                    moment = moment.replace(year=year + 1)  # "Jan 2" printed on Dec 30
            else:
                moment = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
                if moment <= local_now - _JUST_NOW:  # a clock time of the last minutes: the reset is now
                    moment += datetime.timedelta(days=1)
        except ValueError:
            continue  # Feb 30
        return _utc(moment)
    return None


def _seconds_after(text: str, now: datetime.datetime) -> str | None:
    """ "Please retry in 400.0s", "Suggested retry after 75s", "try again in 1m15s"."""
    told = list(_SECONDS.finditer(text))
    if not told:
        return None
    match = told[-1]  # the latest told delay
    seconds = int(match[1] or 0) * 3600 + int(match[2] or 0) * 60 + float(match[3])
    return _utc(now + datetime.timedelta(seconds=math.ceil(seconds)))


_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # a terminal's colour or cursor code (OpenCode colours its errors)


def _printable(line: str) -> str:
    clean = "".join(c if c.isprintable() else " " for c in _ESCAPE.sub("", line)).strip()
    return clean[:MAX_LINE]


def _lines(output: str, foreign: Collection[str] = ()) -> list[str]:
    """The CLI's final words: the output's last FINAL_LINES non-blank lines, last first
    (the latest message wins), printable; a line that holds any of the `foreign` texts
    (what the state and the prompt gave the agent, which it may echo) is not the CLI's."""
    found: list[str] = []
    for raw in reversed(output[-MAX_OUTPUT:].splitlines()):
        if not raw.strip():
            continue
        if len(found) >= FINAL_LINES:
            break
        line = _printable(raw)
        found.append("" if foreign and any(text in line for text in foreign) else line)
    return [line for line in found if line]


def foreign_texts(texts: Iterable[str]) -> frozenset[str]:
    """The texts `limit_in` must not take for the CLI's own words, as they would show in
    its output: printable, one line each, and long enough to be more than a word."""
    kept = set()
    for text in texts:
        for line in text.splitlines():
            shown = _printable(line)
            if len(shown) >= MIN_FOREIGN:
                kept.add(shown[:MAX_LINE])
    return frozenset(kept)


def _first(rules: tuple[LimitRule, ...], output: str, now: datetime.datetime,
           foreign: Collection[str] = ()) -> Limit | None:
    lines = _lines(output, foreign)
    for kind, pattern, when in rules:  # by rule first: a plan limit beats the 429 line around it
        for line in lines:
            match = pattern.search(line)
            if match is None:
                continue
            resets_at = None
            if when == "epoch":
                resets_at = _utc(datetime.datetime.fromtimestamp(int(match[1]), datetime.UTC))
            elif when == "clock":
                resets_at = _when_after(line[match.end():], now)
            elif when == "seconds":
                resets_at = _seconds_after(line, now) or _seconds_after("\n".join(reversed(lines)), now)
            return Limit(kind, resets_at, line)
    return None


def limit_in(cli: str, exit_status: int | None, output: str, now: datetime.datetime,
             foreign: Collection[str] = ()) -> Limit | None:
    """The limit or outage the agent stopped on, or None.

    Only the CLI's own words count: its final error, in the last FINAL_LINES lines of
    what it printed, on an exit of its own (1-127: every CLI of docs/agent-limits.md
    exits 1 on a limit; a process killed by a signal crashed, whatever it printed
    before), never a line holding one of the `foreign` texts (foreign_texts: what the
    state and the prompt gave it, e.g. a fetched task's title that says "You've hit
    your limit", echoed by the agent's tool).

    `cli` is what `cli_of` said; `exit_status` the agent's (None when it is still
    running, e.g. a screen captured from tmux); `output` what it printed (stdout and
    stderr, or a pane's text); `now` an aware datetime in the zone the CLI prints its
    times in (a "resets 8pm" is the next 8 pm after `now` there; a zone the CLI printed
    wins; a naive `now` is UTC), normally `datetime.datetime.now().astimezone()`.
    """
    if exit_status is not None and not 1 <= exit_status <= 127:
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.UTC)
    if cli in registry.CLIS:
        return _first(registry.CLIS[cli].LIMITS, output, now, foreign)
    # a wrapper script around one of them: whichever CLI's texts are there, a told reset first
    found = [limit for known in registry.CLIS.values()
             if (limit := _first(known.LIMITS, output, now, foreign)) is not None]
    return next((limit for limit in found if limit.resets_at), found[0] if found else None)


# -- a pane at work, at rest ------------------------------------------------------------------

# What each CLI shows while a turn runs (the model streaming or a tool running), on its
# status line (each CLI's BUSY: Claude Code "✻ Churning… (12s · esc to interrupt)", Codex
# "Working (5s • Esc to interrupt)", Gemini CLI "(esc to cancel, 5s)"), any of them, in any
# case. At its prompt none of them shows one.
_BUSY = re.compile("(?i)" + "|".join(f"(?:{cli.BUSY})" for cli in registry.CLIS.values() if cli.BUSY))
BUSY_LINES = tuple(cli.NAME for cli in registry.CLIS.values() if cli.BUSY)  # the CLIs whose working line _BUSY knows
_DIGITS = re.compile(r"\d+")
# a spinner's line: an animated glyph, a verb it picks, an ellipsis ("✻ Churning… (12s · ↓ 20
# tokens)"; Claude Code keeps its "esc to interrupt" on the status line below the prompt)
_SPINNER = re.compile(r"^\s*\S\s+[A-Z][a-z]+(?:…|\.\.\.)")


def busy_in(screen: str) -> bool:
    """Does the pane show the CLI in the middle of a turn (its working status line)?"""
    return _BUSY.search(screen) is not None


def screen_shape(screen: str) -> str:
    """What of a pane a redraw does not change: the working status line and the spinner's
    line (its glyph, its verb, its timer, its token count) dropped, every number blanked. Two panes of one shape show
    no progress between them (a CLI waiting on a model that never answers redraws its
    timer every second)."""
    kept = (line for line in screen.splitlines() if _BUSY.search(line) is None and _SPINNER.match(line) is None)
    return "\n".join(_DIGITS.sub("#", line).rstrip() for line in kept).strip()


def person_prompt_in(cli: str, screen: str) -> str | None:
    """One line saying what to set when `screen` (a tmux pane's text) shows the CLI
    waiting for a person on a first-run, login, trust, API-key or permission screen;
    None when it shows none of them. The screens are Claude Code 2.1.332's, captured on
    a fresh HOME, and Codex 0.171.0's and Gemini CLI 0.61.0's (docs/agent-limits.md);
    `cli` "other" tries every CLI's."""
    if cli in registry.CLIS:
        return registry.CLIS[cli].person_prompt(screen)
    if cli != "other":
        return None
    return next((said for known in registry.CLIS.values() if (said := known.person_prompt(screen)) is not None), None)
