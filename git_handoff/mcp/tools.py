"""The verbs as MCP tools: one table of tools (name, arguments, help), argument
checks, and `call()`, which runs one tool and answers exactly what the CLI's
`--json` would print, with the exit code the CLI would exit with.

An adapter like the CLI: it parses the arguments, calls the same core functions
the CLI calls, and maps errors to exit codes and JSON through the CLI's own mapping
(`errors.failure`). It does not import the MCP SDK (mcp/server.py does), so it is
cheap to test and to measure.

Every call opens the state through the same door as one CLI command
(ops/open_state.py): notices taken, an interrupted rollback finished, the session
read again, the state ref read again, the lock taken for each transaction.
"""

from __future__ import annotations

import json
import os
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from git_handoff.core import display
from git_handoff.core.errors import HandoffError, UsageError, failure
from git_handoff.core.model import CATEGORIES, MAX_COUNT, PRIORITIES, SHOWN_STATUSES, parse_duration
from git_handoff.core.serialization import task_to_json
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import attempts, claim, handoff, prompt, sessions, tasks, views, work
from git_handoff.ops.open_state import Opened, open_state
from git_handoff.state.store import StateStore

TRACEBACK_HINT = "set GIT_HANDOFF_DEBUG=1 for the traceback on stderr"
JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "boolean": bool, "array": list}
ArgValue = str | int | bool | list[str]  # what check_args lets through: JSON_TYPES' values


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str  # a JSON Schema type: string, integer, boolean, array (of strings)
    help: str
    required: bool = False
    choices: tuple[str, ...] = ()
    minimum: int | None = None

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "description": self.help}
        if self.kind == "array":
            out["items"] = {"type": "string"}
        if self.choices:
            out["enum"] = list(self.choices)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        return out


@dataclass
class Call:
    """One tool call: its checked arguments, a fresh store, and warnings for the caller."""

    store: StateStore
    args: dict[str, ArgValue]
    warnings: list[str] = field(default_factory=list)

    # Typed reads of the checked arguments (check_args held each to its Arg's JSON type,
    # so a read of another type is a mistake in this table, not the client's).

    def _typed(self, name: str, want: type) -> object:
        value = self.args.get(name)
        if value is not None and not _is_a(value, want):
            raise TypeError(f"argument {name!r} is declared as another type than {want.__name__}")
        return value

    def text(self, name: str) -> str | None:
        value = self._typed(name, str)
        return value if isinstance(value, str) else None

    def required(self, name: str) -> str:
        """A required string argument (check_args refused a call without it)."""
        value = self.text(name)
        if value is None:
            raise TypeError(f"argument {name!r} is not declared required")
        return value

    def number(self, name: str) -> int | None:
        value = self._typed(name, int)
        return value if isinstance(value, int) else None

    def flag(self, name: str) -> bool:
        return self._typed(name, bool) is True

    def texts(self, name: str) -> tuple[str, ...]:
        value = self._typed(name, list)
        return tuple(str(v) for v in value) if isinstance(value, list) else ()

    def lease(self) -> int | None:
        text = self.text("lease")
        return parse_duration(text) if text is not None else None

@dataclass(frozen=True)
class Tool:
    name: str
    help: str
    args: tuple[Arg, ...]
    run: Callable[[Call], Any]
    read_only: bool = False
    destructive: bool = False

    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {a.name: a.schema() for a in self.args},
            "required": [a.name for a in self.args if a.required],
            "additionalProperties": False,
        }


@dataclass
class Answer:
    """What one tool call answers: the CLI's `--json` document and its exit code."""

    value: Any
    exit_code: int = 0
    error: str | None = None  # the CLI's `error: ...` line, without the prefix
    warnings: list[str] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return self.exit_code != 0

    def text(self) -> str:
        """The JSON document, every character git_handoff.core.display escapes (C1 controls,
        bidi formatting, DEL, lone surrogates: the ones JSON itself lets through) written
        as a JSON `\\uXXXX` escape: the same value, with nothing in it for the agent's
        terminal or a person reading the transcript to act on."""
        text = json.dumps(self.value, ensure_ascii=False, default=str)
        return display.UNSEEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# -- the tools ------------------------------------------------------------------------

