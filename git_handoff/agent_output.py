"""What an agent CLI's exit and output say: a usage limit, a rate limit, an outage, or a
screen waiting for a person.

The relay launches real agent CLIs (Claude Code, Codex, Gemini CLI). When one stops on
a plan's usage limit, an API rate limit (HTTP 429) or an API outage (529 overloaded,
5xx), the right answer is to wait, not to count a failed launch. This module reads the
texts each CLI prints in those cases (captured from the real binaries against a loopback
model stub; see docs/agent-limits.md) and says which case it is and, where the text told
it, when the limit resets.

Pure: no I/O, no printing, no clock (the caller passes `now`).
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

USAGE_LIMIT = "usage_limit"
RATE_LIMIT = "rate_limit"
OUTAGE = "outage"
MAX_LINE = 300  # characters of the recognized line kept in a Limit


@dataclass(frozen=True)
class Limit:
    kind: str  # USAGE_LIMIT | RATE_LIMIT | OUTAGE
    resets_at: str | None  # ISO-8601 UTC "...Z" when the output told when it resets
    line: str  # the recognized line, one printable line


def cli_of(agent_command: str) -> str:
    """Which CLI an agent command runs: "claude", "codex", "gemini" or "other".

    The first word that names one of them (a path's last part, an `npx`/`env` prefix
    skipped) decides.
    """
    for word in agent_command.split():
        name = word.strip("'\"").rsplit("/", 1)[-1]
        for cli in ("claude", "codex", "gemini"):
            if name == cli or name.startswith((cli + "-", cli + "@", cli + ".")):
                return cli
        if name in ("npx", "env", "exec", "nice", "nohup", "timeout", "stdbuf", "command") or "=" in word:
            continue
        if word.startswith("-") or word.isdigit():
            continue
        return "other"
    return "other"


# -- times printed by the CLIs -------------------------------------------------------------------


def _utc(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_CLOCK = re.compile(r"(?i)\b(\d{1,2})(?::(\d{2}))?\s*(am|pm)?\b")


def _clock_after(text: str, now: datetime.datetime) -> str | None:
    """ "8pm", "8:30 pm", "20:00": the first such moment after `now`, in now's zone."""
    match = _CLOCK.search(text)
    if not match:
        return None
    hour, minute = int(match.group(1)), int(match.group(2) or 0)
    half = (match.group(3) or "").lower()
    if not half and match.group(2) is None:
        return None  # a bare number is not a time
    if half:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    local = now if now.tzinfo is not None else now.astimezone()
    moment = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment <= local:
        moment += datetime.timedelta(days=1)
    return _utc(moment)


def _in_seconds(seconds: float, now: datetime.datetime) -> str:
    local = now if now.tzinfo is not None else now.astimezone()
    return _utc(local + datetime.timedelta(seconds=seconds))


# -- Claude Code ----------------------------------------------------------------------------------

_CLAUDE_USAGE = re.compile(
    r"(?i)(hit your (session|weekly|opus|usage) limit|usage limit reached|\b\d+-hour limit reached|"
    r"limit will reset at|out of extra usage)"
)
_CLAUDE_RESETS = re.compile(r"(?i)\bresets?(?:\s+at)?\s+(.+)$")
_CLAUDE_EPOCH = re.compile(r"(?i)usage limit reached\|(\d{9,11})")
_CLAUDE_RATE = re.compile(r"(?i)(API Error: Request rejected \(429\)|API Error: 429\b|rate_limit_error)")
_CLAUDE_OUTAGE = re.compile(
    r"(?i)(API Error: (529|500|502|503|504)\b|overloaded_error|api_error|"
    r"API Error: Request rejected \((500|502|503|504|529)\)|Overloaded)"
)


def _printable(line: str) -> str:
    clean = "".join(c if c.isprintable() else " " for c in line).strip()
    return clean[:MAX_LINE]


def _lines(output: str) -> list[str]:
    return [_printable(raw) for raw in output.splitlines() if raw.strip()]


def _claude(output: str, now: datetime.datetime) -> Limit | None:
    for line in _lines(output):
        epoch = _CLAUDE_EPOCH.search(line)
        if epoch:
            moment = datetime.datetime.fromtimestamp(int(epoch.group(1)), datetime.timezone.utc)
            return Limit(USAGE_LIMIT, _utc(moment), line)
        if _CLAUDE_USAGE.search(line):
            resets = _CLAUDE_RESETS.search(line)
            return Limit(USAGE_LIMIT, _clock_after(resets.group(1), now) if resets else None, line)
    for line in _lines(output):
        if _CLAUDE_RATE.search(line):
            return Limit(RATE_LIMIT, None, line)
        if _CLAUDE_OUTAGE.search(line):
            return Limit(OUTAGE, None, line)
    return None


def limit_in(cli: str, exit_status: int | None, output: str, now: datetime.datetime) -> Limit | None:
    """The limit or outage the agent stopped on, or None.

    `cli` is what `cli_of` said; `exit_status` the agent's (None when it is still
    running, e.g. a screen captured from tmux); `output` what it printed (stdout and
    stderr, or a pane's text); `now` an aware datetime in the zone the CLI prints its
    times in (a "resets 8pm" is the next 8 pm after `now` there), normally
    `datetime.datetime.now().astimezone()`.
    """
    if exit_status == 0:
        return None
    if cli == "claude":
        return _claude(output, now)
    return None


def person_prompt_in(cli: str, screen: str) -> str | None:
    """One line saying what to set when `screen` (a tmux pane's text) shows the CLI
    waiting for a person on a first-run, login, trust, API-key or permission screen."""
    if cli != "claude":
        return None
    text = " ".join(screen.split())
    if "Do you trust the files in this folder" in text or "trust this folder" in text.lower():
        return ('claude is asking whether to trust this folder: set "hasTrustDialogAccepted": true under '
                '"projects" -> this directory in ~/.claude.json')
    if "Bypass Permissions mode" in text:
        return ('claude is asking to accept Bypass Permissions mode: set "bypassPermissionsModeAccepted": true '
                'in ~/.claude.json')
    if "Do you want to use this API key" in text:
        return ('claude is asking whether to use ANTHROPIC_API_KEY: add the key\'s last 20 characters to '
                '"customApiKeyResponses": {"approved": [...]} in ~/.claude.json')
    if "Choose the text style" in text or "Let's get started" in text:
        return ('claude is on its first-run theme screen: set "hasCompletedOnboarding": true and "theme": "dark" '
                'in ~/.claude.json')
    if "Select login method" in text:
        return "claude wants a login: set ANTHROPIC_API_KEY in the relay's environment (or run `claude` once and log in)"
    return None
