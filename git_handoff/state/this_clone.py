"""This clone and this worktree: who is working here, the open-session file, the
post-commit hook's state file, the per-clone `handoff.*` git settings, and what
waits to be pushed. Nothing here is synced; nothing here reads the state tree.

Per-worktree files (in <git_dir>/handoff/):
    session.json   the open session of this worktree
    hook-state     "<base> <commitsPerSession> <seen>" for the post-commit hook
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from typing import Any

from git_handoff.core.errors import UsageError
from git_handoff.core.field_checks import MAX_TEXT, line_problem
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo

SESSION_FILE = "session.json"
HOOK_STATE_FILE = "hook-state"


# -- who and where ---------------------------------------------------------------------


# A worker named by its environment: one of several agents working in one work tree, each
# started with its own name (HARNESS_WORKER_ID is the harness skill's name for the same).
WORKER_VARS = ("HANDOFF_WORKER", "HARNESS_WORKER_ID")


def worker_from_env() -> tuple[str, str] | None:
    """(variable, name) of the worker this process names in its environment
    (HANDOFF_WORKER, else HARNESS_WORKER_ID), or None."""
    for var in WORKER_VARS:
        value = os.environ.get(var, "").strip()
        if value:
            return var, _checked(value, var)
    return None


def _checked(name: str, where: str) -> str:
    """A worker name as every clone's reader takes it in a claim (field_checks.WORKER): one line,
    no control character, at most MAX_TEXT characters; else UsageError naming `where`."""
    why = line_problem(name, MAX_TEXT)
    if why:
        raise UsageError(f"the worker name from {where} {why}")
    return name


def declared_worker() -> str | None:
    """The worker this process names in its environment, or None. A declared worker acts
    only on its own claims (git_handoff.state.claim_checks.other_workers)."""
    found = worker_from_env()
    return found[1] if found else None


def worker_identity(repo: Repo, worker: str | None = None) -> str:
    """Who claims: `worker` (--worker), else HANDOFF_WORKER (or HARNESS_WORKER_ID) from the
    environment, else git config handoff.worker (`git -c` included), else user@host:<worktree>."""
    if worker is not None:
        worker = worker.strip()
        if not worker or "\n" in worker:
            raise UsageError("--worker must be non-empty text on one line")
        return _checked(worker, "--worker")
    declared = declared_worker()
    if declared is not None:
        return declared
    configured = repo.config_get("handoff.worker")
    if configured and configured.strip():
        return _checked(configured.strip(), "git config handoff.worker")
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = os.environ.get("USER") or "user"
    where = repo.workdir or repo.git_dir
    return f"{user}@{socket.gethostname()}:{where}"


def here(repo: Repo) -> str:
    """This worktree as a claim records it (`worktree`): its root, else the git dir."""
    return str(repo.workdir or repo.git_dir)


# -- the per-worktree files ----------------------------------------------------------


def open_session(repo: Repo) -> dict[str, Any] | None:
    """This worktree's open session file, or None."""
    try:
        data = json.loads((repo.git_dir / "handoff" / SESSION_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("session"), int) or data.get("ended_at"):
        return None
    return data


def write_private(repo: Repo, name: str, text: str) -> None:
    atomic_write(repo.worktree_dir / name, text)


def remove_private(repo: Repo, name: str) -> None:
    try:
        (repo.git_dir / "handoff" / name).unlink()
    except FileNotFoundError:
        pass


# -- handoff.* settings ----------------------------------------------------------------


def commits_per_session(repo: Repo) -> int | None:
    value = repo.config_int("handoff.commitsPerSession")
    return value if value and value > 0 else None


def tasks_per_session(repo: Repo) -> int | None:
    value = repo.config_int("handoff.tasksPerSession")
    return value if value and value > 0 else None


def default_remote_name(repo: Repo) -> str | None:
    name = repo.config_get("handoff.remote") or "origin"
    return name if name in set(repo.raw.remotes.names()) else None


# -- the post-commit hook's state ---------------------------------------------------------


def write_hook_state(repo: Repo, base: str | None, seen: int | None = None) -> None:
    """What the post-commit hook needs without starting Python or git: the session base, the
    threshold, and the commits since the base counted so far (`seen`; computed when None)."""
    threshold = commits_per_session(repo)
    if base is None or threshold is None:
        remove_private(repo, HOOK_STATE_FILE)
        return
    if seen is None:
        seen = 0
        head = repo.head()
        if head and head != base and repo.has_object(base):
            seen = repo.count_commits(head, base)
    write_private(repo, HOOK_STATE_FILE, f"{base} {threshold} {seen}\n")


def clear_hook_state(repo: Repo) -> None:
    remove_private(repo, HOOK_STATE_FILE)


# -- what waits to be pushed ------------------------------------------------------------


def unpushed_lines(repo: Repo, head: str | None, clone: str) -> list[str]:
    """Lines for `status`: what waits to be pushed to the default remote (to this clone's
    own state ref there, `clone` its id; else the one-ref state of earlier versions)."""
    name = default_remote_name(repo)
    if name is None or head is None:
        return []
    tracking = (repo.ref_target(f"refs/remotes/{name}/harness/clones/{clone}/state")
                or repo.ref_target(f"refs/remotes/{name}/harness/state"))
    if tracking is None and not repo.config_bool("handoff.autoSync"):
        return []
    waiting = repo.count_commits(head, tracking)
    if not waiting:
        return []
    return [f"{waiting} state change(s) waiting to be pushed to {name} (run `git handoff sync {name}`)"]
