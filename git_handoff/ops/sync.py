"""Share the state through any git remote: fetch, merge, push (DESIGN §3).

- Fetch with the git CLI into refs/remotes/<remote>/harness/* and
  refs/remotes/<remote>/notes/* — never onto local refs, which only move by
  compare-and-swap after a merge.
- Merge: fast-forward when one side contains the other, else a 3-way merge
  (git_handoff.merge) written as a merge commit with both parents.
- Push without force through the git CLI (ssh config, credential helpers);
  rejected -> fetch, merge, retry (bounded, then Contention, exit 3).
- `transact_remote` runs one transaction whose commit only counts once the
  remote accepted it: the base of `claim --remote`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from git_handoff import merge
from git_handoff.errors import (
    Contention,
    GitFailure,
    HandoffError,
    InvalidState,
    Negative,
    NotInitialized,
    UsageError,
)
from git_handoff.gitrepo import Repo
from git_handoff.store import (
    ATTEMPTS_PREFIX,
    NOTES_REF,
    STATE_REF,
    TASKS_DIR,
    Snapshot,
    StateStore,
    Tx,
    format_log_line,
)

T = TypeVar("T")

PUSH_TRIES = 8
NOTICES_FILE = "notices.json"


# -- remotes ------------------------------------------------------------------------


class Remote:
    """A remote as git knows it (a name), or a URL/path given directly."""

    def __init__(self, repo: Repo, spec: str | None) -> None:
        names = set(repo.raw.remotes.names())
        if spec is None:
            spec = repo.config_get("handoff.remote") or "origin"
            if spec not in names:
                raise UsageError(
                    f"no remote {spec!r}: name one (`git handoff sync REMOTE`) or set `git config handoff.remote NAME`"
                )
        if not spec or spec.startswith("-"):
            raise UsageError(f"invalid remote {spec!r}")
        self.spec = spec
        self.named = spec in names
        if self.named:
            self.track = spec
        elif "/" in spec or ":" in spec or os.path.isdir(spec):
            self.track = "handoff-" + hashlib.sha1(spec.encode()).hexdigest()[:10]
        else:
            raise UsageError(f"unknown remote {spec!r} (see `git remote -v`)")

    @property
    def state(self) -> str:
        return f"refs/remotes/{self.track}/harness/state"

    @property
    def notes(self) -> str:
        return f"refs/remotes/{self.track}/notes/harness"

    @property
    def attempts(self) -> str:
        return f"refs/remotes/{self.track}/harness/attempts/"

    def refspecs(self) -> list[str]:
        return [f"+refs/harness/*:refs/remotes/{self.track}/harness/*",
                f"+refs/notes/*:refs/remotes/{self.track}/notes/*"]


def default_remote_name(repo: Repo) -> str | None:
    name = repo.config_get("handoff.remote") or "origin"
    return name if name in set(repo.raw.remotes.names()) else None


def _git_error(proc: Any, what: str) -> GitFailure:
    err = proc.stderr.decode(errors="replace").strip().splitlines()
    lines = [line for line in err if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    tail = (fatal or lines or [f"exit {proc.returncode}"])[0]
    return GitFailure(f"{what}: {tail}")


def add_refspecs(repo: Repo, remote: Remote) -> None:
    """So that a plain `git fetch` brings the state too, into remote-tracking refs (and a
    `git fetch --prune` keeps them)."""
    if not remote.named:
        return
    configured = set(repo.git("config", "--get-all", f"remote.{remote.spec}.fetch", check=False)
                     .stdout.decode().split())
    for spec in remote.refspecs():
        if spec not in configured:
            repo.git("config", "--add", f"remote.{remote.spec}.fetch", spec, check=False)


def named_remote(repo: Repo, name: str) -> Remote:
    """A remote git knows by this name (UsageError otherwise)."""
    if name not in set(repo.raw.remotes.names()):
        raise UsageError(f"unknown remote {name!r} (see `git remote -v`; add it with `git remote add`)")
    return Remote(repo, name)


def use_remote(repo: Repo, remote: Remote) -> None:
    """`init --remote R`: R becomes handoff.remote and plain `git fetch R` brings the state."""
    add_refspecs(repo, remote)
    repo.git("config", "handoff.remote", remote.spec)


def fetch(repo: Repo, remote: Remote) -> None:
    """Fetch the remote's state, attempts and notes into remote-tracking refs."""
    proc = repo.git("fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head", remote.spec,
                    *remote.refspecs(), check=False, env={"GIT_TERMINAL_PROMPT": "0"})
    if proc.returncode != 0:
        raise _git_error(proc, f"cannot fetch from {remote.spec}")


