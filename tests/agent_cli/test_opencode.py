"""The OpenCode hooks, fast: the adapter fed the payloads its plugin
(hooks-templates/opencode-plugin.js) builds, what each answers in the plugin's own shape, and
the plugin file's install and uninstall. The real OpenCode: tests/e2e/test_opencode_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_handoff.agent_cli import opencode
from git_handoff.agent_cli.hook_data import Outcome
from git_handoff.agent_cli.templates import template_text
from tests.support.agent_clis import plan
from tests.support.repo import run

SESSION = "ses_daee63c4cffeZHMoLZQA1mQ6Tw"
PLUGIN = Path(".opencode") / "plugins" / "git-handoff.js"


def _hook(name: str, **fields: object) -> dict[str, object] | None:
    """What `hook NAME` answered the payload the plugin builds (None: nothing)."""
    answer = run("hook", name, stdin=json.dumps({"session_id": SESSION, "cwd": str(Path.cwd()),
                                                 "hook_event_name": name, **fields}))
    assert answer.rc == 0, answer.err
    return json.loads(answer.out) if answer.out.strip() else None


def _plan(*ids: str) -> None:
    plan(0)
    for task_id in ids:
        assert run("add", f"Title of {task_id}", "--id", task_id, "--check", "true").rc == 0


def test_the_plugin_runs_every_hook_of_the_module() -> None:
    text = template_text(opencode.PLUGIN or "")
    assert text.splitlines()[0].startswith("// git-handoff")  # plugin_file.ours reads the first line
    for hook, (moment, _, _) in opencode.HOOKS.items():
        assert f'hook("{hook}"' in text and f'"{moment}"' in text
    # its use: each assistant message's tokens, in a transcript of its own every payload names
    assert '"message.updated"' in text and "transcript_path: transcript(sessionID)" in text


def test_the_transcript_the_plugin_names_is_noted_for_the_session(repo: Path) -> None:
    _plan("a")
    path = str(repo / ".git" / "handoff" / "opencode" / f"{SESSION}.jsonl")
    assert _hook("opencode-session-start", source="startup", transcript_path=path) is not None
    sources = json.loads((repo / ".git" / "handoff" / "usage-sources.json").read_text())
    assert sources == {"session": 1, "sources": [["opencode", path]]}


def test_session_start_answers_the_context_and_acknowledges(repo: Path) -> None:
    _plan("a")
    out = _hook("opencode-session-start", source="startup")
    assert out is not None and set(out) == {"context"}
    assert "Next eligible task: [a] Title of a" in str(out["context"])
    assert run("session", "show", "--json").json()["ack"]["status"] == "accepted"


def test_stop_answers_a_block_while_work_is_left_and_nothing_after(repo: Path) -> None:
    _plan("a")
    _hook("opencode-session-start", source="startup")
    out = _hook("opencode-stop", stop_hook_active=False)
    assert out is not None and set(out) == {"block"} and "Next task: [a]" in str(out["block"])
    assert run("claim", "a").rc == 0
    assert run("done", "a").rc == 0
    assert _hook("opencode-stop", stop_hook_active=True) is None


def test_compacting_writes_the_document_at_once(repo: Path) -> None:
    _plan("a")
    _hook("opencode-session-start", source="startup")
    assert _hook("opencode-compacting", trigger="auto") is None
    assert [(d["session"], d["trigger"]) for d in run("doc", "list", "--json").json()] == [(1, "pre-compact")]


def test_render_speaks_the_plugins_shape() -> None:
    assert opencode.render("opencode-session-start", Outcome(context="c")) == '{"context": "c"}'
    assert json.loads(opencode.render("opencode-stop", Outcome(block="b", warning="w"))) == {"block": "b"}
    assert json.loads(opencode.render("opencode-compacting", Outcome(warning="w"))) == {"warning": "w"}
    assert opencode.render("opencode-stop", Outcome()) == ""


@pytest.mark.parametrize("payload", ["", "{not json", "[1]", json.dumps({"cwd": 7, "session_id": []})])
@pytest.mark.parametrize("hook", sorted(opencode.HOOKS))
def test_bad_payloads_never_fail_the_agent(repo: Path, hook: str, payload: str) -> None:
    _plan("a")
    assert run("hook", hook, stdin=payload).rc == 0


def test_install_writes_the_plugin_and_uninstall_removes_only_it(repo: Path) -> None:
    _plan("a")
    (repo / ".opencode" / "plugins").mkdir(parents=True)
    (repo / ".opencode" / "plugins" / "mine.js").write_text("export const Mine = async () => ({})\n")
    (repo / "opencode.json").write_text(json.dumps({"model": "stub/m", "mcp": {"other": {"type": "local",
                                                                                       "command": ["x"]}}}))
    r = run("hooks", "install", "--agent", "opencode", "--json")
    assert r.rc == 0, r.err
    assert r.json()["installed"] and r.json()["added"] == [moment for moment, _, _ in opencode.HOOKS.values()]
    assert (repo / PLUGIN).read_text() == template_text("opencode-plugin.js")
    config = json.loads((repo / "opencode.json").read_text())
    assert config["model"] == "stub/m" and config["mcp"]["other"] == {"type": "local", "command": ["x"]}
    ours = config["mcp"]["handoff"]
    assert ours["type"] == "local" and ours["enabled"] is True and ours["command"][-1] == "mcp" and "args" not in ours
    again = run("hooks", "install", "--agent", "opencode", "--json").json()
    assert again["added"] == [] and not again["mcp"]["added"]
    assert run("hooks", "uninstall", "--agent", "opencode").rc == 0
    assert not (repo / PLUGIN).exists() and (repo / ".opencode" / "plugins" / "mine.js").exists()
    config = json.loads((repo / "opencode.json").read_text())
    assert "handoff" not in config["mcp"] and config["mcp"]["other"]


def test_a_users_file_where_the_plugin_goes_is_refused_unchanged(repo: Path) -> None:
    _plan("a")
    (repo / PLUGIN).parent.mkdir(parents=True)
    (repo / PLUGIN).write_text("// my own plugin\n")
    r = run("hooks", "install", "--agent", "opencode")
    assert r.rc != 0 and "is not git handoff's plugin" in r.err and len(r.err.strip().splitlines()) == 1
    assert (repo / PLUGIN).read_text() == "// my own plugin\n" and not (repo / "opencode.json").exists()
    assert run("hooks", "uninstall", "--agent", "opencode").rc != 0  # the same refusal: nothing of ours there
    assert (repo / PLUGIN).read_text() == "// my own plugin\n"


def test_an_older_plugin_of_ours_is_not_installed_until_rewritten(repo: Path) -> None:
    _plan("a")
    (repo / PLUGIN).parent.mkdir(parents=True)
    (repo / PLUGIN).write_text("// git-handoff opencode plugin: an older one\n")
    assert not run("hooks", "status", "--agent", "opencode", "--json").json()["installed"]
    assert run("hooks", "install", "--agent", "opencode").rc == 0
    assert (repo / PLUGIN).read_text() == template_text("opencode-plugin.js")
