"""The real agent CLIs against the model stub's faults, and agent_output reading what
they printed: Claude Code (`claude -p`), Codex (`codex exec`) and Gemini CLI
(`gemini -p`) get 429s with the real APIs' reset headers, plan limits, 529 and 5xx
from tests/support/stubs/faults.py, and `limit_in` must name the case (and the reset
time where the CLI printed one) from the exit status and the output alone.

docs/agent-limits.md has the table these tests keep true. The CLIs' own retries are
shortened where a setting allows (CLAUDE_CODE_MAX_RETRIES, Codex's
request/stream_max_retries, Gemini's general.maxAttempts) and counted on the stub.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time
import zoneinfo
from pathlib import Path

import pytest

from git_handoff.agent_cli.agent_output import OUTAGE, RATE_LIMIT, USAGE_LIMIT, Limit, limit_in
from tests.support import agent_clis
from tests.support.claude_cli import claude_env, require_claude
from tests.support.stubs import anthropic, gemini, loopback, openai_responses
from tests.support.stubs.faults import Fault, Faults


def _near(resets_at: str | None, epoch: float, slack: float = 61) -> bool:
    """The printed reset (minutes, so up to a minute early) names the stub's reset time."""
    assert resets_at is not None
    told = datetime.datetime.strptime(resets_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()
    return abs(told - epoch) <= slack


def _recognized(cli: str, rc: int, output: str, now: datetime.datetime) -> Limit:
    limit = limit_in(cli, rc, output, now)
    assert limit is not None, f"{cli} exited {rc} and printed, unrecognized:\n{output[-3000:]}"
    return limit


# -- the fault script itself (fast) --------------------------------------------------------------


def test_fault_script_runs_in_order_and_seeded_randomness_repeats() -> None:
    faults = Faults().passes(1).fail(Fault("rate_limit", reset_in=75), times=2).fail(Fault("overloaded"))
    taken = [faults.take() for _ in range(5)]
    assert [t[0].kind if t else None for t in taken] == [None, "rate_limit", "rate_limit", "overloaded", None]
    assert [n for n, _, _ in faults.served] == [2, 3, 4]
    first = taken[1]
    assert first is not None and 70 < first[1] - time.time() <= 75

    def pattern(seed: int) -> list[bool]:
        script = Faults().at_random(seed=seed, probability=0.3, fault=Fault("server_error"))
        return [script.take() is not None for _ in range(50)]

    assert pattern(7) == pattern(7) and pattern(7) != pattern(8) and 5 < sum(pattern(7)) < 25


def test_a_timed_limit_holds_one_reset_moment_until_it_passes() -> None:
    faults = Faults().fail(Fault("usage_limit"), for_seconds=0.3)
    first, second = faults.take(), faults.take()
    assert first is not None and second is not None and first[1] == second[1]
    time.sleep(0.35)
    assert faults.take() is None


def test_each_api_answers_a_fault_in_its_own_shape() -> None:
    from tests.support.stubs import faults as wire

    reset = time.time() + 75
    claude = wire.anthropic(Fault("rate_limit"), reset)
    assert claude.status == 429 and claude.headers["retry-after"] in ("74", "75")
    assert claude.headers["anthropic-ratelimit-requests-reset"].endswith("Z")
    assert json.loads(claude.body)["error"]["type"] == "rate_limit_error"
    assert wire.anthropic(Fault("overloaded"), reset).status == 529
    plan = wire.anthropic(Fault("usage_limit"), reset).headers
    assert plan["anthropic-ratelimit-unified-status"] == "rejected"
    assert plan["anthropic-ratelimit-unified-reset"] == str(round(reset))
    openai = wire.openai(Fault("rate_limit"), reset)
    assert openai.headers["x-ratelimit-reset-requests"] in ("1m14s", "1m15s")
    assert json.loads(wire.openai(Fault("usage_limit"), reset).body)["error"]["type"] == "usage_limit_reached"
    google = json.loads(wire.google(Fault("rate_limit"), reset).body)["error"]
    assert google["status"] == "RESOURCE_EXHAUSTED"
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": google["details"][-1]["retryDelay"]} \
        in google["details"]


# -- Claude Code ---------------------------------------------------------------------------------


def _claude(tmp_path: Path, stub: anthropic.StubServer, extra: dict[str, str] | None = None,
            oauth: bool = False, *options: str) -> tuple[subprocess.CompletedProcess[str], float]:
    exe = require_claude()
    env = claude_env(tmp_path / "home", stub.url, extra)
    if oauth:  # a subscription (Pro/Max) login: plan limits come as the unified rate-limit headers
        del env["ANTHROPIC_API_KEY"]
        env["CLAUDE_CODE_OAUTH_TOKEN"] = "sk-ant-oat01-stub-not-a-real-token"
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run([exe, "-p", "Say hi.", "--dangerously-skip-permissions", *options], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return proc, time.monotonic() - started


@pytest.mark.slow
def test_claude_rate_limit_longer_than_it_waits_is_recognized(tmp_path: Path) -> None:
    with anthropic.StubServer(lambda r: anthropic.say("hi"), lifetime=120) as stub:
        stub.faults.fail(Fault("rate_limit", reset_in=75), for_seconds=75)
        proc, took = _claude(tmp_path, stub)
    assert proc.returncode == 1 and took < 30
    limit = _recognized("claude", proc.returncode, proc.stdout + proc.stderr, datetime.datetime.now(datetime.UTC))
    assert limit.kind == RATE_LIMIT and limit.line.startswith("API Error: Request rejected (429)")


@pytest.mark.slow
def test_claude_waits_out_a_short_rate_limit_itself(tmp_path: Path) -> None:
    with anthropic.StubServer(lambda r: anthropic.say("hello from the stub"), lifetime=120) as stub:
        stub.faults.fail(Fault("rate_limit", reset_in=3))
        proc, took = _claude(tmp_path, stub)
        served = len(stub.faults.served)
    assert proc.returncode == 0 and "hello from the stub" in proc.stdout and served == 1 and took >= 3
    assert limit_in("claude", proc.returncode, proc.stdout, datetime.datetime.now(datetime.UTC)) is None


@pytest.mark.slow
@pytest.mark.parametrize(("zone", "window", "reset_in"), [("Europe/Berlin", "five_hour", 9000),
                                                          ("America/New_York", "seven_day", 300000)])
def test_claude_plan_limit_is_recognized_with_its_reset_time(tmp_path: Path, zone: str, window: str,
                                                             reset_in: int) -> None:
    with anthropic.StubServer(lambda r: anthropic.say("hi"), lifetime=120) as stub:
        stub.faults.fail(Fault("usage_limit", reset_in=reset_in, window=window), times=5)
        proc, _ = _claude(tmp_path, stub, {"TZ": zone}, oauth=True)
        resets = stub.faults.served[0][2]
    assert proc.returncode == 1
    limit = _recognized("claude", proc.returncode, proc.stdout + proc.stderr,
                        datetime.datetime.now(zoneinfo.ZoneInfo("UTC")))  # the printed zone decides, not now's
    assert limit.kind == USAGE_LIMIT and "hit your" in limit.line and f"({zone})" in limit.line
    assert _near(limit.resets_at, resets), (limit, resets)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "status"), [("overloaded", "529"), ("server_error", "500"), ("unavailable", "503")])
