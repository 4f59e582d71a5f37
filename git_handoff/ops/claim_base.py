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

from git_handoff.core.errors import UsageError
from git_handoff.core.model import CLAIM_FIELDS, Task
from git_handoff.infra import merge_tree
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import claim_index, claim_journal
from git_handoff.state import target as targets
from git_handoff.state.store import StateStore, Tx
from git_handoff.state.target import WorkAt as WorkAt  # where claim and claim_plan name it
from git_handoff.state.target import missing_message as missing_message


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