TASK_ID = Arg("id", "string", "The task's id.", required=True)
FORCE = Arg("force", "boolean",
            "Act even where the claim (another worktree's or another worker's), branch or mode says no (as --force).")


def _add(c: Call) -> Any:
    task = tasks.add(c.store, title=c.required("title"), task_id=c.text("id"), priority=c.text("priority") or "P1",
                     after=c.texts("after"), check=c.text("check"), timeout=c.number("timeout"),
                     max_attempts=c.number("max_attempts"), cleanup=c.text("cleanup"), spec=c.text("spec"))
    return views.view(task)


def _claim(c: Call) -> Any:
    return task_to_json(claim.claim(c.store, c.text("id"), worker=c.text("worker"), lease=c.lease(),
                                    force=c.flag("force"), remote=c.text("remote")))


def _renew(c: Call) -> Any:
    return task_to_json(work.renew(c.store, c.required("id"), lease=c.lease(), force=c.flag("force")))


def _release(c: Call) -> Any:
    return task_to_json(work.release(c.store, c.required("id"), force=c.flag("force")))


def _checkpoint(c: Call) -> Any:
    task = work.checkpoint(c.store, c.required("id"), c.required("message"), c.number("step"), c.number("of"),
                           force=c.flag("force"))
    return task_to_json(task)


def _verify(c: Call) -> Any:
    result = work.verify(c.store, c.required("id"))
    if not result.ok:
        raise work.verify_failure(c.required("id"), result)
    return work.verify_view(c.required("id"), result)


def _done(c: Call) -> Any:
    return task_to_json(work.done(c.store, c.required("id"), force=c.flag("force")))


def _fail(c: Call) -> Any:
    outcome = attempts.fail(c.store, c.required("id"), reason=c.required("reason"),
                            category=c.text("category") or "TASK_EXEC",
                        keep_worktree=c.flag("keep_worktree"), force=c.flag("force"))
    return outcome


def _log(c: Call) -> Any:
    entries = views.log(c.store, limit=c.number("n"), task=c.text("task"), session=c.number("session"),
                        kind=c.text("type"))
    return [views.log_view(e) for e in entries]


TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool("status", "Counts by status (blocked computed), every task, the last 5 log lines, sessions "
         "(`git handoff status --json`).", (), lambda c: views.status(c.store), read_only=True),
    Tool("next", "The task `claim` would take; exit 1 when none is eligible (`git handoff next --json`).", (),
         lambda c: views.view(views.next_task(c.store.snapshot())), read_only=True),
    Tool("list", "List tasks, optionally by status or only those `claim` could take now (`git handoff list --json`).",
         (Arg("status", "string", "Only tasks with this status.", choices=SHOWN_STATUSES),
          Arg("ready", "boolean", "Only tasks `claim` could take now, in the order it would.")),
         lambda c: views.list_view(c.store.snapshot(), status=c.text("status"), ready=c.flag("ready")),
         read_only=True),
    Tool("show", "One task whole (`git handoff show ID --json`).", (TASK_ID,),
         lambda c: views.show_view(c.store.snapshot(), c.required("id")), read_only=True),
    Tool("add", "Add a task; answers the task (`git handoff add TITLE --json`).",
         (Arg("title", "string", "What the task is.", required=True),
          Arg("id", "string", "The task's id [default: assigned, unique across machines]."),
          Arg("priority", "string", "P0 is taken first [default: P1].", choices=PRIORITIES),
          Arg("after", "array", "Ids of the tasks this one depends on."),
          Arg("check", "string", "Validation command (sh -c, at the worktree root); `done` requires it to pass."),
          Arg("timeout", "integer", "Seconds the check may run [default: 300].", minimum=1),
          Arg("max_attempts", "integer", "Failed attempts before the task fails for good [default: 3].", minimum=1),
          Arg("cleanup", "string", "Command run after a failed attempt is rolled back."),
          Arg("spec", "string", "Where the task's specification lives.")), _add),
    Tool("claim", "Take the next eligible task (or `id`) for this worktree, atomically. Exit 1 when nothing is "
         "eligible, 3 on contention (`git handoff claim --json`).",
         (Arg("id", "string", "The task to claim [default: the next eligible one]."),
          Arg("worker", "string",
              "Who claims [default: $HANDOFF_WORKER, else git config handoff.worker, else user@host:<worktree>]."),
          Arg("lease", "string", "How long the claim holds unrenewed: 90s, 30m, 2h [default: 30m]."),
          Arg("remote", "string", "Make the claim hold across machines through this remote."), FORCE), _claim),
    Tool("renew", "Push the lease of a claimed task forward (`git handoff renew ID --json`).",
         (TASK_ID, Arg("lease", "string", "New lease from now: 90s, 30m, 2h [default: the claim's]."), FORCE), _renew),
    Tool("release", "Give a claimed task back: pending again, no attempt counted, work tree untouched.",
         (TASK_ID, FORCE), _release),
    Tool("checkpoint", "Record progress on a claimed task; also renews its lease (`git handoff checkpoint ID MSG`).",
         (TASK_ID, Arg("message", "string", "What was done.", required=True),
          Arg("step", "integer", "Step number [default: next].", minimum=1),
          Arg("of", "integer", "Number of steps.", minimum=1), FORCE), _checkpoint),
    Tool("verify", "Run the task's validation command under its timeout; exit 1 when it fails. Changes nothing.",
         (TASK_ID,), _verify),
    Tool("done", "Complete a claimed task: its check must pass. A failing check fails the task exactly as `fail` "
         "does (attempt saved, work tree rolled back) and answers exit 1.", (TASK_ID, FORCE), _done,
         destructive=True),
    Tool("fail", "Fail a claimed task: count the attempt, save its work under refs/harness/attempts/ID/N, roll the "
         "work tree back to where the claim started, then run the task's cleanup.",
         (TASK_ID, Arg("reason", "string", "What went wrong (goes to the error log).", required=True),
          Arg("category", "string", "The error category [default: TASK_EXEC].", choices=CATEGORIES),
          Arg("keep_worktree", "boolean", "Save the attempt but do not roll the work tree back."), FORCE), _fail,
         destructive=True),
    Tool("attempts", "The saved attempts of a task: number, time, reason, files.", (TASK_ID,),
         lambda c: attempts.attempts(c.store, c.required("id")), read_only=True),
    Tool("decide", "Record a decision of this session for the handoff document.",
         (Arg("what", "string", "What was decided.", required=True),
          Arg("why", "string", "Why it was chosen (a fact for the next session).", required=True)),
         lambda c: sessions.decide(c.store, c.required("what"), c.required("why"))),
    Tool("blocker", "Record a blocker found in this session for the handoff document.",
         (Arg("text", "string", "The blocker.", required=True),),
         lambda c: sessions.blocker(c.store, c.required("text"))),
    Tool("doc_write", "Write (or rewrite) this session's facts-only handoff document from git and the state.", (),
         lambda c: handoff.write_doc(c.store, trigger="manual")),
    Tool("doc_show", "The handoff document of session `number` (default: the latest).",
         (Arg("number", "integer", "The session.", minimum=0),),
         lambda c: handoff.show_doc(c.store, c.number("number")), read_only=True),
    Tool("prompt", "The next session's prompt (Markdown, under 10 KB).", (),
         lambda c: prompt.prompt_view(c.store), read_only=True),
    Tool("ack", "Acknowledge the session's prompt and the pending handoff document: the first act of a session.",
         (Arg("failed", "string", "Reject the handoff instead: why the facts do not match."),),
         lambda c: handoff.ack(c.store, failed=c.text("failed"))),
    Tool("log", "The progress log, oldest first (`git handoff log --json`).",
         (Arg("n", "integer", "Only the last N lines.", minimum=0),
          Arg("task", "string", "Only lines about this task."),
          Arg("session", "integer", "Only lines of this session.", minimum=0),
          Arg("type", "string", "Only lines of this type (ERROR, CHECKPOINT, ...).")), _log, read_only=True),
)}


# -- checking arguments -------------------------------------------------------------------


