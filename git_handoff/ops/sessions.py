"""Sessions: numbering, the per-worktree open session, limits, and the facts a session
records for its handoff document (decisions, blockers, completed tasks).

State files (one blob per record):
    sessions/<n>.json   the session record (worker, base, started/ended, completed tasks,
                        decisions, blockers, ack)
Per-worktree files (never synced):
    <git_dir>/handoff/session.json   the open session of this worktree
    <git_dir>/handoff/hook-state     "<base> <commitsPerSession>" for the post-commit hook
"""

from __future__ import annotations

import json
import os
from typing import Any

from git_handoff import identity
from git_handoff.errors import HandoffError, Negative, UsageError
from git_handoff.gitrepo import Repo
from git_handoff.model import now_iso
from git_handoff.store import META_PATH, StateStore, Tx, active_session, format_log_line

SESSIONS_DIR = "sessions"
SESSION_FILE = "session.json"
HOOK_STATE_FILE = "hook-state"


def session_path(number: int) -> str:
    return f"{SESSIONS_DIR}/{number}.json"


def put_record(tx: Tx, path: str, record: dict[str, Any]) -> None:
    """Write a session or document record, stamped for the merge's written-last rule."""
    record["updated_at"] = now_iso()
    tx.put_json(path, record)


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


def _write_private(repo: Repo, name: str, text: str) -> None:
    path = repo.worktree_dir / name
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _remove_private(repo: Repo, name: str) -> None:
    try:
        (repo.git_dir / "handoff" / name).unlink()
    except FileNotFoundError:
        pass


def commits_per_session(repo: Repo) -> int | None:
    value = repo.config_int("handoff.commitsPerSession")
    return value if value and value > 0 else None


def tasks_per_session(repo: Repo) -> int | None:
    value = repo.config_int("handoff.tasksPerSession")
    return value if value and value > 0 else None


def write_hook_state(repo: Repo, base: str | None, seen: int | None = None) -> None:
    """What the post-commit hook needs without starting Python or git: the session base, the
    threshold, and the commits since the base counted so far (`seen`; computed when None)."""
    threshold = commits_per_session(repo)
    if base is None or threshold is None:
        _remove_private(repo, HOOK_STATE_FILE)
        return
    if seen is None:
        seen = 0
        head = repo.head()
        if head and head != base:
            proc = repo.git("rev-list", "--count", f"{base}..{head}", check=False)
            text = proc.stdout.decode().strip()
            seen = int(text) if proc.returncode == 0 and text.isdigit() else 0
    _write_private(repo, HOOK_STATE_FILE, f"{base} {threshold} {seen}\n")


def clear_hook_state(repo: Repo) -> None:
    _remove_private(repo, HOOK_STATE_FILE)


# -- reading records -----------------------------------------------------------------


def read_session(source: Any, number: int) -> dict[str, Any] | None:
    """sessions/<n>.json from a Snapshot or Tx."""
    data = source.read_json(session_path(number))
    return data if isinstance(data, dict) else None


def current_number(store: StateStore) -> int:
    return store.session if store.session else active_session(store.repo)


def worker_name(repo: Repo, worker: str | None = None) -> str:
    try:
        from git_handoff.ops import work

        return str(work.worker_identity(repo, worker))
    except (ImportError, AttributeError):
        pass
    if worker:
        return worker
    configured = repo.config_get("handoff.worker")
    if configured:
        return configured
    import socket

    return f"{os.environ.get('USER') or 'handoff'}@{socket.gethostname()}"


def completed_in(record: dict[str, Any] | None) -> list[str]:
    if not record:
        return []
    done = record.get("completed") or []
    return [x for x in done if isinstance(x, str)]


# -- start / end ---------------------------------------------------------------------


def _stats(tx: Tx) -> str:
    from git_handoff.ops.tasks import stats_text

    return stats_text(tx.tasks())


