"""The pure recognizer of agent CLI limits, outages and first-run screens (agent_output),
on the texts the real CLIs printed against the loopback model stub's faults
(claude 2.1.332, codex 0.171.0, gemini 0.61.0; docs/agent-limits.md). The tests that
run the real CLIs are in test_agent_limits_cli.py."""

from __future__ import annotations

import datetime

import pytest

from git_handoff.agent_output import (
    OUTAGE,
    RATE_LIMIT,
    USAGE_LIMIT,
    cli_of,
    limit_in,
    person_prompt_in,
)

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 12, 2, 11, 33, tzinfo=UTC)
GATEWAY = "This is a server-side issue, usually temporary — try again in a moment. If it persists, check your " \
          "inference gateway (127.0.0.1:41159)."
UPGRADE = "ERROR: You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit " \
          "https://chatgpt.com/settings/usage to purchase more credits or try again at "
GEMINI_REPORT = "Error when talking to Gemini API Full report available at: " \
                "/tmp/gemini-client-error-Turn.run-sendMessageStream-2026-12-02T11-52-31-390Z.json "
GEMINI_QUOTA = "You exceeded your current quota, please check your plan and billing details. * Quota exceeded for " \
               "metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, " \
               "model: gemini-2.5-flash"


@pytest.mark.parametrize(
    ("command", "cli"),
    [
        ("claude -p 'go'", "claude"),
        ("/usr/local/bin/claude --dangerously-skip-permissions", "claude"),
        ("npx @anthropic-ai/claude-code", "claude"),
        ("env FOO=1 codex exec --full-auto", "codex"),
        ("npx @openai/codex exec", "codex"),
        ("gemini -p hi", "gemini"),
        ("npx @google/gemini-cli", "gemini"),
        ("./agent.sh", "other"),
        ("sh -c 'claude -p x'", "other"),
        ("", "other"),
    ],
)
def test_cli_of(command: str, cli: str) -> None:
    assert cli_of(command) == cli


CAPTURED = [
    # (cli, what it printed, kind, resets_at)
    ("claude", "You've hit your 5-hour limit · resets 3:03pm (Europe/Berlin)\n", USAGE_LIMIT, "2026-12-02T14:03:00Z"),
    ("claude", "You've hit your 5-hour limit · resets 11:43am (UTC)\n", USAGE_LIMIT, "2026-12-02T11:43:00Z"),
    ("claude", "You've hit your weekly limit · resets Dec 5, 5:53pm (America/New_York)\n", USAGE_LIMIT,
     "2026-12-05T22:53:00Z"),
    # a time already past today in its zone is tomorrow's (17:03 in Kolkata now)
    ("claude", "You've hit your weekly limit · resets 1:23am (Asia/Kolkata)\n", USAGE_LIMIT, "2026-12-02T19:53:00Z"),
    ("claude", "API Error: Request rejected (429) · This request would exceed the rate limit for your organization "
               "of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.\n",
     RATE_LIMIT, None),
    ("claude", "API Error: Request rejected (429) · Error\n", RATE_LIMIT, None),
    ("claude", f"API Error: 529 Overloaded. {GATEWAY}\n", OUTAGE, None),
    ("claude", f"API Error: 500 Internal server error. {GATEWAY}\n", OUTAGE, None),
    ("claude", f"API Error: 503 Service unavailable. {GATEWAY}\n", OUTAGE, None),
    ("codex", f"user\nsay hi\n{UPGRADE}12:40 PM.\n{UPGRADE}12:40 PM.\n", USAGE_LIMIT, "2026-12-02T12:40:00Z"),
    ("codex", f"{UPGRADE}Dec 5th, 2026 11:01 PM.\n", USAGE_LIMIT, "2026-12-05T23:01:00Z"),
    ("codex", "ERROR: Quota exceeded. Check your plan and billing details.\n", USAGE_LIMIT, None),
    ("codex", "ERROR: Reconnecting... 5/5\nERROR: exceeded retry limit, last status: 429 Too Many Requests, "
              "request id: req_stub_fault\n", RATE_LIMIT, None),
    ("codex", "ERROR: We’re currently experiencing high demand, which may cause temporary errors.\n", OUTAGE, None),
    ("codex", "ERROR: unexpected status 503 Service Unavailable: The server is overloaded or not ready yet., url: "
              "http://127.0.0.1:44769/v1/responses, request id: req_stub_fault\n", OUTAGE, None),
    ("gemini", f"{GEMINI_REPORT}TerminalQuotaError: You have exhausted your daily quota on this model.\n"
               "    at classifyGoogleError (file:///x.js:1:1)\n", USAGE_LIMIT, None),
    ("gemini", f"{GEMINI_REPORT}TerminalQuotaError: {GEMINI_QUOTA}\nPlease retry in 400.0s.\n"
               "Suggested retry after 400s.\n", RATE_LIMIT, "2026-12-02T11:39:40Z"),
]


