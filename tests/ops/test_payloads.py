# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""The types of the use cases: no `Any` in what ops/ offers, every `type: ignore` says
why, and each command's `--json` output matches the TypedDict its use case returns
(git_handoff/ops/payloads.py), run on a real repository."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from git_handoff.core import record_schemas
from git_handoff.ops import hook_payloads, payloads
from tests.support.remotes import clones, remote_url  # noqa: F401
from tests.support.repo import git, make_repo, run
from tests.support.shapes import shape_problems

PACKAGE = Path(__file__).resolve().parents[2] / "git_handoff"


# -- no Any in the use cases' signatures -----------------------------------------------------


def _names_any(node: ast.expr | None) -> bool:
    return node is not None and any(
        (isinstance(n, ast.Name) and n.id == "Any") or (isinstance(n, ast.Attribute) and n.attr == "Any")
        for n in ast.walk(node))


def any_in_signatures(source: str) -> list[str]:
    """`name(param)` for each public function or method of public classes whose parameter
    or return annotation names Any."""
    found: list[str] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
                found.extend(f"{prefix}{node.name}({p.arg})" for p in params if _names_any(p.annotation))
                if _names_any(node.returns):
                    found.append(f"{prefix}{node.name}(return)")

    visit(ast.parse(source).body, "")
    return found


def test_the_any_check_finds_any() -> None:
    source = ("from typing import Any\n"
              "def f(x: dict[str, Any]) -> int: ...\n"
              "def g() -> list[typing.Any]: ...\n"
              "def _private(x: Any) -> Any: ...\n"
              "class C:\n    def m(self, **kw: Any) -> None: ...\n"
              "def h(x: object) -> dict[str, int]: ...\n")
    assert any_in_signatures(source) == ["f(x)", "g(return)", "C.m(kw)"]


def test_no_any_in_use_case_signatures() -> None:
    found = [f"{path.name}: {hit}" for path in sorted((PACKAGE / "ops").glob("*.py"))
             for hit in any_in_signatures(path.read_text())]
    assert found == []


IGNORE = re.compile(r"#\s*type:\s*ignore(\[[^\]]*\])?(?P<rest>.*)$")


def test_every_type_ignore_says_why() -> None:
    bare = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = IGNORE.search(line)
            if m and not re.match(r"\s*#\s*\S", m.group("rest")):
                bare.append(f"{path.relative_to(PACKAGE)}:{n}")
    assert bare == []


# -- the JSON shapes -------------------------------------------------------------------------


def test_the_shape_check_finds_what_differs() -> None:
    good = {"ok": True, "category": None, "exit_code": 0, "timed_out": False, "output_tail": "", "seconds": 0.1,
            "task": "t1"}
    assert shape_problems(good, payloads.VerifyView, "$") == []
    assert shape_problems({**good, "extra": 1}, payloads.VerifyView, "$") == ["$: unexpected 'extra'"]
    assert shape_problems({k: v for k, v in good.items() if k != "ok"}, payloads.VerifyView, "$") == ["$: missing 'ok'"]
    assert shape_problems({**good, "exit_code": "0"}, payloads.VerifyView, "$") \
        == ["$.exit_code: '0' is not int | None"]
    assert shape_problems({**good, "ok": 1}, payloads.VerifyView, "$") == ["$.ok: 1 is not bool"]
    assert shape_problems([{"at": "x", "from": "failed", "reason": 3}], list[payloads.Reopened], "$") == [
        "$[0].reason: 3 is not str"]


def _json(repo: Path, *args: str, rc: int = 0) -> object:
    result = run(*args, "--json", cwd=repo)
    assert result.rc == rc, (args, result.out, result.err)
    return json.loads(result.out)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_each_command_json_matches_its_type(repo: Path) -> None:
    """Every command whose use case returns a payload type, its --json checked against it."""
    seen: list[tuple[str, object, object]] = []

    def check(kind: object, *args: str, rc: int = 0) -> Any:
        value = _json(repo, *args, rc=rc)
        seen.append((" ".join(args), value, kind))
        return value

    check(payloads.InitResult, "init", "--init-command", "true")
    check(payloads.TaskView, "add", "first task", "--id", "t1", "--check", "true")
    check(payloads.TaskView, "add", "second", "--id", "t2", "--after", "t1", "--check", "false")
    check(payloads.TaskView, "add", "third", "--id", "t3")
    check(payloads.TaskView, "edit", "t3", "--priority", "P0")
    check(list[payloads.TaskView], "list")
    check(payloads.TaskView, "show", "t2")
    check(payloads.StatusView, "status")
    check(payloads.PromptView, "prompt")
    check(hook_payloads.HooksStatus, "hooks", "status")
    run("trust", "--all", cwd=repo)
    check(payloads.SessionStarted, "session", "start")
    check(payloads.AckAnswer, "ack")
    check(record_schemas.Decision, "decide", "use sqlite", "--why", "small")
    check(payloads.Blocker, "blocker", "disk full")
    claimed = run("claim", "t1", cwd=repo)
    assert claimed.rc == 0, claimed.err
    check(payloads.VerifyView, "verify", "t1")
    run("done", "t1", cwd=repo)
    run("claim", "t2", cwd=repo)
    (repo / "work.txt").write_text("some work\n")
    run("fail", "t2", "--reason", "broke it", cwd=repo)
    check(list[payloads.Attempt], "attempts", "t2")
    check(payloads.Restored, "restore", "t2", "1", "--force")
    check(payloads.ReopenResult, "reopen", "t2", "--reason", "try again")
    check(payloads.Renamed, "rename", "t3", "t4")
    check(payloads.Removed, "rm", "t4")
    check(payloads.SessionShown, "session", "show")
    check(list[payloads.SessionRow], "session", "list")
    check(record_schemas.WrittenDoc, "doc", "write")
    check(list[payloads.DocRow], "doc", "list")
    check(payloads.ShownDoc, "doc", "show")
    check(record_schemas.SessionRecord, "session", "end")
    check(list[payloads.LogLine], "log", "-n", "5")

    problems = [p for args, value, kind in seen for p in shape_problems(value, kind, args)]
    assert problems == [], "\n".join(problems)
    assert len(seen) >= 25


