"""Saving a failed attempt: a commit of the whole work, under its ref.

The commit's tree is the work tree (untracked non-ignored files included); its parents
are the current HEAD (so commits made since the claim stay reachable) and a commit of
the index (the staged content); its message a summary line and a JSON record of the
attempt. An attempt whose changed files hold a secret (git_handoff.state.redaction) is
kept under refs/harness/local/attempts/<id>/<n>, which no sync pushes, instead of
refs/harness/attempts/<id>/<n>; the reason in its message is redacted either way.
"""

from __future__ import annotations

import json

from git_handoff.core.errors import Contention, UsageError
from git_handoff.core.model import Task, now_iso
from git_handoff.infra import rollback, worktree
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops.payloads import FileChange, SavedAttempt
from git_handoff.state import claim_journal, redaction
from git_handoff.state.snapshot import ATTEMPTS_PREFIX, LOCAL_ATTEMPTS_PREFIX
from git_handoff.state.store import StateStore

LOCAL_ONLY_NOTE = ("kept on this machine only ({ref}): its files hold a secret ({where}); "
                   "`git handoff sync` never pushes it, `git handoff restore` brings it back")


def attempt_ref(task_id: str, n: int, *, local: bool = False) -> str:
    return f"{LOCAL_ATTEMPTS_PREFIX if local else ATTEMPTS_PREFIX}{task_id}/{n}"


def attempt_refs(repo: Repo, task_id: str) -> dict[int, tuple[str, str]]:
    """{n: (ref, commit)} of the task's saved attempts, published and local-only."""
    out: dict[int, tuple[str, str]] = {}
    for prefix in (LOCAL_ATTEMPTS_PREFIX, ATTEMPTS_PREFIX):  # a published one wins a clash
        base = f"{prefix}{task_id}/"
        for name, target in repo.refs_under(base).items():
            rest = name[len(base):]
            if rest.isdigit():
                out[int(rest)] = (name, target)
    return out


def is_local_only(ref: str) -> bool:
    return ref.startswith(LOCAL_ATTEMPTS_PREFIX)


def local_only_note(ref: str, secret_files: dict[str, list[str]] | None = None) -> str:
    where = ", ".join(f"{path}: {', '.join(kinds)}" for path, kinds in (secret_files or {}).items())
    return LOCAL_ONLY_NOTE.format(ref=ref, where=where or "see `git handoff secrets`")


def save_attempt(store: StateStore, task: Task, *, reason: str, category: str,
                 local: claim_journal.Entry | None = None) -> SavedAttempt:
    """Save the whole work of the current attempt as a commit under its ref; `files` are
    the changes since the claim's moment."""
    repo = store.repo
    head = repo.head()
    if head is None:
        raise UsageError("this worktree has no commit: nothing to save")
    # the claim's moment as this worktree journalled it; without an entry, the state's
    # base only names what the attempt's file list is compared with (nothing is reset)
    base = (local.base if local else task.started_at_commit) or head
    snap = rollback.read_snapshot(repo, local.snapshot) if local and local.snapshot else None
    pic = worktree.picture(repo, head)
    files: list[FileChange] = [{"status": s, "path": p}
                               for s, p in worktree.changed(repo, snap.worktree if snap else base, pic.worktree)]
    # what the attempt's ref makes reachable beyond the claim's commit: its work tree and
    # index (untracked files there at the claim too), and the commits made since
    secrets = redaction.secret_files(repo, redaction.tree_of(repo, base), [pic.worktree, pic.index])
    secrets.update(redaction.secret_history(repo, base, head))
    reason = redaction.redact_text(repo, reason)[0]
    existing = attempt_refs(repo, task.id)
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
            "index": pic.index,
            "claim_snapshot": snap.commit if snap else None,
        }
        message = f"handoff attempt {task.id} #{n}: [{category}] {reason}\n\n{json.dumps(record, indent=2)}\n"
        commit = rollback.commit_picture(repo, pic, message)
        ref = attempt_ref(task.id, n, local=bool(secrets))
        if repo.ref_target(attempt_ref(task.id, n, local=not secrets)) is None \
                and repo.cas_ref(ref, commit, None, f"handoff: attempt {n} of {task.id}"):
            return {"attempt": n, "ref": ref, "commit": commit, "files": files, "base": base, "head": head,
                    "local_only": bool(secrets), "secret_files": secrets}
        n += 1
    raise Contention(f"could not name a new attempt ref for {task.id}; retry")
