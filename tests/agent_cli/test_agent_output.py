"""The pure recognizer of agent CLI limits, outages and first-run screens (agent_output),
on the texts the real CLIs printed against the loopback model stub's faults
(claude 2.1.332, codex 0.171.0, gemini 0.61.0; docs/agent-limits.md). The tests that
run the real CLIs are in tests/e2e/test_agent_limits_cli.py."""

from __future__ import annotations

import datetime

import pytest

from git_handoff.agent_cli.agent_output import (
    OUTAGE,
    RATE_LIMIT,
    USAGE_LIMIT,
    busy_in,
    cli_of,
    foreign_texts,
    limit_in,
    person_prompt_in,
    screen_shape,
)

UTC = datetime.UTC
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
    # logged in with a plan (CLAUDE_CODE_OAUTH_TOKEN), the same 429
    ("claude", "API Error: Server is temporarily limiting requests (not your usage limit) · This request would exceed "
               "the rate limit for your organization of 50 requests per minute.\n", RATE_LIMIT, None),
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
    # its 10 attempts used up on a 75 s per-minute quota (the error object dumped after it)
    ("gemini", f"Attempt 10 failed: {GEMINI_QUOTA}\nPlease retry in 75.0s.\nSuggested retry after 75s.. Max attempts "
               f"reached\n{GEMINI_REPORT}RetryableQuotaError: {GEMINI_QUOTA}\nPlease retry in 75.0s.\n"
               f"Suggested retry after 75s.\n  cause: {{\n    code: 429,\n    message: '{GEMINI_QUOTA}\\n' +\n"
               "      'Please retry in 75.0s.',\n  },\n  retryDelayMs: 75000,\n  status: 429\n}\n"
               "An unexpected critical error occurred:[object Object]\n", RATE_LIMIT, "2026-12-02T11:34:15Z"),
    ("gemini", "Attempt 10 failed: The model is overloaded. Please try again later.. Max attempts reached\n"
               f"{GEMINI_REPORT}RetryableQuotaError: The model is overloaded. Please try again later.\n  cause: {{\n"
               "    code: 503,\n    message: 'The model is overloaded. Please try again later.',\n    details: []\n"
               "  },\n  retryDelayMs: undefined,\n  status: 503\n}\n", OUTAGE, None),
    ("gemini", f'{GEMINI_REPORT}_ApiError: {{"error":{{"code":500,"message":"An internal error has occurred. Please '
               'retry or report in '
               'https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}\n'
               "  status: 500\n}\nAn unexpected critical error occurred:[object Object]\n", OUTAGE, None),
]


@pytest.mark.parametrize(("cli", "output", "kind", "resets_at"), CAPTURED)
def test_what_the_real_clis_printed_is_recognized(cli: str, output: str, kind: str, resets_at: str | None) -> None:
    limit = limit_in(cli, 1, output, NOW)
    assert limit is not None
    assert (limit.kind, limit.resets_at) == (kind, resets_at)
    assert limit.line and limit.line in output  # one of its lines (or that line's first 300 characters)
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


