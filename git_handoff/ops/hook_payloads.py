"""The JSON shapes of `hooks status|install|uninstall` (every agent CLI's, and git's
post-commit hook's): what `--json` answers, beside the other commands' in
git_handoff.ops.payloads."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

# Our MCP server's entry in an agent CLI's config (agent_cli.mcp_config.status): its
# keys differ by agent (the file's key names the file), so a mapping, not a TypedDict.
McpEntry = dict[str, object]


class CommandServerSetting(TypedDict):
    """`command_server` of `hooks install|uninstall|status`: whether the repository's git
    config turns the command server on (`handoff.commandServer`, every level), whether
    `hooks install --agent` set it, what this run did ("set", "unset", "kept", "not set":
    install and uninstall only), the commands that turn it off and on, and the variable
    of this environment that overrides the config (`HANDOFF_COMMAND_SERVER=0|1`)."""

    on: bool
    value: str | None
    set_by_install: bool
    turn_off: str
    turn_on: str
    changed: NotRequired[Literal["set", "unset", "kept", "not set"]]
    environment: NotRequired[str]


class AgentHooks(TypedDict):
    """`hooks status|install|uninstall --agent codex|gemini`."""

    agent: str
    settings: str | None
    installed: bool
    events: dict[str, bool]
    problem: NotRequired[str]
    codex_config: NotRequired[str]
    trusted: NotRequired[bool]
    project_trusted: NotRequired[bool]
    hooks_feature: NotRequired[bool | None]
    mcp: NotRequired[McpEntry]
    added: NotRequired[list[str]]
    removed: NotRequired[list[str]]
    command_server: NotRequired[CommandServerSetting]


class ClaudeHooks(TypedDict):
    """`hooks install|uninstall --agent claude`."""

    settings: str | None
    installed: bool
    added: NotRequired[list[str]]
    removed: NotRequired[list[str]]
    unattended: NotRequired[dict[str, object]]
    mcp: NotRequired[McpEntry]
    command_server: NotRequired[CommandServerSetting]


class ClaudeHooksStatus(TypedDict):
    """`hooks status --agent claude`: the Claude Code part of `HooksStatus`."""

    agent: str
    settings: str | None
    installed: bool
    mcp: McpEntry
    unattended: bool
    command_server: CommandServerSetting


class HooksStatus(TypedDict):
    """`hooks status|install|uninstall`: the post-commit hook and each agent CLI's."""

    hooks_dir: str
    post_commit: str
    installed: bool
    up_to_date: bool
    starts: list[str]
    chained_user_hook: bool
    notes_rewrite_ref: bool
    commits_per_session: int | None
    tasks_per_session: int | None
    session: int | None
    claude: bool
    claude_settings: str | None
    claude_unattended: bool
    codex: bool
    gemini: bool
    qwen: bool
    copilot: bool
    opencode: bool
    claude_mcp: McpEntry
    codex_mcp: McpEntry
    gemini_mcp: McpEntry
    qwen_mcp: McpEntry
    copilot_mcp: McpEntry
    opencode_mcp: McpEntry
    command_server: CommandServerSetting
    chained_now: NotRequired[bool]  # install
    removed: NotRequired[bool]  # uninstall
