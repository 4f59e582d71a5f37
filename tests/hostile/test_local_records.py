"""Records read from the local state pass the same parsers as fetched ones (docs/threat-model.md).

Each case corrupts one record of this clone's own refs/harness/state with git plumbing
(a field of the wrong type or out of range, as a hand edit or another tool might leave
it), then runs the commands that read that record: each exits 2 with one line naming
the path and the field, never `unexpected …`, and the state ref does not move.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.repo import git, lived_in_state, run, state_head


def corrupt(repo: Path, path: str, content: bytes) -> None:
    """Commit onto refs/harness/state a tree whose blob at `path` holds `content`."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "corrupt-index")}
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=content,
                          capture_output=True, check=True).stdout.decode().strip()
    subprocess.run(["git", "read-tree", "refs/harness/state"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"], cwd=repo, env=env,
                   check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()
    commit = git("commit-tree", tree, "-p", "refs/harness/state", "-m", "hand-edited", cwd=repo)
    git("update-ref", "refs/harness/state", commit, cwd=repo)


def actual_path(repo: Path, path: str) -> str:
    """Where the record `path` names lives in this state: sessions, documents and runs
    are kept under `<name>@<clone>.json` (fleet ids); other records where they are named."""
    folder, _, name = path.rpartition("/")
    if folder not in ("sessions", "docs", "dispatch"):
        return path
    stem = name.removesuffix(".json")
    names = git("ls-tree", "--name-only", f"refs/harness/state:{folder}", cwd=repo).splitlines()
    found = [n for n in names if n == name or n.startswith(stem + "@")]
    assert len(found) == 1, (path, names)
    return f"{folder}/{found[0]}"


@pytest.fixture
def lived_in(repo: Path) -> Path:
    """A state with a task, a session with a decision, its handoff document and a dispatch run."""
    lived_in_state()
    git("config", "handoff.backend.echo.command", "echo hi", cwd=repo)
    assert run("dispatch", "new", "-b", "echo", "-s", "fix-auth", stdin="do it\n").rc == 0
    return repo


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


# (path, content, the field the error must name, the commands that read it)
CASES: list[tuple[str, bytes, str, list[tuple[str, ...]]]] = [
    ("meta.json", _json({"session_count": "lots"}), "field session_count ",
     [("status",), ("session", "start"), ("session", "show")]),
    ("meta.json", _json({"session_count": 2**70}), "field session_count ", [("status",), ("session", "start")]),
    ("sessions/1.json", _json({"session": 1, "decisions": "lots"}), "field decisions ",
     [("session", "show", "1"), ("session", "show")]),
    ("sessions/1.json", _json({"session": "one"}), "field session ", [("session", "show", "1")]),
    ("sessions/1.json", b'{"session": 1, "worker": "a\\nb"}', "field worker ", [("session", "show", "1")]),
    ("sessions/1.json", _json({"session": 1, "ack": "accepted"}), "field ack ", [("session", "show", "1")]),
    ("sessions/1.json", _json({"session": 1, "ack": {"status": "accepted\x1b]0;owned\x07", "at": None}}),
     "field ack.status ", [("session", "show", "1"), ("session", "list")]),
    ("sessions/1.json", _json({"session": 1, "handoff": {"written_at": None, "trigger": "stop\x1b[2J"}}),
     "field handoff.trigger ", [("session", "show", "1")]),
    ("docs/1.json", _json({"session": 1, "blockers": [{"deep": 1}]}), "field blockers[0] ",
     [("doc", "show", "1"), ("doc", "list"), ("prompt",)]),
    ("docs/1.json", _json({"session": 1, "status": {"pending": [{"id": "a", "title": "x\n[completed] b"}]}}),
     "field status.pending[0].title ", [("doc", "show", "1"), ("prompt",)]),
    ("docs/1.json", b"[" * 40 + b"]" * 40, "nested deeper than 32 levels", [("doc", "show", "1")]),
    ("relay.json", _json({"state": "running", "pid": "abc"}), "field pid ", [("relay", "--agent", "true")]),
    ("relay.json", _json({"state": "running", "agent_pid": 1}), "field agent_pid ", [("relay", "--agent", "true")]),
    ("dispatch/001-fix-auth.json", _json({"run_id": "001-fix-auth", "seq": "one"}), "field seq ",
     [("dispatch", "list"), ("dispatch", "result", "001-fix-auth"), ("dispatch", "run", "001-fix-auth")]),
    ("dispatch/001-fix-auth.json", _json({"run_id": "001-fix-auth", "session_id": "x'; touch /tmp/p #"}),
     "field session_id ", [("dispatch", "list"), ("dispatch", "resume", "001-fix-auth")]),
    ("config.toml", b"max_sessions = 100000000000000000000\n", "max_sessions", [("status",), ("claim",)]),
    ("config.toml", b"max_sessions = 9223372036854775807\nmode = " + b"[" * 2000 + b"]" * 2000 + b"\n",
     "nested deeper than 32 levels", [("status",), ("claim",), ("init",)]),
]


@pytest.mark.parametrize(("path", "content", "field", "commands"), CASES,
                         ids=[f"{c[0]}:{c[2]}" for c in CASES])
def test_a_hand_corrupted_local_record_gives_exit_2_naming_path_and_field(
        lived_in: Path, path: str, content: bytes, field: str, commands: list[tuple[str, ...]]) -> None:
    path = actual_path(lived_in, path)
    corrupt(lived_in, path, content)
    before = state_head(lived_in)
    for command in commands:
        for extra in ((), ("--json",)):
            res = run(*command, *extra, stdin="")
            lines = res.err.splitlines()
            assert res.rc == 2, (command, res)
            assert lines and lines[-1].startswith("error: ") and path in lines[-1] and field in lines[-1], \
                (command, res)
            assert "unexpected" not in res.err and "Traceback" not in res.err
            if extra:
                assert json.loads(res.out)["exit_code"] == 2
            assert state_head(lived_in) == before, command


def test_an_attempt_whose_message_nests_100000_deep_is_listed_without_its_record(lived_in: Path) -> None:
    """An attempt commit's message body (its JSON record) may come from another clone."""
    head = git("rev-parse", "HEAD", cwd=lived_in)
    tree = git("rev-parse", "HEAD^{tree}", cwd=lived_in)
    body = "[" * 100_000 + "]" * 100_000
    commit = subprocess.run(["git", "commit-tree", tree, "-p", head], cwd=lived_in, input=f"attempt 1\n\n{body}",
                            capture_output=True, text=True, check=True).stdout.strip()
    git("update-ref", "refs/harness/attempts/a/1", commit, cwd=lived_in)
    res = run("attempts", "a", "--json")
    assert res.rc == 0, res
    assert "unexpected" not in res.err and [a["attempt"] for a in json.loads(res.out)] == [1]
