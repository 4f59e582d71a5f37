"""A relay lock that covers every clone of one remote, with a lease.

Opt-in (`relay --fleet-lock`, or `git config handoff.relayLock fleet`): the lock is the
ref `refs/harness/locks/relay` on the remote, holding a commit whose tree has one
small record, `lock.json` {clone, host, pid, acquired_at, expires_at, lease_seconds}.

- taken by a compare-and-swap push through the git CLI:
  `git push --porcelain --force-with-lease=refs/harness/locks/relay:<expected> REMOTE
  <commit>:refs/harness/locks/relay`, where <expected> is empty (create only) or the
  lock commit read a moment ago whose lease has expired (a take-over);
- renewed while the relay runs (a thread pushes a new record every third of the lease,
  again a compare-and-swap against the commit it pushed last);
- released at exit: deleted with the same lease, so a lock someone took over after our
  lease ran out is never deleted by us.

A live lock held by another clone refuses the relay with exit 3, naming the holder and
when its lease expires. A machine that died leaves a lock that expires by itself.
Everything here runs the git CLI (no pygit2), so the renewal thread never shares a
libgit2 handle with the relay.
"""

from __future__ import annotations

import json
import socket
import threading
from datetime import datetime, timedelta

from git_handoff.core import hlc, record_schemas
from git_handoff.core.errors import Contention, InvalidState, UsageError
from git_handoff.core.model import iso, now, parse_time
from git_handoff.core.record_schemas import FleetLockRecord
from git_handoff.infra.gitrepo import Repo

LOCK_REF = "refs/harness/locks/relay"
RECORD_NAME = "lock.json"
DEFAULT_LEASE_SECONDS = 120
MAX_LEASE_SECONDS = 24 * 3600
TRIES = 6


def wanted(repo: Repo, flag: bool) -> bool:
    """Whether the relay takes the fleet lock: `--fleet-lock`, or handoff.relayLock=fleet."""
    if flag:
        return True
    value = (repo.config_get("handoff.relayLock") or "").strip().lower()
    if value not in ("", "fleet", "clone"):
        raise UsageError(f"handoff.relayLock is {value!r}: use fleet (one relay per remote) or clone (the default)")
    return value == "fleet"


def staging_ref(remote: str) -> str:
    return f"refs/remotes/{remote}/harness/locks/relay"


