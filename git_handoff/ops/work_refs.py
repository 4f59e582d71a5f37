"""A task's published work (SPEC §10): the ref `done` creates for it, and whether it is on
the target already.

`done` names the commit it completed the task at by a ref per task and attempt,
refs/harness/work/<task-id>/<n>, created once and never moved; `sync` pushes it where the
remote lacks it and fetches everyone's (ops/sync.py, as the failed attempts), and the
integration queue (ops/integration.py) lands it on the target. Where the target is this
very branch and no remote holds it (one agent in one worktree, as before), the work is on
the target the moment it is committed: `done` records it as integrated at once.

Refused work: a work ref the queue sent its task back for (the task's error log names it,
and its record no longer does) that is not on the target. A work ref nothing refused (one
left by a `done` killed before its transaction, or planted by another clone) is not. Nothing is built on it: a claim
leaves a worktree that holds it for the target's tip (ops/claim_base.py), and work built on
it is sent back rather than landed (ops/integration.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from git_handoff.core.errors import Contention, UsageError
from git_handoff.core.model import Task
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import target as targets
from git_handoff.state.snapshot import ATTEMPTS_PREFIX, WORK_PREFIX


def work_ref(task_id: str, n: int) -> str:
    return f"{WORK_PREFIX}{task_id}/{n}"


def publish(repo: Repo, task: Task, commit: str) -> str:
    """Create the work ref of this completion of `task` at `commit` (the next free number
    from the task's attempt: a task reopened and done again gets a new one)."""
    taken = [int(name.rpartition("/")[2]) for name in repo.refs_under(f"{WORK_PREFIX}{task.id}/")
             if name.rpartition("/")[2].isdigit()]
    n = max(task.attempts + 1, max(taken, default=0) + 1)
    for _ in range(50):
        ref = work_ref(task.id, n)
        if repo.cas_ref(ref, commit, None, f"handoff: work of {task.id}"):
            return ref
        n += 1
    raise Contention(f"could not name a work ref for {task.id}; retry")


def secret_in(repo: Repo, base: str | None, head: str) -> str | None:
    """Why the work at `head` is not published (SPEC §11), or None: the commits its ref would
    newly expose hold a secret (their messages or the files they brought). With a remote,
    those are the commits no remote-tracking, work or attempt ref reaches (earlier work of
    this worktree that was itself withheld included); without one, `base..head`. A work with
    no base here (a claim's commit beyond a shallow cut) is judged by its own tree."""
    from git_handoff.state import redaction  # noqa: PLC0415  (the scanner: only for a completion)

    start = base if base is not None and repo.has_object(base) else None
    if repo.refs_under("refs/remotes/"):
        proc = repo.git("rev-list", f"--max-count={redaction.MAX_SCANNED_COMMITS + 1}", head, "--not", "--remotes",
                        f"--glob={WORK_PREFIX.rstrip('/')}", f"--glob={ATTEMPTS_PREFIX.rstrip('/')}", check=False)
        found = redaction.secret_commits(repo, proc.stdout.decode().split()) if proc.returncode == 0 else \
            {"the work's commits (git rev-list failed)": ["unscanned"]}
    elif start is not None:
        found = redaction.secret_history(repo, start, head)
    else:
        found = redaction.secret_files(repo, None, [redaction.tree_of(repo, head)])
    if not found:
        return None
    where = "; ".join(f"{place} ({', '.join(kinds)})" for place, kinds in list(found.items())[:5])
    return (f"its work was not published: a secret in {where}. Take it out of those commits (rewrite them), "
            "then `git handoff reopen` the task and complete it again; until then it stays out of the "
            "integration queue")


def withdraw(repo: Repo, ref: str, commit: str) -> None:
    """Take back a work ref this process just created (its completion was not recorded)."""
    if repo.ref_target(ref) == commit:
        repo.delete_ref(ref)


def landed_here(repo: Repo, commit: str) -> str | None:
    """`commit` when the target is this repository's own branch (no remote) and holds it."""
    try:
        target = targets.resolve(repo)
    except UsageError:  # no usable target: nothing is recorded as landed
        return None
    if target.remote is not None:
        return None
    tip = targets.tip(repo, target)
    if tip is None or not (tip == commit or repo.is_ancestor(commit, tip)):
        return None
    return commit


def was_refused(task: Task, ref: str) -> bool:
    """Whether the queue sent `task` back for its work `ref` (the module's docstring)."""
    return task.get("work_ref") != ref and any(f"({ref})" in entry for entry in task.error_log)


def refused(repo: Repo, tasks: Mapping[str, Task], tip: str | None) -> dict[str, str]:
    """{commit: work ref} of the refused work here (the module's docstring)."""
    out: dict[str, str] = {}
    for name, commit in repo.refs_under(WORK_PREFIX).items():
        task = tasks.get(name[len(WORK_PREFIX):].rpartition("/")[0])
        if task is None or not was_refused(task, name):
            continue
        if tip is not None and (commit == tip or repo.is_ancestor(commit, tip)):
            continue
        out[commit] = name
    return out


def held_refused(repo: Repo, tasks: Callable[[str], Task | None], head: str, tip: str) -> str | None:
    """The refused work ref `head` holds and `tip` lacks, or None: git lists the work refs
    merged into `head` and not into `tip` (one process, usually none), and only their
    tasks are read (`tasks`: a task by id), never the whole state."""
    proc = repo.git("for-each-ref", "--format=%(refname)", f"--merged={head}", f"--no-merged={tip}",
                    WORK_PREFIX.rstrip("/"), check=False)
    for name in proc.stdout.decode(errors="replace").split() if proc.returncode == 0 else ():
        task = tasks(name[len(WORK_PREFIX):].rpartition("/")[0])
        if task is not None and was_refused(task, name):
            return name
    return None


def built_on(repo: Repo, commit: str, refused_work: Mapping[str, str]) -> str | None:
    """The refused work ref `commit` holds (is or descends from), or None."""
    return next((ref for work, ref in refused_work.items() if work == commit or repo.is_ancestor(work, commit)),
                None)


def all_kept(repo: Repo, head: str, tip: str) -> bool:
    """Whether every commit of `head` that `tip` lacks is held by a work or attempt ref:
    moving a branch from `head` to `tip` then loses nothing."""
    proc = repo.git("rev-list", "-n", "1", head, "--not", tip, f"--glob={WORK_PREFIX.rstrip('/')}",
                    f"--glob={ATTEMPTS_PREFIX.rstrip('/')}", check=False)
    return proc.returncode == 0 and not proc.stdout.strip()
