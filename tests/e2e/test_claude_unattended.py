"""Interactive Claude Code in tmux with no person: its first-run screens named by
`person_prompt_in`, the `~/.claude.json` recipe of docs/agent-clis.md followed as written, and
`hooks install --agent claude --unattended`.

The real `claude` (2.1.332) runs interactively in a tmux pane on a fresh HOME against
the loopback model stub; the pane's text is what `tmux capture-pane` shows, as the
relay sees it.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from git_handoff.agent_cli.agent_output import person_prompt_in
from git_handoff.agent_cli.agent_process import tmux_socket_name
from git_handoff.infra import procs
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.store import StateStore
from tests.support.claude_cli import claude_env, require_claude
from tests.support.processes import agents_left
from tests.support.repo import run, run_exe
from tests.support.stubs.anthropic import Lazy, StubServer, say

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "agent-clis.md"
ANSWER = "STUB-ANSWERED-THE-PROMPT"
SETTING = re.compile(r"set (.+?) in ~/\.claude\.json")


@pytest.fixture
def stub() -> Iterator[StubServer]:
    require_claude()
    with StubServer(lambda r: say(ANSWER), lifetime=280) as server:
        yield server


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _screen_of_interactive_claude(repo: Path, env: dict[str, str], socket_name: str,
                                  timeout: float = 45) -> str:
    """Start `claude --dangerously-skip-permissions PROMPT` in a tmux pane; return the
    pane once it waits for a person, shows the model's answer, or the CLI exited."""
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = (f"cd {shlex.quote(str(repo))} && env -i {exports} claude --dangerously-skip-permissions "
               f"'Say hi.'; echo CLAUDE-EXITED-$?; sleep 60")
    subprocess.run(["tmux", "-L", socket_name, "new-session", "-d", "-x", "140", "-y", "45", "-s", "first-run",
                    command], check=True)
    screen = ""
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(1)
            screen = subprocess.run(["tmux", "-L", socket_name, "capture-pane", "-p", "-t", "first-run"],
                                    capture_output=True, text=True).stdout
            if ANSWER in screen or "CLAUDE-EXITED-" in screen or person_prompt_in("claude", screen):
                time.sleep(1)  # let the screen settle
                return subprocess.run(["tmux", "-L", socket_name, "capture-pane", "-p", "-t", "first-run"],
                                      capture_output=True, text=True).stdout
        return screen
    finally:
        pane = subprocess.run(["tmux", "-L", socket_name, "display-message", "-p", "-t", "first-run",
                               "#{pane_pid}"], capture_output=True, text=True).stdout.strip()
        launched = procs.tree(int(pane)) if pane.isdigit() else set()
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
        # the next launch's ~/.claude.json is written once this one is gone: a claude
        # still exiting could otherwise write its own copy over it
        deadline = time.monotonic() + 15
        while any(procs.alive(pid) for pid in launched) and time.monotonic() < deadline:
            time.sleep(0.1)


@pytest.mark.parametrize("bypass", ["user", "project"])
def test_first_run_screens_are_passed_by_doing_what_person_prompt_in_says(repo: Path, stub: StubServer,
                                                                           bypass: str) -> None:
    """From a fresh HOME, each screen claude stops on is named; doing exactly what the
    line says (its JSON merged into ~/.claude.json, or for the bypass warning in
    "project" mode `hooks install --agent claude --unattended`) reaches the next, until
    the model answers."""
    assert run("init").rc == 0
    home = repo.parent / "fresh-home"
    home.mkdir()
    env = claude_env(home, stub.url)
    config: dict[str, Any] = {}
    named: list[str] = []
    keys = ["hasCompletedOnboarding", "hasTrustDialogAccepted", "customApiKeyResponses",
            "bypassPermissionsModeAccepted"]
    for attempt in range(2 * len(keys) + 1):  # room for each screen to come back once
        screen = _screen_of_interactive_claude(repo, env, f"handoff-first-run-{os.getpid()}-{bypass}-{attempt}")
        if ANSWER in screen:
            break
        said = person_prompt_in("claude", screen)
        assert said is not None, f"claude waits on a screen nobody named:\n{screen}"
        named.append(said)
        if bypass == "project" and "skipDangerousModePermissionPrompt" in said:
            assert run("hooks", "install", "--agent", "claude", "--unattended", "--no-mcp").rc == 0
            continue
        found = SETTING.search(said)
        assert found, said
        _merge(config, json.loads("{" + found.group(1) + "}"))
        (home / ".claude.json").write_text(json.dumps(config))
    else:
        pytest.fail(f"claude never answered; named: {named}")
    # Under load a screen was once shown again by the launch after it was answered (CI:
    # five screens for four kinds). The same screen again, consecutive, answered the
    # same way, is no new screen; every kind must still be met, in order, and no other.
    kinds = [next((key for key in keys if key in said), said) for said in named]
    met = [kind for n, kind in enumerate(kinds) if n == 0 or kinds[n - 1] != kind]
    assert met == keys, named
    first = [named[kinds.index(key)] for key in keys]
    assert f'"{repo}"' in first[1] or f'"{repo.resolve()}"' in first[1]  # the folder to trust, named
    assert env["ANTHROPIC_API_KEY"][-20:] in first[2]  # the key's tail, named
    if bypass == "project":
        assert "bypassPermissionsModeAccepted" not in config
        assert json.loads((repo / ".claude" / "settings.local.json").read_text()) == \
            {"skipDangerousModePermissionPrompt": True}
        assert run_exe("status", cwd=repo).rc == 0
        assert ".claude/settings.local.json" not in subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout


