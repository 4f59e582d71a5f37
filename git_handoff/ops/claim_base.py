"""Where a claim starts: never from a base missing a dependency's work (SPEC §10).

A dependency's work is the commit `done` completed it at (`completed_commit`). A claim's
base holds it when that commit is the base or one of its ancestors: the dependency was
done in this worktree's history, or its work has landed on the target branch and the
base is on the target (`git handoff integrate`). Before the claim's transaction,
`forward` finds whether this worktree can start from the target's tip instead of its
HEAD: a clean work tree whose HEAD the tip descends from (the worktree is then brought
forward with `git merge --ff-only` once the claim holds, `bring_forward`). A worktree
with changes of its own is never moved; a task whose dependency's work is then missing
is not taken, and a claim naming it is refused, saying which work is missing and where
it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from git_handoff.core.errors import UsageError
from git_handoff.core.model import CLAIM_FIELDS, Task
from git_handoff.infra import merge_tree
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import claim_index, claim_journal
from git_handoff.state import target as targets
from git_handoff.state.store import StateStore, Tx


class WorkAt:
    """Which dependencies' work a base holds (each commit asked once)."""

    def __init__(self, repo: Repo, base: str) -> None:
        self.repo = repo
        self.base = base
        self._holds: dict[str, bool] = {}

    def holds(self, commit: str) -> bool:
        known = self._holds.get(commit)
        if known is None:
            known = commit == self.base or (self.repo.has_object(commit) and self.repo.is_ancestor(commit, self.base))
            self._holds[commit] = known
        return known

    def lacking(self, task: Task, tasks: Mapping[str, Task]) -> list[Task]:
        """The dependencies of `task` whose work this base does not hold."""
        out = []
        for dep_id in task.depends_on:
            dep = tasks.get(dep_id)
            commit = dep.get("completed_commit") if dep is not None else None
            if dep is not None and isinstance(commit, str) and not self.holds(commit):
                out.append(dep)
        return out


def missing_message(task: Task, lacking: list[Task], base: str, target: str | None) -> str:
    """Why `task` cannot start from `base`: each dependency's missing work, and where it is."""
    parts = []
    for dep in lacking:
        commit = str(dep.get("completed_commit") or "")[:7]
        where = dep.get("work_ref") or "not published"
        landed = dep.get("integrated_commit")
        parts.append(f"{dep.id}'s work (commit {commit}, {where}"
                     + (f", landed as {str(landed)[:7]}" if landed else ", not on the target yet") + ")")
    on = f" nor on {target}" if target else ""
    return (f"task {task.id} cannot start from {base[:7]}: it lacks {'; '.join(parts)}, which is not in this "
            f"worktree's history{on}. Run `git handoff integrate` (or let the relay's queue land it), then claim "
            "again from a clean worktree")


def target_of(repo: Repo) -> targets.Target | None:
    """The target, or None when this repository names none it can use (no branch at all)."""
    try:
        return targets.resolve(repo)
    except UsageError:  # no usable target: claims start from HEAD as before
        return None


def forward(repo: Repo, head: str, snapshot: str | None, target: targets.Target | None) -> str | None:
    """The target's tip, when this worktree (at `head`, `snapshot` None: clean) is behind it
    (an ancestor of it) and may start from it instead; else None."""
    if target is None or snapshot is not None:
        return None
    tip = targets.tip(repo, target)
    if tip is None or tip == head or not repo.is_ancestor(head, tip):
        return None
    return tip


def undo(store: StateStore, claimed: Task) -> None:
    """Give back a claim this process just took (its worktree could not be brought to its
    base): pending again, no attempt counted, as `release` does."""
    def apply(tx: Tx) -> None:
        task = tx.task(claimed.id)
        if task is None or task.status != "in_progress" or task.get("claimed_at") != claimed.get("claimed_at"):
            return
        new = dataclasses.replace(task, status="pending", claimed_by=None, lease_expires_at=None,
                                  started_at_commit=None).with_extra(**dict.fromkeys(CLAIM_FIELDS))
        claim_index.carry(tx, [tx.put_task(new)])
        tx.log("LOCK", "released: the worktree could not be brought to the claim's base", task=task.id)

    store.transact(apply)
    claim_journal.drop(store.repo, claimed.id)


def bring_forward(repo: Repo, base: str | None) -> str | None:
    """Move this worktree to the claim's base `base` (None: stay): None, or why it could not."""
    if base is None:
        return None
    return merge_tree.fast_forward(repo.root(), base)