def _push(repo: Repo, remote: Remote, refspecs: list[str]) -> dict[str, str]:
    """Push without force; {destination ref: flag} with git's porcelain flags ('!' rejected)."""
    if not refspecs:
        return {}
    proc = repo.git("push", "--porcelain", "--no-verify", remote.spec, *refspecs, check=False,
                    env={"GIT_TERMINAL_PROMPT": "0"})
    out: dict[str, str] = {}
    for line in proc.stdout.decode(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and len(parts[0]) == 1 and ":" in parts[1]:
            ref = parts[1].split(":", 1)[1]
            out[ref] = parts[0]
            summary = parts[2] if len(parts) > 2 else ""
            if parts[0] == "!" and "remote rejected" in summary and ref in (STATE_REF, NOTES_REF):
                # a hook or policy on the remote said no: fetching again will not change that
                raise Contention(f"{remote.spec} refused {ref}: {summary.strip()}; nothing was lost locally")
    if proc.returncode != 0 and not out:
        raise _git_error(proc, f"cannot push to {remote.spec}")
    return out


# -- integrating what came in -----------------------------------------------------------


def _tasks_at(repo: Repo, tree: str | None, paths: list[str], claimed_only: bool = False) -> dict[str, Any]:
    out = {}
    for path in paths:
        if tree is None:
            continue
        found = repo.tree_lookup(tree, path)
        if found is None or found[1]:
            continue
        raw = repo.read_blob(found[0])
        if claimed_only and b'"in_progress"' not in raw:
            continue
        try:
            data = json.loads(raw)
        except ValueError:
            continue
        if isinstance(data, dict) and "id" in data:
            out[str(data["id"])] = data
    return out


def _lost_claims(repo: Repo, before: str, after: str) -> list[dict[str, Any]]:
    paths = [p for p in repo.tree_diff(before, after) if p.startswith(merge.TASK_PREFIX)]
    held = _tasks_at(repo, before, paths, claimed_only=True)
    return merge.lost_claims(held, _tasks_at(repo, after, list(held and paths)))


def _lost_claims_changes(repo: Repo, before: str, changes: dict[str, str | bytes | None]) -> list[dict[str, Any]]:
    held = _tasks_at(repo, before, [p for p in changes if p.startswith(merge.TASK_PREFIX)], claimed_only=True)
    if not held:
        return []
    paths = [p for p in changes if p.startswith(merge.TASK_PREFIX)]
    after: dict[str, Any] = {}
    for path in paths:
        value = changes[path]
        raw = repo.read_blob(value) if isinstance(value, str) else value
        if raw is None:
            continue
        try:
            data = json.loads(raw)
        except ValueError:
            continue
        if isinstance(data, dict) and "id" in data:
            after[str(data["id"])] = data
    return merge.lost_claims(held, after)


def merge_changes(repo: Repo, base: str | None, ours: str, theirs: str
                  ) -> tuple[dict[str, str | bytes | None], list[merge.Conflict]]:
    """What to change in `ours` (a tree) to merge `theirs` into it: {path: blob oid, new
    bytes, or None to delete}. Only paths changed on both sides are read and merged."""
    d_ours = repo.tree_diff(base, ours)
    d_theirs = repo.tree_diff(base, theirs)
    changes: dict[str, str | bytes | None] = {}
    conflicts: list[merge.Conflict] = []

    def read(oid: str | None) -> bytes | None:
        return None if oid is None else repo.read_blob(oid)

    for path in sorted(d_theirs):
        old, new = d_theirs[path]
        if path not in d_ours:
            changes[path] = new
            continue
        mine = d_ours[path][1]
        if mine == new:
            continue
        mine_data = read(mine)
        result = merge.merge_file(path, read(old), mine_data, read(new))
        conflicts.extend(result.conflicts)
        if result.data != mine_data:
            changes[path] = result.data
    return changes, conflicts


def merge_trees(repo: Repo, base: str | None, ours: str, theirs: str) -> tuple[str, list[merge.Conflict]]:
    """The merged tree of two state trees (objects written loose; see merge_changes)."""
    changes, conflicts = merge_changes(repo, base, ours, theirs)
    blobs = {p: (v if not isinstance(v, bytes) else repo.write_blob(v)) for p, v in changes.items()}
    return (repo.update_tree(ours, blobs) if blobs else ours), conflicts


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_incoming(repo: Repo, changes: dict[str, Any], label: str) -> None:
    """Refuse (exit 2, nothing changed) task records from `label` this version cannot read:
    taken in, one would make the local state unreadable for every later command."""
    from git_handoff.model import Task

    for path, value in changes.items():
        if not path.startswith(TASKS_DIR + "/") or value is None:
            continue
        data = value if isinstance(value, bytes) else repo.read_blob(value)
        try:
            Task.loads(data, source=f"{path} in the state of {label}")
        except UsageError as exc:
            raise InvalidState(f"{exc.message}; nothing was merged") from None


def integrate(store: StateStore, theirs: str | None, label: str) -> dict[str, Any]:
    """Bring commit `theirs` (the remote's state) into the local state ref."""
    repo = store.repo
    report: dict[str, Any] = {"action": "none", "incoming": 0, "conflicts": [], "claims_lost": []}
    if theirs is None:
        report["action"] = "no-remote-state"
        return report
    Snapshot(repo, theirs)  # refuses a remote state this version cannot read
    with store.lock():
        for _ in range(20):
            ours = store.head()
            if ours is None:
                Snapshot(repo, theirs).tasks()  # every record readable
                if repo.cas_ref(STATE_REF, theirs, None, f"handoff: adopted the state of {label}"):
                    report.update(action="adopted", incoming=repo.count_commits(theirs))
                    return report
                continue
            if repo.is_ancestor(theirs, ours):
                report["action"] = "up-to-date"
                return report
            incoming = repo.count_commits(theirs, ours)
            if repo.is_ancestor(ours, theirs):
                diff = repo.tree_diff(repo.commit_tree(ours), repo.commit_tree(theirs))
                _check_incoming(repo, {p: new for p, (_, new) in diff.items()}, label)
                lost = _lost_claims(repo, repo.commit_tree(ours), repo.commit_tree(theirs))
                if repo.cas_ref(STATE_REF, theirs, ours, f"handoff: fast-forward to {label}"):
                    report.update(action="fast-forward", incoming=incoming, claims_lost=lost)
                    _remember_notices(repo, lost)
                    return report
                continue
            base = repo.merge_base(ours, theirs)
            changes, conflicts = merge_changes(repo, repo.commit_tree(base) if base else None,
                                               repo.commit_tree(ours), repo.commit_tree(theirs))
            _check_incoming(repo, changes, label)
            outgoing = repo.count_commits(ours, theirs)
            lines = [format_log_line(store.session, "SYNC",
                                     f"merged {label}: in={incoming} out={outgoing} conflicts={len(conflicts)}")]
            for c in conflicts:
                lines.append(format_log_line(store.session, "SYNC",
                                             f"conflict {c.field}: kept {_short(c.kept)} over {_short(c.dropped)}",
                                             task=c.record))
            lost = _lost_claims_changes(repo, repo.commit_tree(ours), changes)
            for item in lost:
                lines.append(format_log_line(store.session, "SYNC",
                                             f"claim of {item['worker']} lost (now {item['now']}"
                                             + (f" by {item['claimed_by']})" if item.get("claimed_by") else ")"),
                                             task=item["task"]))
            commit = repo.commit_changes_packed([ours, theirs], changes, "\n".join(lines) + "\n")
            if repo.cas_ref(STATE_REF, commit, ours, "handoff: merge"):
                report.update(action="merged", incoming=incoming, conflicts=[c.to_json() for c in conflicts],
                              claims_lost=lost)
                _remember_notices(repo, lost)
                return report
    raise Contention(f"{STATE_REF} kept changing while merging {label}; nothing was lost, retry")


def _merge_notes(repo: Repo, store: StateStore, theirs: str | None) -> str:
    """Union of our notes and the remote's (the same object noted on both: both texts)."""
    if theirs is None:
        return "none"
    from git_handoff.ops.notes import NOTES_LOCK
    from git_handoff.store import StateLock

    with StateLock(repo.handoff_dir / NOTES_LOCK, 30):
        for _ in range(20):
            ours = repo.ref_target(NOTES_REF)
            if ours is None:
                if repo.cas_ref(NOTES_REF, theirs, None, "handoff: notes from sync"):
                    return "adopted"
                continue
            if repo.is_ancestor(theirs, ours):
                return "up-to-date"
            if repo.is_ancestor(ours, theirs):
                if repo.cas_ref(NOTES_REF, theirs, ours, "handoff: notes fast-forward"):
                    return "fast-forward"
                continue
            ot, tt = repo.commit_tree(ours), repo.commit_tree(theirs)
            mine = {p.replace("/", ""): (p, new) for p, (_, new) in repo.tree_diff(None, ot).items()}
            changes: dict[str, str | None] = {}
            for p, (_, new) in repo.tree_diff(None, tt).items():
                key = p.replace("/", "")
                if key not in mine:
                    changes[p] = new
                elif mine[key][1] != new and new is not None and mine[key][1] is not None:
                    a = repo.read_blob(mine[key][1])
                    b = repo.read_blob(new)
                    changes[mine[key][0]] = repo.write_blob(_union_text(a, b))
            tree = repo.update_tree(ot, changes) if changes else ot
            commit = repo.create_commit(tree, [ours, theirs], "Notes merged by git handoff sync\n")
            if repo.cas_ref(NOTES_REF, commit, ours, "handoff: notes merged"):
                return "merged"
    raise Contention(f"{NOTES_REF} kept changing while merging; retry")


def _union_text(a: bytes, b: bytes) -> bytes:
    lo, hi = sorted((a, b))
    lines = lo.decode(errors="replace").splitlines()
    extra = [x for x in hi.decode(errors="replace").splitlines() if x not in set(lines)]
    if not extra:
        return lo if lo.endswith(b"\n") else lo + b"\n"
    return ("\n".join(lines + extra) + "\n").encode()


def _take_attempts(repo: Repo, remote: Remote) -> tuple[list[str], list[str]]:
    """Create local attempt refs for the remote's attempts we lack; report clashes."""
    fetched, clashing = [], []
    for name, oid in sorted(repo.refs_under(remote.attempts).items()):
        local = ATTEMPTS_PREFIX + name[len(remote.attempts):]
        mine = repo.ref_target(local)
        if mine is None:
            if repo.cas_ref(local, oid, None, f"handoff: attempt from {remote.spec}"):
                fetched.append(local)
        elif mine != oid:
            clashing.append(local)
    return fetched, clashing


# -- sync -------------------------------------------------------------------------------


def _round(store: StateStore, remote: Remote, report: dict[str, Any]) -> bool:
    """One fetch-merge-push round; True when everything reached the remote."""
    repo = store.repo
    fetch(repo, remote)
    theirs = repo.ref_target(remote.state)
    step = integrate(store, theirs, remote.spec)
    if report["action"] in ("", "up-to-date", "no-remote-state"):
        report["action"] = step["action"]
    report["incoming"] += step["incoming"]
    report["conflicts"].extend(step["conflicts"])
    report["claims_lost"].extend(step["claims_lost"])
    report["notes"] = _merge_notes(repo, store, repo.ref_target(remote.notes))
    fetched, clashing = _take_attempts(repo, remote)
    report["attempts"]["fetched"].extend(fetched)
    report["attempts"]["conflicting"] = clashing
    local = store.head()
    if local is None:
        raise NotInitialized(f"nothing to sync: neither this clone nor {remote.spec} has a git handoff state "
                             "(run `git handoff init`)")
    specs: list[str] = []
    if local != theirs:
        specs.append(f"{STATE_REF}:{STATE_REF}")
        report["outgoing"] = repo.count_commits(local, theirs)
    notes = repo.ref_target(NOTES_REF)
    if notes is not None and notes != repo.ref_target(remote.notes):
        specs.append(f"{NOTES_REF}:{NOTES_REF}")
    remote_attempts = repo.refs_under(remote.attempts)
    for name, _oid in sorted(repo.refs_under(ATTEMPTS_PREFIX).items()):
        if remote_attempts.get(remote.attempts + name[len(ATTEMPTS_PREFIX):]) is None:
            specs.append(f"{name}:{name}")
    flags = _push(repo, remote, specs)
    rejected = [ref for ref, flag in flags.items() if flag == "!"]
    report["pushed"].extend(sorted(ref for ref, flag in flags.items() if flag in (" ", "*", "+")))
    report["attempts"]["pushed"].extend(sorted(r for r in report["pushed"] if r.startswith(ATTEMPTS_PREFIX)))
    if any(r.startswith(ATTEMPTS_PREFIX) for r in rejected):
        report["attempts"]["conflicting"] = sorted(set(report["attempts"]["conflicting"])
                                                   | {r for r in rejected if r.startswith(ATTEMPTS_PREFIX)})
    if STATE_REF in flags and flags[STATE_REF] != "!":
        # the remote has it now; keep the tracking ref honest without another fetch
        repo.cas_ref(remote.state, local, repo.ref_target(remote.state), "handoff: pushed")
    return not any(r in (STATE_REF, NOTES_REF) for r in rejected)


def sync(store: StateStore, remote: str | None = None, *, tries: int = PUSH_TRIES) -> dict[str, Any]:
    """Fetch, merge and push the state, attempts and notes; a summary of what moved."""
    remote_obj = Remote(store.repo, remote)
    report: dict[str, Any] = {
        "remote": remote_obj.spec, "action": "", "incoming": 0, "outgoing": 0, "conflicts": [],
        "claims_lost": [], "pushed": [], "attempts": {"fetched": [], "pushed": [], "conflicting": []},
        "notes": "none", "retries": 0,
    }
    for attempt in range(tries):
        if _round(store, remote_obj, report):
            add_refspecs(store.repo, remote_obj)
            report["state_commit"] = store.head()
            if report["action"] in ("up-to-date", "no-remote-state") and STATE_REF in report["pushed"]:
                report["action"] = "pushed"
            return report
        report["retries"] = attempt + 1
        _backoff(attempt)
    raise Contention(f"{remote_obj.spec} kept rejecting the push ({tries} tries); nothing was lost, retry "
                     "`git handoff sync`")


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0.01, 0.05 * (2 ** min(attempt, 4))))