RECIPE_ANCHOR = "### Interactive `claude` overnight: the recipe"
CLAUDE_JSON_ALTERNATIVE = ('add\n`"bypassPermissionsModeAccepted": true` at the top of the JSON and\n'
                           '`"enabledMcpjsonServers": ["handoff"]` beside `hasTrustDialogAccepted`')


def recipe() -> tuple[str, str]:
    """docs/agent-clis.md's recipe: its shell block and its ~/.claude.json block, as written."""
    text = GUIDE.read_text()
    anchor = text.index(RECIPE_ANCHOR)
    shell = re.compile(r"```sh\n(.*?)```", re.S).search(text, anchor)
    block = re.compile(r"```json\n(.*?)```", re.S).search(text, anchor)
    assert shell is not None and block is not None, "docs/agent-clis.md's recipe is gone"
    assert CLAUDE_JSON_ALTERNATIVE in text[anchor:], "the recipe's way without --unattended changed: update the test"
    return shell.group(1), block.group(1)


def _completed_at(repo: Path) -> list[float]:
    """The moments (epoch seconds) the log recorded a task completed."""
    stamps = []
    for line in run("log", "--json", cwd=repo).json():
        if line.get("type") == "Completed":
            moment = datetime.datetime.strptime(line["timestamp"], "%Y-%m-%dT%H:%M:%SZ")
            stamps.append(moment.replace(tzinfo=datetime.UTC).timestamp())
    return stamps


@pytest.mark.parametrize("answers", ["unattended", "claude-json"])
def test_the_overnight_recipe_run_verbatim_ends_when_the_work_ends(repo: Path, stub: StubServer, answers: str) -> None:
    """docs/agent-clis.md's recipe, its shell lines run as written (a fresh HOME, the relay in
    tmux with the interactive CLI): three tasks at two per session, every ACK with no
    person, and the relay exits 0 within 30 s of the last `done` (an interactive CLI never
    exits by itself: before, the relay waited for ever once the work was done). Once with
    `--unattended`, once with the JSON's two extra keys in its place, as the docs say."""
    assert run("init", "--max-tasks-per-session", "2").rc == 0
    for task_id in ("t1", "t2", "t3"):
        assert run("add", f"Write {task_id}", "--id", task_id, "--check", f"test -f {task_id}.txt").rc == 0
    stub.policy = Lazy("touch {id}.txt")
    home = repo.parent / f"recipe-home-{answers}"
    home.mkdir()
    env = claude_env(home, stub.url)
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        env.pop(var, None)  # a fresh machine: the recipe's own `git config --global` gives the identity
    shell, block = recipe()
    config = json.loads(block.replace("<last 20 characters of ANTHROPIC_API_KEY>", env["ANTHROPIC_API_KEY"][-20:])
                        .replace("/path/to/your/repo", str(repo)))
    if answers == "claude-json":
        assert shell.count(" --unattended") == 1
        shell = shell.replace(" --unattended", "")
        config = {"bypassPermissionsModeAccepted": True, **config}
        config["projects"][str(repo)]["enabledMcpjsonServers"] = ["handoff"]
    (home / ".claude.json").write_text(json.dumps(config))
    socket_name = tmux_socket_name(StateStore(Repo.discover(repo)))
    started = time.monotonic()
    try:
        proc = subprocess.run(["bash", "-e", "-c", shell], cwd=repo, env=env, capture_output=True, text=True,
                              timeout=300)
    finally:
        ended = time.time()
        subprocess.run(["tmux", "-L", socket_name, "kill-server"], capture_output=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all 3 task(s) completed" in proc.stdout + proc.stderr
    assert {t["id"]: t["status"] for t in run("list", "--json").json()} == dict.fromkeys(("t1", "t2", "t3"),
                                                                                         "completed")
    last_done = max(_completed_at(repo))
    assert ended - last_done < 30, f"the relay exited {ended - last_done:.0f} s after the last done"
    count = int(run("status", "--json").json()["session_count"])
    assert count == 2
    acks = [line for line in run("log", "--json").json() if line.get("type") == "ACK"]
    assert len(acks) == 2, acks  # one each: the hook's; the agent's own `ack` is no second event
    for number in (1, 2):
        shown = run("session", "show", str(number), "--json").json()
        assert shown["ack"]["status"] == "accepted" and shown["ended_at"], shown
        assert run("doc", "show", str(number), "--json").rc == 0
    # the commit the recipe made carries the shared files, by the identity it configured
    committed = subprocess.run(["git", "show", "--name-only", "--format=%an <%ae>", "HEAD"], cwd=repo,
                               capture_output=True, text=True).stdout
    assert "Your Name <you@example.com>" in committed and ".mcp.json" in committed, committed
    # nothing left: no tmux server on the relay's socket, no agent process
    assert subprocess.run(["tmux", "-L", socket_name, "list-sessions"], capture_output=True).returncode != 0
    assert not agents_left(repo)
    assert time.monotonic() - started < 300
