"""Fetching the target branch and moving it (SPEC §10): by a push that names the tip the
work was checked on, never a force push (the new tip always descends from the old one);
without a remote, by a compare-and-swap of this repository's branch. Which branch is the
target is git_handoff.state.target.
"""

from __future__ import annotations

from git_handoff.core.errors import Contention
from git_handoff.infra import merge_tree
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import push_outcome, transport
from git_handoff.remote.fetch import git_error
from git_handoff.remote.layout import Remote
from git_handoff.state.target import BRANCH_PREFIX, Target, tip


class TargetMoved(Contention):
    """The target is not where the work was built and checked on: fetch, build and check again."""


def bring(repo: Repo, target: Target) -> str | None:
    """Fetch the target's tip from its remote (nothing to do without one); the tip."""
    if target.remote is not None:
        proc = repo.git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--refmap=",
                        target.remote, f"+{BRANCH_PREFIX}{target.branch}:{target.ref}", check=False,
                        env={"GIT_TERMINAL_PROMPT": "0"})
        if proc.returncode != 0:
            missing = b"couldn't find remote ref" in proc.stderr
            if not missing:
                raise git_error(proc, f"cannot fetch {target.name}")
    return tip(repo, target)


def move(repo: Repo, target: Target, new: str, old: str | None, also: list[str] | None = None) -> bool:
    """Move the target from `old` to `new` (a descendant of it): a push whose lease names
    `old` (with `also`, more refspecs in the same atomic push), or, without a remote, a
    compare-and-swap of the branch (a worktree that has it checked out, clean and at `old`,
    follows with `git merge --ff-only`). Contention when the target moved meanwhile
    (fetch and build again) or the server refused it (a protected branch: said so).
    False when the remote's target was at `new` already: another clone landed the very same
    commit (the same merge of the same work onto the same tip) first."""
    remote_ref = BRANCH_PREFIX + target.branch
    if target.remote is None:
        _move_local(repo, target.branch, new, old)
        return True
    specs = [f"{new}:{remote_ref}", *(also or [])]
    pushed = transport.push(repo, Remote(repo, target.remote), specs, leases={remote_ref: old}, atomic=True)
    what = pushed.outcome(remote_ref)
    if what == push_outcome.ACCEPTED:
        repo.cas_ref(target.ref, new, repo.ref_target(target.ref), "handoff: integrated")
        return not pushed.already(remote_ref)
    if what == push_outcome.REFUSED:
        raise Contention(f"{target.remote} refused to move {target.branch} (a protected branch, or a rule on "
                         "the server): the work stays published under refs/harness/work/; let the forge's merge "
                         "queue or a pull request land it (docs/many-agents.md)")
    if what == push_outcome.ATOMIC:  # the target was fine; another ref of the same push was not
        other = pushed.refused() or ", ".join(f"{ref}: {summary.strip()}" for ref, (how, summary)
                                              in sorted(pushed.refs.items()) if how not in (push_outcome.ACCEPTED,
                                                                                           push_outcome.ATOMIC))
        raise Contention(f"{target.remote} took no part of the landing of {target.branch}: {other or 'refused'}")
    raise TargetMoved(f"{target.name} moved while this work was being checked; fetch and try again")


def _move_local(repo: Repo, branch: str, new: str, old: str | None) -> None:
    ref = BRANCH_PREFIX + branch
    where = merge_tree.checked_out_at(repo, branch)
    if where is None:
        if not repo.cas_ref(ref, new, old, "handoff: integrated"):
            raise TargetMoved(f"{branch} moved while this work was being checked; try again")
        return
    if not merge_tree.clean(where):
        raise Contention(f"{branch} is checked out in {where} with uncommitted changes: commit or stash them "
                         "there, then run `git handoff integrate` again")
    if repo.ref_target(ref) != old:
        raise TargetMoved(f"{branch} moved while this work was being checked; try again")
    why = merge_tree.fast_forward(where, new)
    if why is not None:
        raise Contention(f"could not bring {where} ({branch}) forward: {why}")