RULE = "─" * 120
# the last screen interactive claude 2.1.332 showed in tmux (capture-pane), fresh HOME, each step answered
SCREENS = {
    "offline onboarding": (
        "Welcome to Claude Code v2.1.332\n" + "." * 58
        + "\n       █████████\n Unable to connect to Anthropic services\n"
        " Failed to connect to api.anthropic.com: ENOTFOUND\n Check your internet connection and network settings.\n"
        " Claude Code might not be available in your country. Check supported countries at\n"
        " https://anthropic.com/supported-countries\nEXITED-1\n",
        ['"hasCompletedOnboarding": true']),
    "trust": (
        f"{RULE}\n Accessing workspace:\n\n /tmp/exp/tmux-onb/work\n\n Quick safety check: Is this a project you "
        "created or one you trust? (Like your own code, a well-known open source\n project, or work from your team). "
        "If not, take a moment to review what's in this folder first.\n\n Claude Code'll be able to read, edit, and "
        "execute files here.\n\n Security guide\n\n ❯ No, exit\n   Yes, I trust this folder\n\n Enter to confirm · Esc "
        "to cancel\n",
        ['"projects": {"/tmp/exp/tmux-onb/work": {"hasTrustDialogAccepted": true}}']),
    "api key": (
        f"{RULE}\n  Detected a custom API key in your environment\n\n  ANTHROPIC_API_KEY: "
        "sk-ant-...-stub-not-a-real-key\n\n  Do you want to use this API key?\n\n    Yes\n  ❯ No (recommended)\n\n  "
        "Enter to confirm · Esc to cancel\n",
        ['"customApiKeyResponses": {"approved": ["-stub-not-a-real-key"]}']),
    "mcp server": (
        f"{RULE}\n  New MCP server found in this project: handoff\n\n  MCP servers may execute code or access system"
        " resources. All tool calls require approval. Learn more in the MCP documentation.\n\n    Use this MCP"
        " server\n    Use this and all future MCP servers in this project\n  ❯ Continue without using this MCP"
        " server\n\n  Enter to confirm · Esc to reject\n",
        ['"enabledMcpjsonServers": ["handoff"]', ".claude/settings.local.json",
         "hooks install --agent claude --unattended", '"enableAllProjectMcpServers": true']),
    "bypass": (
        f"{RULE}\n  WARNING: Claude Code running in Bypass Permissions mode\n\n  In Bypass Permissions mode, Claude "
        "Code will not ask for your approval before running potentially dangerous\n  commands.\n  This mode should "
        "only be used in a sandboxed container/VM that has restricted internet access and can easily be\n  restored if "
        "damaged.\n\n  By proceeding, you accept all responsibility for actions taken while running in Bypass "
        "Permissions mode.\n\n  https://code.claude.com/docs/en/security\n\n  ❯ No, exit\n    Yes, I accept\n\n"
        "  Enter to confirm · Esc to cancel\n",
        ['"bypassPermissionsModeAccepted": true', '"skipDangerousModePermissionPrompt": true',
         "hooks install --agent claude --unattended"]),
    "not logged in": (
        " ▐▛███▛█   Claude Code v2.1.332\n❯ Say hi.\n  ⎿  Not logged in · Please run /login\n"
        "                     Not logged in · run /login\n" + RULE + "\n❯ Once fixed, resend your message\n",
        ["ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"]),
}


@pytest.mark.parametrize("name", list(SCREENS))
def test_each_first_run_screen_is_named_with_the_setting(name: str) -> None:
    screen, settings = SCREENS[name]
    said = person_prompt_in("claude", screen)
    assert said is not None and "\n" not in said and said.isprintable()
    assert all(setting in said for setting in settings), said
    assert person_prompt_in("other", screen) == said  # a wrapper script around claude


def test_a_working_session_or_a_limit_is_no_person_prompt() -> None:
    working = ("❯ Say hi.\n● STUB-ANSWERED\n✻ Brewed for 0s\n" + RULE + "\n❯ \n" + RULE +
               "\n  ⏵⏵ bypass permissions on (shift+tab to cycle) · ← for agents\n")
    assert person_prompt_in("claude", working) is None
    assert person_prompt_in("claude", "You've hit your 5-hour limit · resets 3:03pm (Europe/Berlin)") is None
    assert person_prompt_in("codex", SCREENS["bypass"][0]) is None


def test_a_folder_name_from_the_screen_is_quoted_data() -> None:
    screen = 'Accessing workspace:\n /tmp/a"b\x1b[31m\n Yes, I trust this folder\n'
    said = person_prompt_in("claude", screen)
    assert said is not None and said.isprintable() and '"/tmp/a?b?[31m"' in said


def _boxed(*lines: str) -> str:
    """Gemini CLI draws its dialogs in a box."""
    return "\n".join(f" │ {line:<114} │" for line in lines)