def test_claude_outage_after_its_retries_is_recognized(tmp_path: Path, kind: str, status: str) -> None:
    with anthropic.StubServer(lambda r: anthropic.say("hi"), lifetime=120) as stub:
        stub.faults.fail(Fault(kind), times=50)
        proc, _ = _claude(tmp_path, stub, {"CLAUDE_CODE_MAX_RETRIES": "1"})
        served = len(stub.faults.served)
    assert proc.returncode == 1 and served == 2  # the request and one retry
    limit = _recognized("claude", proc.returncode, proc.stdout + proc.stderr, datetime.datetime.now(datetime.UTC))
    assert limit.kind == OUTAGE and limit.line.startswith(f"API Error: {status}")


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "kind", "said"), [
    (Fault("usage_limit", reset_in=9000, window="five_hour"), USAGE_LIMIT, "You've hit your 5-hour limit · resets "),
    (Fault("rate_limit", reset_in=75), RATE_LIMIT, "API Error: Request rejected (429)"),
    (Fault("overloaded"), OUTAGE, "API Error: 529 Overloaded"),
])
def test_claude_json_output_limits_and_outages_are_recognized(tmp_path: Path, fault: Fault, kind: str,
                                                             said: str) -> None:
    """`claude -p --output-format json` (the way it prints its cost) prints its error only
    inside its one JSON result line, ~1,300 characters: before, only the line's first 300
    were read, and the limit was taken for a launch failure."""
    with anthropic.StubServer(lambda r: anthropic.say("hi"), lifetime=120) as stub:
        stub.faults.fail(fault, times=50)
        proc, _ = _claude(tmp_path, stub, {"TZ": "Europe/Berlin", "CLAUDE_CODE_MAX_RETRIES": "1"},
                          fault.kind == "usage_limit", "--output-format", "json")
        resets = stub.faults.served[0][2]
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["type"] == "result" and result["is_error"] is True and result["result"].startswith(said)
    limit = _recognized("claude", proc.returncode, proc.stdout + proc.stderr, datetime.datetime.now(datetime.UTC))
    assert limit.kind == kind and limit.line == result["result"]
    if kind == USAGE_LIMIT:
        assert "(Europe/Berlin)" in limit.line and _near(limit.resets_at, resets), (limit, resets)


# -- Codex ---------------------------------------------------------------------------------------


