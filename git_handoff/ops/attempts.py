"""`fail` (a rollback that loses nothing), the saved attempts, and `restore`.

A failed attempt is saved first, whole, as a commit under refs/harness/attempts/<id>/<n>
(the work tree's tree, untracked non-ignored files included; parents HEAD and a
commit of the index), then counted in the state, then the worktree returned
exactly to the claim's moment (git_handoff.infra.rollback). What `fail` does is
decided first, by plan_fail, from what it read; then done. `restore` brings an
attempt's files and staged entries back without moving HEAD.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re

from git_handoff.core import attempt_record, field_checks, secrets
from git_handoff.core.errors import GitFailure, InvalidState, UsageError
from git_handoff.core.model import CLAIM_FIELDS, Task, check_category, check_id, now_iso, printable
from git_handoff.core.serialization import task_to_json
from git_handoff.infra import rollback, task_commands
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops.attempt_save import attempt_refs, is_local_only, local_only_note, save_attempt
from git_handoff.ops.payloads import Attempt, FailOutcome, Restored, SavedAttempt
from git_handoff.state import claim_index, claim_journal, notes, redaction, this_clone, trust
from git_handoff.state.claim_checks import (
    claimed_task,
    current,
    require_branch,
    short,
)
from git_handoff.state.store import StateStore, Tx

# -- fail ------------------------------------------------------------------------------

NO_LOCAL_CLAIM = ("no rollback: this worktree keeps no journal of this claim (claimed by an older git handoff, "
                  "in another worktree, or a claim record that came back from a remote); the attempt is saved and "
                  "the work tree is as the attempt left it (reset it by hand if you want the claim's moment back)")


def _claim_snapshot(repo: Repo, recorded: str | None) -> rollback.ClaimPicture | None:
    """The claim's snapshot, when the claim names one and it is there."""
    return rollback.read_snapshot(repo, recorded) if recorded else None


@dataclasses.dataclass(frozen=True)
class FailPlan:
    """Every decision `fail` takes, from what it read before anything changes (plan_fail)."""

    reason: str  # one printable line
    category: str
    base: str | None  # the claim's moment: this worktree's journal of it, else the shared record's
    saves: bool  # the base is a commit here: the attempt is saved and counted (else attempts go to max)
    snapshot: str | None  # the claim's snapshot commit, read back
    snapshot_name: str | None  # the snapshot this worktree's journal names
    snapshot_lost: bool  # named but missing: no rollback
    unjournalled: bool  # no journal of the claim here: no rollback (NO_LOCAL_CLAIM)
    rolls_back: bool
    ends_operation: bool  # a rebase/merge/... in progress is ended after saving, not refused

    def attempts(self, task: Task) -> int:
        """The task's attempt count once this failure is recorded."""
        return task.attempts + 1 if self.saves else max(task.max_attempts, task.attempts + 1)

    def log_lines(self, operation: str | None) -> list[tuple[str, str, str | None]]:
        """(kind, text, category) of the state's log lines for this failure."""
        lines: list[tuple[str, str, str | None]] = [("ERROR", self.reason, self.category)]
        if not self.saves:
            lines.append(("ERROR", f"started_at_commit {self.base or '(none)'} is missing from the repository: "
                          "no rollback, attempts set to max", self.category))
        elif self.snapshot_lost:
            lines.append(("ERROR", f"the claim's snapshot {short(self.snapshot_name)} is missing: no rollback "
                          "(the work tree is as the attempt left it)", self.category))
        elif self.unjournalled:
            lines.append(("WARN", NO_LOCAL_CLAIM, None))
        elif self.rolls_back:
            if operation:
                lines.append(("ROLLBACK", f"git {operation} ended (--force)", None))
            lines.append(("ROLLBACK", f"git reset --hard {short(self.base)}"
                          + (f"; work tree, index and untracked files as at the claim ({short(self.snapshot)})"
                             if self.snapshot else ""), None))
        return lines

    def outcome(self, task: Task, saved: SavedAttempt | None, operation: str | None,
                validation: task_commands.RunResult | None) -> FailOutcome:
        """`fail --json`, before the cleanup command runs."""
        return {
            "task": task_to_json(task),
            "category": self.category,
            "reason": self.reason,
            "attempt": saved["attempt"] if saved else None,
            "attempt_ref": saved["ref"] if saved else None,
            "attempt_commit": saved["commit"] if saved else None,
            "attempt_local_only": saved["local_only"] if saved else False,
            "secret_files": saved["secret_files"] if saved else {},
            "files": saved["files"] if saved else [],
            "base": self.base,
            "rolled_back": self.rolls_back,
            "snapshot": self.snapshot,
            "snapshot_missing": self.snapshot_lost,
            "no_local_claim": self.unjournalled,
            "operation_ended": operation,
            "cleanup": None,
            "validation": validation.to_json() if validation is not None else None,
        }


