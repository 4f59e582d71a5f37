"""One door (git_handoff/ops/open_state.py): every adapter opens the state the way the CLI
does, so a rollback a killed `fail` left half done is finished and the notices for this
clone are delivered whether the next thing to run is a command, an MCP tool call, a hook
or the dashboard. And one mapping from an exception to exit code, `error:` line and JSON
(errors.failure), the same for the CLI and the MCP tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from git_handoff.core.errors import (
    Contention,
    GitFailure,
    HandoffError,
    InvalidState,
    Negative,
    NotARepository,
    NotInitialized,
    UsageError,
)
from git_handoff.infra import rollback
from git_handoff.infra.gitrepo import Repo
from git_handoff.mcp import tools as mcp_tools
from git_handoff.ops import views
from git_handoff.state import notices
from tests.ops.test_rollback import picture
from tests.support.processes import wait_for
from tests.support.repo import git, run, run_exe

FINISHED = "finished the interrupted rollback of t"


def handoff(*args: str, rc: int = 0, stdin: str | None = None) -> Any:
    result = run(*args, stdin=stdin)
    assert result.rc == rc, f"git handoff {' '.join(args)}: rc={result.rc}\nout={result.out}\nerr={result.err}"
    return result


def _claimed_with_work(repo: Path) -> Any:
    """A task claimed over an untracked file of the user's (plan.toml), then an attempt's
    file written; returns the picture a rollback must come back to."""
    handoff("init")
    handoff("add", "Try", "--id", "t", "--check", "false", "--max-attempts", "9")
    (repo / "plan.toml").write_text("mine\n")
    before = picture(repo)
    handoff("claim")
    (repo / "work.txt").write_text("attempt\n")
    return before


@pytest.fixture
def interrupted(repo: Path) -> tuple[Path, Any]:
    """A `fail` that recorded its failure and was killed before it touched the work tree
    (its journal written, the attempt's file still there), as tests/ops/test_rollback.py
    sets it up (test_a_killed_rollback_is_finished_by_the_next_command); returns the
    repository and the picture the rollback must come back to."""
    before = _claimed_with_work(repo)
    handoff("fail", "t", "--reason", "no", "--keep-worktree")
    task = handoff("show", "t", "--json").json()
    snapshot = handoff("attempts", "t", "--json").json()[0]["claim_snapshot"]
    assert snapshot and (repo / "work.txt").exists()
    rollback.write_journal(Repo.discover(repo), rollback.RollbackPlan(
        task="t", base=task["started_at_commit"], snapshot=snapshot, attempt_ref=task["last_attempt_ref"],
        operation=None))
    return repo, before


def rolled_back(repo: Path, before: Any) -> bool:
    return picture(repo) == before and not rollback.has_journal(Repo.discover(repo))


def _text(block: object) -> str:
    """A block of a tool's result: the server answers in text blocks only."""
    assert isinstance(block, TextContent), block
    return block.text


@pytest.mark.slow  # a real `git handoff mcp` server process over stdio
def test_the_mcp_server_finishes_an_interrupted_rollback(interrupted: tuple[Path, Any]) -> None:
    repo, before = interrupted
    notices.remember(Repo.discover(repo), ["your claim of c0 was lost in a sync"])
    params = StdioServerParameters(command=sys.executable, args=["-m", "git_handoff", "mcp"], cwd=str(repo),
                                   env=dict(os.environ))

    async def go() -> list[list[str]]:
        async with Client(params, read_timeout_seconds=60) as client:
            first = await client.call_tool("status", {})
            assert not first.is_error
            second = await client.call_tool("status", {})
            return [[_text(block) for block in r.content] for r in (first, second)]

    first, second = anyio.run(go)
    assert rolled_back(repo, before)
    warnings = [t for t in first if t.startswith("warning: ")]
    assert warnings == ["warning: your claim of c0 was lost in a sync",
                        f"warning: {FINISHED} to {handoff('show', 't', '--json').json()['started_at_commit'][:7]} "
                        f"(the attempt is saved as refs/harness/attempts/t/1)"], first
    assert json.loads(first[0])["counts"]["failed"] == 1
    assert not [t for t in second if t.startswith("warning: ")]  # told once


def test_the_mcp_tools_finish_an_interrupted_rollback_in_process(interrupted: tuple[Path, Any]) -> None:
    repo, before = interrupted
    answer = mcp_tools.call(mcp_tools.Workspace(str(repo)), "show", {"id": "t"})
    assert answer.exit_code == 0 and answer.value["status"] == "failed"
    assert len(answer.warnings) == 1 and answer.warnings[0].startswith(FINISHED)
    assert rolled_back(repo, before)


@pytest.mark.slow  # a real `git handoff serve` process
def test_serve_finishes_an_interrupted_rollback_as_it_starts(interrupted: tuple[Path, Any]) -> None:
    repo, before = interrupted
    result = run_exe("serve", "--stop-after", "1s", "--json", cwd=repo)
    assert result.rc == 0, result.err
    assert json.loads(result.out)["root"] == str(repo)
    assert FINISHED in result.err
    assert rolled_back(repo, before)


def test_serve_in_process_finishes_an_interrupted_rollback(interrupted: tuple[Path, Any]) -> None:
    repo, before = interrupted
    result = handoff("serve", "--stop-after", "1s")
    assert FINISHED in result.err and result.out.startswith("Serving the dashboard of ")
    assert rolled_back(repo, before)


@pytest.mark.parametrize("hook", ["claude-session-start", "claude-stop", "codex-session-start", "gemini-session-start"])
def test_an_agent_hook_finishes_an_interrupted_rollback(interrupted: tuple[Path, Any], hook: str) -> None:
    repo, before = interrupted
    result = handoff("hook", hook, stdin=json.dumps({"cwd": str(repo), "source": "startup"}))
    assert rolled_back(repo, before)
    assert FINISHED in result.err
    # Claude Code shows a hook's systemMessage to the person watching: the warning is there too
    if hook == "claude-session-start":
        assert FINISHED in json.loads(result.out)["systemMessage"]


def test_the_post_commit_hook_finishes_an_interrupted_rollback(interrupted: tuple[Path, Any]) -> None:
    repo, before = interrupted
    result = handoff("hook", "post-commit")  # what the installed hook runs once its threshold is reached
    assert FINISHED in result.err and result.out == ""
    assert rolled_back(repo, before)


def test_a_hook_delivers_the_notices_once(repo: Path) -> None:
    handoff("init")
    notices.remember(Repo.discover(repo), ["your claim of c0 was lost in a sync"])
    payload = json.dumps({"cwd": str(repo), "source": "startup"})
    first = handoff("hook", "claude-session-start", stdin=payload)
    assert "git handoff: your claim of c0 was lost in a sync" in first.err
    assert "your claim of c0" in json.loads(first.out)["systemMessage"]
    assert "your claim of c0" not in handoff("hook", "claude-session-start", stdin=payload).err


def test_a_notice_taken_by_a_hook_reaches_the_model_beside_a_block_and_in_the_context(repo: Path) -> None:
    """The Stop hook that keeps the agent working blocks, and the agent CLIs drop a
    warning beside a block: the notice it took goes into the reason the model reads. A
    session start puts it into the context it injects."""
    handoff("init")
    handoff("add", "open work", "--id", "w", "--check", "true")
    repo_obj = Repo.discover(repo)
    notices.remember(repo_obj, ["your claim of c0 was lost in a sync"])
    stop = handoff("hook", "claude-stop", stdin=json.dumps({"cwd": str(repo), "stop_hook_active": False}))
    out = json.loads(stop.out)
    assert out["decision"] == "block"
    assert out["reason"].startswith("git handoff: your claim of c0 was lost in a sync\n")
    notices.remember(repo_obj, ["your claim of c1 was lost in a sync"])
    start = handoff("hook", "claude-session-start", stdin=json.dumps({"cwd": str(repo), "source": "startup"}))
    context = json.loads(start.out)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("git handoff: your claim of c1 was lost in a sync\n")


def test_a_hook_in_a_repository_without_a_state_keeps_the_notices_and_says_nothing(repo: Path) -> None:
    notices.remember(Repo.discover(repo), ["for the next command"])
    result = handoff("hook", "claude-session-start", stdin=json.dumps({"cwd": str(repo)}))
    assert (result.out, result.err) == ("", "")
    assert notices.take(Repo.discover(repo)) == ["for the next command"]


# -- one mapping from an exception to exit code, message and JSON --------------------------

NEGATIVE_PAYLOAD = {"task": None, "reason": "nothing eligible"}
# (the exception `status` raises, the exit code, the `--json` document): what the CLI
# printed and exited with before the mapping was shared, for every error class
ERRORS: list[tuple[Exception, int, Any]] = [
    (Negative("nothing eligible"), 1, {"error": "nothing eligible", "exit_code": 1}),
    (Negative("nothing eligible", payload=NEGATIVE_PAYLOAD), 1, NEGATIVE_PAYLOAD),
    (Negative("one of two", payload=["a", "b"]), 1, ["a", "b"]),
    (Negative("not a document", payload="text"), 1, {"error": "not a document", "exit_code": 1}),
    (UsageError("bad input\nsecond line"), 2, {"error": "bad input\nsecond line", "exit_code": 2}),
    (NotARepository("not a git repository"), 2, {"error": "not a git repository", "exit_code": 2}),
    (NotInitialized("not initialized"), 2, {"error": "not initialized", "exit_code": 2}),
    (InvalidState("state unreadable"), 2, {"error": "state unreadable", "exit_code": 2}),
    (GitFailure("git failed"), 2, {"error": "git failed", "exit_code": 2}),
    (HandoffError("plain"), 2, {"error": "plain", "exit_code": 2}),
    (Contention("lock held"), 3, {"error": "lock held", "exit_code": 3}),
    (RuntimeError("boom"), 2, {"error": "unexpected RuntimeError: boom ({hint})", "exit_code": 2}),
    (KeyError("k"), 2, {"error": "unexpected KeyError: 'k' ({hint})", "exit_code": 2}),
]
CLI_HINT = "rerun with `git handoff --debug ...` for the traceback"
MCP_HINT = "set GIT_HANDOFF_DEBUG=1 for the traceback on stderr"


def _with_hint(expected: Any, hint: str) -> Any:
    if isinstance(expected, dict) and "{hint}" in str(expected.get("error")):
        return {**expected, "error": expected["error"].format(hint=hint)}
    return expected


@pytest.mark.parametrize(("error", "code", "document"), ERRORS, ids=[f"{type(e).__name__}-{i}" for i, (e, _, _) in
                                                                      enumerate(ERRORS)])
def test_the_cli_and_the_mcp_tools_map_every_error_class_alike(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                               error: Exception, code: int, document: Any) -> None:
    handoff("init")

    def raising(_store: object) -> Any:
        raise error

    monkeypatch.setattr(views, "status", raising)
    monkeypatch.setattr(views, "status_json", raising)  # what the CLI's compact --json calls
    cli = run("status", "--json")
    answer = mcp_tools.call(mcp_tools.Workspace(str(repo)), "status", {})
    message = error.message if isinstance(error, HandoffError) else f"unexpected {type(error).__name__}: {error}"
    # the CLI: its exit code, the JSON document on stdout, `error: <first line>` on stderr
    assert cli.rc == code
    assert json.loads(cli.out) == _with_hint(document, CLI_HINT)
    assert cli.err.startswith(f"error: {message.splitlines()[0]}")
    # the MCP tool: the same exit code and document, the same `error:` line
    assert answer.exit_code == code and answer.is_error
    assert answer.value == _with_hint(document, MCP_HINT)
    assert answer.error is not None and answer.error.startswith(message.splitlines()[0])
    if isinstance(error, HandoffError):  # no hint to differ by: the very same line and document
        assert f"error: {answer.error}\n" == cli.err
        assert answer.value == json.loads(cli.out)


# -- a rollback whose owner is still at work ---------------------------------------------------

PAUSE = """#!/bin/sh
# pauses the first run after {armed} appears, until {go} does; then behaves as {then}
if [ -e "{armed}" ] && mkdir "{once}" 2>/dev/null; then
  touch "{paused}"
  while [ ! -e "{go}" ]; do sleep 0.05; done
fi
exec {then} "$@"
"""


def _pause_script(repo: Path, name: str, then: str) -> tuple[Path, dict[str, Path]]:
    """A program that, once armed, stops at its first run until told to go on."""
    where = repo.parent / f"pause-{name}"
    where.mkdir()
    marks = {k: where / k for k in ("armed", "once", "paused", "go")}
    script = where / "run.sh"
    script.write_text(PAUSE.format(then=then, **marks))
    script.chmod(0o755)
    return script, marks


def _fail_paused(repo: Path, marks: dict[str, Path]) -> subprocess.Popen[str]:
    """`git handoff fail t` as its own process, stopped where the armed program runs."""
    marks["armed"].touch()
    proc = subprocess.Popen(["git", "handoff", "fail", "t", "--reason", "no"], cwd=repo, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: marks["paused"].exists() or proc.poll() is not None, what="fail to pause")
    assert proc.poll() is None, proc.communicate()
    assert rollback.has_journal(Repo.discover(repo))  # between its journal and the end of its rollback
    return proc


def _finish(proc: subprocess.Popen[str], marks: dict[str, Path], repo: Path, before: Any) -> None:
    marks["go"].touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err)
    assert rolled_back(repo, before)
    assert handoff("show", "t", "--json").json()["status"] == "failed"


