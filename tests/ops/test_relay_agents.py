"""The relay's agents in order (ops/relay_agents.py): the switch on a limit that resets
later than the threshold, the return once the reset passed, the wait for the earliest
reset when every agent is limited, and where the list and the threshold come from. With
the real CLIs: tests/e2e/test_relay_switch.py."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from git_handoff.agent_cli.agent_output import RATE_LIMIT, USAGE_LIMIT, Limit
from git_handoff.core.errors import UsageError
from git_handoff.core.record_schemas import RelayRecord
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import relay_agents
from git_handoff.ops.relay_agents import Agents
from git_handoff.state.store import StateStore
from tests.support.repo import git, run, state_head

NOW = datetime.datetime(2026, 7, 1, 10, 0, 0, tzinfo=datetime.UTC).timestamp()
CLAUDE, CODEX, GEMINI = "claude -p x", "codex exec x", "gemini -p x"


def limit_in(hours: float, kind: str = USAGE_LIMIT) -> Limit:
    at = datetime.datetime.fromtimestamp(NOW + hours * 3600, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Limit(kind, at, "You've hit your limit")


Logged = list[tuple[RelayRecord, tuple[str, str, str | None] | None]]


def rotation(*commands: str, after: float = 3600.0) -> tuple[Agents, Logged]:
    logged: Logged = []
    agents = Agents(list(commands), after, record=lambda changes, log: logged.append((changes, log)),
                    say=lambda _text: None)
    return agents, logged


def test_a_long_limit_switches_to_the_next_agent_and_its_reset_brings_the_first_back() -> None:
    agents, logged = rotation(CLAUDE, CODEX)
    assert agents.choose(1, NOW) == CLAUDE and not logged
    assert agents.after_limit(limit_in(5), 1, NOW) is None  # no wait: codex goes on
    assert agents.command == CODEX and agents.choose(1, NOW) == CODEX
    (changes, log), = logged
    assert changes["agent"] == CODEX and changes["limited"] == [{"agent": "claude", "until": "2026-07-01T15:00:00Z"}]
    assert log is not None
    kind, text, category = log
    assert (kind, category) == ("WARN", "LIMIT")
    assert "claude -> codex" in text and "usage limit until 2026-07-01T15:00:00Z" in text and "1 h" in text
    assert agents.choose(2, NOW + 4 * 3600) == CODEX and len(logged) == 1  # not reset yet
    assert agents.choose(3, NOW + 5 * 3600) == CLAUDE  # reset: back to the first
    last = logged[-1][1]
    assert last is not None and "codex -> claude" in last[1] and "back to claude" in last[1]
    assert logged[-1][0]["limited"] == [] and len(logged[-1][0]["switches"]) == 2


def test_a_short_limit_one_agent_or_no_reset_time_is_waited_as_before() -> None:
    agents, logged = rotation(CLAUDE, CODEX)
    short = limit_in(0.5)
    assert agents.after_limit(short, 1, NOW) is short and agents.command == CLAUDE
    bare = Limit(RATE_LIMIT, None, "429")
    assert agents.after_limit(bare, 1, NOW) is bare
    alone, _ = rotation(CLAUDE)
    long = limit_in(30)
    assert alone.after_limit(long, 1, NOW) is long
    assert not logged


def test_the_next_agent_not_itself_limited_is_taken_and_all_limited_waits_for_the_earliest() -> None:
    agents, logged = rotation(CLAUDE, CODEX, GEMINI)
    assert agents.after_limit(limit_in(5), 1, NOW) is None and agents.command == CODEX
    assert agents.after_limit(limit_in(2), 1, NOW) is None and agents.command == GEMINI
    waited = agents.after_limit(limit_in(9), 1, NOW)
    # every agent limited: the wait ends at the earliest reset (codex's), which runs next
    assert waited is not None and waited.resets_at == "2026-07-01T12:00:00Z"
    assert agents.command == CODEX  # that switch too is logged, with its reason, before the wait
    log = logged[-1][1]
    assert log is not None and log[2] == "LIMIT" and "gemini -> codex" in log[1], log
    assert "every agent is limited and codex's limit resets first, at 2026-07-01T12:00:00Z" in log[1], log
    assert agents.choose(1, NOW + 2 * 3600 + 5) == CODEX
    assert agents.choose(2, NOW + 5 * 3600) == CLAUDE
    assert [entry[0]["switches"][-1]["to"] for entry in logged] == ["codex", "gemini", "codex", "claude"]


def test_two_commands_of_one_cli_are_told_apart() -> None:
    assert relay_agents.labels([CLAUDE, "claude --model x -p y", CODEX]) == ["claude#1", "claude#2", "codex"]


def test_the_list_and_the_threshold_come_from_the_options_else_git_config(repo: Path) -> None:
    r = Repo.discover(repo)
    with pytest.raises(UsageError, match="handoff.agents"):
        relay_agents.configured(r, [])
    git("config", "--add", "handoff.agents", CLAUDE, cwd=repo)
    git("config", "--add", "handoff.agents", CODEX, cwd=repo)
    r = Repo.discover(repo)
    assert relay_agents.configured(r, []) == [CLAUDE, CODEX]
    assert relay_agents.configured(r, [GEMINI]) == [GEMINI]
    assert relay_agents.switch_after(r, None) == 3600
    assert relay_agents.switch_after(r, "90") == 90 and relay_agents.switch_after(r, "2h") == 7200
    git("config", "handoff.switchAfter", "30m", cwd=repo)
    assert relay_agents.switch_after(Repo.discover(repo), None) == 1800
    git("config", "handoff.switchAfter", "soon", cwd=repo)
    with pytest.raises(UsageError, match="handoff.switchAfter"):
        relay_agents.switch_after(Repo.discover(repo), None)


@pytest.mark.parametrize("args", [["--agent", CLAUDE, "--switch-after", "soon"], ["--agent", " "], []])
def test_a_bad_agent_list_or_threshold_is_exit_2_in_one_line_and_changes_nothing(repo: Path,
                                                                                 args: list[str]) -> None:
    assert run("init").rc == 0
    before = state_head(repo)
    r = run("relay", *args)
    assert r.rc == 2, r.out + r.err
    assert len(r.err.strip().splitlines()) == 1 and r.err.startswith("error: "), r.err
    assert state_head(repo) == before


def test_each_agent_that_ran_in_a_session_is_kept_in_its_record_in_order(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("session", "start").rc == 0
    store = StateStore(Repo.discover(repo), session=1)
    for name in ("claude", "claude", "codex"):
        relay_agents.note_session(store, 1, name)
    assert run("session", "show", "1", "--json").json()["agents"] == ["claude", "codex"]
    assert "agents:     claude -> codex" in run("session", "show", "1").out
