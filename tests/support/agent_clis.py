"""Run the real Codex CLI, Gemini CLI, Qwen Code, Copilot CLI and OpenCode hermetically
against their loopback model stubs.

Each runner gives the CLI a private home (``CODEX_HOME`` / ``GEMINI_CLI_HOME``; Qwen Code
and Copilot CLI keep theirs under the test's own HOME) whose settings point at the stub and
switch off everything that would reach the network (plugin sync, apps, update checks,
telemetry), runs it under a timeout with stdin closed, and returns its exit code and output.
The tests skip, saying how to install it, only when the executable is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import agents_left
from tests.support.repo import Result, assert_fsck_clean, run, run_exe
from tests.support.stubs import gemini as gemini_stub
from tests.support.stubs import openai_responses
from tests.support.stubs.openai_chat import MODEL as CHAT_MODEL

CODEX_VERSION = "0.171.0"  # what .ci/run installs; raise both on purpose
GEMINI_VERSION = "0.61.0"
QWEN_VERSION = "0.24.4"
COPILOT_VERSION = "1.0.102"
OPENCODE_VERSION = "1.18.33"
# the npm packages .ci/run installs (its AGENT_CLIS line), each at the version above
PACKAGES = {"codex": ("@openai/codex", CODEX_VERSION), "gemini": ("@google/gemini-cli", GEMINI_VERSION),
            "qwen": ("@qwen-code/qwen-code", QWEN_VERSION), "copilot": ("@github/copilot", COPILOT_VERSION),
            "opencode": ("opencode-ai", OPENCODE_VERSION)}

# Codex features that reach the network on their own (curated plugin sync, apps).
CODEX_OFFLINE = "[features]\nplugins = false\napps = false\nremote_plugin = false\n"


@dataclass
class CliRun:
    rc: int
    stdout: str
    stderr: str


def require(exe: str, package: str, version: str) -> str:
    found = shutil.which(exe)
    if found is None:
        pytest.skip(f"the {exe} CLI is not installed (`npm install -g {package}@{version}`; .ci/run does it)")
    return found


def require_codex() -> str:
    return require("codex", "@openai/codex", CODEX_VERSION)


def require_gemini() -> str:
    return require("gemini", "@google/gemini-cli", GEMINI_VERSION)


def require_qwen() -> str:
    return require("qwen", "@qwen-code/qwen-code", QWEN_VERSION)


def require_copilot() -> str:
    return require("copilot", "@github/copilot", COPILOT_VERSION)


def require_opencode() -> str:
    return require("opencode", "opencode-ai", OPENCODE_VERSION)


def _clean_env() -> dict[str, str]:
    drop = ("OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "HANDOFF_", "ANTHROPIC_", "QWEN_", "COPILOT_", "GH_",
            "GITHUB_", "OPENCODE_", "npm_config_", "NPM_CONFIG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)
           or k.startswith("HANDOFF_COMMAND_SERVER")}  # the suite's server settings (conftest: its idle time)
    env["NO_PROXY"] = "127.0.0.1,localhost"
    return env


# -- what the Codex and Gemini tests share -------------------------------------------------------


def plan(n: int, *init_args: str) -> list[str]:
    """`init` and n tasks t1..tN, each done when tN.txt holds `done-tN` (what `do_task` writes)."""
    assert run("init", *init_args).rc == 0
    ids = [f"t{i}" for i in range(1, n + 1)]
    for task_id in ids:
        check = f"test \"$(cat {task_id}.txt)\" = done-{task_id}"
        assert run("add", f"Write {task_id}.txt", "--id", task_id, "--check", check).rc == 0
    return ids


def install_hooks(agent: str) -> dict[str, object]:
    """`hooks install --agent AGENT --json`, which must succeed; its answer."""
    r = run("hooks", "install", "--agent", agent, "--json")
    assert r.rc == 0, r.err
    answer: dict[str, object] = r.json()
    assert answer["installed"]
    return answer


def statuses() -> dict[str, str]:
    return {t["id"]: t["status"] for t in run("list", "--json").json()}


def assert_relayed(repo: Path, ids: list[str], sessions: int, per_session: int) -> None:
    """What the Claude soak asserts (tests/e2e/test_relay_unattended.py): every task
    completed, in exactly `sessions` sessions (a limit waited out spends none), each
    acknowledged, closed and completing `per_session` tasks; no agent process left, and
    `git fsck` clean."""
    assert statuses() == dict.fromkeys(ids, "completed")
    count = int(run("status", "--json").json()["session_count"])
    assert count == sessions, f"{count} sessions, not {sessions}"
    shown = [run("session", "show", str(n), "--json").json() for n in range(1, sessions + 1)]
    assert [s["ack"]["status"] for s in shown] == ["accepted"] * sessions
    assert [len(s["completed"]) for s in shown] == [per_session] * sessions, shown
    assert all(s["ended_at"] for s in shown), shown
    assert run("session", "show", str(sessions + 1), "--json").rc != 0
    assert not agents_left(repo)
    assert_fsck_clean(repo)


# -- Codex -----------------------------------------------------------------------------------


def codex_home(path: Path, port: int, *, compact_limit: int | None = None) -> Path:
    """A CODEX_HOME whose config.toml points at the stub (its [features] offline)."""
    path.mkdir(parents=True, exist_ok=True)
    config = path / "config.toml"
    kept = config.read_text() if config.exists() else ""  # e.g. hook trust written by hooks install
    config.write_text(openai_responses.codex_config(port, compact_limit=compact_limit) + CODEX_OFFLINE + kept)
    return path


def codex_env(home: Path) -> dict[str, str]:
    env = _clean_env()
    env.update({"CODEX_HOME": str(home), "STUB_API_KEY": "stub-key", "RUST_LOG": "warn"})
    return env


def run_codex(cwd: Path, home: Path, prompt: str, *, extra: list[str] | None = None,
              timeout: float = 180) -> CliRun:
    """`codex exec --trust -s danger-full-access PROMPT` in `cwd` (no hook-trust bypass:
    the hooks run only because `hooks install --agent codex` recorded their trust)."""
    exe = require_codex()
    args = [exe, "exec", "--trust", "-s", "danger-full-access", *(extra or []), prompt]
    proc = subprocess.run(args, cwd=cwd, env=codex_env(home), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


# -- Gemini ------------------------------------------------------------------------------------


def gemini_env(home: Path, port: int, *, compression_threshold: float | None = None) -> dict[str, str]:
    gemini_stub.gemini_home(home, compression_threshold=compression_threshold)
    env = _clean_env()
    env.update(gemini_stub.gemini_env(port, home))
    return env


def run_gemini(cwd: Path, home: Path, port: int, prompt: str, *, timeout: float = 180,
               compression_threshold: float | None = None) -> CliRun:
    """`gemini --yolo -p PROMPT` in `cwd` (the workspace trusted by GEMINI_CLI_TRUST_WORKSPACE)."""
    exe = require_gemini()
    env = gemini_env(home, port, compression_threshold=compression_threshold)
    proc = subprocess.run([exe, "--yolo", "-p", prompt], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


# -- Qwen Code ---------------------------------------------------------------------------------


def qwen_env(port: int) -> dict[str, str]:
    """Qwen Code against the chat-completions stub (with `--auth-type openai`: no login
    screen), the yolo warning silenced."""
    env = _clean_env()
    env.update({"OPENAI_API_KEY": "stub-key", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
                "OPENAI_MODEL": CHAT_MODEL,
                "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1"})
    return env


def run_qwen(cwd: Path, port: int, prompt: str, *, timeout: float = 180,
             env: dict[str, str] | None = None) -> CliRun:
    """`qwen --yolo --auth-type openai -p PROMPT` in `cwd`."""
    exe = require_qwen()
    proc = subprocess.run([exe, "--yolo", "--auth-type", "openai", "-p", prompt], cwd=cwd,
                          env=env or qwen_env(port), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


# -- Copilot CLI -------------------------------------------------------------------------------

# Copilot CLI unpacks its 200 MB package into its cache on first run: one cache for the whole suite
COPILOT_CACHE = Path(os.environ.get("TMPDIR") or "/tmp") / "handoff-tests-copilot-cache"


def copilot_env(port: int) -> dict[str, str]:
    """Copilot CLI offline against the chat-completions stub (its BYOK provider: no GitHub
    login), no auto-update, the working folder trusted and every tool allowed."""
    env = _clean_env()
    env.update({"COPILOT_PROVIDER_BASE_URL": f"http://127.0.0.1:{port}/v1", "COPILOT_PROVIDER_API_KEY": "stub-key",
                "COPILOT_MODEL": CHAT_MODEL, "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false",
                "COPILOT_ALLOW_ALL": "true", "COPILOT_CACHE_HOME": str(COPILOT_CACHE)})
    return env


def run_copilot(cwd: Path, port: int, prompt: str, *, timeout: float = 180,
                env: dict[str, str] | None = None) -> CliRun:
    """`copilot --allow-all-tools -p PROMPT` in `cwd`."""
    exe = require_copilot()
    proc = subprocess.run([exe, "--allow-all-tools", "-p", prompt], cwd=cwd, env=env or copilot_env(port),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def assert_waited_in_one_session() -> None:
    waits = [line for line in run("log", "--type", "WARN").out.splitlines()
             if "[LIMIT]" in line and "waiting until" in line]
    assert len(waits) >= 1, waits
    sessions = {re.search(r"\[SESSION-(\d+)\]", line).group(1) for line in waits}  # type: ignore[union-attr]
    assert len(sessions) == 1, waits
    assert not [line for line in run("log", "--type", "ERROR").out.splitlines() if "launch" in line]


def relay_through_a_limit(agent: str, repo: Path, env: dict[str, str], stub: Any) -> tuple[Result, list[str]]:
    """`git handoff relay --agent AGENT` with short limit backoffs (2 s, at most 4 s),
    against `stub` (a loopback model stub with scripted faults): its result, and the
    kinds of fault the stub served."""
    r = run_exe("relay", "--agent", agent, "--ack-timeout", "60", "--limit-backoff", "2",
                "--limit-backoff-max", "4", cwd=repo, env=env, timeout=500)
    return r, [kind for _, kind, *_ in stub.faults.served]


def assert_limit_waited_out(r: Result, repo: Path, served: list[str], ids: list[str], kind: str,
                            waiting: str) -> None:
    """The relay ended well after the stub served `kind` twice, said it waited for the
    `waiting`, and waited in one session, which the limit did not spend: the 6 tasks in
    exactly 3 sessions of 2, as without the limit (assert_relayed)."""
    assert r.rc == 0, r.out[-2000:] + r.err[-2000:]
    assert served == [kind, kind]
    assert f"waiting for the {waiting}, resumes at" in r.out
    assert_waited_in_one_session()
    assert_relayed(repo, ids, sessions=3, per_session=2)


# -- OpenCode ------------------------------------------------------------------------------------


def opencode_env(port: int, *, context: int | None = None, price: tuple[float, float] | None = None) -> dict[str, str]:
    """OpenCode against the chat-completions stub, loopback only: its configuration (a provider
    `stub` at the stub's base URL, its model the default; `context`: the model's window, which
    sets when it compacts) in OPENCODE_CONFIG_CONTENT, so neither the test's HOME nor the
    project holds it; no models.dev fetch (OPENCODE_DISABLE_MODELS_FETCH); and the npm install
    of its plugin package it starts in every config folder sent to a closed loopback port,
    once (npm_config_registry, npm_config_fetch_retries: it fails at once and OpenCode goes on).
    `price`: the model's dollars per million input and output tokens (OpenCode's cost)."""
    model: dict[str, Any] = {"name": "Stub model"}
    if context is not None:
        model["limit"] = {"context": context, "output": 1000}
    if price is not None:
        model["cost"] = {"input": price[0], "output": price[1]}
    config = {"autoupdate": False, "share": "disabled", "model": f"stub/{CHAT_MODEL}",
              "provider": {"stub": {"npm": "@ai-sdk/openai-compatible", "name": "Stub",
                                    "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "stub-key"},
                                    "models": {CHAT_MODEL: model}}}}
    env = _clean_env()
    env.update({"OPENCODE_CONFIG_CONTENT": json.dumps(config), "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_AUTOUPDATE": "1", "npm_config_registry": "http://127.0.0.1:9/",
                "npm_config_fetch_retries": "0"})
    return env


def run_opencode(cwd: Path, port: int, prompt: str, *, timeout: float = 180,
                 env: dict[str, str] | None = None) -> CliRun:
    """`opencode run --auto PROMPT` in `cwd` (and in PWD, where OpenCode takes its directory from)."""
    exe = require_opencode()
    env = dict(env or opencode_env(port), PWD=str(cwd))
    proc = subprocess.run([exe, "run", "--auto", prompt], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return CliRun(proc.returncode, proc.stdout, proc.stderr)
