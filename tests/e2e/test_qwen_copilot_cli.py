"""The real Qwen Code (qwen -p) and GitHub Copilot CLI (copilot -p) with the hooks `hooks
install --agent qwen|copilot` wrote, against the loopback chat-completions stub: only the
model is a stub. Each CLI: the session start's context reaches the model and is
acknowledged, a stop while a task is left keeps it working, its compaction writes the
document, and a relay of six tasks in three sessions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.agent_clis import (
    CliRun,
    assert_relayed,
    copilot_env,
    install_hooks,
    plan,
    qwen_env,
    require_copilot,
    require_qwen,
    run_copilot,
    run_qwen,
    statuses,
)
from tests.support.repo import run, run_exe
from tests.support.stubs.loopback import NEXT_TASK, lazy_agent
from tests.support.stubs.openai_chat import ChatStub

pytestmark = pytest.mark.slow

README_QWEN = 'qwen --yolo --auth-type openai -p "Work on the tasks git handoff gives you."'
README_COPILOT = 'copilot --allow-all-tools --trust-folder -p "Work on the tasks git handoff gives you."'

Runner = Callable[..., CliRun]  # (cwd, port, prompt, *, env=...)
CLIS: dict[str, tuple[Callable[[], str], Runner, Callable[[int], dict[str, str]], str]] = {
    "qwen": (require_qwen, run_qwen, qwen_env, README_QWEN),
    "copilot": (require_copilot, run_copilot, copilot_env, README_COPILOT),
}


@pytest.fixture(params=sorted(CLIS))
def cli(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    CLIS[name][0]()  # skips, saying how to install it, where it is missing
    return name


def _user_texts(body: dict[str, object], roles: tuple[str, ...] = ("user",)) -> list[str]:
    texts = []
    for message in body.get("messages") or []:  # type: ignore[attr-defined]
        if isinstance(message, dict) and message.get("role") in roles:
            content = message.get("content")
            texts += [content] if isinstance(content, str) else [
                p["text"] for p in content or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return texts


def test_session_start_context_reaches_the_first_request_and_is_acknowledged(repo: Path, cli: str) -> None:
    plan(1)
    assert install_hooks(cli)["installed"]
    with ChatStub(lazy_agent()) as stub:
        r = CLIS[cli][1](repo, stub.port, "Work on the tasks git handoff gives you.")
        first = stub.model_requests()[0].body
    assert r.rc == 0, r.stderr[-2000:]
    # Copilot CLI sends it as a user message before the prompt; Qwen Code appends it to its system prompt
    role = {"copilot": "user", "qwen": "system"}[cli]
    assert any("Next eligible task: [t1] Write t1.txt" in t for t in _user_texts(first, (role,))), \
        f"the session start's context is not in {cli}'s first model request"
    session = run("session", "show", "--json").json()
    assert session["session"] == 1 and session["ack"]["status"] == "accepted"
    assert statuses() == {"t1": "completed"}


def test_a_lazy_agent_is_kept_working_through_six_tasks(repo: Path, cli: str) -> None:
    ids = plan(6)
    install_hooks(cli)
    with ChatStub(lazy_agent(first_task_from_prompt=False)) as stub:
        r = CLIS[cli][1](repo, stub.port, "Say hello.")
        reqs = stub.model_requests()
    assert r.rc == 0, r.stderr[-2000:]
    assert statuses() == dict.fromkeys(ids, "completed")
    named = []  # each task named to the model by the stop hook, in order, nothing after the last
    for req in reqs:
        texts = _user_texts(req.body)
        last = req.body["messages"][-1]
        found = NEXT_TASK.search(texts[-1]) if texts and last.get("role") == "user" else None
        if found:
            named.append(found.group(1))
    assert named == ids


def test_a_compaction_writes_the_document(repo: Path, cli: str) -> None:
    """The model's answers report a prompt near the window (Copilot: 19,000 of the
    20,000 COPILOT_PROVIDER_MAX_PROMPT_TOKENS, each turn; Qwen Code: 172,000 of an unknown
    model's 200,000, past its 167,000 auto-compaction point and under its 177,000 hard
    limit, on the first turn): the CLI compacts (its PreCompact / preCompact hook) and
    goes on."""
    plan(2)
    install_hooks(cli)
    tokens: Callable[[int], int] = {"copilot": lambda n: 19_000, "qwen": lambda n: 172_000 if n == 0 else 100}[cli]
    with ChatStub(lazy_agent(), usage_tokens=tokens) as stub:
        env = CLIS[cli][2](stub.port)
        env["COPILOT_PROVIDER_MAX_PROMPT_TOKENS"] = "20000"
        r = CLIS[cli][1](repo, stub.port, "Work on the tasks git handoff gives you.", env=env)
    assert r.rc == 0, r.stderr[-2000:]
    docs = run("doc", "list", "--json").json()
    assert [(d["session"], d["trigger"]) for d in docs][:1] == [(1, "pre-compact")], docs
    assert statuses() == {"t1": "completed", "t2": "completed"}


def test_relay_of_six_tasks_in_three_sessions(repo: Path, cli: str) -> None:
    ids = plan(6, "--max-tasks-per-session", "2")
    install_hooks(cli)
    command = CLIS[cli][3]
    guide = (Path(__file__).resolve().parents[2] / "docs" / "agent-clis.md").read_text()
    assert f"git handoff relay --agent '{command}'" in guide  # the guide's example, verbatim
    with ChatStub(lazy_agent()) as stub:
        env = CLIS[cli][2](stub.port)
        env.pop("COPILOT_ALLOW_ALL", None)  # the example itself must trust the folder
        r = run_exe("relay", "--agent", command, "--ack-timeout", "60", cwd=repo, env=env, timeout=400)
    assert r.rc == 0, r.out[-2000:] + r.err[-2000:]
    assert_relayed(repo, ids, sessions=3, per_session=2)


def test_hooks_install_writes_the_clis_own_files(repo: Path, cli: str) -> None:
    plan(1)
    answer = install_hooks(cli)
    settings = json.loads((repo / str(answer["settings"]).rsplit(str(repo) + "/", 1)[-1]).read_text())
    commands = [h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]]
    assert commands and all(c.startswith(f"git handoff hook {cli}-") for c in commands)
    status = run("hooks", "status", "--agent", cli, "--json").json()
    assert status["installed"] and all(status["events"].values())
    assert run("hooks", "uninstall", "--agent", cli).rc == 0
    assert not run("hooks", "status", "--agent", cli, "--json").json()["installed"]


def test_qwen_ends_the_turn_at_its_own_stop_block_cap_whatever_was_completed(repo: Path) -> None:
    """Qwen Code counts the Stop blocks of one prompt, tasks completed or not, and the
    block that reaches its cap is overridden: one `qwen -p` works through the first task
    and cap - 1 more, then ends the turn saying so (docs/agent-clis.md). With the cap of
    3 set in its environment (its default, 8, is qwen.STOP_BLOCK_CAP): 3 of 5 tasks."""
    from git_handoff.agent_cli import qwen

    require_qwen()
    ids = plan(5)
    install_hooks("qwen")
    with ChatStub(lazy_agent()) as stub:
        env = qwen_env(stub.port)
        env[qwen.STOP_BLOCK_CAP_ENV] = "3"
        r = run_qwen(repo, stub.port, "Work on the tasks git handoff gives you.", env=env)
    assert r.rc == 0, r.stderr[-2000:]
    assert statuses() == {**dict.fromkeys(ids, "pending"), **dict.fromkeys(ids[:3], "completed")}
    assert "Stop hook blocked continuation 3 consecutive times; overriding and ending the turn." in r.stdout + r.stderr
    assert qwen.STOP_BLOCK_CAP == 8
