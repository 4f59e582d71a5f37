"""The agent CLIs git handoff supports: one module each, implementing `AgentCli`
(agent_cli/protocol.py), in the order they are listed and tried. Adding a CLI is its
module, its line here and its name in `NAMES` (agent_cli/__init__.py), and its tests
(CONTRIBUTING.md, "A new agent CLI")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from git_handoff.agent_cli import claude, codex, copilot, gemini, opencode, qwen

if TYPE_CHECKING:
    from git_handoff.agent_cli.protocol import AgentCli

CLIS: dict[str, AgentCli] = {
    "claude": claude, "codex": codex, "gemini": gemini, "qwen": qwen, "copilot": copilot,
    "opencode": opencode}  # mypy checks each module


def get(name: str) -> AgentCli:
    """The CLI named `name` (KeyError when none is)."""
    return CLIS[name]


def hook_owner(hook: str) -> AgentCli | None:
    """The CLI whose hooks include `hook` (`claude-stop`: Claude Code), or None."""
    return next((cli for cli in CLIS.values() if hook in cli.HOOKS), None)
