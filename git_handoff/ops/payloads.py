"""What the use cases answer: the objects every adapter prints with `--json` (the CLI)
or returns (the MCP tools). These shapes are the JSON contract of the commands:
tests/ops/test_payloads.py runs each command with `--json` on a real repository and checks
its output against the type named here (keys, required and optional, value types).

Records that are stored as they are shown (a session, a handoff document, a dispatch run,
the relay) keep their TypedDicts in git_handoff.core.record_schemas; what a lower layer answers
as it is shown keeps its TypedDict there too (`sync`: ops.sync.SyncReport; `trust`:
state.trust.Untrusted and Approval, state.writers.PendingWriter; an error:
core.errors.ErrorJson). An answer the CLI makes itself, with no use case behind it
(`completion`, `demo`, `serve`, `hook`, `trust --writer`), is typed in its cli/ module.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, NotRequired, TypedDict, cast

from git_handoff.core.model import Config, ShownStatus, Status, Task
from git_handoff.core.record_schemas import Decision, FileChange, HandoffDoc, SessionRecord
from git_handoff.core.serialization import task_to_json

# -- tasks ---------------------------------------------------------------------------------


class Validation(TypedDict):
    command: str | None
    timeout_seconds: int


class OnFailure(TypedDict):
    cleanup: str | None


class Checkpoint(TypedDict, total=False):
    step: int | None
    total: int | None
    description: str
    timestamp: str | None


# "from" is a keyword: the functional form
Reopened = TypedDict("Reopened", {"at": str, "from": str, "reason": str})


class TaskJson(TypedDict):
    """A task as the state stores it (`serialization.task_to_json`): the harness fields, the
    bookkeeping, then the claim and completion fields while they are set."""

    id: str
    title: str
    status: Status
    priority: str
    depends_on: list[str]
    attempts: int
    max_attempts: int
    started_at_commit: str | None
    validation: Validation
    on_failure: OnFailure
    error_log: list[str]
    checkpoints: list[Checkpoint]
    completed_at: str | None
    claimed_by: str | None
    lease_expires_at: str | None
    created_at: str
    spec_ref: str | None
    tokens: int  # its share of its sessions' agents' tokens (ops/usage.py)
    order: int
    updated_at: str
    # the claim (git_handoff.core.model.CLAIM_FIELDS) and what a claim leaves behind
    worktree: NotRequired[str | None]
    branch: NotRequired[str | None]
    claimed_at: NotRequired[str | None]
    lease_seconds: NotRequired[int | None]
    claim_session: NotRequired[int | None]
    claim_snapshot: NotRequired[str | None]
    clone: NotRequired[str | None]
    clone_seal: NotRequired[str | None]
    checkpoint_tree: NotRequired[str | None]
    completed_commit: NotRequired[str | None]
    completed_session: NotRequired[int | None]
    work_ref: NotRequired[str | None]  # refs/harness/work/<id>/<n>: the work `done` published
    work_withheld: NotRequired[str | None]  # why `done` did not publish it (a secret in its commits)
    integrated_commit: NotRequired[str | None]  # where the work landed on the target
    uncommitted_at_completion: NotRequired[bool | list[str] | None]
    failed_at: NotRequired[str | None]
    last_attempt_ref: NotRequired[str | None]
    reopened: NotRequired[list[Reopened]]
    hlc: NotRequired[str]
    field_clock: NotRequired[dict[str, list[str]]]


def task_json(task: Task) -> TaskJson:
    """`task_to_json(task)`, typed: it writes the fields TaskJson names (and any field a
    newer version added, kept as it came)."""
    return cast(TaskJson, task_to_json(task))


class TaskView(TaskJson):
    """`add`, `edit`, `show`, one entry of `list` and `import`: the task and whether a
    dependency holds it back."""

    blocked: bool
    unapproved_writer: NotRequired[str]  # with handoff.allowedSigners: who wrote it last, not approved here


# -- views ---------------------------------------------------------------------------------


class ConfigView(TypedDict):
    mode: str
    max_tasks_per_session: int
    max_sessions: int
    spec_ref: str | None
    init_command: str | None


def config_view(config: Config) -> ConfigView:
    return cast(ConfigView, dataclasses.asdict(config))  # the dataclass's fields, as ConfigView names them


class StatusRow(TypedDict):
    id: str
    title: str
    status: ShownStatus
    attempts: int
    max_attempts: int
    priority: str
    claimed_by: str | None
    unapproved_writer: NotRequired[str]
    # where a finished task's work is (core/selection.work_state; absent: nothing to say)
    work: NotRequired[Literal["landed", "waiting", "withheld", "sent_back"]]
    integrated_commit: NotRequired[str]  # with "landed": the target's commit it landed in
    work_ref: NotRequired[str]  # with "waiting": refs/harness/work/<id>/<n>
    # what was charged to it (all three, where one is not 0): `show`'s fields of the same names
    tokens: NotRequired[int]
    cost_micro_usd: NotRequired[int]
    held_seconds: NotRequired[int]


class WorkCounts(TypedDict):
    """`status`'s "work": how many tasks' work is in each place (core/selection.work_state)."""

    landed: int
    waiting: int
    withheld: int
    sent_back: int


class UsageTotal(TypedDict):
    """What every session's agent used, as the session records say, summed (ops/usage.py)."""

    tokens: int
    input_tokens: int
    output_tokens: int
    turns: int
    cost_usd: float | None
    sessions: int  # the sessions that recorded a use


