"""Talking to a remote: its configuration here (the refspecs a plain `git fetch` follows,
`handoff.remote`) and push (compare-and-swap, with git's answer classified by
git_handoff.remote.push_outcome). The layout of a remote is git_handoff.remote.layout;
fetch, through the checks of the edge, git_handoff.remote.fetch.

Push goes through the git CLI (ssh config, credential helpers, as git itself would use
them).
"""

from __future__ import annotations

import random
import time

from git_handoff.core.errors import Contention, UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import push_outcome

# The use cases (ops/) and the benchmarks name the layout and the fetch through this
# module: one name for "talking to a remote" above them.
from git_handoff.remote.fetch import fetch as fetch
from git_handoff.remote.fetch import fetch_history as fetch_history
from git_handoff.remote.fetch import git_error
from git_handoff.remote.layout import CLAIMS as CLAIMS
from git_handoff.remote.layout import CLONES as CLONES
from git_handoff.remote.layout import Remote as Remote
from git_handoff.remote.layout import fetch_specs as fetch_specs

# -- the remote's configuration here ------------------------------------------------------


def add_refspecs(repo: Repo, remote: Remote) -> dict[str, list[str]]:
    """So that a plain `git fetch` brings the state too, into remote-tracking refs (and a
    `git fetch --prune` keeps them). Adds only what is missing, and replaces the broader
    notes refspec earlier versions added; returns {"added", "removed"} for the user."""
    changed: dict[str, list[str]] = {"added": [], "removed": []}
    if not remote.named:
        return changed
    key = f"remote.{remote.spec}.fetch"
    local = set(repo.local_config_values(key))
    if local.issuperset(remote.refspecs()) and local.isdisjoint(remote.legacy_refspecs()):
        return changed  # every sync after the first: known without a git process
    configured = set(repo.git("config", "--get-all", key, check=False).stdout.decode().split())
    for spec in remote.refspecs():
        if spec not in configured:
            repo.git("config", "--add", key, spec, check=False)
            changed["added"].append(spec)
    for spec in remote.legacy_refspecs():
        if spec in configured:
            repo.git("config", "--fixed-value", "--unset", key, spec, check=False)
            changed["removed"].append(spec)
    return changed


def named_remote(repo: Repo, name: str) -> Remote:
    """A remote git knows by this name (UsageError otherwise)."""
    if name not in set(repo.raw.remotes.names()):
        raise UsageError(f"unknown remote {name!r} "
                         "(see `git remote -v`; add it with `git remote add`)")
    return Remote(repo, name)


def use_remote(repo: Repo, remote: Remote) -> dict[str, list[str]]:
    """`init --remote R`: R becomes handoff.remote and plain `git fetch R` brings the state."""
    changed = add_refspecs(repo, remote)
    repo.git("config", "handoff.remote", remote.spec)
    return changed


# -- push ---------------------------------------------------------------------------------


def push(repo: Repo, remote: Remote, refspecs: list[str], *,
         leases: dict[str, str | None] | None = None, atomic: bool = False) -> push_outcome.Pushed:
    """Push `refspecs` without force. `leases` {remote ref: expected oid, None = must not
    exist} makes each of those refs a compare-and-swap on the server; `atomic`: all or none."""
    if not refspecs:
        return push_outcome.Pushed({})
    args = ["push", "--porcelain", "--no-verify"]
    if atomic:
        args.append("--atomic")
    for ref, expected in sorted((leases or {}).items()):
        args.append(f"--force-with-lease={ref}:{expected or ''}")
    proc = repo.git(*args, remote.spec, *refspecs, check=False,
                    env={"GIT_TERMINAL_PROMPT": "0"})
    pushed = push_outcome.read(proc.stdout, proc.stderr, failed=proc.returncode != 0)
    if proc.returncode != 0 and not pushed.refs:
        raise git_error(proc, f"cannot push to {remote.spec}")
    return pushed


def refused_error(remote: Remote, what: str) -> Contention:
    """A ref the server refuses by a rule (an access rule, a hook): not a race, so trying
    again changes nothing until the rule or this clone's settings do."""
    return Contention(f"{remote.spec} refused {what}: a rule on the server, not a race "
                      "(docs/server-rights.md); nothing was lost locally")


def backoff(attempt: int, contenders: int = 1) -> None:
    """Between tries after a lost race: random, growing with the try and with how many
    machines share the remote (their pushes are what we wait out)."""
    spread = 0.02 * max(1, min(contenders, 64)) * (2 ** min(attempt, 4))
    time.sleep(random.uniform(0.005, min(spread, 2.0)))
