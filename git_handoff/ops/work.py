"""The work cycle on a claimed task: renew, release, checkpoint, verify,
done. (`claim` is ops/claim.py; `fail`, attempts and restore are ops/attempts.py.)

State changes are single transactions on refs/harness/state. Anything touching
the work tree (running the check, saving an attempt, `git reset --hard`) happens
outside the transaction; the transaction that records its outcome re-checks that
the claim it acted on is still the same, so a concurrent takeover is never
overwritten.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import cast

from git_handoff.core.errors import Negative, UsageError
from git_handoff.core.model import CLAIM_FIELDS, CLAIM_KEPT_WHEN_DONE, Task, check_id, now_iso
from git_handoff.core.selection import lease_expired
from git_handoff.infra import rollback, task_commands, worktree
from git_handoff.ops import attempts, handoff, work_refs
from git_handoff.ops.payloads import VerifyView
from git_handoff.state import claim_index, claim_journal, notes, session_records, trust
from git_handoff.state.claim_checks import (
    claimed_task,
    current,
    expires,
    lease_of,
    require_branch,
    short,
)
from git_handoff.state.store import StateStore, Tx

# -- acting on a claimed task --------------------------------------------------------------


def renew(store: StateStore, task_id: str, *, lease: int | None = None, force: bool = False) -> Task:
    """Push the lease of a claimed task forward (default: by the length it was claimed with)."""
    seen = claimed_task(store, task_id, "renew", force)
    seconds = lease_of(seen, lease)

    def apply(tx: Tx) -> Task:
        task = current(tx, seen, "renewed")
        new = tx.put_task(dataclasses.replace(task,
                                              lease_expires_at=expires(seconds)).with_extra(lease_seconds=seconds))
        claim_index.carry(tx, [new])
        tx.log("LOCK", f"lease renewed until {new.lease_expires_at} (claimed_by={task.claimed_by})", task=task.id)
        return new

    return store.transact(apply)


def release(store: StateStore, task_id: str, *, force: bool = False) -> Task:
    """Give a claimed task back: pending again, no attempt counted, the work tree untouched."""
    seen = claimed_task(store, task_id, "release", force)

    def apply(tx: Tx) -> Task:
        task = current(tx, seen, "released")
        new = dataclasses.replace(
            task, status="pending", claimed_by=None, lease_expires_at=None, started_at_commit=None
        ).with_extra(**dict.fromkeys(CLAIM_FIELDS))
        new = tx.put_task(new)
        claim_index.carry(tx, [new])
        tx.log("LOCK", f"released (claimed_by={task.claimed_by}); back to pending", task=task.id)
        return new

    task = store.transact(apply)
    _forget_claim(store, seen)
    return task


def _forget_claim(store: StateStore, seen: Task) -> None:
    """The claim `seen` ended here: its journal entry and its snapshot's keep-alive ref go
    (the snapshot named by this worktree's own entry, never one a fetched record names)."""
    entry = claim_journal.of_claim(store.repo, seen)
    if entry is not None:
        rollback.drop_snapshot_ref(store.repo, entry.snapshot)
        claim_journal.drop(store.repo, seen.id)


def checkpoint(
    store: StateStore,
    task_id: str,
    message: str,
    step: int | None = None,
    total: int | None = None,
    *,
    force: bool = False,
) -> Task:
    """Record progress on a claimed task (and renew its lease)."""
    text = " ".join((message or "").split())
    if not text:
        raise UsageError("a checkpoint needs a non-empty message")
    for name, value in (("--step", step), ("--of", total)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{name} must be a whole number of at least 1, not {value!r}")
    if step is not None and total is not None and step > total:
        raise UsageError(f"--step {step} is beyond --of {total}")
    seen = claimed_task(store, task_id, "checkpoint", force)
    head_now = store.repo.head()
    tree = worktree.worktree_tree(store.repo, head_now) if head_now else None

    def apply(tx: Tx) -> Task:
        task = current(tx, seen, "checkpointed")
        last_step = task.checkpoints[-1].get("step") if task.checkpoints else 0
        n = step if step is not None else (last_step + 1 if isinstance(last_step, int) else len(task.checkpoints) + 1)
        of = total
        if of is None and task.checkpoints:
            last_total = task.checkpoints[-1].get("total")
            of = last_total if isinstance(last_total, int) and last_total >= n else None
        entry = {"step": n, "total": of, "description": text, "timestamp": now_iso()}
        new = dataclasses.replace(
            task,
            checkpoints=(*task.checkpoints, entry),
            lease_expires_at=expires(lease_of(task, None)),
        )
        new = new.with_extra(checkpoint_tree=tree)  # lets session recovery verify the files
        new = tx.put_task(new)
        claim_index.carry(tx, [new])
        shown = text.replace('"', "'")
        tx.log("CHECKPOINT", f'step={n}/{of if of is not None else "?"} "{shown}"', task=task.id)
        tx.after_commit("notes", lambda: notes.note_task_commits(store, new))
        return new

    new = store.transact(apply)
    if claim_journal.of_claim(store.repo, seen) is not None:
        claim_journal.update(store.repo, task_id, checkpoint_tree=tree)  # what recovery compares the files to
    return new


def _missing_check(task: Task) -> UsageError:
    return UsageError(
        f"[CONFIG] Missing validation.command for task {task.id}: nothing is completed without an objective "
        f"check; add one with `git handoff edit {task.id} --check CMD`"
    )


def _log_missing_check(store: StateStore, task: Task) -> None:
    """The harness logs the refusal, so `log --type ERROR` shows it; the task is unchanged."""
    def apply(tx: Tx) -> None:
        tx.log("ERROR", "Missing validation.command", task=task.id, category="CONFIG")

    store.transact(apply)


def _run_check(store: StateStore, task: Task) -> task_commands.RunResult:
    if not task.check:
        raise _missing_check(task)
    repo = store.repo
    trust.require_trusted(repo, task.check, "validation command", trust.place(task.id, "validation"))
    env = {"HANDOFF_TASK": task.id}
    return task_commands.run_command(task.check, repo.root(), task.timeout_seconds, env=env)


def verify(store: StateStore, task_id: str) -> task_commands.RunResult:
    """Run the task's validation command under its timeout; changes nothing."""
    check_id(task_id)
    task = store.snapshot().task(task_id)
    if task is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    return _run_check(store, task)


def verify_view(task_id: str, result: task_commands.RunResult) -> VerifyView:
    """`verify --json`."""
    return cast(VerifyView, {"task": task_id, **result.to_json()})  # to_json writes the fields of CheckRun


def verify_failure(task_id: str, result: task_commands.RunResult) -> Negative:
    """The exit-1 answer of a failing check, carrying `verify --json`'s object."""
    return Negative(f"[{result.category}] validation of {task_id} failed: {result.summary()}",
                    payload=verify_view(task_id, result))


def done(store: StateStore, task_id: str, *, force: bool = False) -> Task:
    """Complete a claimed task if its check passes; otherwise fail it exactly as `fail` and
    raise Negative (exit 1) carrying the failure."""
    seen, through = _to_complete(store, task_id, force)
    result = _run_check(store, seen)
    if not result.ok:
        raise _check_failed(store, task_id, seen, result, force)
    return _complete(store, seen, through)


def _to_complete(store: StateStore, task_id: str, force: bool) -> tuple[Task, str | None]:
    """The claimed task `done` may complete (refusals: no check, another branch, a cleanup
    not trusted here), and the remote it is completed through when its lease is over and
    another machine may have taken it over (else None)."""
    seen = claimed_task(store, task_id, "complete", force)
    through: str | None = None  # the remote a claim whose lease is over is completed through
    if not force and lease_expired(seen, now_iso()):
        # Lazy on purpose (import cost): fetch and merge only for a claim whose lease is over
        from git_handoff.ops import sync  # noqa: PLC0415

        through = sync.pull_if_taken_over(store, seen)
        if through is not None:
            seen = claimed_task(store, task_id, "complete", force)  # another machine may hold it now
    if not seen.check:
        _log_missing_check(store, seen)
        raise _missing_check(seen)
    require_branch(seen, store.repo, "complete", force)
    if seen.cleanup:
        trust.require_trusted(store.repo, seen.cleanup, "cleanup command", trust.place(seen.id, "cleanup"))
    return seen, through


def _check_failed(store: StateStore, task_id: str, seen: Task, result: task_commands.RunResult,
                  force: bool) -> Negative:
    """The task failed as `fail` fails it (its output redacted first), and the Negative
    (exit 1) that says so, carrying the failure."""
    # Lazy on purpose (import cost): only a failing check's output is scanned here
    from git_handoff.state import redaction  # noqa: PLC0415

    result = redaction.redact_run(store.repo, result)  # whole, before summary() cuts it
    category = result.category or "TEST_FAIL"
    reason = f"Validation failed: {result.summary()}"
    outcome = attempts.fail_claim(store, seen, reason=reason, category=category, force=True, end_operation=force,
                                  validation=result)
    return Negative(
        f"[{category}] validation of {task_id} failed ({result.summary()}); attempt "
        f"{outcome['attempt']} saved as {outcome['attempt_ref']}"
        + (" (on this machine only: its files hold a secret)" if outcome["attempt_local_only"] else "")
        + (f", rolled back to {short(outcome['base'])}" if outcome["rolled_back"] else ""),
        payload=outcome,
    )


def _complete(store: StateStore, seen: Task, through: str | None) -> Task:
    """Record the completion of `seen`, whose check passed, at HEAD: its work published
    under its own ref (withdrawn if the record fails), the claim forgotten."""
    head = store.repo.head()
    assert head is not None  # a claim needs a commit (claim_context)
    # The check ran on the work tree; what is not committed is not in `completed_commit`.
    uncommitted = worktree.dirty(store.repo)
    # the work, published under its own ref (ops/work_refs.py): on the target already
    # when the target is this very branch; never when its commits hold a secret (SPEC §11)
    withheld = work_refs.secret_in(store.repo, seen.started_at_commit, head)
    published = work_refs.publish(store.repo, seen, head) if withheld is None else None
    landed = work_refs.landed_here(store.repo, head)

    def apply(tx: Tx) -> Task:
        task = current(tx, seen, "completed")
        new = dataclasses.replace(
            task, status="completed", completed_at=now_iso(), lease_expires_at=None
        ).with_extra(
            completed_commit=head,
            work_ref=published,
            work_withheld=withheld,
            integrated_commit=landed,
            completed_session=tx.session,
            uncommitted_at_completion=uncommitted[:50] or None,
            **dict.fromkeys(k for k in CLAIM_FIELDS if k not in CLAIM_KEPT_WHEN_DONE),
        )
        new = tx.put_task(new)
        claim_index.carry(tx, [new])
        session_records.record_completion(tx, task.id)
        if uncommitted:
            tx.log("WARN", f"completed with {len(uncommitted)} uncommitted file(s), not in commit {short(head)}: "
                   + ", ".join(uncommitted[:5]), task=task.id)
        tx.log("Completed", f"(commit {short(head)})", task=task.id)  # landed or not: the field says
        if withheld is not None:
            tx.log("WARN", withheld, task=task.id)
        tx.after_commit("notes", lambda: notes.note_task_commits(store, seen, head=head, outcome="completed"))
        tx.after_commit("the tasks-per-session handoff document", lambda: handoff.after_done(store))
        return new

    try:
        task = _record_done(store, apply, through)
    except BaseException:
        if published is not None:
            work_refs.withdraw(store.repo, published, head)
        raise
    _forget_claim(store, seen)
    return task


def _record_done(store: StateStore, apply: Callable[[Tx], Task], through: str | None) -> Task:
    """The completion's transaction: here, or through the remote the claim was taken over on."""
    if through is None:
        task = store.transact(apply)
    else:
        # the completion and the task's claim ref move in one push, by compare-and-swap
        # against the claim fetched: a takeover that got there first makes this one
        # refuse (exit 3, nothing recorded), never complete the task twice
        from git_handoff.ops import sync  # noqa: PLC0415  (import cost, as above)

        task = sync.transact_remote(store, lambda tx, _fleet: apply(tx), lambda t: t.id, through)
    return task




# -- autoSync: the one decision --------------------------------------------------------------

# The commands after which handoff.autoSync (sync) or handoff.syncClaims (publish) push what
# they recorded. Both adapters (cli/work.py, mcp/tools.py) ask `syncing` with their command's
# name; this table alone says which ones push (tests/ops/test_work.py holds them to it).
SYNCED_AFTER = frozenset({"renew", "release", "checkpoint", "done", "fail"})


def sync_after(store: StateStore, command: str) -> str | None:
    """Push what `command` just recorded when the table and the config say so: None when
    nothing was to be pushed or it was, else the one-line reason it stays local."""
    if command not in SYNCED_AFTER:
        return None
    repo = store.repo
    if not repo.config_bool("handoff.autoSync") and not repo.config_bool("handoff.syncClaims"):
        return None  # the usual case: no need to import sync and the whole merge (~7 ms a command)
    from git_handoff.ops import sync  # noqa: PLC0415 - import cost: the remote side, only when it is used

    return sync.auto_sync(store)


@contextlib.contextmanager
def syncing(store: StateStore, command: str, warn: Callable[[str], None]) -> Iterator[None]:
    """Around one command's call into ops: after it recorded its change, or a failure it
    recorded before refusing (`done` whose check failed: a Negative), `sync_after`; a push
    that failed goes to `warn`, in the adapter's own shape."""
    try:
        yield
    except Negative:
        _warn_if(sync_after(store, command), warn)
        raise
    _warn_if(sync_after(store, command), warn)


def _warn_if(problem: str | None, warn: Callable[[str], None]) -> None:
    if problem:
        warn(problem)
