"""The relay's record in the state (`relay.json`) and its lock: one relay per repository.

The lock is a filelock in the clone's private directory (and, when asked, one relay per
remote: git_handoff.remote.fleet_lock, a leased ref on the remote). The record says which relay
runs where (host, pid, start time, the current session and agent) so that `status` can
show it and a restarted relay can take over a dead one's session.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from filelock import FileLock, Timeout

from git_handoff.core.errors import Contention
from git_handoff.core.model import now_iso, printable
from git_handoff.core.record_schemas import RelayRecord
from git_handoff.remote.fleet_lock import NO_LOCK as _NO_FLEET_LOCK
from git_handoff.remote.fleet_lock import FleetLock, NoLock
from git_handoff.state import identity
from git_handoff.state.session_records import RELAY_PATH, read_relay
from git_handoff.state.store import StateStore, Tx

FAILURES_KEPT = 20


# -- the record in the state ------------------------------------------------------------


def update_record(store: StateStore, changes: RelayRecord, *, failure: str | None = None,
                   log: tuple[str, str, str | None] | None = None) -> RelayRecord:
    reason = changes.get("reason")
    if isinstance(reason, str):  # may quote the agent command, of several lines
        changes = {**changes, "reason": printable(reason)}
    failure = printable(failure) if failure is not None else None

    def apply(tx: Tx) -> RelayRecord:
        record: RelayRecord = {**(read_relay(tx) or {})}
        record.update(changes)
        record["updated_at"] = now_iso()
        # only this clone's relay writes the record: sealed, so that no copy of it in a
        # remote makes another clone adopt (and signal) the processes it names
        record["clone"] = identity.clone_id(store.repo)
        record["clone_seal"] = identity.relay_seal(store.repo, record)
        if failure is not None:
            failures = list(record.get("failures") or [])
            failures.append({"at": now_iso(), "what": failure})
            record["failures"] = failures[-FAILURES_KEPT:]
        tx.put_json(RELAY_PATH, record)
        if log is not None:
            kind, text, category = log
            tx.log(kind, text, category=category)
        return record

    return store.transact(apply)


# -- one relay per repository -------------------------------------------------------------


def record_start(store: StateStore, previous: RelayRecord | None, *, agent: str, agent_name: str, tmux: bool,
                 agents: list[str]) -> None:
    """The record of a relay starting in this process (taking over from `previous`, a dead relay's)."""
    pid, host = os.getpid(), socket.gethostname()
    update_record(store, {
        "state": "running", "host": host, "pid": pid, "started_at": now_iso(), "agent": agent,
        "agent_name": agent_name, "tmux": tmux, "agents": agents if len(agents) > 1 else [], "switches": [],
        "limited": [], "stopped_at": None, "reason": None, **({} if previous else {"session": None, "agent_pid": None}),
    }, log=("LOCK", f"relay started (pid {pid} on {host})"
            + (f"; took over from dead relay pid {previous.get('pid')}" if previous else ""), None))


def record_stop(store: StateStore, reason: str) -> None:
    """The record of the relay stopped, for `reason`."""
    update_record(store, {"state": "stopped", "stopped_at": now_iso(), "reason": reason,
                          "session": None, "agent_pid": None, "waiting": None},
                  log=("LOCK", f"relay stopped: {reason}", None))


@contextmanager
def relay_lock(store: StateStore, fleet_lock: FleetLock | None = None) -> Iterator[RelayRecord | None]:
    """Hold the relay lock; yields the previous (dead) relay's record, if any. Contention
    (exit 3) naming the running relay when another one holds it."""
    lock = FileLock(str(store.repo.handoff_dir / "relay.lock"), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        record = read_relay(store.snapshot()) if store.is_initialized() else None
        if record:
            who = f"pid {record.get('pid')} on {record.get('host')}, started {record.get('started_at')}"
        else:
            who = "another process"
        raise Contention(f"a relay is already running for this repository ({who}); stop it first") from None
    fleet: FleetLock | NoLock = fleet_lock or _NO_FLEET_LOCK
    try:
        fleet.acquire()  # after the clone's own lock: a lock this clone left behind is taken over
        fleet.start_renewing()
        previous = read_relay(store.snapshot())
        mine = previous is not None and identity.relay_is_mine(store.repo, previous)
        yield previous if previous and mine and previous.get("state") == "running" else None
    finally:
        fleet.release()
        lock.release()