def test_a_command_leaves_a_rollback_under_way_to_its_owner(repo: Path) -> None:
    """`fail` stopped inside its rollback (a smudge filter that waits, as a slow file
    system would) while a hook and `status` open the state in the same worktree: they
    leave the journal to its owner, which finishes the rollback once. Before the owner's
    lock, each started the same rollback again (`git reset --hard` under the owner's
    feet: it failed on git's index lock, or rolled back twice)."""
    script, marks = _pause_script(repo, "smudge", "cat")
    (repo / ".gitattributes").write_text("slow.txt filter=pause\n")
    (repo / "slow.txt").write_text("as committed\n")
    git("add", ".gitattributes", "slow.txt", cwd=repo)
    git("commit", "-q", "-m", "a filtered file", cwd=repo)
    git("config", "filter.pause.smudge", str(script), cwd=repo)
    git("config", "filter.pause.clean", "cat", cwd=repo)
    handoff("init")
    handoff("add", "Try", "--id", "t", "--check", "false", "--max-attempts", "9")
    before = picture(repo)
    handoff("claim")
    (repo / "slow.txt").write_text("the attempt\n")
    proc = _fail_paused(repo, marks)
    try:
        assert handoff("show", "t", "--json").json()["status"] == "failed"  # recorded: the rollback is under way
        hook = run_exe("hook", "claude-stop", cwd=repo, stdin=json.dumps(
            {"session_id": "s", "cwd": str(repo), "hook_event_name": "Stop"}))
        status = run_exe("status", cwd=repo)
        assert hook.rc == 0 and status.rc == 0, (hook, status)
        assert FINISHED not in hook.out + hook.err + status.out + status.err
        assert rollback.has_journal(Repo.discover(repo))  # still its owner's
    finally:
        _finish(proc, marks, repo, before)


@pytest.mark.needs("ssh-keygen")
def test_a_command_keeps_the_journal_of_a_fail_not_recorded_yet(repo: Path, tmp_path: Path) -> None:
    """`fail` stopped after writing its journal, before its failure is recorded (signing
    the state commit: a program that waits for a passphrase would), while `status` opens
    the state: the journal stays (before the owner's lock, `status` dropped it as the
    journal of a failure never recorded, and a `fail` killed in its rollback then left a
    half-rolled-back tree nobody finished)."""
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    script, marks = _pause_script(repo, "sign", "ssh-keygen")
    for name, value in (("gpg.format", "ssh"), ("user.signingKey", str(key)), ("handoff.signState", "true"),
                        ("gpg.ssh.program", str(script))):
        git("config", name, value, cwd=repo)
    before = _claimed_with_work(repo)
    proc = _fail_paused(repo, marks)
    try:
        assert handoff("show", "t", "--json").json()["status"] == "in_progress"  # not recorded yet
        status = run_exe("status", cwd=repo)
        assert status.rc == 0, status
        assert rollback.has_journal(Repo.discover(repo))  # still its owner's
    finally:
        _finish(proc, marks, repo, before)
