"""Where a claim starts: never from a base missing a dependency's work (SPEC §10).

A dependency's work is the commit `done` completed it at (`completed_commit`). A claim's
base holds it when that commit is the base or one of its ancestors: the dependency was
done in this worktree's history, or its work has landed on the target branch and the
base is on the target (`git handoff integrate`). Before the claim's transaction,
`forward` finds whether this worktree can start from the target's tip instead of its
HEAD: a clean work tree whose HEAD the tip descends from (the worktree is then brought
forward with `git merge --ff-only` once the claim holds, `bring_forward`) — or a clean
work tree whose HEAD holds work the queue refused, every commit of it the tip lacks kept
by a work or attempt ref (ops/work_refs.py): building on refused work would be refused
again, so the worktree leaves it for the tip (`git reset --keep`; nothing is lost, the
refs hold it). A worktree with changes of its own is never moved; a task whose dependency's work is then missing
is not taken, and a claim naming it is refused, saying which work is missing and where
it is.
"""

from __future__ import annotations

import dataclasses

from git_handoff.core.errors import UsageError
from git_handoff.core.model import CLAIM_FIELDS, Task
from git_handoff.infra import merge_tree
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import work_refs
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


@dataclasses.dataclass(frozen=True)
class Forward:
    """Where a clean worktree moves before its claim: the target's `tip`; `leaving`: the
    refused work ref its HEAD held (None: HEAD was behind the tip, a fast-forward)."""

    tip: str
    leaving: str | None = None


def forward(store: StateStore, head: str, snapshot: str | None, target: targets.Target | None) -> Forward | None:
    """Where this worktree (at `head`, `snapshot` None: clean) may start from instead of
    its HEAD (the module's docstring), or None."""
    if target is None or snapshot is not None:
        return None
    repo = store.repo
    tip = targets.tip(repo, target)
    if tip is None or tip == head:
        return None
    if repo.is_ancestor(head, tip):
        return Forward(tip)
    refused = work_refs.held_refused(repo, store.snapshot().task, head, tip)
    if refused is None or not work_refs.all_kept(repo, head, tip):
        return None
    return Forward(tip, refused)


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


def bring_forward(repo: Repo, head: str, to: Forward | None) -> str | None:
    """Move this worktree from `head` to the claim's base (None: stay): None, or why it could not."""
    if to is None:
        return None
    if to.leaving is None:
        return merge_tree.fast_forward(repo.root(), to.tip)
    if repo.head() != head:
        return "its HEAD moved while the claim was taken"
    return merge_tree.reset_keep(repo.root(), to.tip)
