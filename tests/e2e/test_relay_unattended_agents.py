"""The relay's limit waits with the real Codex CLI and Gemini CLI: 6 tasks, 2 per
session, and a burst of 429s the CLI gives up on in the middle. The relay waits, then
launches the agent again into the same session: exactly 3 sessions of 2 tasks (the
limit spends none), the waits in one session, no launch failure, no agent process left,
`git fsck` clean (what the Claude soak asserts). Only the model is a stub (tests/support/stubs/, with the
scripted faults of faults.py). Claude Code: tests/e2e/test_relay_unattended.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.agent_clis import (
    assert_limit_waited_out,
    codex_env,
    codex_home,
    gemini_env,
    install_hooks,
    plan,
    relay_through_a_limit,
    require_codex,
    require_gemini,
)
from tests.support.stubs.faults import Fault
from tests.support.stubs.gemini import GeminiStub
from tests.support.stubs.loopback import Exchange, StubBase, Turn, lazy_agent
from tests.support.stubs.openai_responses import ResponsesStub

pytestmark = pytest.mark.slow

CODEX = 'codex exec --trust -s danger-full-access "Work on the tasks git handoff gives you."'
GEMINI = 'GEMINI_CLI_TRUST_WORKSPACE=true gemini --yolo -p "Work on the tasks git handoff gives you."'


def faulting_at(task: str, fault: Fault, times: int) -> tuple[list[StubBase], Callable[[Exchange], Turn]]:
    """The lazy agent; once a turn is about task `task`, the stub answers the next
    `times` model requests with `fault` (the CLI is mid-task: the claim is in)."""
    lazy = lazy_agent()
    holder: list[StubBase] = []

    def policy(ex: Exchange) -> Turn:
        turn = lazy(ex)
        command = getattr(turn, "command", "")
        if f"claim {task} " in command and not holder[0].faults.served:
            holder[0].faults.fail(fault, times=times)
        return turn

    return holder, policy


def test_codex_rate_limit_burst_is_waited_out_in_its_session(repo: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    require_codex()
    ids = plan(6, "--max-tasks-per-session", "2")
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    assert install_hooks("codex")["trusted"]
    env = codex_env(home)
    holder, policy = faulting_at("t3", Fault("rate_limit", reset_in=3), times=2)
    with ResponsesStub(policy) as stub:
        holder.append(stub)
        codex_home(home, stub.port)
        r, served = relay_through_a_limit(CODEX, repo, env, stub)
    assert_limit_waited_out(r, repo, served, ids, "rate_limit", "rate limit")


def test_gemini_quota_burst_is_waited_out_in_its_session(repo: Path, tmp_path: Path) -> None:
    require_gemini()
    ids = plan(6, "--max-tasks-per-session", "2")
    install_hooks("gemini")
    home = tmp_path / "gemini-home"
    holder, policy = faulting_at("t3", Fault("usage_limit"), times=2)  # a 429 of the daily quota: terminal
    with GeminiStub(policy) as stub:
        holder.append(stub)
        env = gemini_env(home, stub.port)
        env.pop("GEMINI_CLI_TRUST_WORKSPACE")
        settings_file = home / ".gemini" / "settings.json"
        settings = json.loads(settings_file.read_text())
        settings["general"]["maxAttempts"] = 2
        settings_file.write_text(json.dumps(settings))
        r, served = relay_through_a_limit(GEMINI, repo, env, stub)
    assert_limit_waited_out(r, repo, served, ids, "usage_limit", "usage limit")