class StatusView(TypedDict):
    """`status`."""

    counts: dict[str, int]
    tasks: list[StatusRow]
    log: list[str]
    session_count: int
    last_session: str | None
    config: ConfigView
    state_commit: str
    notes: list[str]
    usage: UsageTotal  # what the sessions' agents used (ops/usage.py)
    work: WorkCounts


class LogLine(TypedDict):
    """One line of `log`."""

    line: str
    timestamp: str | None
    session: int | None
    type: str
    task: str | None
    commit: str | None


class GraphNode(TypedDict):
    id: str
    title: str
    status: Status


class GraphView(TypedDict):
    """`graph --json`: every task, and every dependency as [dependency, task]."""

    nodes: list[GraphNode]
    edges: list[list[str]]


class InitResult(TypedDict):
    """`init`."""

    created: bool
    changed: list[str]
    config: ConfigView


# -- work ----------------------------------------------------------------------------------


class CheckRun(TypedDict):
    """A validation command's run (`task_commands.RunResult.to_json`)."""

    ok: bool
    category: str | None
    exit_code: int | None
    timed_out: bool
    output_tail: str
    seconds: float


class VerifyView(CheckRun):
    """`verify`."""

    task: str


class SavedAttempt(TypedDict):
    """What saving a failed attempt under refs/harness/attempts/ gave."""

    attempt: int
    ref: str
    commit: str
    files: list[FileChange]
    base: str
    head: str
    local_only: bool  # its files hold a secret: kept under refs/harness/local/attempts/, never pushed
    secret_files: dict[str, list[str]]  # path -> the kinds of secret found in it


class Attempt(TypedDict):
    """One entry of `attempts`: a saved attempt, as its commit's record tells it."""

    attempt: int
    ref: str
    commit: str
    time: str | None
    category: str | None
    reason: str | None
    base: str | None
    head: str | None
    session: int | None
    worker: str | None
    files: list[FileChange]
    index: str | None
    claim_snapshot: str | None
    unreadable: str | None
    local_only: bool  # kept on this machine only (refs/harness/local/attempts/): its files hold a secret


