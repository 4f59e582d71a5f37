"""The pure recognizer of agent CLI limits, outages and first-run screens (agent_output),
on texts captured from the real CLIs (docs/agent-limits.md)."""

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

BERLIN_WINTER = datetime.timezone(datetime.timedelta(hours=1))
NOW = datetime.datetime(2026, 12, 2, 11, 0, tzinfo=BERLIN_WINTER)


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


def test_claude_plan_limit_with_a_clock_time_resolves_to_the_next_such_time() -> None:
    limit = limit_in("claude", 1, "You've hit your session limit · resets 8pm\n", NOW)
    assert limit is not None
    assert limit.kind == USAGE_LIMIT
    assert limit.resets_at == "2026-12-02T19:00:00Z"
    assert limit.line == "You've hit your session limit · resets 8pm"
    early = limit_in("claude", 1, "You've hit your session limit · resets 8am", NOW)
    assert early is not None and early.resets_at == "2026-12-03T07:00:00Z"  # 8 am has passed today


def test_claude_rate_limit_and_overload() -> None:
    rate = limit_in("claude", 1, "API Error: Request rejected (429) · Rate limited. Please try again later.", NOW)
    assert rate is not None and rate.kind == RATE_LIMIT and rate.resets_at is None
    over = limit_in("claude", 1, 'API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}', NOW)
    assert over is not None and over.kind == OUTAGE


def test_a_clean_exit_or_an_ordinary_failure_is_no_limit() -> None:
    assert limit_in("claude", 0, "You've hit your session limit · resets 8pm", NOW) is None
    assert limit_in("claude", 1, "Error: something else broke", NOW) is None
    assert limit_in("other", 1, "API Error: 529 Overloaded", NOW) is None


def test_claude_bypass_screen_is_named() -> None:
    said = person_prompt_in("claude", "WARNING: Claude Code running in Bypass Permissions mode\n❯ 1. No, exit")
    assert said is not None and "bypassPermissionsModeAccepted" in said
