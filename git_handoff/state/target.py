"""The target branch: where finished work lands (SPEC §10). Which branch it is and where
this clone reads its tip (git_handoff.remote.landing fetches and moves it; this module
reads git config and refs only, as every claim does).

`handoff.target` names the branch; without it, the remote's default branch (its
`refs/remotes/<remote>/HEAD`, as `git clone` sets it), else the branch the main worktree
has checked out (the one linked worktrees were added from; for a single worktree, its
own branch). With a remote (`handoff.remote`, else `origin` when there is one) the
target lives there: this clone reads it from its remote-tracking ref and moves it only
by a push that names the tip it was built on (never a force push: the new tip always
descends from the old). Without one, the target is this repository's own branch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from git_handoff.core.errors import UsageError
from git_handoff.core.model import Task
from git_handoff.core.patterns import lazy
from git_handoff.infra.gitrepo import Repo

BRANCH_PREFIX = "refs/heads/"


def track_of(spec: str, named: bool) -> str:
    """The name under refs/remotes/ where a remote's refs are tracked here: its own name, or
    for a URL or path given directly, `handoff-` and a digest of it."""
    return spec if named else "handoff-" + hashlib.sha1(spec.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Target:
    branch: str  # the branch's short name (main)
    remote: str | None  # the remote's name; None: this repository's own branch is the target

    @property
    def ref(self) -> str:
        """Where this clone reads the target's tip: the remote-tracking ref, or the branch."""
        if self.remote is None:
            return BRANCH_PREFIX + self.branch
        return f"refs/remotes/{self.remote}/{self.branch}"

    @property
    def name(self) -> str:
        """The target as a person names it: origin/main, or main."""
        return self.branch if self.remote is None else f"{self.remote}/{self.branch}"


_BRANCH = lazy(r"(?!-)(?!.*(?:\.\.|@\{|//|/\.|\.lock(?:/|$)))[^\x00-\x20\x7f~^:?*\[\\]+(?<![./])")


def _valid_branch(name: str) -> bool:
    return bool(_BRANCH.fullmatch(name)) and not name.startswith("/")


def _symbolic(repo: Repo, name: str) -> str | None:
    """Where the symbolic ref `name` points (None: no such symbolic ref)."""
    try:
        ref = repo.raw.references.get(name)
    except ValueError:
        return None
    target = getattr(ref, "target", None) if ref is not None else None
    return target if isinstance(target, str) else None


def resolve(repo: Repo, remote: str | None = None) -> Target:
    """The target of this clone (the module's docstring); `remote` overrides handoff.remote."""
    names = set(repo.raw.remotes.names())
    where = remote or repo.config_get("handoff.remote") or ("origin" if "origin" in names else None)
    if where is not None and where not in names:
        raise UsageError(f"no remote {where!r} to integrate through (see `git remote -v`); the target's remote "
                         "is handoff.remote, else origin")
    configured = repo.config_get("handoff.target")
    if configured:
        branch = configured[len(BRANCH_PREFIX):] if configured.startswith(BRANCH_PREFIX) else configured
        if not _valid_branch(branch):
            raise UsageError(f"handoff.target is {configured!r}, not a branch name")
        return Target(branch, where)
    if where is not None:
        default = _symbolic(repo, f"refs/remotes/{where}/HEAD")
        prefix = f"refs/remotes/{where}/"
        if default is not None and default.startswith(prefix):
            return Target(default[len(prefix):], where)
    # the main worktree's branch: for one worktree, the branch it is on; for linked
    # worktrees (a worker each), the branch of the one they were added from
    found = _main_worktree_branch(repo) or repo.head_branch()
    if found is None:
        raise UsageError("no target branch: set `git config handoff.target BRANCH` (this worktree's HEAD is "
                         "detached and the remote names no default branch)")
    return Target(found[len(BRANCH_PREFIX):] if found.startswith(BRANCH_PREFIX) else found, where)


def _main_worktree_branch(repo: Repo) -> str | None:
    try:
        text = (repo.common_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return text[len("ref: "):] if text.startswith("ref: " + BRANCH_PREFIX) else None


def tip(repo: Repo, target: Target) -> str | None:
    """The target's tip as this clone last saw it (None: no such branch yet)."""
    return repo.ref_target(target.ref)


# -- what a base holds of its dependencies' work (ops/claim_base.py, `next`) --------------------


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