def _reason_line(reason: str, category: str) -> str:
    """The failure's reason as one printable line (a reason built from a command's output
    too); refused when empty or the category is unknown."""
    check_category(category)
    text = printable(reason or "")
    if not text:
        raise UsageError("fail needs a --reason")
    return text


def plan_fail(*, reason: str, category: str, keep_worktree: bool, force: bool, end_operation: bool | None,
              base: str | None, base_is_commit: bool, journalled: bool,
              snapshot_name: str | None, snapshot: str | None) -> FailPlan:
    """What `fail` does, from what it found: `base` (and whether it is a commit here), whether
    this worktree journalled the claim, the snapshot its journal names and the commit read
    back for it (None when missing). Pure."""
    saves = bool(base) and base_is_commit
    snapshot_lost = saves and bool(snapshot_name) and snapshot is None
    unjournalled = saves and not journalled and not keep_worktree
    return FailPlan(
        reason=_reason_line(reason, category),
        category=category,
        base=base,
        saves=saves,
        snapshot=snapshot,
        snapshot_name=snapshot_name,
        snapshot_lost=snapshot_lost,
        unjournalled=unjournalled,
        rolls_back=saves and not keep_worktree and not snapshot_lost and not unjournalled,
        ends_operation=force if end_operation is None else end_operation,
    )


def fail(store: StateStore, task_id: str, *, reason: str, category: str = "TASK_EXEC", keep_worktree: bool = False,
         force: bool = False, end_operation: bool | None = None) -> FailOutcome:
    """Fail a claimed attempt: save it whole, count it, return the worktree exactly to the
    claim's moment, clean up (fail_claim; a failing `done` calls that with the claim its
    check ran under and the check's result)."""
    _reason_line(reason, category)  # refused before the claim is read
    seen = claimed_task(store, task_id, "fail", force)
    return fail_claim(store, seen, reason=reason, category=category, keep_worktree=keep_worktree, force=force,
                      end_operation=end_operation)


def fail_claim(store: StateStore, seen: Task, *, reason: str, category: str = "TASK_EXEC",
               keep_worktree: bool = False, force: bool = False, end_operation: bool | None = None,
               validation: task_commands.RunResult | None = None) -> FailOutcome:
    """Fail the claim `seen` (as claimed_task read it; the state is changed only while it is
    still that claim); `validation` is the failing check's result, when a check failed it.

    Refused before anything changes: a rebase/merge/... in progress (unless
    `end_operation`, default `force`: it is ended after the attempt is saved), a
    submodule with work of its own.
    """
    repo = store.repo
    # What the rollback returns to comes from this worktree's own journal of the claim,
    # never from the shared record (a fetched snapshot or base would choose the files).
    local = claim_journal.of_claim(repo, seen)
    base = local.base if local else seen.started_at_commit
    snapshot_name = local.snapshot if local else None
    snap = _claim_snapshot(repo, snapshot_name)
    plan = plan_fail(reason=reason, category=category, keep_worktree=keep_worktree, force=force,
                     end_operation=end_operation, base=base,
                     base_is_commit=bool(base) and repo.resolve_commit(f"{base}^{{commit}}") is not None,
                     journalled=local is not None, snapshot_name=snapshot_name,
                     snapshot=snap.commit if snap else None)
    operation = _refusals(repo, seen, plan, force)
    task, outcome = _record(store, seen, plan, local, operation, validation)
    if task.cleanup:
        result = task_commands.run_command(task.cleanup, repo.root(), task.timeout_seconds,
                                           env={"HANDOFF_TASK": task.id})
        outcome["cleanup"] = result.to_json()
        if not result.ok:
            summary = redaction.redact_run(repo, result).summary()  # whole, before summary() cuts it
            _log_warning(store, task.id, f"on_failure.cleanup failed ({result.category}): {summary}")
    return outcome


def _refusals(repo: Repo, seen: Task, plan: FailPlan, force: bool) -> str | None:
    """Refuse before anything changes; the rebase/merge/... the rollback is to end, if any."""
    operation = rollback.refuse_operation(repo, "fail", seen.id, plan.ends_operation) if plan.rolls_back else None
    if operation is None:
        require_branch(seen, repo, "fail", force)
    if plan.rolls_back:
        assert plan.base is not None
        rollback.refuse_submodules(repo, plan.base, "roll back", seen.id)
    if seen.cleanup:
        trust.require_trusted(repo, seen.cleanup, "cleanup command", trust.place(seen.id, "cleanup"))
    return operation