# -- a transaction that counts only once the remote has it -------------------------------


def _build_commit(store: StateStore, tx: Tx, head: str) -> str:
    repo = store.repo
    blobs = {p: (None if d is None else repo.write_blob(d)) for p, d in tx.changes.items()}
    base_tree = repo.commit_tree(head)
    tree = repo.update_tree(base_tree, blobs) if blobs else base_tree
    message = "\n".join(tx.lines) + "\n" if tx.lines else "git handoff: state update\n"
    return repo.create_commit(tree, [head], message)


def transact_remote(store: StateStore, apply: Callable[[Tx], T], remote: str | None = None,
                    *, tries: int = 30) -> T:
    """fetch -> merge -> apply -> push. Only a push the remote accepted makes the change;
    a rejected one is dropped and `apply` runs again on the newer state (so a claim that
    lost the race takes the next task). Contention (exit 3) after `tries`."""
    repo = store.repo
    remote_obj = Remote(repo, remote)
    for attempt in range(tries):
        fetch(repo, remote_obj)
        theirs = repo.ref_target(remote_obj.state)
        integrate(store, theirs, remote_obj.spec)
        head = store.head()
        if head is None:
            raise NotInitialized("git handoff is not initialized here or on the remote: run `git handoff init`")
        tx = Tx(store, Snapshot(repo, head))
        result = apply(tx)
        if not tx.changes and not tx.lines:
            return result
        commit = _build_commit(store, tx, head)
        flags = _push(repo, remote_obj, [f"{commit}:{STATE_REF}"])
        if flags.get(STATE_REF, "!") != "!":
            repo.cas_ref(remote_obj.state, commit, repo.ref_target(remote_obj.state), "handoff: pushed")
            with store.lock():
                moved = repo.cas_ref(STATE_REF, commit, head, "handoff: remote transaction")
            if not moved:
                integrate(store, commit, remote_obj.spec)
            for hook in tx.after_commit:
                hook()
            return result
        _backoff(min(attempt, 3))
    raise Contention(f"lost the race on {remote_obj.spec} {tries} times; nothing was changed, retry")


