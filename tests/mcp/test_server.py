"""`git handoff mcp` through the MCP SDK's own client: every tool, in-process and
over a real stdio subprocess; bad arguments are tool errors that change nothing
and never stop the server; every exit code reaches the result."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from git_handoff.mcp.tools import TOOLS, Workspace
from git_handoff.state import notices
from git_handoff.state import store as store_module
from tests.support.mcp_inproc import build_server
from tests.support.repo import git, run, state_head

VERBS = {"status", "next", "list", "show", "add", "claim", "renew", "release", "checkpoint", "verify", "done",
         "fail", "attempts", "decide", "blocker", "doc_write", "doc_show", "prompt", "ack", "log"}


@dataclass
class Reply:
    is_error: bool
    exit_code: int
    value: Any
    texts: list[str]

    @property
    def error_line(self) -> str:
        assert self.is_error and len(self.texts) >= 2, self
        return self.texts[1]

    @property
    def warnings(self) -> list[str]:
        return [t for t in self.texts if t.startswith("warning: ")]


def _reply(result: Any) -> Reply:
    texts = [block.text for block in result.content]
    meta = result.meta or {}
    return Reply(bool(result.is_error), meta["exit_code"], json.loads(texts[0]), texts)


def calls(where: Path | StdioServerParameters, steps: list[tuple[str, dict[str, Any] | None]],
          mode: str = "auto") -> list[Reply]:
    """Run the tool calls `steps` in order through one server and one SDK client."""
    server: Any = where if isinstance(where, StdioServerParameters) else build_server(Workspace(str(where)))

    async def go() -> list[Reply]:
        out = []
        async with Client(server, mode=mode, read_timeout_seconds=60) as client:
            for name, args in steps:
                out.append(_reply(await client.call_tool(name, args)))
        return out

    return anyio.run(go)


def call(where: Path, name: str, args: dict[str, Any] | None = None) -> Reply:
    return calls(where, [(name, args)])[0]


def cli(*args: str, rc: int = 0) -> Any:
    result = run(*args)
    assert result.rc == rc, f"git handoff {' '.join(args)}: rc={result.rc} err={result.err}"
    return result.json() if "--json" in args else result.out


@pytest.fixture
def ready(repo: Path) -> Path:
    """Initialized, with t1 (check passes once `ok` exists), t2 after t1, t3 (check always passes),
    and a session open."""
    cli("init")
    cli("add", "First", "--id", "t1", "--check", "test -f ok")
    cli("add", "Second", "--id", "t2", "--after", "t1", "--check", "true")
    cli("add", "Third", "--id", "t3", "--priority", "P2", "--check", "true")
    cli("session", "start")
    return repo


def without_blocked(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if k != "blocked"}


# -- the tool list -------------------------------------------------------------------------------


def test_every_verb_is_a_tool_with_a_strict_schema(ready: Path) -> None:
    async def go() -> Any:
        async with Client(build_server(Workspace(str(ready)))) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in anyio.run(go)}
    assert set(tools) == VERBS
    for name, tool in tools.items():
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False, name
        assert set(schema["required"]) == {a.name for a in TOOLS[name].args if a.required}
        assert tool.description
    assert tools["fail"].input_schema["required"] == ["id", "reason"]
    assert tools["claim"].input_schema["required"] == []
    assert "TIMEOUT" in tools["fail"].input_schema["properties"]["category"]["enum"]
    assert tools["status"].annotations.read_only_hint is True
    assert tools["done"].annotations.destructive_hint is True


# -- answers equal to the CLI's --json ------------------------------------------------------------


def test_read_tools_answer_exactly_what_the_cli_prints(ready: Path) -> None:
    cli("claim", "t1")
    cli("checkpoint", "t1", "half way", "--step", "1", "--of", "2")
    cli("fail", "t1", "--reason", "broke it")
    cli("decide", "use sqlite", "--why", "no server")
    cli("doc", "write")
    replies = calls(ready, [
        ("status", {}), ("next", None), ("list", {}), ("list", {"status": "failed"}), ("list", {"ready": True}),
        ("show", {"id": "t1"}), ("show", {"id": "t2"}), ("attempts", {"id": "t1"}), ("doc_show", {}),
        ("doc_show", {"number": 1}), ("prompt", {}), ("log", {}), ("log", {"n": 2, "task": "t1"}),
        ("log", {"type": "ERROR"}),
    ])
    expected = [
        cli("status", "--json"), cli("next", "--json"), cli("list", "--json"),
        cli("list", "--status", "failed", "--json"), cli("list", "--ready", "--json"),
        cli("show", "t1", "--json"), cli("show", "t2", "--json"), cli("attempts", "t1", "--json"),
        cli("doc", "show", "--json"), cli("doc", "show", "1", "--json"), cli("prompt", "--json"),
        cli("log", "--json"), cli("log", "-n", "2", "--task", "t1", "--json"), cli("log", "--type", "ERROR", "--json"),
    ]
    for reply, want in zip(replies, expected, strict=True):
        assert not reply.is_error and reply.exit_code == 0, reply
        assert reply.value == want
    assert replies[3].value[0]["id"] == "t1" and replies[7].value[0]["reason"] == "broke it"


def test_the_work_cycle_through_tools(ready: Path) -> None:
    base = git("rev-parse", "HEAD", cwd=ready)
    r = calls(ready, [
        ("ack", {}),
        ("add", {"title": "Fourth", "id": "t4", "priority": "P0", "after": ["t3"], "check": "true", "timeout": 20,
                 "max_attempts": 2, "cleanup": "true", "spec": "docs/spec.md"}),
        ("claim", {"id": "t1", "worker": "agent-7", "lease": "90s"}),
        ("renew", {"id": "t1", "lease": "2h"}),
        ("checkpoint", {"id": "t1", "message": "wrote the schema", "step": 1, "of": 3}),
        ("verify", {"id": "t1"}),
    ])
    assert [x.exit_code for x in r] == [0, 0, 0, 0, 0, 1]
    assert r[0].value["status"] == "accepted"
    assert r[1].value == cli("show", "t4", "--json")
    assert r[1].value["priority"] == "P0" and r[1].value["depends_on"] == ["t3"] and r[1].value["max_attempts"] == 2
    assert r[2].value["claimed_by"] == "agent-7" and r[2].value["started_at_commit"] == base
    assert r[4].value == without_blocked(cli("show", "t1", "--json"))
    assert r[4].value["checkpoints"][-1]["description"] == "wrote the schema"
    assert r[5].is_error and r[5].value["task"] == "t1" and r[5].value["ok"] is False
    assert r[5].error_line.startswith("error: [TEST_FAIL] validation of t1 failed")
    assert "exit 1: a normal negative answer" in r[5].error_line

    (ready / "ok").write_text("done\n")
    git("add", "ok", cwd=ready)
    git("commit", "-q", "-m", "t1 work", cwd=ready)
    r = calls(ready, [
        ("verify", {"id": "t1"}), ("done", {"id": "t1"}),
        ("claim", {}), ("release", {"id": "t2"}),
        ("claim", {"id": "t2"}), ("fail", {"id": "t2", "reason": "flaky network", "category": "ENV_SETUP"}),
        ("decide", {"what": "keep sqlite", "why": "tests are fast"}), ("blocker", {"text": "no staging db"}),
        ("doc_write", {}),
    ])
    assert [x.exit_code for x in r] == [0] * 9, [x.texts for x in r if x.is_error]
    assert r[0].value["ok"] is True
    assert r[1].value["status"] == "completed" and cli("show", "t1", "--json")["status"] == "completed"
    assert r[2].value["id"] == "t2"  # t4 is P0 but waits on t3; t2's dependency is completed now
    assert r[3].value["status"] == "pending" and r[3].value["claimed_by"] is None
    assert r[5].value["task"]["attempts"] == 1 and r[5].value["category"] == "ENV_SETUP"
    assert r[5].value["attempt_ref"] == "refs/harness/attempts/t2/1"
    assert (r[6].value["what"], r[6].value["why"]) == ("keep sqlite", "tests are fast")
    assert r[7].value["text"] == "no staging db"
    shown = cli("doc", "show", "--json")
    assert r[8].value["session"] == shown["session"] == 1 and r[8].value["written"] is True
    assert r[8].value["files_changed"] == shown["files_changed"] and "ok" in shown["files_changed"]
    assert {"what": "keep sqlite", "why": "tests are fast"} in [
        {"what": d["what"], "why": d["why"]} for d in r[8].value["decisions"]]


def test_exit_1_answers_carry_their_payload_like_the_cli(ready: Path) -> None:
    cli("claim", "t1")
    before = git("rev-parse", "HEAD", cwd=ready)
    (ready / "scratch.txt").write_text("attempt\n")
    failed_done, = calls(ready, [("done", {"id": "t1"})])
    assert failed_done.is_error and failed_done.exit_code == 1
    assert failed_done.value["task"]["status"] == "failed" and failed_done.value["task"]["attempts"] == 1
    assert failed_done.value["rolled_back"] is True and not (ready / "scratch.txt").exists()
    assert git("rev-parse", "HEAD", cwd=ready) == before
    assert failed_done.error_line.startswith("error: [TEST_FAIL] validation of t1 failed")
    assert cli("attempts", "t1", "--json")[0]["files"]

    for t in ("t1", "t3"):
        cli("edit", t, "--check", "true")
        cli("claim", t)
        cli("done", t)
    cli("claim", "t2")
    nothing = calls(ready, [("next", {}), ("claim", {"force": True})])
    for reply in nothing:
        assert reply.is_error and reply.exit_code == 1
        assert reply.value == {"error": reply.value["error"], "exit_code": 1}
        assert reply.value["error"].startswith("nothing eligible")
        assert reply.error_line.startswith("error: nothing eligible")
    assert run("next", "--json").json() == nothing[0].value


# -- bad input ------------------------------------------------------------------------------------

BAD_CALLS: list[tuple[str, dict[str, Any] | list[Any], str]] = [
    ("status", {"verbose": True}, "unknown argument 'verbose'"),
    ("next", {"id": "t1"}, "unknown argument 'id'"),
    ("list", {"status": "done"}, "invalid status 'done'"),
    ("list", {"ready": "yes"}, "'ready' must be a boolean"),
    ("show", {}, "missing argument 'id'"),
    ("show", {"id": "../../etc/passwd"}, "id"),
    ("show", {"id": "nope"}, "no task 'nope'"),
    ("add", {"id": "x1"}, "missing argument 'title'"),
    ("add", {"title": "T", "priority": "P9"}, "invalid priority 'P9'"),
    ("add", {"title": "T", "after": "t1"}, "'after' must be an array"),
    ("add", {"title": "T", "after": [1]}, "array of strings"),
    ("add", {"title": "T", "timeout": 0}, "'timeout' must be at least 1"),
    ("add", {"title": "T", "timeout": True}, "'timeout' must be an integer"),
    ("add", {"title": "T", "after": ["ghost"]}, "ghost"),
    ("add", {"title": "T", "id": "t1"}, "t1"),
    ("add", {"title": "bad\0title"}, "NUL"),
    ("claim", {"id": 7}, "'id' must be a string"),
    ("claim", {"lease": "forever"}, "invalid duration 'forever'"),
    ("claim", {"id": "ghost"}, "ghost"),
    ("renew", {"id": "t1"}, "t1"),
    ("release", {"id": "t1", "force": "yes"}, "'force' must be a boolean"),
    ("checkpoint", {"id": "t1"}, "missing argument 'message'"),
    ("checkpoint", {"id": "t1", "message": "m", "step": 0}, "'step' must be at least 1"),
    ("checkpoint", {"id": "t1", "message": "   "}, "non-empty message"),
    ("verify", {"id": "t1", "extra": 1}, "unknown argument 'extra'"),
    ("done", {"id": "t9"}, "t9"),
    ("done", {"id": "t1"}, "t1"),  # not claimed
    ("fail", {"id": "t1"}, "missing argument 'reason'"),
    ("fail", {"id": "t1", "reason": "r", "category": "OOPS"}, "invalid category 'OOPS'"),
    ("attempts", {"id": ""}, "id"),
    ("decide", {"what": "w"}, "missing argument 'why'"),
    ("blocker", {"text": 5}, "'text' must be a string"),
    ("doc_write", {"force": True}, "unknown argument 'force'"),
    ("doc_show", {"number": -1}, "'number' must be at least 0"),
    ("doc_show", {"number": 99}, "99"),
    ("prompt", {"json": True}, "unknown argument 'json'"),
    ("ack", {"failed": ["x"]}, "'failed' must be a string"),
    ("log", {"n": "ten"}, "'n' must be an integer"),
    ("log", {"n": 2**64}, "'n' must be at most 9223372036854775807"),
    ("add", {"title": "T", "timeout": 10**23}, "'timeout' must be at most 9223372036854775807"),
    ("add", {"title": "T", "max_attempts": 10**6}, "max_attempts must be at most 10000"),
    ("log", {"type": "GOSSIP"}, "unknown log type 'GOSSIP'"),
    ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
]


def test_every_tool_refuses_bad_arguments_with_exit_2_and_changes_nothing(ready: Path) -> None:
    assert {name for name, _, _ in BAD_CALLS} >= VERBS
    before = state_head(ready)
    files = sorted(p.name for p in ready.iterdir())
    steps: list[tuple[str, Any]] = [(name, args) for name, args, _ in BAD_CALLS] + [("status", {})]
    replies = calls(ready, steps)
    for (name, args, needle), reply in zip(BAD_CALLS, replies, strict=False):
        assert reply.is_error and reply.exit_code == 2, (name, args, reply)
        assert reply.value["exit_code"] == 2 and needle in reply.value["error"], (name, args, reply.value)
        assert reply.error_line.startswith("error: ") and "\nexit 2: bad input" in reply.error_line
    assert replies[-1].exit_code == 0 and len(replies[-1].value["tasks"]) == 3  # the server kept serving
    assert state_head(ready) == before
    assert sorted(p.name for p in ready.iterdir()) == files


def test_the_same_trust_as_the_cli(ready: Path) -> None:
    (ready / ".git" / "handoff" / "trusted.json").unlink()  # t1's check is not approved on this clone
    cli("claim", "t1")
    before = state_head(ready)
    reply = call(ready, "done", {"id": "t1"})
    assert reply.exit_code == 2 and "git handoff trust" in reply.value["error"]
    cli_done = run("done", "t1", "--json")
    assert cli_done.rc == 2 and cli_done.err == f"error: {reply.value['error']}\n"
    assert state_head(ready) == before


def test_a_held_state_lock_is_exit_3(ready: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_SECONDS", 0.3)
    before = state_head(ready)
    fd = os.open(ready / ".git" / "handoff" / "state.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held = calls(ready, [("claim", {}), ("status", {})])
    finally:
        os.close(fd)
    assert held[0].is_error and held[0].exit_code == 3 and "state lock" in held[0].value["error"]
    assert "exit 3: contention" in held[0].error_line
    assert held[1].exit_code == 0  # reading needs no lock
    assert state_head(ready) == before
    assert call(ready, "claim", {}).value["id"] == "t1"  # and once the lock is free, the claim goes through


def test_the_state_is_read_fresh_for_every_call_and_no_repository_is_exit_2(tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    not_git = call(outside, "status")
    assert not_git.exit_code == 2 and "not a git repository" in not_git.value["error"]

    from tests.support.repo import make_repo

    repo = make_repo(tmp_path / "r")
    space = Workspace(str(repo))

    async def go() -> list[Reply]:
        out = []
        async with Client(build_server(space)) as client:
            out.append(_reply(await client.call_tool("status", {})))
            run("init", cwd=repo)
            run("add", "Made by the CLI", "--id", "c1", "--check", "true", cwd=repo)
            out.append(_reply(await client.call_tool("list", {})))
            notices.remember(space.store().repo, ["your claim of c0 was lost in a sync"])
            out.append(_reply(await client.call_tool("next", {})))
            out.append(_reply(await client.call_tool("next", {})))
        return out

    uninitialized, listed, noticed, again = anyio.run(go)
    assert uninitialized.exit_code == 2 and "not initialized" in uninitialized.value["error"]
    assert [t["id"] for t in listed.value] == ["c1"]
    assert noticed.warnings == ["warning: your claim of c0 was lost in a sync"]
    assert again.warnings == []


# -- a real stdio subprocess ------------------------------------------------------------------------


def stdio_params(repo: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "git_handoff", "mcp"], cwd=str(repo),
                                 env=dict(os.environ))


@pytest.mark.slow  # a real `git handoff mcp` server process over stdio: the slow layer
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_over_stdio_a_noisy_check_cannot_break_the_protocol(ready: Path, mode: str) -> None:
    # The check writes to stdout and reads stdin: the server's wire must not see either.
    cli("edit", "t1", "--check", "echo '{\"jsonrpc\": \"2.0\", \"id\": 1}'; cat; test -f ok")
    (ready / "ok").write_text("x\n")
    git("add", "ok", cwd=ready)
    git("commit", "-q", "-m", "ok", cwd=ready)
    r = calls(stdio_params(ready), [("claim", {}), ("verify", {"id": "t1"}), ("done", {"id": "t1"}),
                                    ("show", {"id": "t9"}), ("status", {})], mode=mode)
    assert [x.exit_code for x in r] == [0, 0, 0, 2, 0]
    assert r[0].value["id"] == "t1"
    assert r[2].value["status"] == "completed"
    assert r[4].value == cli("status", "--json")


@pytest.mark.slow  # a real `git handoff mcp` server process over stdio: the slow layer
def test_over_stdio_a_check_writing_to_the_servers_own_stdout_cannot_reach_the_wire(ready: Path) -> None:
    # /proc/$PPID/fd/1 is the server's descriptor 1, whatever the check's own stdout is:
    # the wire must have moved off it before any tool ran. Every line the client reads is
    # one of the server's messages.
    cli("edit", "t1", "--check", "echo NOISE-FROM-THE-CHECK > /proc/$PPID/fd/1; test -f ok")
    (ready / "ok").write_text("x\n")
    git("add", "ok", cwd=ready)
    git("commit", "-q", "-m", "ok", cwd=ready)
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "claim", "arguments": {"id": "t1"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "verify", "arguments": {"id": "t1"}}},
    ]
    wire = "".join(json.dumps(m) + "\n" for m in messages).encode()
    got = subprocess.run([sys.executable, "-m", "git_handoff", "mcp"], cwd=ready, input=wire, capture_output=True,
                         timeout=120)
    assert got.returncode == 0, got.stderr
    answers = [json.loads(line) for line in got.stdout.decode().splitlines()]  # any other line fails here
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert json.loads(answers[2]["result"]["content"][0]["text"])["ok"] is True
    assert b"NOISE-FROM-THE-CHECK" in got.stderr  # where it went instead


@pytest.mark.slow  # a real `git handoff mcp` server process over stdio: the slow layer
def test_garbage_on_the_wire_gets_errors_and_the_server_ends_when_stdin_closes(ready: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "git_handoff", "mcp"], cwd=ready, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "this is not json",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": [1, 2]}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "claim", "arguments": {"id": {}}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "status", "arguments": {}}},
    ]
    assert proc.stdin is not None and proc.stdout is not None
    answers = {}
    try:
        for m in messages:
            proc.stdin.write((m if isinstance(m, str) else json.dumps(m)).encode() + b"\n")
            proc.stdin.flush()
            if isinstance(m, dict) and "id" in m:  # a request: wait for its answer
                while True:
                    got = json.loads(proc.stdout.readline())
                    if "id" in got:
                        answers[got["id"]] = got
                        break
        _, err = proc.communicate(timeout=60)  # closes stdin: the server must end by itself
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert answers[1]["result"]["serverInfo"]["name"] == "handoff"
    assert "error" in answers[2]  # the SDK refuses arguments that are not an object
    assert answers[3]["result"]["isError"] is True and answers[3]["result"]["_meta"]["exit_code"] == 2
    assert json.loads(answers[4]["result"]["content"][0]["text"]) == cli("status", "--json")
    assert state_head(ready) is not None


def test_other_commands_never_import_the_sdk(ready: Path) -> None:
    code = ("import sys; from git_handoff.cli import main\n"
            "try:\n    main(['status', '--json'])\nexcept SystemExit:\n    pass\n"
            "print('mcp' in sys.modules, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ready, capture_output=True, text=True, timeout=60)
    assert proc.stderr.strip().splitlines()[-1] == "False"
    assert json.loads(proc.stdout)["counts"]["pending"] == 3


def _started_server(repo: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "git_handoff", "mcp"], cwd=repo, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    proc.stdin.write(json.dumps(hello).encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    return proc


@pytest.mark.slow  # a real `git handoff mcp` server process over stdio: the slow layer
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_an_idle_server_at_once(ready: Path, signum: int) -> None:
    proc = _started_server(ready)
    try:
        proc.send_signal(signum)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow  # a real `git handoff mcp` server process over stdio: the slow layer
def test_a_signal_during_a_call_lets_the_call_answer_first(ready: Path) -> None:
    cli("edit", "t3", "--check", "sleep 2")
    cli("claim", "t3")
    proc = _started_server(ready)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        call_done = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "done",
                                                                                   "arguments": {"id": "t3"}}}
        proc.stdin.write(json.dumps(call_done).encode() + b"\n")
        proc.stdin.flush()
        time.sleep(1)  # the check is running
        proc.send_signal(signal.SIGINT)
        answer = json.loads(proc.stdout.readline())
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert answer["id"] == 2 and answer["result"]["isError"] is False
    assert cli("show", "t3", "--json")["status"] == "completed"


def test_a_call_queued_behind_the_running_one_is_not_started_once_a_stop_was_asked(ready: Path) -> None:
    """SIGTERM while call A runs: the server exits once A has answered; call B, which the
    client queued behind A, must not start a transaction the exit would cut short."""
    from git_handoff.mcp.protocol import RpcError
    from git_handoff.mcp.server import Stopping, handlers
    from git_handoff.mcp.tools import Workspace

    stopping = Stopping()
    assert stopping.begin()  # call A runs
    stopping.handle(signal.SIGTERM, None)  # a signal during A: noted, not acted on yet
    before = state_head(ready)
    with pytest.raises(RpcError, match="stopping"):
        handlers(Workspace(str(ready)), stopping).call_tool("add", {"title": "Queued"})
    assert state_head(ready) == before
    assert stopping.end()  # A answered: now the server stops

