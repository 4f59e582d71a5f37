"""What an agent CLI's exit and output say: a usage limit, a rate limit, an outage, or a
screen waiting for a person.

The relay launches real agent CLIs (Claude Code, Codex, Gemini CLI). When one stops on
a plan's usage limit, an API rate limit (HTTP 429) or an API outage (529 overloaded,
5xx), the right answer is to wait, not to count a failed launch. This module reads the
texts each CLI prints in those cases (captured from the real binaries against a loopback
model stub; see docs/agent-limits.md) and says which case it is and, where the text told
it, when the limit resets.

Pure: no printing, no clock (the caller passes `now`), no I/O but the IANA zone
database (`zoneinfo`) for a zone a CLI printed ("resets 3pm (Europe/Berlin)").
"""

from __future__ import annotations

import datetime
import math
import re
import zoneinfo
from dataclasses import dataclass

USAGE_LIMIT = "usage_limit"
RATE_LIMIT = "rate_limit"
OUTAGE = "outage"
MAX_LINE = 300  # characters of the recognized line kept in a Limit
MAX_OUTPUT = 64 * 1024  # only the output's tail is read: the CLI's last words


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

_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                         "nov", "dec"), start=1)}
# "8pm", "3:03pm", "11:01 PM", "20:00"; optionally after "Dec 5, " or "Dec 5th, 2026 "; then "(Europe/Berlin)"
_WHEN = re.compile(
    r"(?i)(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?"
    r",?(?:\s+(?P<year>\d{4}))?,?\s+(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<half>am|pm)?\b"
    r"(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)*)\))?"
)
_SECONDS = re.compile(r"(?i)(?:retry|try again|retry after)\s+(?:in\s+|after\s+)?(?:(\d+)h)?(?:(\d+)m(?!s))?([\d.]+)s\b")


# A reset printed to the minute ("resets 12:01pm") when it falls within that very minute
# reads as a moment just past: it is now, not the same time tomorrow (a 24-hour wait).
_JUST_NOW = datetime.timedelta(minutes=2)


