"""Every registered agent CLI implements the whole `AgentCli` protocol (agent_cli/protocol.py),
and what must know the CLIs without importing them agrees with the registry."""

from __future__ import annotations

import inspect
from typing import get_type_hints

import pytest

from git_handoff import agent_cli
from git_handoff.agent_cli import registry
from git_handoff.agent_cli.hook_data import OUTAGE, RATE_LIMIT, USAGE_LIMIT
from git_handoff.agent_cli.protocol import AgentCli
from git_handoff.cli import hooks as hooks_cli
from git_handoff.core.patterns import LazyPattern

MEMBERS = sorted(name for name in dir(AgentCli) if not name.startswith("_"))
DATA = sorted(name for name in MEMBERS if isinstance(inspect.getattr_static(AgentCli, name), property))
FUNCTIONS = sorted(set(MEMBERS) - set(DATA))


def test_the_protocol_has_data_and_functions() -> None:
    assert {"NAME", "HOOKS", "CONFIG", "LIMITS", "MCP_CONFIG"} <= set(DATA)
    assert FUNCTIONS == ["config_entries", "event", "own_words", "person_prompt", "render", "setup_notes", "usage"]


@pytest.mark.parametrize("name", sorted(registry.CLIS))
def test_every_registered_cli_implements_the_whole_protocol(name: str) -> None:
    cli = registry.get(name)
    missing = [member for member in MEMBERS if not hasattr(cli, member)]
    assert not missing, f"{name} lacks {missing}"
    for member in DATA:
        assert not callable(getattr(cli, member)), member
        want = get_type_hints(getattr(AgentCli, member).fget)["return"]
        origin = getattr(want, "__origin__", want)
        value = getattr(cli, member)
        assert value is None or isinstance(value, origin if isinstance(origin, type) else object), member
    for member in FUNCTIONS:
        function = getattr(cli, member)
        assert callable(function), member
        expected = [p for p in inspect.signature(getattr(AgentCli, member)).parameters if p != "self"]
        assert list(inspect.signature(function).parameters) == expected, member


@pytest.mark.parametrize("name", sorted(registry.CLIS))
def test_each_clis_data_is_well_formed(name: str) -> None:
    cli = registry.get(name)
    assert cli.NAME == name and cli.LABEL and cli.PROGRAMS
    assert all(hook.startswith(f"{name}-") for hook in cli.HOOKS)  # `hook EVENT` finds its owner by name
    assert all(cli.COMMAND_PREFIX + hook.removeprefix(f"{name}-") == f"git handoff hook {hook}" for hook in cli.HOOKS)
    assert set(cli.DETACHED) <= set(cli.HOOKS)
    assert {event for event, _ in cli.TIMEOUTS} <= {event for event, _, _ in cli.HOOKS.values()}
    assert set(cli.config_entries()) == {event for event, _, _ in cli.HOOKS.values()}
    assert {kind for _, _, kind in cli.HOOKS.values()} <= {"session_start", "stop", "subagent_stop", "pre_compact",
                                                           "compacting", "session_end"}
    for kind, pattern, when in cli.LIMITS:
        assert kind in (USAGE_LIMIT, RATE_LIMIT, OUTAGE) and isinstance(pattern, LazyPattern)
        assert when in (None, "clock", "seconds", "epoch")
    assert cli.person_prompt("") is None
    assert isinstance(list(cli.setup_notes({})), list)


def test_no_two_clis_share_a_hook_or_a_program() -> None:
    hooks = [hook for cli in registry.CLIS.values() for hook in cli.HOOKS]
    programs = [program for cli in registry.CLIS.values() for program in cli.PROGRAMS]
    assert len(hooks) == len(set(hooks)) and len(programs) == len(set(programs))


def test_what_knows_the_clis_without_importing_them_agrees_with_the_registry() -> None:
    # the `hook` command's first step and `--agent`'s choice read agent_cli.NAMES, not the registry
    assert agent_cli.NAMES == tuple(registry.CLIS)
    assert hooks_cli.DETACHED == tuple(hook for cli in registry.CLIS.values() for hook in cli.DETACHED)
