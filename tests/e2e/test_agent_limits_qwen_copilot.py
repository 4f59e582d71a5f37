"""Qwen Code (`qwen -p`) and Copilot CLI (`copilot -p`) against the chat-completions
stub's faults, and agent_output reading what they printed (the rows of
docs/agent-limits.md for them; tests/e2e/test_agent_limits_cli.py has the others').
Qwen Code's retries are shortened in its settings (model.generationConfig.maxRetries 1,
its default 10 waits of 60 s); Copilot CLI's (5, about 60 s on a 429) have no setting."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path

import pytest

from git_handoff.agent_cli.agent_output import OUTAGE, RATE_LIMIT, USAGE_LIMIT, limit_in
from tests.support import agent_clis
from tests.support.stubs import loopback
from tests.support.stubs.faults import Fault
from tests.support.stubs.openai_chat import ChatStub

pytestmark = pytest.mark.slow


def _run(cli: str, tmp_path: Path, fault: Fault) -> tuple[agent_clis.CliRun, int, float]:
    """The CLI's one-shot run with every model request answered by `fault`: its run, the
    faults served, the reset the stub told (epoch)."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    with ChatStub(loopback.say("hi"), lifetime=400) as stub:
        stub.faults.fail(fault, times=1000)
        if cli == "qwen":
            agent_clis.require_qwen()
            settings = Path.home() / ".qwen" / "settings.json"
            settings.parent.mkdir(parents=True, exist_ok=True)
            settings.write_text(json.dumps({"model": {"generationConfig": {
                "maxRetries": 1, "retryInitialDelayMs": 500, "retryMaxDelayMs": 1000}}}))
            result = agent_clis.run_qwen(work, stub.port, "Say hi.", timeout=360)
        else:
            result = agent_clis.run_copilot(work, stub.port, "Say hi.", timeout=360)
        served = stub.faults.served
    return result, len(served), served[0][2] if served else 0.0


def _limit(cli: str, result: agent_clis.CliRun) -> tuple[str, str | None, str]:
    limit = limit_in(cli, result.rc, result.stdout + result.stderr, datetime.datetime.now(datetime.UTC))
    assert limit is not None, f"{cli} exited {result.rc} and printed, unrecognized:\n{result.stderr[-3000:]}"
    return limit.kind, limit.resets_at, limit.line


def test_copilot_rate_limit_it_does_not_wait_is_recognized_with_its_delay(tmp_path: Path) -> None:
    result, served, resets = _run("copilot", tmp_path, Fault("rate_limit", reset_in=200))
    assert result.rc == 1 and served == 1  # a told delay that long: no retry
    kind, resets_at, line = _limit("copilot", result)
    assert kind == RATE_LIMIT and line.startswith("429 Rate limit reached") and resets_at is not None
    told = datetime.datetime.strptime(resets_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()
    assert abs(told - resets) <= 30


@pytest.mark.parametrize(("fault", "kind", "text"), [
    (Fault("server_error"), OUTAGE, "Last error: 500 "),
    (Fault("overloaded"), OUTAGE, "Last error: 503 The server is overloaded"),
])
def test_copilot_outage_after_its_retries_is_recognized(tmp_path: Path, fault: Fault, kind: str, text: str) -> None:
    result, served, _ = _run("copilot", tmp_path, fault)
    assert result.rc == 1 and served == 6  # the request and its 5 retries
    found, _, line = _limit("copilot", result)
    assert found == kind and text in line


def test_qwen_plan_limit_is_a_usage_limit(tmp_path: Path) -> None:
    result, served, _ = _run("qwen", tmp_path, Fault("usage_limit", reset_in=7200))
    assert result.rc == 1 and served >= 2
    kind, _, line = _limit("qwen", result)
    assert kind == USAGE_LIMIT and line == "[API Error: 429 The usage limit has been reached]"


def test_qwen_server_error_after_its_retries_is_an_outage(tmp_path: Path) -> None:
    result, served, _ = _run("qwen", tmp_path, Fault("server_error"))
    assert result.rc == 1 and served >= 2
    kind, _, line = _limit("qwen", result)
    assert kind == OUTAGE and line.startswith("[API Error: 500 ")