def _utc(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _zone(name: str | None, now: datetime.datetime) -> datetime.tzinfo:
    """The named IANA zone the CLI printed, else now's own zone."""
    if name:
        if name.upper() == "UTC":
            return datetime.timezone.utc
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    return now.tzinfo if now.tzinfo is not None else datetime.timezone.utc


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


def _printable(line: str) -> str:
    clean = "".join(c if c.isprintable() else " " for c in line).strip()
    return clean[:MAX_LINE]


def _lines(output: str) -> list[str]:
    """The output's non-blank lines, last first (the latest message wins), printable."""
    return [_printable(raw) for raw in reversed(output[-MAX_OUTPUT:].splitlines()) if raw.strip()]


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    when: str | None = None  # "clock": a printed reset time; "seconds": a printed delay
    epoch: bool = False  # group 1 is a Unix time


def _first(rules: tuple[_Rule, ...], output: str, now: datetime.datetime) -> Limit | None:
    lines = _lines(output)
    for rule in rules:  # by rule first: a plan limit beats the 429 line around it
        for line in lines:
            match = rule.pattern.search(line)
            if match is None:
                continue
            resets_at = None
            if rule.epoch:
                resets_at = _utc(datetime.datetime.fromtimestamp(int(match[1]), datetime.timezone.utc))
            elif rule.when == "clock":
                resets_at = _when_after(line[match.end():], now)
            elif rule.when == "seconds":
                resets_at = _seconds_after(line, now) or _seconds_after(output[-MAX_OUTPUT:], now)
            return Limit(rule.kind, resets_at, line)
    return None


# -- per CLI: what the real binaries print (docs/agent-limits.md has the table) --------------------

# Claude Code 2.1.332 (`claude -p`: on stdout, exit 1)
CLAUDE = (
    # subscription plan limits: "You've hit your 5-hour limit · resets 3:03pm (Europe/Berlin)",
    # "You've hit your weekly limit · resets Dec 5, 5:53pm (America/New_York)", "... session limit · resets 8pm"
    _Rule(USAGE_LIMIT, re.compile(r"(?i)\bhit your (?:[\w-]+ )*limit\b.*?\bresets?\b"), when="clock"),
    _Rule(USAGE_LIMIT, re.compile(r"(?i)usage limit reached\|(\d{9,11})"), epoch=True),  # older CLIs
    _Rule(USAGE_LIMIT, re.compile(r"(?i)(?:\bhit your (?:[\w-]+ )*limit\b|usage limit reached|out of (?:extra )?usage"
                                  r"|usage credits)")),
    # "API Error: Request rejected (429) · This request would exceed the rate limit ..."
    _Rule(RATE_LIMIT, re.compile(r"(?i)API Error: (?:Request rejected \(429\)|429\b)|rate_limit_error")),
    # "API Error: 529 Overloaded. This is a server-side issue ...", "API Error: 500 Internal server error. ...",
    # "API Error: 503 Service unavailable. ..."
    _Rule(OUTAGE, re.compile(r"(?i)API Error: (?:Request rejected \()?(?:5\d\d)\b|overloaded_error"
                             r"|API Error: (?:Connection error|Request timed out)")),
)

# Codex 0.171.0 (`codex exec`: on stderr as "ERROR: ...", exit 1)
CODEX = (
    # ChatGPT plans: "You've hit your usage limit. Upgrade to Pro (...) or try again at 12:40 PM."
    # (or "... at Dec 5th, 2026 11:01 PM."); the apostrophe is U+2019
    _Rule(USAGE_LIMIT, re.compile(r"(?i)hit your usage limit\b.*?\btry again at\b"), when="clock"),
    _Rule(USAGE_LIMIT, re.compile(r"(?i)hit your usage limit|usage limit reached|Quota exceeded\. Check your plan"
                                  r"|out of credits|workspace credit limit")),
    # "exceeded retry limit, last status: 429 Too Many Requests, request id: ..."
    _Rule(RATE_LIMIT, re.compile(r"(?i)last status: 429\b|unexpected status 429\b|rate limit reached"), when="seconds"),
    # 500: "We're currently experiencing high demand, which may cause temporary errors."
    # 503: "unexpected status 503 Service Unavailable: The server is overloaded or not ready yet., url: ..."
    _Rule(OUTAGE, re.compile(r"(?i)experiencing high demand|(?:last|unexpected) status 5\d\d\b"
                             r"|Codex is currently experiencing high load|stream disconnected before completion")),
)

# Gemini CLI 0.61.0 (`gemini -p`: on stderr, exit 1, its error class then the API's error dumped)
GEMINI = (
    # a per-day quota: "TerminalQuotaError: You have exhausted your daily quota on this model."
    _Rule(USAGE_LIMIT, re.compile(r"(?i)exhausted your daily quota|QUOTA_EXHAUSTED|INSUFFICIENT_G1_CREDITS")),
    # 503 after its retries: "RetryableQuotaError: The model is overloaded. Please try again later."
    _Rule(OUTAGE, re.compile(r"(?i)QuotaError: The model is overloaded|MODEL_CAPACITY_EXHAUSTED"
                             r"|exhausted your capacity")),
    # a per-minute quota past its retries or longer than 300 s: "TerminalQuotaError: You exceeded your current
    # quota, ... Please retry in 400.0s." then "Suggested retry after 400s."
    _Rule(RATE_LIMIT, re.compile(r"(?:Terminal|Retryable)QuotaError"), when="seconds"),
    _Rule(RATE_LIMIT, re.compile(r"(?i)RESOURCE_EXHAUSTED|exceeded your current quota|status 429\b"
                                 r"|\b429 Too Many Requests"), when="seconds"),
    # 500 after its retries: "_ApiError: {"error":{"code":500,"message":"An internal error has occurred. ..."
    _Rule(OUTAGE, re.compile(r'ApiError: \{"error":\{"code":5\d\d\b')),
    _Rule(OUTAGE, re.compile(r"(?i)model is overloaded|\b(?:status|code)\W{0,3}(?:500|502|503|504)\b"
                             r"|An internal error has occurred|\bUNAVAILABLE\b")),
)

_RULES = {"claude": CLAUDE, "codex": CODEX, "gemini": GEMINI}


def limit_in(cli: str, exit_status: int | None, output: str, now: datetime.datetime) -> Limit | None:
    """The limit or outage the agent stopped on, or None.

    `cli` is what `cli_of` said; `exit_status` the agent's (None when it is still
    running, e.g. a screen captured from tmux); `output` what it printed (stdout and
    stderr, or a pane's text; only its last 64 KiB are read); `now` an aware datetime
    in the zone the CLI prints its times in (a "resets 8pm" is the next 8 pm after `now`
    there; a zone the CLI printed wins; a naive `now` is UTC), normally
    `datetime.datetime.now().astimezone()`.
    """
    if exit_status == 0:
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.timezone.utc)
    if cli in _RULES:
        return _first(_RULES[cli], output, now)
    # a wrapper script around one of them: whichever CLI's texts are there, a told reset first
    found = [limit for rules in _RULES.values() if (limit := _first(rules, output, now)) is not None]
    return next((limit for limit in found if limit.resets_at), found[0] if found else None)


# -- a pane at work, at rest ------------------------------------------------------------------

# What each CLI shows while a turn runs (the model streaming or a tool running), on its
# status line: Claude Code "✻ Churning… (12s · esc to interrupt)", Codex "Working (5s •
# Esc to interrupt)", Gemini CLI "(esc to cancel, 5s)". At its prompt none of them does.
_BUSY = re.compile(r"(?i)\besc to (?:interrupt|cancel)\b")
BUSY_LINES = ("claude", "codex", "gemini")  # the CLIs whose working status line _BUSY knows
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