@pytest.mark.parametrize(("cli", "output", "kind", "resets_at"), CAPTURED)
def test_what_the_real_clis_printed_is_recognized(cli: str, output: str, kind: str, resets_at: str | None) -> None:
    limit = limit_in(cli, 1, output, NOW)
    assert limit is not None
    assert (limit.kind, limit.resets_at) == (kind, resets_at)
    assert limit.line and "\n" not in limit.line and limit.line in output.replace("\n", " ") or \
        limit.line in output
    # a wrapper script (cli "other") around the same CLI is recognized the same way
    assert limit_in("other", 1, output, NOW) == limit


def test_a_plan_limit_without_a_zone_resolves_in_nows_zone() -> None:
    berlin = datetime.timezone(datetime.timedelta(hours=1))
    now = datetime.datetime(2026, 12, 2, 11, 0, tzinfo=berlin)
    limit = limit_in("claude", 1, "You've hit your session limit · resets 8pm\n", now)
    assert limit is not None and limit.kind == USAGE_LIMIT and limit.resets_at == "2026-12-02T19:00:00Z"
    early = limit_in("claude", 1, "You've hit your session limit · resets 8am", now)
    assert early is not None and early.resets_at == "2026-12-03T07:00:00Z"  # 8 am has passed today
    old = limit_in("claude", 1, "Claude AI usage limit reached|1735689600", now)
    assert old is not None and old.kind == USAGE_LIMIT and old.resets_at == "2025-01-01T00:00:00Z"


def test_a_date_early_next_year_is_next_year() -> None:
    now = datetime.datetime(2026, 12, 30, 12, 0, tzinfo=UTC)
    limit = limit_in("claude", 1, "You've hit your weekly limit · resets Jan 2, 9am (UTC)", now)
    assert limit is not None and limit.resets_at == "2027-01-02T09:00:00Z"


def test_the_plan_limit_wins_over_the_lines_around_it() -> None:
    output = f"API Error: 529 Overloaded. {GATEWAY}\nYou've hit your 5-hour limit · resets 3pm (UTC)\n"
    limit = limit_in("claude", 1, output, NOW)
    assert limit is not None and limit.kind == USAGE_LIMIT and limit.resets_at == "2026-12-02T15:00:00Z"


def test_a_recognized_line_is_one_printable_line() -> None:
    limit = limit_in("claude", 1, "\x1b[31mAPI Error: 529 Overloaded\x1b[0m\r\x07" + "x" * 1000, NOW)
    assert limit is not None and limit.kind == OUTAGE
    assert limit.line.isprintable() and len(limit.line) <= 300


@pytest.mark.parametrize(
    ("cli", "status", "output"),
    [
        ("claude", 0, "You've hit your session limit · resets 8pm"),  # it finished: its answer quoted one
        ("claude", 1, "Error: something else broke"),
        ("claude", 1, ""),
        ("codex", 1, "ERROR: unexpected status 400 Bad Request: invalid model"),
        ("gemini", 1, "An unexpected critical error occurred: ENOENT"),
        ("claude", 1, "You've hit your session limit · resets 25:99"),  # no time in it: a limit with no reset
    ],
)
def test_no_limit(cli: str, status: int, output: str) -> None:
    found = limit_in(cli, status, output, NOW)
    if "session limit" in output and status:
        assert found is not None and found.resets_at is None
    else:
        assert found is None


def test_claude_bypass_screen_is_named() -> None:
    said = person_prompt_in("claude", "WARNING: Claude Code running in Bypass Permissions mode\n❯ 1. No, exit")
    assert said is not None and "bypassPermissionsModeAccepted" in said