OTHER_SCREENS = {
    # interactive codex 0.171.0 in tmux, its stub provider configured, the folder not trusted
    ("codex", "trust"): (
        "  Folder access\n\n  /tmp/exp/t2-c1/work\n\n  Trust this folder? Codex can read, edit, and run files here, "
        "subject to your permission settings. Folder settings\n  can run code automatically, even without a model "
        "request. Continue only if you trust these files. Your trust\n  decision will be saved.\n\n› 1. Trust and "
        "continue\n  2. Back to Agent Command Center\n\n  enter continue · esc back\n",
        ['[projects."/tmp/exp/t2-c1/work"] trust_level = "trusted"', "codex exec --trust"]),
    # no provider and no login
    ("codex", "login"): (
        "  Welcome to Codex, OpenAI's command-line coding agent\n\n  Choose how you want to use Codex.\n\n"
        "> 1. Sign in with ChatGPT\n     Usage included with Plus, Pro, Business, and Enterprise plans\n"
        "  2. Sign in with Device Code\n  3. Sign in another way\n     Use an API key or another provider\n\n"
        "  Press enter to continue\n",
        ["codex login --with-api-key", "env_key"]),
    # interactive gemini 0.61.0 without GEMINI_CLI_TRUST_WORKSPACE (after answering the first prompt)
    ("gemini", "trust"): (
        _boxed("", "Do you trust the files in this folder?", "",
               "Trusting a folder allows Gemini CLI to load its local configurations, "
               "including custom commands, hooks,",
               "", "● 1. Trust folder (work)", "  2. Trust parent folder (t2-g2)", "  3. Don't trust"),
        ["GEMINI_CLI_TRUST_WORKSPACE=true", "trustedFolders.json"]),
    # no security.auth.selectedType in its settings
    ("gemini", "auth"): (
        _boxed("", "? Get started", "", "  How would you like to authenticate for this project?", "",
               "    1. Sign in with Google", "  ● 2. Use Gemini API Key", "    3. Vertex AI", "",
               '  Existing API key detected (GEMINI_API_KEY). Select "Gemini API Key" option to use it.'),
        ['"selectedType": "gemini-api-key"', "GEMINI_API_KEY"]),
    # gemini 0.61.0 headless (CI=true in its environment, even in a terminal) in an untrusted
    # folder: no screen, exit 55 with this (a CI run met it)
    ("gemini", "headless trust"): (
        "Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, set the\n"
        "`GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode. For\n"
        "more details, see https://geminicli.com/docs/cli/trusted-folders/#headless-and-automated-environments\n",
        ["GEMINI_CLI_TRUST_WORKSPACE=true", "headless", "CI=true"]),
}


@pytest.mark.parametrize("key", list(OTHER_SCREENS))
def test_codex_and_gemini_first_run_screens_are_named(key: tuple[str, str]) -> None:
    screen, settings = OTHER_SCREENS[key]
    said = person_prompt_in(key[0], screen)
    assert said is not None and said.isprintable()
    assert all(setting in said for setting in settings), said
    assert person_prompt_in("claude", screen) is None  # each CLI's own screens


PANE_RULE = "─" * 120
# interactive claude 2.1.332 in tmux (docs/agent-clis.md's recipe answered its first-run screens); the CLI still runs
PANES = [
    ("❯ Say hi.\n  ⎿  You've hit your 5-hour limit · resets 3:52pm (Europe/Berlin)\n"
     "● Usage limit reached · set to continue automatically at 3:52pm\n" + PANE_RULE + "\n❯\n" + PANE_RULE +
     "\n  ⚠ Usage limit reached · limit resets 3:52pm\n    Continuing automatically at 3:52pm · Esc to cancel\n"
     "  ⏵⏵ bypass permissions on (shift+tab to cycle) · ← for agents\n", USAGE_LIMIT, "2026-12-02T14:52:00Z"),
    ("❯ Say hi.\n● API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. "
     "If it\n  persists, check your inference gateway (127.0.0.1:44653).\n" + PANE_RULE +
     "\n❯ Resend your message to try again\n" + PANE_RULE + "\n  ⏵⏵ bypass permissions on (shift+tab to cycle)\n",
     OUTAGE, None),
]


@pytest.mark.parametrize(("pane", "kind", "resets_at"), PANES)
def test_a_limit_on_the_pane_of_a_running_interactive_claude(pane: str, kind: str, resets_at: str | None) -> None:
    limit = limit_in("claude", None, pane, NOW)
    assert limit is not None and (limit.kind, limit.resets_at) == (kind, resets_at)


# the pane of interactive claude 2.1.332 in a turn (the Stop hook running), then at its prompt
WORKING = ("● Nothing more from me.\n\n* Galloping… (running Stop hook · 1s · ↓ 10 tokens)\n\n" + RULE + "\n❯ \n"
           + RULE + "\n  ⏵⏵ bypass permissions on (shift+tab to cycle) · esc to interrupt · ← for agents\n")
RESTING = ("● Nothing more from me.\n\n✻ Baked for 3s · done 4:13 AM\n\n" + RULE + "\n❯ \n" + RULE
           + "\n  ⏵⏵ bypass permissions on (shift+tab to cycle)\n")