def _record(store: StateStore, seen: Task, plan: FailPlan, local: claim_journal.Entry | None,
            operation: str | None, validation: task_commands.RunResult | None) -> tuple[Task, FailOutcome]:
    """Save the attempt, record the failure, then roll the worktree back as `plan` says."""
    repo = store.repo
    # The rollback's owner holds this worktree's rollback lock from before its journal is
    # written until it is cleared: a command opening the state meanwhile (a hook, an MCP
    # call) leaves the journal to it (open_state), never finishing or dropping it twice.
    with rollback.rollback_owner(repo) if plan.rolls_back else contextlib.nullcontext():
        saved: SavedAttempt | None = None
        if plan.saves:
            store.best_effort("notes",
                              lambda: notes.note_task_commits(store, seen, outcome=f"failed [{plan.category}]"))
            saved = save_attempt(store, seen, reason=plan.reason, category=plan.category, local=local)
        journal = None
        if plan.rolls_back:
            assert plan.base is not None
            journal = rollback.RollbackPlan(task=seen.id, base=plan.base, snapshot=plan.snapshot,
                                    attempt_ref=saved["ref"] if saved else None, operation=operation)
            rollback.write_journal(repo, journal)
        try:
            task = store.transact(lambda tx: _put_failed(tx, seen, plan, saved, operation))
        except BaseException:
            rollback.clear_journal(repo)  # nothing was recorded: the work tree stays as it is
            raise
        outcome = plan.outcome(task, saved, operation, validation)
        if journal is not None:
            try:
                rollback.roll_back(repo, journal)
            except GitFailure as exc:
                raise GitFailure(
                    f"{exc.message}; the attempt is saved as {saved['ref'] if saved else '?'}: the next "
                    "git handoff command in this worktree finishes the rollback"
                ) from None
            rollback.clear_journal(repo)
        else:
            rollback.drop_snapshot_ref(repo, plan.snapshot)
        if local is not None:
            claim_journal.drop(repo, seen.id)
    return task, outcome


def _put_failed(tx: Tx, seen: Task, plan: FailPlan, saved: SavedAttempt | None, operation: str | None) -> Task:
    """The claim `seen`, failed, in the transaction `tx`, with its log lines."""
    task = current(tx, seen, "failed")
    new = dataclasses.replace(task, status="failed", attempts=plan.attempts(task), claimed_by=None,
                              lease_expires_at=None,
                              error_log=(*task.error_log, f"[{plan.category}] {plan.reason}"),
                              ).with_extra(failed_at=now_iso(), **dict.fromkeys(CLAIM_FIELDS))
    if saved is not None:
        new = new.with_extra(last_attempt_ref=saved["ref"])
    new = tx.put_task(new)
    claim_index.carry(tx, [new], clean=not new.failed_for_good)
    for kind, text, category in plan.log_lines(operation):
        tx.log(kind, text, task=task.id, category=category)
    for kind in secrets.MARKER.compiled.findall(new.error_log[-1]):  # a check's output, redacted before it was cut
        tx.log("WARN",
               f"redacted {kind} from error_log[{len(new.error_log) - 1}] (secret scan; see `git handoff secrets`)",
               task=task.id)
    if saved is not None and saved["local_only"]:
        tx.log("WARN", f"attempt {saved['attempt']} {local_only_note(saved['ref'], saved['secret_files'])}",
               task=task.id)
    return new


def finish_interrupted_rollback(store: StateStore) -> str | None:
    """Finish a rollback a killed `fail` left half done (its journal is in the worktree's
    private directory); a journal whose failure was never recorded is dropped, since
    then nothing had changed; a journal whose owner still holds the worktree's rollback
    lock is left to it. Returns a sentence for the user, or None."""
    repo = store.repo
    with rollback.orphaned_journal(repo) as orphaned:
        if not orphaned:
            return None  # its owner, a `fail` still at work, finishes it (or drops it) itself
        plan = rollback.read_journal(repo)
        if plan is None:
            return None
        task = store.snapshot().task(plan.task) if store.is_initialized() else None
        if task is None or task.status == "in_progress" or task.get("last_attempt_ref") != plan.attempt_ref:
            rollback.clear_journal(repo)
            return None
        rollback.roll_back(repo, plan)
        rollback.clear_journal(repo)
    return (f"finished the interrupted rollback of {plan.task} to {short(plan.base)} "
            f"(the attempt is saved as {plan.attempt_ref})")


def _log_warning(store: StateStore, task_id: str, text: str) -> None:
    def apply(tx: Tx) -> None:
        tx.log("WARN", text, task=task_id)

    store.best_effort("warning", lambda: store.transact(apply))


# -- attempts / restore -----------------------------------------------------------------------