def check_args(tool: Tool, given: Any) -> dict[str, Any]:
    """The arguments of one call, checked against the tool's table; UsageError (exit 2) otherwise."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise UsageError(f"{tool.name}: arguments must be an object, not {type(given).__name__}")
    known = {a.name: a for a in tool.args}
    unknown = sorted(set(given) - set(known))
    if unknown:
        allowed = ", ".join(known) or "none"
        raise UsageError(f"{tool.name}: unknown argument {unknown[0]!r} (arguments: {allowed})")
    out: dict[str, Any] = {}
    for arg in tool.args:
        value = given.get(arg.name)
        if value is None:
            if arg.required:
                raise UsageError(f"{tool.name}: missing argument {arg.name!r}")
            continue
        out[arg.name] = _checked(tool.name, arg, value)
    return out


def _is_a(value: object, want: type) -> bool:
    # JSON has no separate bool among the numbers: true is not the integer 1 here.
    return isinstance(value, want) and not (want is int and isinstance(value, bool))


def _checked(tool: str, arg: Arg, value: Any) -> Any:
    if not _is_a(value, JSON_TYPES[arg.kind]):
        raise UsageError(f"{tool}: argument {arg.name!r} must be {'an' if arg.kind[0] in 'aei' else 'a'} "
                         f"{arg.kind}, not {json.dumps(value)[:40]}")
    if arg.kind == "array" and not all(isinstance(v, str) for v in value):
        raise UsageError(f"{tool}: argument {arg.name!r} must be an array of strings")
    if arg.kind == "string" and "\0" in value:
        raise UsageError(f"{tool}: argument {arg.name!r} must not contain a NUL character")
    if arg.choices and value not in arg.choices:
        raise UsageError(f"{tool}: invalid {arg.name} {value!r}: use one of {', '.join(arg.choices)}")
    if arg.minimum is not None and value < arg.minimum:
        raise UsageError(f"{tool}: argument {arg.name!r} must be at least {arg.minimum}, not {value}")
    if arg.kind == "integer" and value > MAX_COUNT:  # TOML's integer range, as on the command line
        raise UsageError(f"{tool}: argument {arg.name!r} must be at most {MAX_COUNT}, not {str(value)[:40]}")
    return value


# -- running a call ---------------------------------------------------------------------------


class Workspace:
    """The repository around the server's working directory, opened once and kept
    (like the CLI's, but for many calls); the state itself is read fresh per call."""

    def __init__(self, start: str | None = None) -> None:
        self.start = start or os.getcwd()
        self._repo: Repo | None = None
        self._opening = threading.Lock()

    def repo(self) -> Repo:
        with self._opening:
            if self._repo is None:
                self._repo = Repo.discover(self.start)  # NotARepository (exit 2) until there is one
            else:
                self._repo.reopen_if_repacked()
            return self._repo

    def open(self) -> Opened:
        """The state for one call, opened through the one door every adapter uses
        (ops/open_state.py): a notice queued for this clone is taken, an interrupted
        rollback finished, as at the start of a command."""
        return open_state(repo=self.repo())

    def store(self) -> StateStore:
        """The state alone, none of a command's start (warming up, tests)."""
        return StateStore(self.repo())

    def warm(self) -> None:
        """Open the repository and read the state once (pygit2's import, the first pack
        reads), so the agent's first call does not pay for them. Never fails."""
        try:
            store = self.store()
            if store.is_initialized():
                store.snapshot().tasks()
        except Exception:  # noqa: BLE001 - the real call reports whatever is wrong
            pass


def call(workspace: Workspace, name: str, arguments: Any = None) -> Answer:
    """Run tool `name`: the answer the CLI's `--json` gives, never an exception."""
    warnings: list[str] = []
    try:
        tool = TOOLS.get(name)
        if tool is None:
            raise UsageError(f"unknown tool {name!r}: use one of {', '.join(TOOLS)}")
        args = check_args(tool, arguments)
        opened = workspace.open()
        warnings.extend(opened.warnings)
        c = Call(opened.store, args, warnings)
        with work.syncing(c.store, name, warnings.append):  # as after the same CLI command: ops/work.py's table
            value = tool.run(c)
        return Answer(value, warnings=warnings)
    except Exception as exc:  # noqa: BLE001 - a tool answers; the server never dies of one call
        if not isinstance(exc, HandoffError) and os.environ.get("GIT_HANDOFF_DEBUG"):
            traceback.print_exc()
        shown = failure(exc, traceback_hint=TRACEBACK_HINT)
        return Answer(shown.payload, shown.exit_code, shown.line, warnings)
