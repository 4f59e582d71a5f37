"""`AgentCli`: what git handoff knows of one agent CLI, as one module implements it.

Each supported CLI is one module of this package (claude.py, codex.py, gemini.py, …) that
provides every name of the protocol below at module level, and one entry in
registry.py; everything else (the hook entry point, `hooks install|uninstall|status`,
the MCP configuration, the relay's reading of limits, outages and screens) reads the
registry instead of naming a CLI. The model is pre-commit's `Language` protocol, which
its language modules implement (pre-commit/languages/all.py). mypy checks each
registered module against the protocol; tests/agent_cli/test_protocol.py checks it at
run time too.

The modules are imported by every agent hook (`git handoff hook EVENT`), so what they
hold at module level stays plain data, cheap to build: constants and tuples, no class of
their own (what they share at run time is in hook_data.py), patterns compiled on first use
(core/patterns.py). This module is imported only for type checking and by the tests. A
CLI's config-file merging, MCP registration and output reading are the shared modules
that read its data (agent_config.py, mcp_config.py, agent_output.py), never imported by
a hook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeAlias

from git_handoff.agent_cli.hook_data import Event, Outcome
from git_handoff.agent_cli.usage import Usage
from git_handoff.core.patterns import LazyPattern

# One text a CLI prints when it stops on a limit or an outage: (its kind: hook_data.USAGE_LIMIT |
# RATE_LIMIT | OUTAGE, the pattern of the line, what the line tells of the reset: "clock" a
# printed reset time after the match, "seconds" a printed delay, "epoch" group 1 a Unix time,
# None nothing). agent_output applies a CLI's rules in order: the first that matches a line wins.
LimitRule: TypeAlias = tuple[str, LazyPattern, str | None]


class AgentCli(Protocol):
    """The names an agent CLI's module provides (see the module docstring). The data are
    read-only properties here so that a module's plain constants implement them."""

    @property
    def NAME(self) -> str: ...  # `--agent NAME`, the prefix of its hook names, the key of its status
    @property
    def LABEL(self) -> str: ...  # as the CLI calls itself in our messages ("Codex CLI")
    @property
    # the executables that start it (agent_output.cli_of reads a launch command)
    def PROGRAMS(self) -> tuple[str, ...]: ...
    @property
    def PACKAGE(self) -> str: ...  # the npm package that installs it
    @property
    def VERSION(self) -> str: ...  # the version the suite proves (.ci/run installs it; `git handoff hooks versions`)
    # -- its hooks: `git handoff hook NAME-…` in the file CONFIG of the project ----------------
    @property
    # hook -> (its event, matcher, the core's event kind)
    def HOOKS(self) -> dict[str, tuple[str, str | None, str]]: ...
    @property
    def CONFIG(self) -> str: ...  # the project's hooks file, in the work tree
    @property
    def COMMAND_PREFIX(self) -> str: ...  # the start of every command of ours in CONFIG
    @property
    def TIMEOUTS(self) -> tuple[tuple[str, int], ...]: ...  # event -> the handler's "timeout", where one is set
    @property
    def NAMED_HANDLERS(self) -> bool: ...  # each handler gets a "name" (agent_config.handler_name)
    @property
    def TRUSTED_HOOKS(self) -> bool: ...  # its handlers run only once their trust is recorded in the user's config
    @property
    def DETACHED(self) -> tuple[str, ...]: ...  # hooks its caller gives too little time: run detached (cli/hooks.py)
    @property
    def UNATTENDED(self) -> bool: ...  # `hooks install --unattended` has project settings to write for it
    @property
    # a file of hooks-templates/ that CONFIG holds whole: a plugin the CLI loads, which runs our hooks
    # itself (plugin_file.py); None: our handlers are merged into CONFIG's JSON (agent_config.py)
    def PLUGIN(self) -> str | None: ...
    # -- its MCP configuration (mcp_config.py registers our server there) -----------------------
    @property
    def MCP_CONFIG(self) -> str: ...  # the project's file, in the work tree
    @property
    def MCP_KEY(self) -> str: ...  # its table of servers
    @property
    def MCP_TOML(self) -> bool: ...  # TOML (else JSON)
    @property
    def MCP_EXTRA(self) -> tuple[tuple[str, Any], ...]: ...  # keys of our entry besides command and args
    @property
    def MCP_COMMAND_LIST(self) -> bool: ...  # our entry's "command" is the whole list (no "args")
    # -- what it prints ---------------------------------------------------------------------------
    @property
    def LIMITS(self) -> tuple[LimitRule, ...]: ...  # its usage limits, rate limits and outages, the plan limit first
    @property
    def BUSY(self) -> str | None: ...  # a regular expression of its working status line (None: it shows none we know)

    def config_entries(self) -> dict[str, tuple[str | None, str]]:
        """What `hooks install --agent NAME` merges into CONFIG: event -> (matcher, command)."""
        ...

    def event(self, hook: str, payload: dict[str, Any]) -> Event:
        """The hook's payload as the core's event."""
        ...

    def render(self, hook: str, outcome: Outcome) -> str:
        """The outcome as the CLI reads a hook's output ("" when there is nothing to say)."""
        ...

    def person_prompt(self, screen: str) -> str | None:
        """One line saying what to set when `screen` (a pane's text) shows the CLI waiting for a
        person (first run, login, trust, an approval); None when it shows none."""
        ...

    def usage(self, transcript: str) -> Usage | None:
        """What the CLI's transcript at `transcript` (a hook payload's `transcript_path`) says it
        used: tokens in and out, model turns (agent_cli/usage.py); None when it tells nothing."""
        ...

    def setup_notes(self, status: Mapping[str, object]) -> Sequence[str]:
        """What still stands between its installed hooks (`status`: hook_install.agent_status)
        and their running, said plainly."""
        ...