def begin(store: StateStore, worker: str | None = None) -> dict[str, Any]:
    """Open a new session in this worktree: number it, record its base; no recovery.

    Refuses (Negative, exit 1) with a STATS line once max_sessions sessions were started.
    A session this worktree left open is closed first.
    """
    repo = store.repo
    who = worker_name(repo, worker)
    base = repo.head()
    stale = open_session(repo)
    stamp = now_iso()

    def apply(tx: Tx) -> dict[str, Any]:
        meta = tx.meta()
        count = int(meta.get("session_count") or 0)
        cfg = tx.config()
        if stale is not None:
            old = read_session(tx, stale["session"])
            if old is not None and not old.get("ended_at"):
                old["ended_at"] = stamp
                old["ended_by"] = "next session start"
                put_record(tx, session_path(stale["session"]), old)
                tx.lines.append(format_log_line(stale["session"], "WARN",
                                                f"Session {stale['session']} was left open; closed by the next session start"))
        if count >= cfg.max_sessions:
            tx.lines.append(format_log_line(count, "STATS", _stats(tx)))
            return {"refused": True, "session_count": count, "max_sessions": cfg.max_sessions}
        number = count + 1
        record = {
            "session": number,
            "worker": who,
            "base": base,
            "worktree": str(repo.workdir) if repo.workdir else None,
            "clone": identity.clone_id(repo),
            "started_at": stamp,
            "ended_at": None,
            "completed": [],
            "decisions": [],
            "blockers": [],
            "ack": None,
            "handoff": None,
        }
        put_record(tx, session_path(number), record)
        meta["session_count"] = number
        meta["last_session"] = stamp
        tx.put_json(META_PATH, meta)
        short = base[:7] if base else "none"
        tx.lines.append(format_log_line(number, "INIT", f"Session {number} started (base={short}, worker={who})"))
        return {"refused": False, "record": record}

    result = store.transact(apply)
    if stale is not None:
        _write_private(repo, SESSION_FILE, json.dumps({**stale, "ended_at": stamp}) + "\n")
        clear_hook_state(repo)
    if result["refused"]:
        raise Negative(
            f"max_sessions ({result['max_sessions']}) reached: {result['session_count']} sessions were started; "
            "no new session (raise it with `git handoff init --max-sessions N`)",
            payload=result,
        )
    record = result["record"]
    _write_private(repo, SESSION_FILE, json.dumps({
        "session": record["session"], "base": base, "worker": who,
        "started_at": record["started_at"], "ended_at": None,
    }) + "\n")
    write_hook_state(repo, base)
    store.session = record["session"]
    return dict(record)


def start(store: StateStore, worker: str | None = None) -> dict[str, Any]:
    """`session start`: open a session, run the health check and the recovery protocol.

    Returns the session record plus `recovery` (one entry per recovered task) and `health`.
    """
    cfg = store.snapshot().config()
    if cfg.init_command:
        # before the session is opened: a refusal (exit 2) must leave the state as it was
        from git_handoff.ops import trust

        trust.require_trusted(store.repo, cfg.init_command, "init command")
    record = begin(store, worker=worker)
    from git_handoff.ops import recovery

    health = recovery.health_check(store, record)
    actions = recovery.recover(store, record)
    out = dict(read_session(store.snapshot(), record["session"]) or record)
    out["health"] = health
    out["recovery"] = actions
    return out


def end(store: StateStore) -> dict[str, Any]:
    """`session end`: notes for the session's commits, the STATS line, the session closed."""
    repo = store.repo
    opened = open_session(repo)
    if opened is None:
        raise UsageError("no open session in this worktree (start one with `git handoff session start`)")
    number = int(opened["session"])
    store.session = number
    _note_open_claims(store)
    stamp = now_iso()

    def apply(tx: Tx) -> dict[str, Any]:
        record = read_session(tx, number) or {"session": number}
        record["ended_at"] = stamp
        record["head"] = repo.head()
        record["completed"] = completed_ids(tx, number)
        put_record(tx, session_path(number), record)
        meta = tx.meta()
        meta["last_session"] = stamp
        tx.put_json(META_PATH, meta)
        stats = _stats(tx)
        tx.lines.append(format_log_line(number, "STATS", stats))
        record["stats"] = stats
        return record

    record = store.transact(apply)
    _write_private(repo, SESSION_FILE, json.dumps({**opened, "ended_at": stamp}) + "\n")
    clear_hook_state(repo)
    return record


