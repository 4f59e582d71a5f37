"""OpenCode (`opencode run`) against the chat-completions stub's faults, and agent_output
reading what it printed (the OpenCode rows of docs/agent-limits.md). It retries a 429 or a
5xx 5 times (6 requests, its own backoff; no setting shortens it) and then prints the API's
message after "Error: " on stderr and exits 1."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path

import pytest

from git_handoff.agent_cli.agent_output import OUTAGE, RATE_LIMIT, limit_in
from tests.support import agent_clis
from tests.support.stubs import loopback
from tests.support.stubs.faults import Fault
from tests.support.stubs.openai_chat import ChatStub

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("fault", "kind", "text"), [
    (Fault("rate_limit", reset_in=2), RATE_LIMIT, "Error: Rate limit reached for stub-model"),
    (Fault("server_error"), OUTAGE, "Error: The server had an error while processing your request."),
])
def test_opencode_limit_after_its_retries_is_recognized(tmp_path: Path, fault: Fault, kind: str, text: str) -> None:
    agent_clis.require_opencode()
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    with ChatStub(loopback.say("hi"), lifetime=400) as stub:
        stub.faults.fail(fault, times=1000)
        result = agent_clis.run_opencode(work, stub.port, "Say hi.", timeout=360)
        served = len(stub.faults.served)
    assert result.rc == 1 and served == 6, (result.rc, served)  # the request and its 5 retries
    limit = limit_in("opencode", result.rc, result.stdout + result.stderr, datetime.datetime.now(datetime.UTC))
    assert limit is not None, f"opencode exited {result.rc} and printed, unrecognized:\n{result.stderr[-3000:]}"
    assert limit.kind == kind and limit.line.startswith(text), limit.line  # its colour codes left out