def claim_remote(store: StateStore, task_id: str | None = None, *, worker: str | None = None,
                 lease: int | None = None, force: bool = False, remote: str | None = None) -> Any:
    """A claim that holds across machines: fetch -> merge -> claim -> push. Only a claim
    the remote accepted counts; a lost race claims the next task (or, for a named task,
    is Contention once the winner's claim arrives)."""
    from git_handoff.model import check_id
    from git_handoff.ops import work

    if task_id is not None:
        check_id(task_id)
    ctx = work.claim_context(store.repo, worker=worker, lease=lease)
    task = transact_remote(store, lambda tx: work.claim_in_tx(tx, task_id, ctx=ctx, force=force), remote)
    if task is None:
        raise Negative("nothing eligible: every task is completed, in progress, or waiting on failed dependencies")
    return task


def claims_sync_remote(store: StateStore, remote: str | None) -> str | None:
    """The remote a claim must reach: --remote, else the default one when handoff.syncClaims is on."""
    if remote is not None:
        return remote
    if store.repo.config_bool("handoff.syncClaims"):
        return store.repo.config_get("handoff.remote") or "origin"
    return None


# -- autoSync, what waits, notices ----------------------------------------------------------


def auto_sync(store: StateStore) -> str | None:
    """With `handoff.autoSync = true`, push after a transaction. Offline or rejected: the
    work stays local and a one-line reason is returned (status says what waits)."""
    repo = store.repo
    if not repo.config_bool("handoff.autoSync"):
        return None
    try:
        sync(store, None, tries=3)
    except HandoffError as exc:
        return f"not pushed yet ({exc.message}); kept locally, `git handoff sync` pushes it"
    return None