def test_hooks_json_matches_its_type(repo: Path) -> None:
    run("init", cwd=repo)
    problems: list[str] = []
    for kind, args in ((hook_payloads.HooksStatus, ("hooks", "install")),
                       (hook_payloads.HooksStatus, ("hooks", "status")),
                       (hook_payloads.HooksStatus, ("hooks", "uninstall")),
                       (hook_payloads.ClaudeHooks, ("hooks", "install", "--agent", "claude")),
                       (hook_payloads.ClaudeHooks, ("hooks", "uninstall", "--agent", "claude")),
                       (hook_payloads.AgentHooks, ("hooks", "status", "--agent", "gemini")),
                       (hook_payloads.AgentHooks, ("hooks", "install", "--agent", "gemini")),
                       (hook_payloads.AgentHooks, ("hooks", "uninstall", "--agent", "gemini"))):
        problems += shape_problems(_json(repo, *args), kind, " ".join(args))
    assert problems == [], "\n".join(problems)


def test_the_work_cycle_and_the_other_commands_json_match_their_types(repo: Path) -> None:
    """The claim's commands, fail, next, import, graph, completion, hook, dispatch, serve
    and an error, each --json checked against its type."""
    from git_handoff.cli import completion, hooks, serve
    from git_handoff.core.errors import ErrorJson
    from git_handoff.state import trust

    seen: list[tuple[str, object, object]] = []

    def check(kind: object, *args: str, rc: int = 0, stdin: str | None = None) -> Any:
        result = run(*args, "--json", cwd=repo, stdin=stdin)
        assert result.rc == rc, (args, result.out, result.err)
        value = json.loads(result.out)
        seen.append((" ".join(args), value, kind))
        return value

    run("init", cwd=repo)
    run("add", "first", "--id", "t1", "--check", "true", cwd=repo)
    run("add", "second", "--id", "t2", "--after", "t1", "--check", "false", cwd=repo)
    check(list[trust.Untrusted], "trust")  # created here: trusted at birth, none listed
    check(list[trust.Untrusted], "trust", "--all")
    check(list[trust.Approval], "trust", "--approved")
    check(payloads.TaskView, "next")
    check(payloads.TaskJson, "claim", "t1")
    check(payloads.TaskJson, "renew", "t1", "--lease", "1h")
    check(payloads.TaskJson, "checkpoint", "t1", "half way", "--step", "1")
    check(payloads.TaskJson, "release", "t1")
    check(payloads.TaskJson, "claim", "t1")
    check(payloads.TaskJson, "done", "t1")
    check(payloads.TaskJson, "claim", "t2")
    (repo / "work.txt").write_text("some work\n")
    check(payloads.FailOutcome, "fail", "t2", "--reason", "broke it")
    check(payloads.GraphView, "graph")
    plan = repo.parent / "plan.json"
    plan.write_text(json.dumps({"version": 2, "tasks": [{"id": "t9", "title": "imported", "depends_on": ["t1"]}]}))
    check(list[payloads.TaskView], "import", str(plan))
    check(completion.CompletionScript, "completion", "bash")
    check(hooks.HookAnswer, "hook", "no-such-event")
    check(hooks.HookAnswer, "hook", "post-commit")
    check(ErrorJson, "show", "no-such-task", rc=2)
    git("config", "handoff.backend.plain.command", "cat", cwd=repo)
    made = check(record_schemas.DispatchRun, "dispatch", "new", "--backend", "plain", "--slug", "echo", stdin="hello")
    check(record_schemas.DispatchRun, "dispatch", "run", made["run_id"])
    check(record_schemas.DispatchRun, "dispatch", "result", made["run_id"])
    check(list[record_schemas.DispatchRun], "dispatch", "list")
    check(serve.Serving, "serve", "--stop-after", "1s")

    problems = [p for args, value, kind in seen for p in shape_problems(value, kind, args)]
    assert problems == [], "\n".join(problems)


def test_sync_and_trust_json_match_their_types(clones: Callable[[str], Path]) -> None:
    """`sync` of two clones, and `trust` of the commands one of them brought to the other."""
    from git_handoff.ops.sync import SyncReport
    from git_handoff.state import trust

    a = clones("a")
    assert run("init", cwd=a).rc == 0
    assert run("add", "checked", "--id", "ta", "--check", "true", cwd=a).rc == 0
    b = clones("b")
    problems = shape_problems(_json(a, "sync"), SyncReport, "a: sync")
    problems += shape_problems(_json(b, "sync"), SyncReport, "b: sync")
    listed = _json(b, "trust")
    assert isinstance(listed, list) and len(listed) == 1
    problems += shape_problems(listed, list[trust.Untrusted], "trust")
    problems += shape_problems(_json(b, "trust", "ta"), list[trust.Untrusted], "trust ta")
    problems += shape_problems(_json(b, "trust", "--approved"), list[trust.Approval], "trust --approved")
    assert problems == [], "\n".join(problems)