class FailOutcome(TypedDict):
    """What `fail` (and a failing `done`) reports."""

    task: dict[str, Any]
    category: str
    reason: str
    attempt: int | None
    attempt_ref: str | None
    attempt_commit: str | None
    attempt_local_only: bool  # the attempt's files hold a secret: saved where no sync pushes it
    secret_files: dict[str, list[str]]  # path -> the kinds of secret found in it
    files: list[FileChange]
    base: str | None
    rolled_back: bool
    snapshot: str | None  # the claim's snapshot commit the rollback returned to
    snapshot_missing: bool
    no_local_claim: bool  # no rollback: this worktree keeps no journal of the claim (claim_journal)
    operation_ended: str | None  # the rebase/merge/... `--force` ended
    cleanup: dict[str, Any] | None
    validation: dict[str, Any] | None


class Restored(TypedDict):
    """`restore`."""

    task: str
    attempt: int
    commit: str
    restored: list[str]
    deleted: list[str]
    index: bool
    ref: str  # the attempt's ref
    local_only: bool  # restored from refs/harness/local/attempts/: its files hold a secret


# -- rm, rename, reopen --------------------------------------------------------------------


class Removed(TypedDict):
    """`rm`."""

    removed: TaskJson
    detached: list[str]
    attempts_kept: NotRequired[list[str]]  # set once the transaction committed


class Renamed(TypedDict):
    """`rename`."""

    task: TaskJson
    old: str
    dependents: list[str]
    attempts: NotRequired[list[str]]  # set once the transaction committed
    notes: NotRequired[int]


class ReopenResult(TypedDict):
    """`reopen`."""

    task: TaskJson
    was: str
    also_reopened: list[str]


# -- sessions and handoff documents --------------------------------------------------------


class SessionShown(SessionRecord, total=False):
    """`session show`: the record, whether it is open here, and the other clones that
    numbered a session alike."""

    open_here: bool
    also: list[str | None]


class Health(TypedDict):
    ok: bool
    attempts: int


class Recovery(TypedDict):
    """One task `session start` recovered (or skipped)."""

    task: str
    action: str
    reason: str


class SessionStarted(SessionRecord, total=False):
    """`session start`: the record, the health check's answer and the recovery."""

    health: Health | None
    recovery: list[Recovery]


class SessionRow(TypedDict):
    """One entry of `session list`."""

    session: int
    clone: str | None
    here: bool
    worker: str | None
    started_at: str | None
    ended_at: str | None
    completed: int


class Blocker(TypedDict):
    """`blocker`."""

    text: str
    at: str


class DocRow(TypedDict):
    """One entry of `doc list`."""

    session: int
    clone: str | None
    written_at: str | None
    trigger: str | None
    archived: bool
    accepted_by: int | None
    completed: int
    files_changed: int
    unapproved_writer: NotRequired[str]  # with handoff.allowedSigners: who wrote it last, not approved here


class ShownDoc(HandoffDoc, total=False):
    """What `doc show` answers: the document, and who wrote it last when that writer is
    not approved here (handoff.allowedSigners)."""

    unapproved_writer: str


class AckEntry(TypedDict):
    """The ACK a session recorded."""

    status: Literal["accepted", "failed"]
    at: str
    reason: str | None
    handoff: int | None


class AckAnswer(AckEntry):
    """`ack`."""

    session: int


class PromptView(TypedDict):
    """`prompt`."""

    prompt: str
    bytes: int


# -- relay ---------------------------------------------------------------------------------


class RelaySummary(TypedDict):
    """`relay` once it stopped."""

    sessions: int
    reason: str
    completed: bool


__all__ = [
    "AckAnswer", "AckEntry", "Attempt", "Blocker", "CheckRun", "Checkpoint",
    "ConfigView", "Decision", "DocRow",
    "FailOutcome", "FileChange", "GraphNode", "GraphView", "HandoffDoc", "Health", "InitResult",
    "LogLine", "OnFailure", "PromptView", "Recovery", "RelaySummary", "Removed", "Renamed",
    "ReopenResult", "Reopened", "Restored", "SavedAttempt", "SessionRow", "SessionShown", "ShownDoc",
    "SessionStarted", "StatusRow", "StatusView", "TaskJson", "TaskView", "Validation", "VerifyView", "config_view",
    "task_json",
]
