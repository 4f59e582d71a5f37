"""`session start`: open a session, then what it does before new work: the health check (the state's
init_command) and the recovery of tasks an interrupted session left in progress,
by the harness decision matrix:

| uncommitted? | task commits? | checkpoints? | action                                                   |
|--------------|---------------|--------------|----------------------------------------------------------|
| no           | no            | none         | fail [SESSION_TIMEOUT] No progress detected              |
| no           | no            | some         | resume if the files are as at the last checkpoint,       |
|              |               |              | else fail (work lost)                                    |
| no           | yes           | any          | validate: complete, or fail (rolled back)                |
| yes          | no            | any          | commit, validate: complete, or fail (rolled back)        |
| yes          | yes           | any          | commit, validate: complete, or fail (rolled back)        |

Every decision is logged as `RECOVERY [id] action="..." reason="..."`; a failed
attempt is saved under refs/harness/attempts/ first, so nothing is lost.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

from git_handoff.core import selection
from git_handoff.core.errors import HandoffError, Negative
from git_handoff.core.model import Task, now_iso
from git_handoff.core.record_schemas import SessionRecord
from git_handoff.infra import rollback, task_commands, worktree
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import attempts, sessions, work
from git_handoff.ops.payloads import Health, Recovery, SessionStarted
from git_handoff.state import claim_journal, identity, notes, trust
from git_handoff.state.claim_checks import expires, lease_of
from git_handoff.state.session_records import read_session
from git_handoff.state.store import StateStore, Tx
from git_handoff.state.this_clone import declared_worker, worker_identity

HEALTH_TIMEOUT = 300
CHECKPOINT_TREE = "checkpoint_tree"  # task extra: the work tree's tree at the last checkpoint


# -- session start -----------------------------------------------------------------------


def start(store: StateStore, worker: str | None = None) -> SessionStarted:
    """`session start`: open a session, run the health check and the recovery protocol.

    Returns the session record plus `recovery` (one entry per recovered task) and `health`.
    """
    require_trusted_init(store)  # before the session is opened: a refusal (exit 2) leaves the state as it was
    record = sessions.begin(store, worker=worker)
    health = health_check(store, record)
    actions = recover(store, record)
    out = cast(SessionStarted, dict(read_session(store.snapshot(), record["session"]) or record))  # + health, recovery
    out["health"] = health
    out["recovery"] = actions
    return out


def require_trusted_init(store: StateStore) -> None:
    """UsageError (exit 2) when the state's init command is one this clone has not trusted
    (fetched from a remote and not approved with `git handoff trust`)."""
    command = store.snapshot().config().init_command
    if command:
        trust.require_trusted(store.repo, command, "init command", trust.INIT_PLACE)


# -- health check ------------------------------------------------------------------------


def health_check(store: StateStore, record: SessionRecord) -> Health | None:
    """Run the state's init_command; an ENV_SETUP failure is retried once, then the
    session is closed and Negative (exit 1) raised."""
    cfg = store.snapshot().config()
    command = cfg.init_command
    if not command:
        return None
    repo = store.repo
    trust.require_trusted(repo, command, "init command", trust.INIT_PLACE)
    result = None
    for attempt in (1, 2):
        result = task_commands.run_command(command, repo.root(), HEALTH_TIMEOUT)
        if result.ok:
            _log(store, "INIT", f"Environment health check: PASS ({'retry' if attempt == 2 else 'first try'})")
            return {"ok": True, "attempts": attempt}
        _log(store, "ERROR", f"Environment health check failed (try {attempt}/2): {_summary(result)}",
             category="ENV_SETUP")
    sessions.end(store)
    raise Negative(f"[ENV_SETUP] the health check `{command}` failed twice ({_summary(result)}); "
                   f"session {record['session']} stopped: fix the environment, then start a new session")


def _summary(result: Any) -> str:
    summary = getattr(result, "summary", None)
    if callable(summary):
        return str(summary())
    tail = (getattr(result, "output_tail", "") or "").strip().splitlines()
    return f"exit {getattr(result, 'exit_code', '?')}" + (f": {tail[-1]}" if tail else "")


def _log(store: StateStore, kind: str, text: str, task: str | None = None, category: str | None = None) -> None:
    def apply(tx: Tx) -> None:
        tx.log(kind, text, task=task, category=category)

    store.transact(apply)


# -- facts from git ------------------------------------------------------------------------


def task_commits(repo: Repo, task: Task, base: str | None = None) -> list[str]:
    """Commits since the claim's base (`base`, else the task's started_at_commit) not
    noted as another task's work by a note of this clone's own: a note that came from a
    remote (or went to one) does not take a commit away from the claim it was made under."""
    base = base or task.started_at_commit
    head = repo.head()
    if not base or not head or base == head or not repo.has_object(base):
        return []
    proc = repo.git("rev-list", f"{base}..{head}", check=False)
    commits = proc.stdout.decode().split() if proc.returncode == 0 else []
    out = []
    fetched = notes.fetched_notes_trees(repo) if commits else []
    for commit in commits:
        text = notes.read_local_note(repo, commit, fetched) or ""
        owner = next((line[6:].strip() for line in text.splitlines() if line.startswith("task: ")), None)
        if owner is None or owner == task.id:
            out.append(commit)
    return out


# -- which tasks -------------------------------------------------------------------------


def _here(task: Task, repo: Repo) -> bool:
    """Claimed by this clone (its seal verifies: git_handoff.state.identity) in this very
    worktree. A path that does not exist here, a worker name or a worktree path copied
    into a fetched record is no evidence: recovery commits, resets and cleans, so it acts
    only on this clone's own claims. Claims made elsewhere are the lease's business."""
    if not identity.claim_is_mine(repo, task):
        return False
    where = task.claim.worktree
    if not where or repo.workdir is None:
        return False
    try:
        return Path(where).resolve() == repo.workdir.resolve()
    except (OSError, ValueError):
        return False


def left_behind(tasks: dict[str, Task], repo: Repo, worker: str, mode: str) -> list[Task]:
    """In-progress tasks this clone claimed in this worktree and left behind (concurrent
    mode, or a worker named by HANDOFF_WORKER: only this worker's, or those whose lease
    expired): the claims this worktree's journal holds (git_handoff.state.claim_journal) that
    the state still shows as they were."""
    stamp = now_iso()
    out = []
    for entry in claim_journal.entries(repo):
        t = tasks.get(entry.task)
        if t is None or not entry.matches(t) or not _here(t, repo):
            continue
        # a worker named by its environment leaves other workers' live claims alone, in any mode
        if ((mode == "concurrent" or declared_worker() is not None)
                and not (t.claimed_by == worker or selection.lease_expired(t, stamp))):
            continue
        out.append(t)
    return out


def not_journalled(tasks: dict[str, Task], repo: Repo) -> list[Task]:
    """In-progress claims sealed by this clone for this worktree that its journal does not
    hold: made by an older version, or a claim this clone published and ended that came
    back from a remote. Nothing local proves either is current: they are never recovered."""
    out = []
    for t in tasks.values():
        if t.status == "in_progress" and _here(t, repo) and claim_journal.of_claim(repo, t) is None:
            out.append(t)
    return out


# -- the matrix --------------------------------------------------------------------------


def decide(dirty: bool, commits: bool, checkpoints: bool) -> str:
    """The matrix row: 'fail-no-progress', 'check-checkpoints', 'validate' or 'commit-validate'."""
    if dirty:
        return "commit-validate"
    if commits:
        return "validate"
    return "check-checkpoints" if checkpoints else "fail-no-progress"


def recover(store: StateStore, record: SessionRecord) -> list[Recovery]:
    repo = store.repo
    snap = store.snapshot()
    worker = str(record.get("worker") or worker_identity(repo))
    actions: list[Recovery] = []
    tasks = snap.tasks()
    for entry in claim_journal.entries(repo):
        shown = tasks.get(entry.task)
        if shown is None or not entry.matches(shown):
            # the claim ended or was replaced (taken over after its lease, lost to another
            # machine's claim): nothing left to recover here, and never again
            rollback.drop_snapshot_ref(repo, entry.snapshot)
            claim_journal.drop(repo, entry.task)
    for task in not_journalled(tasks, repo):
        reason = (f"this worktree keeps no journal of this claim (claimed by an older git handoff, or a claim record "
                  f"that came back from a remote): not recovered, the work tree is left as it is; finish it with "
                  f"`git handoff done {task.id}` or `git handoff fail {task.id} --reason TEXT`, or "
                  f"`git handoff release {task.id}`")
        _log(store, "RECOVERY", f'action="skip" reason="{reason}"', task=task.id)
        actions.append({"task": task.id, "action": "skip", "reason": reason})
    for task in left_behind(tasks, repo, worker, snap.config().mode):
        try:
            actions.append(recover_task(store, task, worker))
        except HandoffError as exc:
            reason = exc.message.replace('"', "'")
            _log(store, "RECOVERY", f'action="skip" reason="{reason}"', task=task.id)
            actions.append({"task": task.id, "action": "skip", "reason": exc.message})
    return actions


def recover_task(store: StateStore, task: Task, worker: str) -> Recovery:
    repo = store.repo
    local = claim_journal.of_claim(repo, task)
    if local is None:
        raise Negative(f"task {task.id}: this worktree keeps no journal of this claim")
    dirty = rollback.uncommitted_since_claim(repo, local.snapshot)
    commits = task_commits(repo, task, local.base)
    row = decide(dirty, bool(commits), bool(task.checkpoints))
    facts = (f"uncommitted={'yes' if dirty else 'no'} task_commits={len(commits)} "
             f"checkpoints={len(task.checkpoints)}")
    if row == "fail-no-progress":
        attempts.fail(store, task.id, reason="No progress detected", category="SESSION_TIMEOUT", force=True)
        return _done(store, task, "fail", f"No progress detected ({facts})")
    if row == "check-checkpoints":
        recorded = local.checkpoint_tree  # what this worktree saw at its last checkpoint, not a fetched tree
        current = worktree.current_tree(repo)
        if recorded and recorded == current:
            _resume(store, task, worker)
            last = task.checkpoints[-1]
            return _done(store, task, "resume",
                         f"files match checkpoint step={last.get('step')}/{last.get('total') or '?'} ({facts})")
        why = ("the files differ from the last checkpoint: work was lost" if recorded
               else "the last checkpoint recorded no file state to verify: work was lost")
        attempts.fail(store, task.id, reason=f"Checkpoints claim progress but {why}", category="SESSION_TIMEOUT",
                  force=True)
        return _done(store, task, "fail", f"{why} ({facts})")
    if row == "commit-validate":
        repo.git("add", "-A", "--", ".", cwd=repo.root())
        repo.git("commit", "--no-verify", "-q", "-m",
                 f"{task.id}: {task.title} (work recovered by session {store.session})",
                 cwd=repo.root())
    try:
        work.done(store, task.id, force=True)
    except Negative as exc:
        return _done(store, task, "fail", f"validation failed, rolled back ({facts}): {exc.message}")
    what = "committed the uncommitted changes, validation passed" if row == "commit-validate" else "validation passed"
    return _done(store, task, "complete", f"{what} ({facts})")


def _resume(store: StateStore, task: Task, worker: str) -> None:
    repo = store.repo
    seconds = lease_of(task)

    def apply(tx: Tx) -> None:
        current = tx.require_task(task.id)
        if current.status != "in_progress" or claim_journal.of_claim(repo, current) is None:
            raise Negative(f"task {task.id} is no longer in progress (or no longer this worktree's claim)")
        worktree = str(repo.workdir) if repo.workdir else None
        claimed_at = current.claim.claimed_at
        new = dataclasses.replace(
            current, claimed_by=worker, lease_expires_at=expires(seconds)
        ).with_extra(worktree=worktree, claim_session=tx.session, branch=repo.head_branch(),
                     clone=identity.clone_id(repo),
                     clone_seal=identity.claim_seal(repo, current.id, claimed_at, worktree,
                                                    current.started_at_commit, worker))
        tx.put_task(new)

    store.transact(apply)


def _done(store: StateStore, task: Task, action: str, reason: str) -> Recovery:
    shown = reason.replace('"', "'")
    _log(store, "RECOVERY", f'action="{action}" reason="{shown}"', task=task.id)
    return {"task": task.id, "action": action, "reason": reason}