def _attempt_record(repo: Repo, n: int, commit: str, ref: str) -> Attempt:
    """What the readers (attempts, restore, the MCP tool, the dashboard) use of attempt
    `n`: the record in its commit's message through attempt_record.attempt, fields typed; a
    record that does not parse is `unreadable` (why, in one line) and none of its
    fields count."""
    message, parents, _, _ = repo.commit_info(commit)
    _, _, body = message.partition("\n\n")
    unreadable: str | None = None
    try:
        record = attempt_record.attempt(body, ref)
    except InvalidState as exc:
        record, unreadable = {}, " ".join(exc.message.split())
    first = message.splitlines()[0] if message else ""
    if field_checks.line_problem(first, field_checks.MAX_TEXT):
        first = ""  # the summary line as reason only when it is one printable line
    return {
        "attempt": n,
        "ref": ref,
        "commit": commit,
        "time": record.get("time"),
        "category": record.get("category"),
        "reason": record.get("reason", first or None) if unreadable is None else None,
        "base": record.get("base"),
        "head": record.get("head", parents[0] if parents else None),
        "session": record.get("session"),
        "worker": record.get("worker"),
        "files": record.get("files", []),
        "index": record.get("index"),
        "claim_snapshot": record.get("claim_snapshot"),
        "unreadable": unreadable,
        "local_only": is_local_only(ref),
    }


def attempts(store: StateStore, task_id: str) -> list[Attempt]:
    """The saved attempts of a task, oldest first: number, time, reason, files."""
    check_id(task_id)
    repo = store.repo
    found = attempt_refs(repo, task_id)
    if not found and store.snapshot().task(task_id) is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    return [_attempt_record(repo, n, found[n][1], found[n][0]) for n in sorted(found)]


def restore(store: StateStore, task_id: str, n: int, force: bool = False) -> Restored:
    """Bring attempt `n` back into this work tree: its files, and its index when it was
    saved with one (HEAD untouched). Refused when a file it would write or remove was
    changed here since the rollback, unless `force`."""
    check_id(task_id)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"attempts are numbered from 1, not {n!r}")
    repo = store.repo
    ref, commit = attempt_refs(repo, task_id).get(n, ("", ""))
    if not commit:
        raise UsageError(f"task {task_id} has no saved attempt {n} (see `git handoff attempts {task_id}`)")
    if repo.resolve_commit(f"{commit}^{{commit}}") != commit:
        raise UsageError(f"{ref} does not point at a commit: it cannot be restored")
    record = _attempt_record(repo, n, commit, ref)
    if record["unreadable"]:  # which base and index it was saved against is unknown: nothing to restore from
        raise InvalidState(f"attempt {n} of {task_id} cannot be restored: its record is unreadable "
                           f"({record['unreadable']}); its files are in commit {commit} "
                           f"(`git checkout {short(commit)} -- PATH` brings one back)")
    _, parents, _, _ = repo.commit_info(commit)
    since: str | None = None
    since_index: str | None = None
    snapshot = record.get("claim_snapshot")
    if isinstance(snapshot, str):
        snap = rollback.read_snapshot(repo, snapshot)
        if snap is not None:
            since, since_index = snap.worktree, snap.index
    base = record.get("base")
    # the message's base counts only as an ancestor of the attempt (what save_attempt writes)
    if not (isinstance(base, str) and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", base)
            and repo.resolve_commit(base) and repo.is_ancestor(base, commit)):
        base = None
    if since is None:
        from_commit = repo.resolve_commit(base) if isinstance(base, str) else None
        since = repo.commit_tree(from_commit or repo.head() or commit)
    # an attempt saved with its index has it as second parent (older attempts have one parent)
    index = repo.commit_tree(parents[1]) if len(parents) >= 2 and record.get("index") else None
    # the names of an attempt another worker saved (another clone's, perhaps) pass the
    # foreign name rules too (paths.path_problem); this worker's own come back as they were
    foreign = record.get("worker") != this_clone.worker_identity(repo)
    done_ = rollback.restore_picture(repo, source=repo.commit_tree(commit), since=since, index=index,
                                     since_index=since_index, force=force, foreign=foreign)

    def apply(tx: Tx) -> None:
        tx.log(
            "RECOVERY",
            f'action="restore attempt {n}" reason="{len(done_.written)} file(s) written, {len(done_.deleted)} removed'
            + (", index restored" if done_.index else "")
            + f' from {ref}"',
            task=task_id,
        )

    if store.is_initialized():
        store.transact(apply)
    return {"task": task_id, "attempt": n, "commit": commit, "restored": done_.written, "deleted": done_.deleted,
            "index": done_.index, "ref": ref, "local_only": is_local_only(ref)}