def _codex(tmp_path: Path, fault: Fault, times: int = 50, tz: str = "UTC") -> tuple[agent_clis.CliRun, float]:
    agent_clis.require_codex()
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    with openai_responses.ResponsesStub(loopback.say("hi"), lifetime=120) as stub:
        home = agent_clis.codex_home(tmp_path / "codex-home", stub.port)  # request/stream_max_retries = 0
        stub.faults.fail(fault, times=times)
        env = agent_clis.codex_env(home)
        env["TZ"] = tz
        proc = subprocess.run([agent_clis.require_codex(), "exec", "--trust", "-s", "danger-full-access", "Say hi."],
                              cwd=work, env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        resets = stub.faults.served[0][2] if stub.faults.served else 0.0
    return agent_clis.CliRun(proc.returncode, proc.stdout, proc.stderr), resets


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "kind"), [
    (Fault("rate_limit", reset_in=75), RATE_LIMIT),
    (Fault("usage_limit", quota=True), USAGE_LIMIT),
    (Fault("server_error"), OUTAGE),
    (Fault("unavailable"), OUTAGE),
])
def test_codex_limits_and_outages_are_recognized(tmp_path: Path, fault: Fault, kind: str) -> None:
    result, _ = _codex(tmp_path, fault)
    assert result.rc == 1
    limit = _recognized("codex", result.rc, result.stdout + result.stderr, datetime.datetime.now(datetime.UTC))
    assert limit.kind == kind and limit.line.startswith("ERROR: ")


@pytest.mark.slow
@pytest.mark.parametrize(("zone", "reset_in"), [("America/New_York", 3600), ("Asia/Tokyo", 300000)])
def test_codex_plan_limit_is_recognized_with_its_local_reset_time(tmp_path: Path, zone: str, reset_in: int) -> None:
    result, resets = _codex(tmp_path, Fault("usage_limit", reset_in=reset_in), tz=zone)
    assert result.rc == 1
    # Codex prints the machine's local time with no zone: now's zone is the machine's
    now = datetime.datetime.now(zoneinfo.ZoneInfo(zone))
    limit = _recognized("codex", result.rc, result.stdout + result.stderr, now)
    assert limit.kind == USAGE_LIMIT and "try again at" in limit.line
    assert _near(limit.resets_at, resets), (limit, resets)


# -- Gemini CLI ----------------------------------------------------------------------------------


def _gemini(tmp_path: Path, fault: Fault, times: int = 50) -> tuple[agent_clis.CliRun, float, int]:
    exe = agent_clis.require_gemini()
    work = tmp_path / "work"
    work.mkdir()
    with gemini.GeminiStub(loopback.say("hi"), lifetime=150) as stub:
        home = tmp_path / "gemini-home"
        env = agent_clis.gemini_env(home, stub.port)
        settings_file = home / ".gemini" / "settings.json"
        settings = json.loads(settings_file.read_text())
        settings["general"]["maxAttempts"] = 2  # its default 10, each waiting the told delay (13 min for 75 s)
        settings_file.write_text(json.dumps(settings))
        stub.faults.fail(fault, times=times)
        proc = subprocess.run([exe, "--yolo", "-p", "Say hi."], cwd=work, env=env, capture_output=True, text=True,
                              timeout=150, stdin=subprocess.DEVNULL)
        served = stub.faults.served
    return agent_clis.CliRun(proc.returncode, proc.stdout, proc.stderr), served[0][2] if served else 0.0, len(served)


@pytest.mark.slow
def test_gemini_daily_quota_is_a_usage_limit(tmp_path: Path) -> None:
    result, _, served = _gemini(tmp_path, Fault("usage_limit"))
    assert result.rc == 1 and served == 1  # terminal: no retry
    limit = _recognized("gemini", result.rc, result.stdout + result.stderr, datetime.datetime.now(datetime.UTC))
    assert limit.kind == USAGE_LIMIT and "daily quota" in limit.line


@pytest.mark.slow
def test_gemini_long_rate_limit_is_recognized_with_its_delay(tmp_path: Path) -> None:
    result, resets, served = _gemini(tmp_path, Fault("rate_limit", reset_in=400))
    assert result.rc == 1 and served == 1  # over 300 s: the CLI does not wait it out
    now = datetime.datetime.now(datetime.UTC)
    limit = _recognized("gemini", result.rc, result.stdout + result.stderr, now)
    assert limit.kind == RATE_LIMIT and "QuotaError" in limit.line
    assert _near(limit.resets_at, resets, slack=30), (limit, resets)


@pytest.mark.slow
def test_gemini_overload_after_its_retries_is_an_outage(tmp_path: Path) -> None:
    result, _, served = _gemini(tmp_path, Fault("overloaded"))
    assert result.rc == 1 and served == 2
    limit = _recognized("gemini", result.rc, result.stdout + result.stderr, datetime.datetime.now(datetime.UTC))
    assert limit.kind == OUTAGE