class FleetLock:
    """The fleet relay lock on `remote`, held by this clone (`clone` is its public id)."""

    def __init__(self, repo: Repo, remote: str, clone: str, pid: int, lease_seconds: int = DEFAULT_LEASE_SECONDS
                 ) -> None:
        if not 1 <= lease_seconds <= MAX_LEASE_SECONDS:
            raise UsageError(f"the fleet lock's lease must be 1 to {MAX_LEASE_SECONDS} seconds, not {lease_seconds}")
        if not remote or remote.startswith("-") or any(c.isspace() or ord(c) < 32 for c in remote):
            raise UsageError(f"invalid remote {remote!r} for the fleet lock")
        if repo.git("remote", "get-url", remote, check=False).returncode != 0:
            raise UsageError(f"no remote {remote!r} for the fleet lock: name one with --lock-remote, "
                             "or set `git config handoff.remote NAME`")
        self.repo = repo
        self.remote = remote
        self.clone = clone
        self.pid = pid
        self.lease = lease_seconds
        self.held: str | None = None  # the lock commit we pushed last
        self.record: FleetLockRecord = {}
        self.took_over: FleetLockRecord | None = None
        self.lost: str | None = None  # why a renewal failed, if it did
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def taken_over(self) -> bool:
        """Another clone took the lock after our lease ran out (a renewal lost its swap)."""
        return self.held is None and self.lost is not None

    # -- the remote's lock --------------------------------------------------------------

    def read(self) -> tuple[str | None, FleetLockRecord | None]:
        """(lock commit, its record) on the remote, or (None, None) when nobody holds it;
        (lock commit, None) when the ref there records no lock."""
        proc = self.repo.git("ls-remote", self.remote, LOCK_REF, check=False)
        if proc.returncode != 0:
            raise Contention(f"cannot read the fleet relay lock on {self.remote}: {_last_line(proc.stderr)}")
        oid = None
        for line in proc.stdout.decode(errors="replace").splitlines():
            value, _, name = line.partition("\t")
            if name == LOCK_REF:
                oid = value.strip()
        if not oid:
            return None, None
        fetch = self.repo.git("fetch", "--no-tags", "--quiet", self.remote,
                              f"+{LOCK_REF}:{staging_ref(self.remote)}", check=False)
        if fetch.returncode != 0:
            raise Contention(f"cannot fetch the fleet relay lock from {self.remote}: {_last_line(fetch.stderr)}")
        fetched = self.repo.git("rev-parse", "--verify", "--quiet", staging_ref(self.remote), check=False)
        oid = fetched.stdout.decode().strip() or oid
        try:
            return oid, read_record(self.repo, oid, f"{self.remote}'s {LOCK_REF}")
        except InvalidState:
            # a lock ref that records no lock (a blob, another tree, a record that does
            # not parse) holds nothing: taken over by compare-and-swap against it, not a
            # relay stopped for good
            return oid, None

    def _push(self, expected: str | None, record: FleetLockRecord | None) -> bool:
        """Compare-and-swap the remote lock from `expected` (None: absent) to a commit of
        `record` (None: delete it). True when the remote took it; False on a lost race."""
        lease = f"--force-with-lease={LOCK_REF}:{expected or ''}"
        if record is None:
            spec = f":{LOCK_REF}"
        else:
            commit = self._commit(record)
            spec = f"{commit}:{LOCK_REF}"
        proc = self.repo.git("push", "--porcelain", "--quiet", lease, self.remote, spec, check=False)
        if proc.returncode == 0:
            if record is not None:
                self.held = commit
            return True
        text = (proc.stdout + proc.stderr).decode(errors="replace")
        refusal = _refusal(text)
        if refusal:
            raise Contention(f"{self.remote} refused {LOCK_REF}: {refusal}: a rule on the server, not a race "
                             "(docs/server-rights.md)")
        if "stale info" in text or "rejected" in text or "failed to update ref" in text or "fetch first" in text:
            return False
        raise Contention(f"cannot update the fleet relay lock on {self.remote}: {_last_line(proc.stderr)}")

    def _commit(self, record: FleetLockRecord) -> str:
        data = (json.dumps(record, indent=2, sort_keys=True) + "\n").encode()
        blob = self.repo.git("hash-object", "-w", "--stdin", input=data).stdout.decode().strip()
        tree = self.repo.git("mktree", input=f"100644 blob {blob}\t{RECORD_NAME}\n".encode()).stdout.decode().strip()
        message = f"relay lock: clone {self.clone} on {record['host']}, until {record['expires_at']}\n".encode()
        return self.repo.git("commit-tree", tree, input=message).stdout.decode().strip()

    def _fresh_record(self) -> FleetLockRecord:
        moment = now()
        return {
            "clone": self.clone, "host": socket.gethostname(), "pid": self.pid,
            "acquired_at": self.record.get("acquired_at") or iso(moment),
            "renewed_at": iso(moment), "expires_at": iso(moment + timedelta(seconds=self.lease)),
            "lease_seconds": self.lease,
        }

    # -- take, renew, release -------------------------------------------------------------

    def acquire(self) -> FleetLockRecord:
        """Take the lock (create it, or take over an expired one, or one this clone left
        behind); Contention (exit 3) naming the holder when another clone holds it."""
        for _ in range(TRIES):
            current, record = self.read()
            if current is not None and record is not None:
                moment = now()
                expires = lock_deadline(record, moment)
                if expires > moment and record.get("clone") != self.clone:
                    raise Contention(
                        f"a relay already holds the fleet lock on {self.remote}: clone {record.get('clone')} "
                        f"on {record.get('host')} (pid {record.get('pid')}), lease until {iso(expires)}; "
                        "stop that relay, or wait for its lease to expire")
            fresh = self._fresh_record()
            if self._push(current, fresh):
                self.record = fresh
                self.took_over = record
                return fresh
        raise Contention(f"the fleet relay lock on {self.remote} kept changing while taking it ({TRIES} tries); "
                         "try again")

    def renew(self) -> bool:
        """Push a record with a new expiry; False (and `lost` says why) when the lock is
        no longer ours (someone took it over after our lease ran out)."""
        if self.held is None:
            return False
        fresh = self._fresh_record()
        try:
            ok = self._push(self.held, fresh)
        except Contention as exc:
            self.lost = exc.message  # the remote is unreachable: try again at the next beat
            return True
        if ok:
            self.record = fresh
            return True
        self.lost = f"the fleet relay lock on {self.remote} was taken over by another clone"
        self.held = None
        return False

    def release(self) -> bool:
        """Delete the lock if it is still the one we pushed; True when deleted."""
        self.stop_renewing()
        if self.held is None:
            return False
        try:
            done = self._push(self.held, None)
        except Contention:
            return False
        self.held = None
        return done

    def start_renewing(self) -> None:
        def beat() -> None:
            while not self._stop.wait(max(0.5, self.lease / 3)):
                if not self.renew():
                    return

        self._thread = threading.Thread(target=beat, name="fleet-lock-renewal", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None


def lock_deadline(record: FleetLockRecord, moment: datetime) -> datetime:
    """When the lock's lease ends, as this clone counts it: its `expires_at`, but no later
    than its last renewal (`renewed_at`, else `acquired_at`) plus the lease it declares
    (`lease_seconds`, at most a day); at once when that renewal is further ahead of
    `moment` than the clock skew allowed (hlc.MAX_SKEW_MS) or absent. A fetched lock
    "until 8999" holds no longer than one lease from its own record."""
    declared = parse_time(record["expires_at"])
    written: datetime | None = None
    for name in ("renewed_at", "acquired_at"):
        if isinstance(record.get(name), str):
            try:
                written = parse_time(record[name])
            except UsageError:
                written = None
            break
    if written is None or written > moment + timedelta(milliseconds=hlc.MAX_SKEW_MS):
        return min(declared, moment)
    seconds = record.get("lease_seconds")
    seconds = seconds if type(seconds) is int and 0 < seconds <= MAX_LEASE_SECONDS else DEFAULT_LEASE_SECONDS
    return min(declared, written + timedelta(seconds=seconds))


def read_record(repo: Repo, oid: str, what: str) -> FleetLockRecord:
    """The record of lock commit `oid` through its parser; InvalidState (exit 2) if the
    remote holds something else."""
    kind = repo.git("cat-file", "-t", oid, check=False).stdout.decode().strip()
    if kind != "commit":
        raise InvalidState(f"{what} points at a {kind or 'missing object'}, not a lock commit; nothing was changed")
    listing = repo.git("ls-tree", "-l", oid, check=False).stdout.decode(errors="replace").splitlines()
    entry = next((line for line in listing if line.endswith(f"\t{RECORD_NAME}")), None)
    if entry is None or len(listing) != 1:
        raise InvalidState(f"{what}: a lock commit holds exactly one {RECORD_NAME}; nothing was changed")
    mode, kind, blob, size = entry.split("\t", 1)[0].split()
    if mode != "100644" or kind != "blob" or not size.isdigit() or int(size) > record_schemas.MAX_LOCK_BYTES:
        raise InvalidState(f"{what}: {RECORD_NAME} is not a small file; nothing was changed")
    raw = repo.git("cat-file", "blob", blob).stdout
    return record_schemas.fleet_lock(raw, f"{what}:{RECORD_NAME}")


_RACE_WORDS = ("stale info", "fetch first", "non-fast-forward", "already exists", "failed to update ref",
               "cannot lock ref", "unable to lock", "failed to lock", "incorrect old value")


def _refusal(text: str) -> str | None:
    """What the server said when a hook or an access rule refused the lock ref (git's
    `[remote rejected] (hook declined)`; not a lost race), quoted; None otherwise."""
    if "[remote rejected]" not in text or any(word in text for word in _RACE_WORDS):
        return None
    said = [line[len("remote: "):].strip() for line in text.splitlines()
            if line.startswith("remote: ") and LOCK_REF in line and "hook declined to update" not in line]
    return json.dumps(said[0][:300]) if said else "[remote rejected]"


def _last_line(stderr: bytes) -> str:
    lines = stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "git failed"


class NoLock:
    """The relay without a fleet lock (the default: one relay per clone)."""

    def acquire(self) -> FleetLockRecord:
        return {}

    def start_renewing(self) -> None:
        return None

    def release(self) -> bool:
        return False


NO_LOCK = NoLock()
