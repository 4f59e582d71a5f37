"""`fail` (a rollback that loses nothing), the saved attempts, and `restore`.

A failed attempt is saved first, as a commit under refs/harness/attempts/<id>/<n>
(the work tree's tree, untracked non-ignored files included, on top of HEAD), then
counted in the state, then the work tree rolled back. `restore` brings an
attempt's files back into the work tree without touching HEAD or the index.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from git_handoff import claim_index, notes, paths, runner, trust, worktree
from git_handoff.claims import CLAIM_EXTRAS, claimed_task, current, require_branch, short
from git_handoff.errors import Contention, GitFailure, HandoffError, UsageError
from git_handoff.gitrepo import Repo
from git_handoff.model import Task, check_category, check_id, now_iso
from git_handoff.store import ATTEMPTS_PREFIX, StateStore, Tx

# -- fail ------------------------------------------------------------------------------


def attempt_ref(task_id: str, n: int) -> str:
    return f"{ATTEMPTS_PREFIX}{task_id}/{n}"


def _attempt_numbers(repo: Repo, task_id: str) -> dict[int, str]:
    prefix = f"{ATTEMPTS_PREFIX}{task_id}/"
    out = {}
    for name, target in repo.refs_under(prefix).items():
        rest = name[len(prefix):]
        if rest.isdigit():
            out[int(rest)] = target
    return out


def save_attempt(store: StateStore, task: Task, *, reason: str, category: str) -> dict[str, Any]:
    """Save the whole work of the current attempt as a commit under refs/harness/attempts/.

    The commit's tree is the work tree (untracked non-ignored files included), its
    parent the current HEAD (so commits made since the claim stay reachable), its
    message a summary line and a JSON record of the attempt.
    """
    repo = store.repo
    head = repo.head()
    if head is None:
        raise UsageError("this worktree has no commit: nothing to save")
    base = task.started_at_commit or head
    tree = worktree.worktree_tree(repo, head)
    files = [{"status": s, "path": p} for s, p in worktree.changed(repo, base, tree)]
    existing = _attempt_numbers(repo, task.id)
    n = max(task.attempts + 1, max(existing, default=0) + 1)
    for _ in range(50):
        record = {
            "task": task.id,
            "attempt": n,
            "time": now_iso(),
            "category": category,
            "reason": reason,
            "base": base,
            "head": head,
            "branch": repo.head_branch(),
            "worker": task.claimed_by,
            "session": store.session,
            "files": files,
        }
        message = f"handoff attempt {task.id} #{n}: [{category}] {reason}\n\n{json.dumps(record, indent=2)}\n"
        commit = repo.create_commit(tree, [head], message)
        ref = attempt_ref(task.id, n)
        if repo.cas_ref(ref, commit, None, f"handoff: attempt {n} of {task.id}"):
            return {"attempt": n, "ref": ref, "commit": commit, "files": files, "base": base, "head": head}
        n += 1
    raise Contention(f"could not name a new attempt ref for {task.id}; retry")


def fail(
    store: StateStore,
    task_id: str,
    *,
    reason: str,
    category: str = "TASK_EXEC",
    keep_worktree: bool = False,
    force: bool = False,
    _seen: Task | None = None,
    _run: runner.RunResult | None = None,
) -> dict[str, Any]:
    """Fail a claimed attempt: save it, count it, roll the work tree back, clean up."""
    check_category(category)
    text = " ".join((reason or "").split())
    if not text:
        raise UsageError("fail needs a --reason")
    repo = store.repo
    seen = _seen or claimed_task(store, task_id, "fail", force)
    require_branch(seen, repo, "fail", force)
    if seen.cleanup:
        trust.require_trusted(repo, seen.cleanup, "cleanup command")
    base = seen.started_at_commit
    base_ok = bool(base) and repo.resolve_commit(f"{base}^{{commit}}") is not None
    saved: dict[str, Any] | None = None
    if base_ok:
        notes.note_quietly(store, seen, outcome=f"failed [{category}]")
        saved = save_attempt(store, seen, reason=text, category=category)
    rollback = base_ok and not keep_worktree

    def apply(tx: Tx) -> Task:
        task = current(tx, seen, "failed")
        attempts = task.attempts + 1 if base_ok else max(task.max_attempts, task.attempts + 1)
        entry = f"[{category}] {text}"
        new = dataclasses.replace(
            task,
            status="failed",
            attempts=attempts,
            error_log=(*task.error_log, entry),
            claimed_by=None,
            lease_expires_at=None,
        ).with_extra(failed_at=now_iso(), **{k: None for k in CLAIM_EXTRAS})
        if saved is not None:
            new = new.with_extra(last_attempt_ref=saved["ref"])
        new = tx.put_task(new)
        claim_index.carry(tx, [new], clean=not new.failed_for_good)
        tx.log("ERROR", text, task=task.id, category=category)
        if not base_ok:
            tx.log(
                "ERROR",
                f"started_at_commit {base or '(none)'} is missing from the repository: no rollback, attempts set to max",
                task=task.id,
                category=category,
            )
        elif rollback:
            tx.log("ROLLBACK", f"git reset --hard {short(base)}", task=task.id)
        return new

    task = store.transact(apply)
    outcome: dict[str, Any] = {
        "task": task.to_json(),
        "category": category,
        "reason": text,
        "attempt": saved["attempt"] if saved else None,
        "attempt_ref": saved["ref"] if saved else None,
        "attempt_commit": saved["commit"] if saved else None,
        "files": saved["files"] if saved else [],
        "base": base,
        "rolled_back": rollback,
        "cleanup": None,
        "validation": _run.to_json() if _run is not None else None,
    }
    if rollback:
        assert base is not None
        try:
            repo.git("reset", "--hard", "--quiet", base, cwd=repo.root())
            repo.git("clean", "-fd", "--quiet", cwd=repo.root())
        except GitFailure as exc:
            raise GitFailure(
                f"{exc.message}; the attempt is saved as {saved['ref'] if saved else '?'}: "
                f"finish the rollback with `git reset --hard {base}` and `git clean -fd`"
            ) from None
    if task.cleanup:
        result = runner.run_command(task.cleanup, repo.root(), task.timeout_seconds, env={"HANDOFF_TASK": task.id})
        outcome["cleanup"] = result.to_json()
        if not result.ok:
            _log_warning(store, task.id, f"on_failure.cleanup failed ({result.category}): {result.summary()}")
    return outcome


def _log_warning(store: StateStore, task_id: str, text: str) -> None:
    def apply(tx: Tx) -> None:
        tx.log("WARN", text, task=task_id)

    try:
        store.transact(apply)
    except HandoffError:
        pass


# -- attempts / restore -----------------------------------------------------------------------


def _attempt_record(repo: Repo, n: int, commit: str) -> dict[str, Any]:
    message, parents, when, author = repo.commit_info(commit)
    _, _, body = message.partition("\n\n")
    try:
        record = json.loads(body)
    except ValueError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    first = message.splitlines()[0] if message else ""
    return {
        "attempt": n,
        "ref": None,
        "commit": commit,
        "time": record.get("time"),
        "category": record.get("category"),
        "reason": record.get("reason", first),
        "base": record.get("base"),
        "head": record.get("head", parents[0] if parents else None),
        "session": record.get("session"),
        "worker": record.get("worker"),
        "files": record.get("files", []),
    }


def attempts(store: StateStore, task_id: str) -> list[dict[str, Any]]:
    """The saved attempts of a task, oldest first: number, time, reason, files."""
    check_id(task_id)
    repo = store.repo
    found = _attempt_numbers(repo, task_id)
    if not found and store.snapshot().task(task_id) is None:
        raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
    out = []
    for n in sorted(found):
        record = _attempt_record(repo, n, found[n])
        record["ref"] = attempt_ref(task_id, n)
        out.append(record)
    return out


def restore(store: StateStore, task_id: str, n: int, force: bool = False) -> dict[str, Any]:
    """Bring the files of attempt `n` back into this work tree (HEAD and index untouched)."""
    check_id(task_id)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"attempts are numbered from 1, not {n!r}")
    repo = store.repo
    root = repo.root()
    commit = repo.ref_target(attempt_ref(task_id, n))
    if commit is None:
        raise UsageError(f"task {task_id} has no saved attempt {n} (see `git handoff attempts {task_id}`)")
    record = _attempt_record(repo, n, commit)
    dirty = worktree.dirty(repo)
    if dirty and not force:
        raise UsageError(
            f"uncommitted changes would be overwritten ({', '.join(dirty[:3])}{'...' if len(dirty) > 3 else ''}): "
            "commit or stash them, or --force"
        )
    base = record.get("base")
    # the message's base counts only as an ancestor of the attempt (what save_attempt writes)
    if not (isinstance(base, str) and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", base)
            and repo.resolve_commit(base) and repo.is_ancestor(base, commit)):
        base = repo.head() or commit
    changes = worktree.changed(repo, base, commit)
    written = [p for s, p in changes if s != "D"]
    deleted = [p for s, p in changes if s == "D"]
    # every path comes from a commit that may have been fetched: checked before anything
    # is touched, and only files git tracks here (so recoverable) are ever deleted
    paths.confine_all(root, written + deleted)
    tracked = set(repo.git("ls-files", "-z", "--", *deleted, cwd=root, env={"GIT_LITERAL_PATHSPECS": "1"})
                  .stdout.decode(errors="surrogateescape").split("\0")) if deleted else set()
    deleted = [p for p in deleted if p in tracked]
    if written:
        repo.git(
            "restore", f"--source={commit}", "--worktree", "--pathspec-from-file=-", "--pathspec-file-nul",
            input="\0".join(written).encode(errors="surrogateescape") + b"\0",
            env={"GIT_LITERAL_PATHSPECS": "1"}, cwd=root,
        )
    for path in deleted:
        target = Path(root, path)
        if target.is_file() or target.is_symlink():
            target.unlink()

    def apply(tx: Tx) -> None:
        tx.log(
            "RECOVERY",
            f'action="restore attempt {n}" reason="{len(written)} file(s) written, {len(deleted)} removed '
            f'from {attempt_ref(task_id, n)}"',
            task=task_id,
        )

    if store.is_initialized():
        store.transact(apply)
    return {"task": task_id, "attempt": n, "commit": commit, "restored": written, "deleted": deleted}