def test_a_turn_at_work_is_told_from_a_pane_at_rest() -> None:
    assert busy_in(WORKING) and not busy_in(RESTING)
    assert busy_in("  Working (5s • Esc to interrupt)") and busy_in("⠋ Thinking (esc to cancel, 3s)")  # codex, gemini
    assert not busy_in("the escape hatch: esc to leave")


def test_a_redraw_of_the_working_line_is_not_a_new_shape_and_new_output_is() -> None:
    later = WORKING.replace("1s · ↓ 10 tokens", "14s · ↓ 220 tokens").replace("* Galloping", "✻ Pondering")
    assert screen_shape(later) == screen_shape(WORKING)
    assert screen_shape(WORKING.replace("Nothing more", "Something more")) != screen_shape(WORKING)
    assert screen_shape("a  \n\nb   \n") == screen_shape("a\n\nb\n")  # trailing blanks a resize repaints
    assert screen_shape("⠋ Thinking... (esc to cancel, 3s)\nx") == screen_shape("⠙ Thinking... (esc to cancel, 9s)\nx")


# -- only the CLI's own words (issue 41; docs/threat-model.md) --------------------------------------

TITLE = "Write t1: You've hit your session limit · resets 4am"


def test_a_line_holding_what_the_agent_was_given_is_not_the_clis() -> None:
    echoed = f"● Bash(git handoff show t1)\n  ⎿  t1: {TITLE} (P1)\nI will work on it.\n"
    assert limit_in("claude", 1, echoed, NOW) is not None  # what the relay read before
    assert limit_in("claude", 1, echoed, NOW, foreign_texts([TITLE])) is None
    # the CLI's own limit after the echo still counts
    own = echoed + "You've hit your 5-hour limit · resets 3pm (UTC)\n"
    found = limit_in("claude", 1, own, NOW, foreign_texts([TITLE]))
    assert found is not None and found.resets_at == "2026-12-02T15:00:00Z"
    # a pane (no exit status yet) likewise
    assert limit_in("claude", None, echoed, NOW, foreign_texts([TITLE])) is None


def test_foreign_texts_are_lines_long_enough_to_mean_something() -> None:
    texts = foreign_texts(["# Handoff\n\nWrite t1\n  a\n", "x" * 500])
    assert "Write t1" in texts and "# Handoff" in texts and "a" not in texts
    assert all(len(text) <= 300 for text in texts)


@pytest.mark.parametrize("status", [137, 143, 129, -9, 0])
def test_a_process_killed_by_a_signal_crashed_whatever_it_printed(status: int) -> None:
    assert limit_in("claude", status, "You've hit your session limit · resets 8pm\n", NOW) is None


def test_only_the_final_lines_are_the_clis_final_error() -> None:
    early = "You've hit your session limit · resets 8pm\n" + "".join(f"step {n} done\n" for n in range(40))
    assert limit_in("claude", 1, early, NOW) is None
    assert limit_in("claude", 1, early + "API Error: 529 Overloaded\n", NOW) is not None


COPILOT_RETRIED = "Failed to get response from the AI model; retried 5 times (total retry wait time: 59.24 seconds) " \
                  "Last error: "
COPILOT_TAIL = "\n\nChanges    +0 -0\nDuration   1m 0s\n" \
               "Resume     copilot --resume=a23ab29a-b764-4131-b7b9-d15c5f38c221\n"
QWEN_QUOTA_NOTE = "Possible quota limitations in place or slow response times detected. " \
                  "Please wait and try again later.\n"
