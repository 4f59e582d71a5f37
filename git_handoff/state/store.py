"""StateStore: the one transaction engine on `refs/harness/state`, and the history's log.

A transaction is: our filelock in the git dir -> read the ref -> apply -> write
objects -> compare-and-swap the ref against what was read -> bounded retries,
then Contention (exit 3). The commit message is the transaction's log lines.
The layout of the state and its read-only view are git_handoff.state.snapshot's.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from git_handoff.core import hlc, record_schemas, state_tree
from git_handoff.core.errors import (
    Contention,
    HandoffError,
    InvalidState,
    NotInitialized,
    UsageError,
)
from git_handoff.core.model import Config, Task, now_iso, now_ms
from git_handoff.core.patterns import lazy
from git_handoff.core.serialization import dump_task, load_task, task_file, task_to_json
from git_handoff.infra import signing
from git_handoff.infra.file_lock import StateLock
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import identity
from git_handoff.state.snapshot import (
    CONFIG_PATH,
    FORMAT_NAME,
    FORMAT_PATH,
    FORMAT_VERSION,
    META_PATH,
    STATE_REF,
    Snapshot,
    parse_json,
    task_path,
)
from git_handoff.state.this_clone import open_session

LOCK_TIMEOUT_SECONDS = float(os.environ.get("GIT_HANDOFF_LOCK_TIMEOUT", "30"))
CAS_RETRIES = 40
# Packing: on average every GC_CHECK_EVERY transactions, estimate the loose objects
# (a few directory listings); from GC_LOOSE_OBJECTS on, pack them in the background.
# A transaction writes ~6 objects, so loose objects stay under ~GC_LOOSE_OBJECTS + 100.
GC_CHECK_EVERY = 8
GC_LOOSE_OBJECTS = 128

T = TypeVar("T")

LOG_LINE = lazy(r"^\[(?P<ts>[^\]]+)\] \[SESSION-(?P<session>\d+)\] (?P<type>\S+)(?: \[(?P<task>[^\]]+)\])?")


def format_log_line(session: int, kind: str, text: str, task: str | None = None, category: str | None = None,
                    ts: str | None = None) -> str:
    parts = [f"[{ts or now_iso()}]", f"[SESSION-{session}]", kind]
    if task:
        parts.append(f"[{task}]")
    if category:
        parts.append(f"[{category}]")
    if text:
        parts.append(text)
    return " ".join(parts).replace("\n", " ")


def active_session(repo: Repo) -> int:
    """The session this process acts in: $HANDOFF_SESSION, else this worktree's open session, else 0."""
    env = os.environ.get("HANDOFF_SESSION", "").strip()
    if env.isdigit():
        return int(env)
    opened = open_session(repo)
    return int(opened["session"]) if opened else 0