_WORKSPACE = re.compile(r"Accessing workspace:\s*\n\s*(/[^\n]*)")
_MCP_SERVER = re.compile(r"New MCP servers? found in this project:\s*([A-Za-z0-9_.-]{1,64})")
_KEY_TAIL = re.compile(r"ANTHROPIC_API_KEY:\s*\S*\.\.\.(\S{1,20})")


def _json_string(text: str) -> str:
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else "?" for c in text.strip())[:200] + '"'


def _claude_screen(screen: str) -> str | None:
    text = " ".join(screen.split())
    if "Unable to connect to Anthropic services" in text or "Failed to connect to api.anthropic.com" in text:
        return ('claude stopped on its first-run screens, which need api.anthropic.com: set "hasCompletedOnboarding": '
                'true in ~/.claude.json (see docs/agent-clis.md)')
    if "Choose the text style" in text:
        return 'claude is on its first-run theme screen: set "hasCompletedOnboarding": true in ~/.claude.json'
    if "Accessing workspace:" in text or "Yes, I trust this folder" in text:
        found = _WORKSPACE.search(screen)
        folder = _json_string(found.group(1)) if found else '"<this directory>"'
        return (f'claude is asking whether to trust this folder: set "projects": {{{folder}: '
                '{"hasTrustDialogAccepted": true}} in ~/.claude.json')
    if "Do you want to use this API key" in text or "Detected a custom API key" in text:
        tail = _KEY_TAIL.search(text)
        key = _json_string(tail.group(1)) if tail else "<the key's last 20 characters>"
        return (f'claude is asking whether to use ANTHROPIC_API_KEY: set "customApiKeyResponses": {{"approved": '
                f'[{key}]}} in ~/.claude.json (the key\'s last 20 characters)')
    if "New MCP server found in this project" in text or "New MCP servers found in this project" in text:
        found = _MCP_SERVER.search(text)
        name = _json_string(found.group(1)) if found else '"handoff"'
        return (f"claude is asking whether to use the project's MCP server {name}: set \"enabledMcpjsonServers\": "
                f"[{name}] in .claude/settings.local.json (`git handoff hooks install --agent claude --unattended` "
                'writes it), or "enableAllProjectMcpServers": true there')
    if "Bypass Permissions mode" in text and ("Yes, I accept" in text or "No, exit" in text):
        return ('claude is asking to accept Bypass Permissions mode: set "bypassPermissionsModeAccepted": true in '
                '~/.claude.json, or "skipDangerousModePermissionPrompt": true in .claude/settings.local.json '
                '(`git handoff hooks install --agent claude --unattended` writes it)')
    if "Select login method" in text or "Not logged in" in text and "/login" in text:
        return ("claude is not logged in: set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`) "
                "in the relay's environment")
    return None


_CODEX_FOLDER = re.compile(r"Folder access\s*\n\s*(/[^\n]*)")


def _codex_screen(screen: str) -> str | None:
    text = " ".join(screen.split())
    if "Trust this folder?" in text or "Trust and continue" in text:
        found = _CODEX_FOLDER.search(screen)
        folder = _json_string(found.group(1)) if found else '"<this directory>"'
        return (f"codex is asking whether to trust this folder: add [projects.{folder}] trust_level = \"trusted\" "
                "to $CODEX_HOME/config.toml (~/.codex/config.toml), or run `codex exec --trust` here once")
    if "Sign in with ChatGPT" in text or "Choose how you want to use Codex" in text:
        return ("codex wants a login: run `printenv OPENAI_API_KEY | codex login --with-api-key` once, or give it a "
                "[model_providers.<id>] entry with env_key in $CODEX_HOME/config.toml")
    return None


def _gemini_screen(screen: str) -> str | None:
    text = " ".join(screen.split())
    if "Do you trust the files in this folder?" in text or "Trust folder (" in text:
        return ("gemini is asking whether to trust this folder: set GEMINI_CLI_TRUST_WORKSPACE=true in the relay's "
                'environment, or add {"<this folder>": "TRUST_FOLDER"} to ~/.gemini/trustedFolders.json')
    if "How would you like to authenticate" in text or "Get started" in text and "Use Gemini API Key" in text:
        return ('gemini is asking how to log in: set "security": {"auth": {"selectedType": "gemini-api-key"}} in '
                "~/.gemini/settings.json and GEMINI_API_KEY in the relay's environment")
    return None


def person_prompt_in(cli: str, screen: str) -> str | None:
    """One line saying what to set when `screen` (a tmux pane's text) shows the CLI
    waiting for a person on a first-run, login, trust, API-key or permission screen;
    None when it shows none of them. The screens are Claude Code 2.1.332's, captured on
    a fresh HOME, and Codex 0.171.0's and Gemini CLI 0.61.0's (docs/agent-limits.md);
    `cli` "other" tries every CLI's."""
    readers = {"claude": _claude_screen, "codex": _codex_screen, "gemini": _gemini_screen}
    if cli in readers:
        return readers[cli](screen)
    if cli != "other":
        return None
    return next((said for read in readers.values() if (said := read(screen)) is not None), None)
