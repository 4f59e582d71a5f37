"""This clone's identity: what lets it tell its own claims, sessions, relays and
dispatch runs from everyone else's in a shared state.

A random secret is made once, in the clone's private directory (`<git common
dir>/handoff/clone-secret`, mode 0600), and never leaves it: not synced, not pushed,
not printed. Records carry two values derived from it:

- `clone`: a public id (a hash of the secret), shown to people ("claimed by clone ab12…");
  `git config handoff.cloneId` sets it, whole (16 hex digits) or its start (fewer: the
  rest still comes from the secret), so that a server rule can tie the refs
  refs/harness/clones/<id>/ to one machine's key (docs/server-rights.md);
- `clone_seal`: an HMAC of the record's identifying fields under the secret.

"Held here", "left behind here", "my relay", "my agent" require a seal this clone can
recompute over the record as it stands. Anyone can copy a public id or a whole record
into a remote, but nobody without the secret can make a seal for fields of their
choosing (another pid, another base commit, another task), so a fetched record never
makes this clone signal a process, commit, reset, clean or check out.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from typing import Any

from git_handoff.core.errors import UsageError
from git_handoff.core.model import Task
from git_handoff.core.patterns import lazy
from git_handoff.infra.gitrepo import Repo

SECRET_FILE = "clone-secret"
_cache: dict[str, bytes] = {}


def _secret(repo: Repo) -> bytes:
    path = repo.handoff_dir / SECRET_FILE
    key = str(path)
    if key in _cache:
        return _cache[key]
    try:
        value = bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        value = b""
    if len(value) < 16:
        try:
            value = _create(path)
        except OSError:
            if os.access(path.parent, os.W_OK):
                raise  # a full disk, say: never a secret that is not kept
            # A private directory this process can not write (a read-only repository served
            # by `serve`): a secret for this process only. Nothing is sealed with it: every
            # write to the state holds the state lock, a file in that same directory, so a
            # clone that can not write there has no record of its own to find or prove.
            value = secrets.token_bytes(32)
    _cache[key] = value
    return value


def _create(path: Any) -> bytes:
    """Make the secret once; of two processes racing, the first one's file wins."""
    fresh = secrets.token_bytes(32)
    tmp = _write_tmp(path, fresh, "tmp")
    try:
        os.link(tmp, path)  # fails when another process made it first
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    try:
        value = bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        value = b""
    if len(value) < 16:  # a damaged file: replace it (nothing this clone sealed can be proven anyway)
        os.replace(_write_tmp(path, fresh), path)
        value = fresh
    return value


def _write_tmp(path: Any, value: bytes, suffix: str = "new") -> Any:
    """The secret, in hex, in a private file beside `path` (mode 0600 from the start)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{suffix}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, value.hex().encode() + b"\n")
    finally:
        os.close(fd)
    return tmp


_ids: dict[str, str] = {}
CLONE_ID_SETTING = "handoff.cloneId"
_SET_ID = lazy(r"[0-9a-f]{1,16}")


def clone_id(repo: Repo) -> str:
    """This clone's public id (16 hex digits). Cached per clone: it cannot change within a
    process (the secret is cached too), and a transaction stamps thousands of records with it."""
    key = str(repo.common_dir)
    found = _ids.get(key)
    if found is None:
        derived = hashlib.sha256(b"git-handoff clone id\0" + _secret(repo)).hexdigest()[:16]
        found = _ids[key] = configured_id(repo.config_get(CLONE_ID_SETTING), derived)
    return found


def configured_id(setting: str | None, derived: str) -> str:
    """The id `handoff.cloneId` makes of `derived` (the id the secret gives): 16 hex digits
    replace it, fewer replace its start (a prefix a server rule grants one machine's key;
    the rest stays this clone's own, so clones sharing a prefix still differ)."""
    if setting is None:
        return derived
    value = setting.strip().lower()
    if not _SET_ID.fullmatch(value):
        raise UsageError(f"{CLONE_ID_SETTING} is {setting!r}: give 16 hex digits (this clone's id) or fewer "
                         "(the start of it, e.g. the prefix a server rule grants this machine's key)")
    return value + derived[len(value):]


def seal(repo: Repo, kind: str, *fields: Any) -> str:
    """A proof that this clone wrote a record of `kind` with these identifying fields."""
    message = "\0".join([kind, *(str(f) for f in fields)]).encode("utf-8", "surrogateescape")
    return hmac.new(_secret(repo), message, hashlib.sha256).hexdigest()[:32]


def sealed_here(repo: Repo, record_seal: Any, kind: str, *fields: Any) -> bool:
    """Whether `record_seal` is this clone's seal over exactly these fields."""
    if not isinstance(record_seal, str) or len(record_seal) != 32:
        return False
    return hmac.compare_digest(record_seal, seal(repo, kind, *fields))


# -- the records that carry a seal ------------------------------------------------------------


def claim_fields(task_id: str, claimed_at: str | None, worktree: str | None, base: str | None,
                 worker: str | None) -> tuple[str | None, ...]:
    return (task_id, claimed_at, worktree, base, worker)


def claim_seal(repo: Repo, task_id: str, claimed_at: str | None, worktree: str | None, base: str | None,
               worker: str | None) -> str:
    return seal(repo, "claim", *claim_fields(task_id, claimed_at, worktree, base, worker))


def claim_is_mine(repo: Repo, task: Task) -> bool:
    """Whether this clone made the claim `task` carries (its seal verifies)."""
    claim = task.claim
    return sealed_here(repo, claim.clone_seal, "claim",
                       *claim_fields(task.id, claim.claimed_at, claim.worktree, task.started_at_commit,
                                     task.claimed_by))


def relay_seal(repo: Repo, record: Any) -> str:
    return seal(repo, "relay", *_relay_fields(record))


def relay_is_mine(repo: Repo, record: Any) -> bool:
    """Whether this clone's relay wrote `record` with the pids and token it now names."""
    return isinstance(record, dict) and sealed_here(repo, record.get("clone_seal"), "relay", *_relay_fields(record))


def _relay_fields(record: Any) -> tuple[Any, ...]:
    return tuple(record.get(k) for k in ("host", "pid", "started_at", "session", "agent_pid", "agent_token",
                                         "tmux_session", "tmux_socket"))
