"""The relay with the interactive Codex CLI and Gemini CLI in tmux (`relay --tmux`), as with
interactive Claude Code (tests/e2e/test_claude_unattended.py): the run ends when the work
ends (an interactive CLI never exits by itself), and a first-run screen is named with its
setting, the relay stopping on its own. Only the model is a stub."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.agent_clis import (
    codex_env,
    codex_home,
    gemini_env,
    install_hooks,
    plan,
    require_codex,
    require_gemini,
    statuses,
)
from tests.support.processes import agents_left
from tests.support.repo import git, run, run_exe
from tests.support.stubs.gemini import GeminiStub
from tests.support.stubs.loopback import StubBase, lazy_agent
from tests.support.stubs.openai_responses import ResponsesStub

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")]

AGENTS = {
    "codex": 'codex -s danger-full-access "$(cat {prompt_file})"',
    "gemini": 'gemini --yolo -i "$(cat {prompt_file})"',
}


def _setup(agent: str, repo: Path, home: Path, stub: StubBase, *, trusted: bool) -> dict[str, str]:
    """The agent's hooks installed and committed; its environment (a fresh home on the stub),
    the project trusted or not."""
    home.mkdir()
    if agent == "codex":
        require_codex()
        env = codex_env(home)
        os.environ["CODEX_HOME"] = str(home)  # hooks install records the hooks' trust there
        install_hooks("codex")
        codex_home(home, stub.port)
        if trusted:
            with (home / "config.toml").open("a") as f:
                f.write(f'\n[projects."{repo.resolve()}"]\ntrust_level = "trusted"\n')
    else:
        require_gemini()
        env = gemini_env(home, stub.port)
        install_hooks("gemini")
        if not trusted:
            del env["GEMINI_CLI_TRUST_WORKSPACE"]
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "hooks", cwd=repo)
    return env


def _stub(agent: str) -> StubBase:
    return ResponsesStub(lazy_agent()) if agent == "codex" else GeminiStub(lazy_agent())


@pytest.mark.parametrize("agent", list(AGENTS))
def test_an_interactive_run_ends_when_the_work_ends(repo: Path, tmp_path: Path, agent: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_HOME", raising=False)
    ids = plan(3, "--max-tasks-per-session", "2")
    socket_name = f"handoff-{agent}-{os.getpid()}"
    with _stub(agent) as stub:
        env = _setup(agent, repo, tmp_path / f"{agent}-home", stub, trusted=True)
        try:
            r = run_exe("relay", "--tmux", "--tmux-socket", socket_name, "--agent", AGENTS[agent],
                        "--ack-timeout", "60", cwd=repo, env=env, timeout=300)
        finally:
            ended = time.time()
            subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert r.rc == 0, r.out[-2000:] + r.err[-2000:]
    assert statuses() == dict.fromkeys(ids, "completed")
    assert int(run("status", "--json").json()["session_count"]) == 2
    done = [datetime.datetime.strptime(line["timestamp"], "%Y-%m-%dT%H:%M:%SZ")
            .replace(tzinfo=datetime.UTC).timestamp()
            for line in run("log", "--json").json() if line["type"] == "Completed"]
    assert ended - max(done) < 30, f"the relay exited {ended - max(done):.0f} s after the last done"
    for number in (1, 2):
        shown = run("session", "show", str(number), "--json").json()
        assert shown["ack"]["status"] == "accepted" and shown["ended_at"], shown
        assert run("doc", "show", str(number), "--json").rc == 0
    assert subprocess.run(["tmux", "-L", socket_name, "list-sessions"], capture_output=True).returncode != 0
    assert not agents_left(repo)


@pytest.mark.parametrize(("agent", "setting"), [("codex", 'trust_level = "trusted"'),
                                                ("gemini", "GEMINI_CLI_TRUST_WORKSPACE=true")])
def test_the_folder_trust_screen_is_named_and_the_relay_stops(repo: Path, tmp_path: Path, agent: str, setting: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_HOME", raising=False)
    plan(1)
    socket_name = f"handoff-{agent}-trust-{os.getpid()}"
    with _stub(agent) as stub:
        env = _setup(agent, repo, tmp_path / f"{agent}-home", stub, trusted=False)
        started = time.monotonic()
        try:
            r = run_exe("relay", "--tmux", "--tmux-socket", socket_name, "--agent", AGENTS[agent],
                        "--ack-timeout", "120", cwd=repo, env=env, timeout=300)
        finally:
            subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    took = time.monotonic() - started
    assert r.rc == 1, r.out[-2000:] + r.err[-2000:]
    (said,) = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert "for a person" in said and setting in said, said
    assert took < 45, (took, r.out)
    assert not agents_left(repo)


def test_gemini_headless_under_ci_refuses_an_untrusted_folder_and_the_relay_names_it(
        repo: Path, tmp_path: Path) -> None:
    """Under CI=true Gemini CLI is headless whatever its terminal: no trust screen, it exits 55.
    The relay stops at the first exit, naming the setting, rather than relaunching it."""
    plan(1)
    socket_name = f"handoff-gemini-ci-{os.getpid()}"
    with _stub("gemini") as stub:
        env = _setup("gemini", repo, tmp_path / "gemini-home", stub, trusted=False)
        env["CI"] = "true"
        started = time.monotonic()
        try:
            r = run_exe("relay", "--tmux", "--tmux-socket", socket_name, "--agent", AGENTS["gemini"],
                        "--ack-timeout", "120", cwd=repo, env=env, timeout=300)
        finally:
            subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert r.rc == 1, r.out[-2000:] + r.err[-2000:]
    (said,) = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert "headless" in said and "GEMINI_CLI_TRUST_WORKSPACE=true" in said, said
    assert "3 time(s)" not in said, said
    assert time.monotonic() - started < 45, r.out
    assert statuses() == {next(iter(statuses())): "pending"}
    assert not agents_left(repo)