def pending_notes(store: StateStore) -> list[str]:
    """Lines for `status`: what waits to be pushed to the default remote."""
    repo = store.repo
    name = default_remote_name(repo)
    head = store.head()
    if name is None or head is None:
        return []
    tracking = repo.ref_target(f"refs/remotes/{name}/harness/state")
    if tracking is None and not repo.config_bool("handoff.autoSync"):
        return []
    waiting = repo.count_commits(head, tracking)
    if not waiting:
        return []
    return [f"{waiting} state change(s) waiting to be pushed to {name} (run `git handoff sync {name}`)"]


def _remember_notices(repo: Repo, lost: list[dict[str, Any]]) -> None:
    if not lost:
        return
    path = repo.handoff_dir / NOTICES_FILE
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = []
    for item in lost:
        who = f" to {item['claimed_by']}" if item.get("claimed_by") else ""
        old.append(f"your claim of {item['task']} (as {item['worker']}) was lost{who} in a sync: "
                   f"the task is now {item['now']}; stop working on it")
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(old, indent=2) + "\n")
    os.replace(tmp, path)


def take_notices(repo: Repo) -> list[str]:
    """Notices for this clone's next command (shown once)."""
    path = repo.handoff_dir / NOTICES_FILE
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text())
        path.unlink()
    except (OSError, ValueError):
        return []
    return [str(x) for x in data] if isinstance(data, list) else []