class Tx:
    """One transaction: reads see the base snapshot plus this transaction's writes."""

    def __init__(self, store: StateStore, base: Snapshot | None) -> None:
        self.store = store
        self.base = base
        self.changes: dict[str, bytes | None] = {}
        self.lines: list[str] = []
        self._tasks: dict[str, Task] = {}
        self.followups: list[tuple[str, Callable[[], object]]] = []
        self.redacted = False  # build_commit redacted what it writes (once: a retry builds anew)

    @property
    def session(self) -> int:
        return self.store.session

    @property
    def repo(self) -> Repo:
        return self.store.repo

    # -- reads ----------------------------------------------------------------------

    def read(self, path: str) -> bytes | None:
        if path in self.changes:
            return self.changes[path]
        return self.base.read(path) if self.base else None

    def read_json(self, path: str) -> Any:
        return parse_json(self.read(path), path)

    def listdir(self, path: str) -> list[str]:
        names = set(self.base.listdir(path)) if self.base else set()
        prefix = path.rstrip("/") + "/"
        for changed, data in self.changes.items():
            if changed.startswith(prefix):
                name = changed[len(prefix):].split("/", 1)[0]
                if data is None and "/" not in changed[len(prefix):]:
                    names.discard(name)
                else:
                    names.add(name)
        return sorted(names)

    def config(self) -> Config:
        if CONFIG_PATH in self.changes:
            raw = self.changes[CONFIG_PATH]
            return Config() if raw is None else record_schemas.config(raw, CONFIG_PATH)
        return self.base.config() if self.base else Config()

    def meta(self) -> dict[str, Any]:
        data = self.read_json(META_PATH)
        return dict(data) if isinstance(data, dict) else {}

    def task(self, task_id: str) -> Task | None:
        if task_id in self._tasks:
            return self._tasks[task_id]
        return self.base.task(task_id) if self.base else None

    def require_task(self, task_id: str) -> Task:
        task = self.task(task_id)
        if task is None:
            raise UsageError(f"no task {task_id!r} (see `git handoff list`)")
        return task

    def tasks(self) -> dict[str, Task]:
        """Every task including this transaction's changes, in creation order."""
        base = self.base.tasks() if self.base else {}
        if not self._tasks:
            return base
        merged = dict(base)
        merged.update(self._tasks)
        return dict(sorted(merged.items(), key=lambda kv: (kv[1].order, kv[1].created_at, kv[0])))

    # -- writes ---------------------------------------------------------------------

    def put(self, path: str, data: bytes | None) -> None:
        self.changes[path] = data

    def stamped(self, old: dict[str, Any] | None, new: dict[str, Any], *, task: bool,
                fields: bool = True) -> dict[str, Any]:
        """`new` replacing `old`, stamped by this clone's hybrid logical clock (hlc.stamp_write)."""
        return hlc.stamp_write(old, new, now_ms(), identity.clone_id(self.store.repo),
                           task=task, fields=fields)

    def put_json(self, path: str, value: Any) -> None:
        if isinstance(value, dict):
            raw = self.read(path)
            try:
                old = json.loads(raw) if raw is not None else None
            except ValueError:
                old = None
            value = self.stamped(old if isinstance(old, dict) else None, value, task=False, fields=path != META_PATH)
        self.put(path, (json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode())

    def put_task(self, task: Task) -> Task:
        before = self.task(task.id)
        if before is None:  # a new task (import: thousands of them): the stamp only, no field clock
            when = hlc.next_stamp(hlc.seen_in(task.extra), now_ms(), identity.clone_id(self.store.repo))
            task = task.evolve(updated_at=now_iso(), extra={**task.extra, hlc.FIELD: when})
            data = dump_task(task)
        else:
            new = task_to_json(task.evolve(updated_at=now_iso()))
            stamped = self.stamped(task_to_json(before), new, task=True)
            extra = {k: v for k, v in task.extra.items() if k != hlc.CLOCK}
            extra[hlc.FIELD] = stamped[hlc.FIELD]
            if hlc.CLOCK in stamped:
                extra[hlc.CLOCK] = stamped[hlc.CLOCK]
            task = task.evolve(updated_at=new["updated_at"], extra=extra)
            # task_to_json(task), from `new` (a claim that fails 50,000 tasks builds each once
            # less): the same fields in the same order, the stamp where the old one stood
            # or last, the field clock last
            doc = {k: v for k, v in new.items() if k != hlc.CLOCK}
            doc[hlc.FIELD] = stamped[hlc.FIELD]
            if hlc.CLOCK in stamped:
                doc[hlc.CLOCK] = stamped[hlc.CLOCK]
            data = task_file(doc)
        self._tasks[task.id] = task
        self.put(task_path(task.id), data)
        return task

    def after_commit(self, what: str, fn: Callable[[], object]) -> None:
        """Run `fn` once this transaction's commit is in, never when it is not (a retried
        transaction starts with none): the one home for best-effort follow-ups such as
        notes, the tasks-per-session document, the claim index. A HandoffError it raises
        does not fail the command: `StateStore.best_effort` records it as `what`."""
        self.followups.append((what, fn))

    def log(self, kind: str, text: str = "", task: str | None = None, category: str | None = None,
            *, session: int | None = None) -> str:
        """Add a log line to this transaction's commit, in the transaction's session unless
        `session` names another one (a session record written for session N logs as N)."""
        line = format_log_line(self.session if session is None else session, kind, text, task=task, category=category)
        self.lines.append(line)
        return line


@dataclass
class LogEntry:
    """One parsed log line of the state history."""

    line: str
    ts: str
    session: int
    type: str
    task: str | None
    commit: str


class StateStore:
    def __init__(self, repo: Repo, session: int | None = None) -> None:
        self.repo = repo
        self.session = active_session(repo) if session is None else session
        # What best-effort follow-ups failed with ("what: message"), oldest first.
        self.swallowed: list[str] = []
        self._snap: Snapshot | None = None  # the last snapshot read: one per state commit

    # -- reading --------------------------------------------------------------------

    def head(self) -> str | None:
        return self.repo.ref_target(STATE_REF)

    def is_initialized(self) -> bool:
        return self.head() is not None

    def snapshot(self, commit: str | None = None) -> Snapshot:
        """The state at `commit` (default: the state ref now). A commit is immutable, so
        every question asked of one commit in this process shares one Snapshot, and what it
        parsed (tasks, config) is parsed once."""
        commit = commit or self.head()
        if commit is None:
            raise NotInitialized("git handoff is not initialized here: run `git handoff init`")
        snap = self._snap
        if snap is None or snap.commit != commit or snap.repo is not self.repo:
            snap = self._snap = Snapshot(self.repo, commit)
        return snap

    def entries(self, start: str | None = None, limit: int | None = None) -> Iterator[LogEntry]:
        """Log lines of the state history, newest commit first (lines of one commit in order)."""
        start = start or self.head()
        if start is None:
            return
        seen = 0
        for commit in self.repo.walk(start):
            message = self.repo.commit_info(commit)[0]
            batch = []
            for line in message.splitlines():
                m = LOG_LINE.match(line)
                if m:
                    batch.append(LogEntry(line, m["ts"], int(m["session"]), m["type"], m["task"], commit))
            for entry in reversed(batch):
                yield entry
                seen += 1
                if limit is not None and seen >= limit:
                    return

    # -- writing --------------------------------------------------------------------

    def lock(self) -> Any:
        """The per-clone state lock (a context manager); Contention (exit 3) after the timeout."""
        return StateLock(self.repo.handoff_dir / "state.lock", LOCK_TIMEOUT_SECONDS)

    def transact(self, apply: Callable[[Tx], T], *, allow_uninitialized: bool = False) -> T:
        """Run `apply` on the current state and commit what it wrote, atomically.

        `apply` may run more than once (after a lost compare-and-swap), so it must
        only read from and write to the Tx. Errors it raises leave the state as it was.
        """
        with self.lock():
            result, committed = self._transact_locked(apply, allow_uninitialized)
        if committed is not None:  # outside the lock: a follow-up may run a transaction of its own
            self.run_followups(committed)
        return result

    def _transact_locked(self, apply: Callable[[Tx], T], allow_uninitialized: bool) -> tuple[T, Tx | None]:
        self.repo.reopen_if_repacked()
        for attempt in range(CAS_RETRIES):
            head = self.head()
            if head is None and not allow_uninitialized:
                raise NotInitialized("git handoff is not initialized here: run `git handoff init`")
            tx = Tx(self, self.snapshot(head) if head else None)
            result = apply(tx)
            if not tx.changes and not tx.lines:
                return result, None
            if self._commit(tx, head):
                return result, tx
            time.sleep(min(0.2, 0.005 * (2 ** min(attempt, 6))) * random.random())
        raise Contention(f"{STATE_REF} kept changing under this transaction ({CAS_RETRIES} tries); "
                         "nothing was changed, retry")

    def _commit(self, tx: Tx, head: str | None) -> bool:
        commit = self.build_commit(tx, [head] if head else [])  # redacts tx's lines first
        first = tx.lines[0] if tx.lines else "state update"
        return self.publish(commit, head, f"handoff: {first[:200]}")

    # The one transaction engine: every state commit is built by `build_commit` (or, for a
    # merge, `commit_merge`) and every move of the state ref goes through `publish`. A local
    # transaction publishes at once; `ops.sync.transact_remote` pushes the commit first.

    def build_commit(self, tx: Tx, parents: list[str]) -> str:
        """The commit of what `tx` wrote on top of its base (objects written, no ref moved).
        Every text it writes and logs is redacted first (git_handoff.state.redaction), and
        each redaction logged by its kind and field: no secret reaches a published ref."""
        repo = self.repo
        if not tx.redacted:
            from git_handoff.state import redaction  # only a command that writes scans

            tx.redacted = True
            for kind, field, task in redaction.redact_transaction(repo, tx.changes, tx.lines,
                                                                    tx.base.read if tx.base else None):
                tx.log("WARN", f"redacted {kind} from {field} (secret scan; see `git handoff secrets`)", task=task)
                stored = tx.changes.get(task_path(task)) if task else None
                if task and task in tx._tasks and stored is not None:  # what the command reads back: as written
                    tx._tasks[task] = load_task(stored, source=task_path(task))
        if os.environ.get("HANDOFF_CHECK_WRITES") == "1":
            _check_writes(tx.changes)
        written = [data for data in tx.changes.values() if data is not None]
        oids = iter(repo.write_blobs(written))  # many: one pack, not a loose object each
        blobs = {path: (None if data is None else next(oids)) for path, data in tx.changes.items()}
        base_tree = tx.base.tree if tx.base else None
        tree = repo.update_tree(base_tree, blobs) if blobs else base_tree
        if tree is None:
            tree = repo.update_tree(None, {})
        message = "\n".join(tx.lines) + "\n" if tx.lines else "git handoff: state update\n"
        return signing.seal(repo, repo.create_commit(tree, parents, message))

    def commit_merge(self, parents: list[str], changes: Mapping[str, str | bytes | None], lines: list[str]) -> str:
        """A merge commit of two state histories: the first parent's tree with `changes`
        (written as one pack: a merge may bring thousands of blobs), no ref moved."""
        return signing.seal(self.repo, self.repo.commit_changes_packed(parents, changes, "\n".join(lines) + "\n"))

    def seal(self, commit: str) -> str:
        """A state commit built elsewhere (a sync's chain of merges), as this clone
        publishes its own: signed when asked for (git_handoff.infra.signing)."""
        return signing.seal(self.repo, commit)

    def publish(self, commit: str, expected: str | None, reason: str) -> bool:
        """Move refs/harness/state from `expected` to `commit` (compare-and-swap; False when
        it moved meanwhile). Now and then, pack loose objects in the background."""
        repo = self.repo
        if not repo.cas_ref(STATE_REF, commit, expected, reason):
            return False
        self.last_commit = commit
        if random.randrange(GC_CHECK_EVERY) == 0 and repo.loose_estimate() >= GC_LOOSE_OBJECTS:
            repo.gc_in_background()
        return True

    # -- after a commit -------------------------------------------------------------------

    def run_followups(self, tx: Tx) -> None:
        """The follow-ups `tx` registered with `after_commit`, in order, each best-effort."""
        for what, fn in tx.followups:
            self.best_effort(what, fn)

    def best_effort(self, what: str, fn: Callable[[], object]) -> None:
        """Run `fn`, which must never fail the command: a HandoffError it raises is recorded
        in `swallowed` as "what: message" (shown with GIT_HANDOFF_DEBUG) instead."""
        try:
            fn()
        except HandoffError as exc:
            self.swallowed.append(f"{what}: {exc.message}")
            if os.environ.get("GIT_HANDOFF_DEBUG"):
                print(f"debug: {what} skipped: {exc.message}", file=sys.stderr)


def initial_files(config_toml: str) -> dict[str, bytes]:
    return {
        FORMAT_PATH: f"{FORMAT_NAME} {FORMAT_VERSION}\n".encode(),
        CONFIG_PATH: config_toml.encode(),
        META_PATH: (json.dumps({"created": now_iso(), "session_count": 0, "last_session": None}, indent=2,
                               sort_keys=True) + "\n").encode(),
    }


def _check_writes(changes: Mapping[str, bytes | None]) -> None:
    """What the test suite asks of every transaction (HANDOFF_CHECK_WRITES=1, set by
    tests/conftest.py): each record it writes passes the parser every other clone's
    sync puts it through (git_handoff.core.state_tree). A record that does not is a bug of the
    writer: the state would be refused by the fleet, and by this clone's own reads."""
    for path, data in changes.items():
        if data is None:
            continue
        kind = state_tree.kind_of(path)
        if kind is None:
            raise AssertionError(f"git handoff wrote {path}, a path its own edge does not know")
        try:
            state_tree.check_record(path, data, kind)
        except InvalidState as exc:
            raise AssertionError(f"git handoff wrote a record its own edge refuses: {exc.message}") from None