OPENCODE_HEAD = "\x1b[0m\n> build \u00b7 stub-model\n\x1b[0m\n\x1b[91m\x1b[1mError: \x1b[0m"
# what qwen 0.24.4, copilot 1.0.102 and opencode 1.18.33 printed against the chat-completions stub's faults
# (docs/agent-limits.md; tests/e2e/test_agent_limits_qwen_copilot.py and test_agent_limits_opencode.py run them)
CAPTURED_CHAT = [
    ("copilot", "429 Rate limit reached for stub-model in organization org-stub on requests per min (RPM): Limit 50, "
                f"Used 50, Requested 1. Please try again in 3m20s.\n{COPILOT_TAIL}",
     RATE_LIMIT, "2026-12-02T11:36:20Z"),
    ("copilot", f"{COPILOT_RETRIED}429 The usage limit has been reached\n{COPILOT_TAIL}", USAGE_LIMIT, None),
    ("copilot", f"{COPILOT_RETRIED}429 You exceeded your current quota, please check your plan and billing details.\n"
                f"{COPILOT_TAIL}", USAGE_LIMIT, None),
    ("copilot", "● Request failed due to a transient API error. Retrying...\n\n"
                f"{COPILOT_RETRIED}503 The server is overloaded or not ready yet.\n{COPILOT_TAIL}", OUTAGE, None),
    ("copilot", f"{COPILOT_RETRIED}500 The server had an error while processing your request. Sorry about that!\n"
                f"{COPILOT_TAIL}", OUTAGE, None),
    ("qwen", "Retrying in 1s (attempt 1/1): [API Error: 429 The usage limit has been reached]\nRetrying provider "
             f"attempt (0 buffered tool call(s) discarded).\n[API Error: 429 The usage limit has been reached]\n"
             f"{QWEN_QUOTA_NOTE}", USAGE_LIMIT, None),
    ("qwen", "[API Error: 429 You exceeded your current quota, please check your plan and billing details.]\n"
             f"{QWEN_QUOTA_NOTE}", USAGE_LIMIT, None),
    ("qwen", "Retrying in 1s (attempt 1/1): [API Error: 429 Rate limit reached for stub-model in organization "
             "org-stub on requests per min (RPM): Limit 50, Used 50, Requested 1. Please try again in 2s.]\n"
             "[API Error: 429 Rate limit reached for stub-model in organization org-stub on requests per min (RPM): "
             f"Limit 50, Used 50, Requested 1. Please try again in 75s.]\n{QWEN_QUOTA_NOTE}", RATE_LIMIT,
     "2026-12-02T11:34:15Z"),
    ("qwen", "[API Error: 500 The server had an error while processing your request. Sorry about that!]\n",
     OUTAGE, None),
    ("qwen", "[API Error: 503 The server is overloaded or not ready yet.]\n", OUTAGE, None),
    # opencode 1.18.33 (tests/e2e/test_agent_limits_opencode.py): its final error in colour, after its 5 retries
    ("opencode", f"{OPENCODE_HEAD}Rate limit reached for stub-model in organization org-stub on requests per min "
                 "(RPM): Limit 50, Used 50, Requested 1. Please try again in 5s.\n",
     RATE_LIMIT, "2026-12-02T11:33:05Z"),
    ("opencode", f"{OPENCODE_HEAD}The usage limit has been reached\n", USAGE_LIMIT, None),
    ("opencode", f"{OPENCODE_HEAD}The server had an error while processing your request. Sorry about that!\n",
     OUTAGE, None),
    ("opencode", f"{OPENCODE_HEAD}The server is overloaded or not ready yet.\n", OUTAGE, None),
]


@pytest.mark.parametrize(("cli", "output", "kind", "resets_at"), CAPTURED_CHAT)
def test_what_qwen_copilot_and_opencode_printed_is_recognized(cli: str, output: str, kind: str,
                                                              resets_at: str | None) -> None:
    limit = limit_in(cli, 1, output, NOW)
    assert limit is not None
    assert (limit.kind, limit.resets_at) == (kind, resets_at)
    assert limit.line and limit.line in output.replace("\x1b[0m", "").replace("\x1b[91m\x1b[1m", "")
    assert "\x1b" not in limit.line and "[91m" not in limit.line  # a terminal's codes are not the CLI's words
    assert limit_in("other", 1, output, NOW) is not None  # a wrapper script around it: some limit all the same


@pytest.mark.parametrize("cli", ["qwen", "copilot", "opencode"])
def test_qwen_and_copilot_print_no_limit_on_other_errors(cli: str) -> None:
    assert limit_in(cli, 1, "[API Error: 400 invalid model]\nError: bad request\n", NOW) is None
    assert limit_in(cli, 0, "[API Error: 429 The usage limit has been reached]\n", NOW) is None


def test_qwen_and_copilot_screens_are_named() -> None:
    qwen_said = ("No auth type is selected. Please configure an auth type (e.g. via settings or `--auth-type`) "
                 "before running in non-interactive mode.")
    copilot_said = ("Error: No authentication information found.\n\nCopilot can be authenticated with GitHub using an "
                    "OAuth Token or a Fine-Grained Personal Access Token.")
    assert "--auth-type openai" in (person_prompt_in("qwen", qwen_said) or "")
    assert "COPILOT_PROVIDER_BASE_URL" in (person_prompt_in("copilot", copilot_said) or "")
    assert person_prompt_in("copilot", "Do you trust the files in this folder?") is not None