def _note_open_claims(store: StateStore) -> None:
    """Notes for the commits of tasks still claimed in this worktree (the hook stays fast)."""
    try:
        from git_handoff.ops import notes
    except ImportError:
        return
    repo = store.repo
    here = str(repo.workdir) if repo.workdir else None
    for task in store.snapshot().tasks().values():
        if (task.status == "in_progress" and here and task.get("worktree") == here
                and identity.claim_is_mine(repo, task)):
            try:
                notes.note_task_commits(store, task)
            except HandoffError:
                pass


def show(store: StateStore, number: int | None = None) -> dict[str, Any]:
    """A session record: N, else this worktree's open session, else the latest."""
    snap = store.snapshot()
    if number is None:
        opened = open_session(store.repo)
        number = int(opened["session"]) if opened else int(snap.meta().get("session_count") or 0)
        if number == 0:
            raise Negative("no session was started yet (`git handoff session start`)")
    elif number < 1:
        raise UsageError(f"invalid session number {number}: sessions are numbered from 1")
    record = read_session(snap, number)
    if record is None:
        raise UsageError(f"no session {number} (sessions started: {int(snap.meta().get('session_count') or 0)})")
    out = dict(record)
    out["completed"] = completed_ids(snap, number)
    opened = open_session(store.repo)
    out["open_here"] = bool(opened and opened.get("session") == number)
    return out


# -- facts for the handoff document --------------------------------------------------


def _require_number(store: StateStore) -> int:
    store.snapshot()  # NotInitialized first
    number = current_number(store)
    if number <= 0:
        raise UsageError("no open session in this worktree (start one with `git handoff session start`)")
    return number


def _one_line(text: str, what: str) -> str:
    text = " ".join(text.split())
    if not text:
        raise UsageError(f"{what} must not be empty")
    return text


def decide(store: StateStore, what: str, why: str) -> dict[str, Any]:
    """Record a decision (what was chosen, and why) in the current session."""
    what = _one_line(what, "WHAT")
    why = _one_line(why, "--why")
    entry = {"what": what, "why": why, "at": now_iso()}
    return _record_fact(store, "decisions", entry, "INIT", f'Decision "{what}" why="{why}"')


def blocker(store: StateStore, text: str) -> dict[str, Any]:
    """Record a blocker found in the current session."""
    text = _one_line(text, "TEXT")
    entry = {"text": text, "at": now_iso()}
    return _record_fact(store, "blockers", entry, "WARN", f'Blocker "{text}"')


def _record_fact(store: StateStore, kind: str, entry: dict[str, Any], log_type: str, line: str) -> dict[str, Any]:
    """Append `entry` to the current session record's `kind` list, with its log line."""
    number = _require_number(store)

    def apply(tx: Tx) -> dict[str, Any]:
        record = read_session(tx, number)
        if record is None:
            raise UsageError(f"session {number} is not in the state (start one with `git handoff session start`)")
        record.setdefault(kind, []).append(entry)
        put_record(tx, session_path(number), record)
        tx.lines.append(format_log_line(number, log_type, line))
        return entry

    return store.transact(apply)


# -- hooks into the work cycle (called inside claim/done transactions) -----------------


def completed_ids(source: Any, number: int) -> list[str]:
    """Tasks completed in session `number`, as `done` recorded them in the session record
    (one blob read: claim checks it on its fast path)."""
    if number <= 0:
        return []
    return completed_in(read_session(source, number))


def record_completion(tx: Tx, task_id: str) -> int:
    """Count a task completed in the transaction's session; returns the session's count."""
    number = tx.session
    if number <= 0:
        return 0
    record = read_session(tx, number)
    if record is None:
        return 0
    done = completed_in(record)
    if task_id not in done:
        done.append(task_id)
    record["completed"] = done
    put_record(tx, session_path(number), record)
    return len(done)


def check_claim_allowed(tx: Tx) -> None:
    """Refuse a claim (Negative, exit 1) once the session completed max_tasks_per_session tasks."""
    number = tx.session
    if number <= 0:
        return
    limit = tx.config().max_tasks_per_session
    done = len(completed_ids(tx, number))
    if done >= limit:
        raise Negative(
            f"max_tasks_per_session ({limit}) reached: session {number} completed {done} task(s); "
            "hand off: `git handoff doc write`, then `git handoff session end` and start a new session"
        )


def limit_reached(snapshot: Any, number: int) -> bool:
    if number <= 0:
        return False
    return bool(len(completed_ids(snapshot, number)) >= snapshot.config().max_tasks_per_session)
