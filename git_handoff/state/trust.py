"""Which shell commands this clone has approved, and where (validation, cleanup, init).

A command that arrived by fetch is not run until this clone trusts it; commands
created here are trusted at birth. The store is a file in this clone's git dir and
never syncs: trust is a decision of whoever runs the commands.

An approval is bound to a *place* as well as to the text (docs/threat-model.md): the
validation of task T (`T:validation`), its cleanup (`T:cleanup`), or the state's init
command (`init`). A remote that moves a trusted text into another task's validation
has made a new use of it, which is not run until approved there.

The file (`.git/handoff/trusted.json`, version 2) maps the command's sha256 to its text
and its places. A file written before places existed (text-only approvals) is
migrated on first read: each old approval covers the places this clone's own state
(refs/harness/state, not a fetched one) used that text at that moment, which are the
places it was given for; an old approval the state no longer uses covers no place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from git_handoff.core.errors import UsageError
from git_handoff.core.model import now_iso
from git_handoff.infra.fileio import atomic_write, file_identity, read_sealed, sealed
from git_handoff.infra.gitrepo import Repo

if TYPE_CHECKING:  # a type only: trust is imported where the store is not
    from git_handoff.state.snapshot import StateReader
    from git_handoff.state.store import StateStore

class Approval(TypedDict):
    """One approval (`trust --approved --json`): the command and the places it covers."""

    command: str
    places: list[str]


class CommandUse(TypedDict):
    """One place a command is used at: `T:validation`, `T:cleanup` or `init`."""

    id: str  # the task, or 'config' (the init command)
    kind: str  # validation, cleanup or init
    place: str


class Untrusted(TypedDict):
    """A command this clone has not approved where it is used (`trust --json`; `trust
    ID|--all --json` answers those it approved, without where they came from)."""

    id: str  # its first use
    kind: str
    place: str
    command: str
    uses: list[CommandUse]  # every unapproved use
    trusted_at: list[str]  # the places the same text is approved at already
    introduced_by: NotRequired[str | None]  # who wrote it into the state (None: not found)
    introduced_at: NotRequired[str | None]
    commit: NotRequired[str | None]
    log: NotRequired[str]  # that commit's first line


class _Origin(TypedDict):
    introduced_by: str | None
    introduced_at: str | None
    commit: str | None
    log: NotRequired[str]


TRUST_FILE = "trusted.json"
VERSION = 2
INIT_PLACE = "init"


def command_key(command: str) -> str:
    return hashlib.sha256(command.encode()).hexdigest()


def place(item_id: str, kind: str) -> str:
    """Where a command is used: `T:validation`, `T:cleanup`, or `init` (the state's init
    command, listed as id 'config')."""
    return INIT_PLACE if kind == "init" else f"{item_id}:{kind}"


Approvals = dict[str, dict[str, Any]]  # sha256 -> {"command": text, "places": {place: trusted_at}}


def _read_file(repo: Repo) -> dict[str, Any]:
    try:
        data = json.loads((repo.handoff_dir / TRUST_FILE).read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _entries(data: dict[str, Any]) -> Approvals:
    """The well-formed approvals of a version-2 file's data."""
    commands = data.get("commands")
    out: Approvals = {}
    for key, entry in (commands.items() if isinstance(commands, dict) else ()):
        if isinstance(entry, dict) and isinstance(entry.get("command"), str) and isinstance(entry.get("places"), dict):
            out[key] = entry
    return out


def _load(repo: Repo, *, save: bool = True) -> Approvals:
    """The approvals, migrating (and, with `save`, rewriting) a text-only file."""
    data = _read_file(repo)
    if data.get("version") == VERSION:
        return _entries(data)
    legacy = {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("command"), str)}
    if not legacy:
        return {}
    migrated = _migrate(repo, legacy)
    if save:
        from filelock import FileLock

        path = repo.handoff_dir / TRUST_FILE
        with FileLock(str(path) + ".lock", timeout=30):
            if _read_file(repo).get("version") != VERSION:
                _save(repo, migrated)
    return migrated


def _migrate(repo: Repo, legacy: dict[str, dict[str, Any]]) -> Approvals:
    """Text-only approvals bound to the places this clone's own state uses each text at."""
    from git_handoff.core.errors import HandoffError
    from git_handoff.state.snapshot import STATE_REF, Snapshot

    out: Approvals = {key: {"command": entry["command"], "places": {}} for key, entry in legacy.items()}
    head = repo.ref_target(STATE_REF)
    if head is None:
        return out
    try:
        uses = _commands(Snapshot(repo, head))
    except HandoffError:  # an unreadable state: the old approvals cover nothing until given again
        return out
    for item_id, kind, command in uses:
        entry = out.get(command_key(command))
        if entry is not None:
            entry["places"][place(item_id, kind)] = legacy[command_key(command)].get("trusted_at") or now_iso()
    return out


def _save(repo: Repo, approvals: Approvals) -> None:
    atomic_write(repo.handoff_dir / TRUST_FILE,
                 json.dumps({"version": VERSION, "commands": approvals}, indent=2, sort_keys=True) + "\n")


def _covers(approvals: Approvals, command: str, where: str) -> bool:
    entry = approvals.get(command_key(command))
    return entry is not None and entry.get("command") == command and where in entry["places"]


# What is_trusted asks of the file, kept beside it (`trusted-places.marshal`): {sha256:
# (command, places)} without the dates, for the file's identity (inode, size, mtime) it
# was read from; checked by its digest. A command then reads a small marshal instead of
# parsing every approval's JSON (one place per task: the file grows with the tasks).
# Another identity, a damaged or foreign cache: the file is read again, never the cache.
PLACES_FILE = "trusted-places.marshal"
PLACES_MAGIC = b"git-handoff-trusted-places 1\n"
Places = dict[str, tuple[str, frozenset[str]]]


def _as_places(approvals: Approvals) -> Places:
    return {key: (e["command"], frozenset(e["places"])) for key, e in approvals.items()}


def _places(repo: Repo) -> Places | None:
    """The approvals' commands and places; None for a file that is not version 2 (a
    text-only one: _load migrates it) or is not there."""
    # the identity before the file is read: a file replaced meanwhile leaves a cache of the old one
    stamp = file_identity(repo.handoff_dir / TRUST_FILE)
    if stamp is None:
        return None
    cache = repo.handoff_dir / PLACES_FILE
    found = read_sealed(cache, PLACES_MAGIC)
    if isinstance(found, tuple) and len(found) == 2 and found[0] == stamp and isinstance(found[1], dict):
        places: Places = found[1]
        return places
    data = _read_file(repo)
    if data.get("version") != VERSION:
        return None
    places = _as_places(_entries(data))
    try:
        atomic_write(cache, sealed(PLACES_MAGIC, (stamp, places)))
    except (OSError, ValueError):
        pass  # only slower: the next command reads the file again
    return places


def _known(repo: Repo, *, save: bool) -> Places:
    """The approvals' commands and places: from the cache, else from the file (a
    text-only file migrated, and with `save` rewritten)."""
    known = _places(repo)
    return known if known is not None else _as_places(_load(repo, save=save))


def _approved(known: Places, key: str, command: str, where: str) -> bool:
    entry = known.get(key)
    return entry is not None and entry[0] == command and where in entry[1]


def approvals(repo: Repo) -> Callable[[str, str], bool]:
    """`is_trusted` for many questions: the approvals read once."""
    known = _known(repo, save=False)
    keys: dict[str, str] = {}  # one command is the check of many tasks: hashed once

    def covers(command: str, where: str) -> bool:
        key = keys.get(command)
        if key is None:
            key = keys[command] = command_key(command)
        return _approved(known, key, command, where)

    return covers


def is_trusted(repo: Repo, command: str, where: str) -> bool:
    """Whether this clone approved `command` at `where` (see place())."""
    return _approved(_known(repo, save=True), command_key(command), command, where)


def remember(repo: Repo, uses: Iterable[tuple[str, str | None]]) -> None:
    """Trust each (place, command) on this clone (atomic replace under a lock)."""
    wanted = [(where, c) for where, c in uses if c]
    if not wanted:
        return
    from filelock import FileLock

    path = repo.handoff_dir / TRUST_FILE
    with FileLock(str(path) + ".lock", timeout=30):
        data = _load(repo, save=False)
        changed = _read_file(repo).get("version") != VERSION  # a text-only file: save it migrated
        stamp = now_iso()
        for where, command in wanted:
            entry = data.setdefault(command_key(command), {"command": command, "places": {}})
            if where not in entry["places"]:
                entry["places"][where] = stamp
                changed = True
        if changed:
            _save(repo, data)


def move_places(repo: Repo, old_id: str, new_id: str) -> None:
    """A task renamed here keeps its approvals: `OLD:kind` becomes `NEW:kind`."""
    from filelock import FileLock

    path = repo.handoff_dir / TRUST_FILE
    with FileLock(str(path) + ".lock", timeout=30):
        data = _load(repo, save=False)
        changed = False
        for entry in data.values():
            for kind in ("validation", "cleanup"):
                at = entry["places"].pop(place(old_id, kind), None)
                if at is not None:
                    entry["places"][place(new_id, kind)] = at
                    changed = True
        if changed:
            _save(repo, data)


def approved(repo: Repo) -> list[Approval]:
    """Every approval of this clone: the command and the places it covers."""
    found: list[Approval] = [{"command": e["command"], "places": sorted(e["places"])} for e in _load(repo).values()]
    return sorted(found, key=lambda e: (e["places"][:1], e["command"]))


def require_trusted(repo: Repo, command: str, what: str, where: str) -> None:
    """Refuse (exit 2) to run a command this clone has not approved at `where`."""
    if not is_trusted(repo, command, where):
        raise UsageError(
            f"{what} {command!r} at {where} came from another clone and is not trusted there: "
            "a person reviews it (`git handoff trust`) and approves it (`git handoff trust ID`)"
        )


# -- reviewing what arrived -------------------------------------------------------------

HISTORY_LIMIT = 20000


def _commands(snap: StateReader) -> list[tuple[str, str, str]]:
    """(id, kind, command) for every command the state would have this clone run."""
    out: list[tuple[str, str, str]] = []
    init_command = snap.config().init_command
    if init_command:
        out.append(("config", "init", init_command))
    for task in snap.tasks().values():
        if task.check:
            out.append((task.id, "validation", task.check))
        if task.cleanup:
            out.append((task.id, "cleanup", task.cleanup))
    return out


def _task_command(raw: bytes, where: str, kind: str) -> str | None:
    """The validation (or cleanup) command of a task file from the state's history, None
    when the file is no JSON object holding one as text."""
    from git_handoff.core import decoding
    from git_handoff.core.errors import InvalidState

    try:
        data = decoding.load_json(raw, where)
    except InvalidState:
        return None
    section = data.get("validation" if kind == "validation" else "on_failure") if isinstance(data, dict) else None
    value = section.get("command" if kind == "validation" else "cleanup") if isinstance(section, dict) else None
    return value if isinstance(value, str) else None


def _introduced(store: StateStore, item_id: str, kind: str, command: str) -> _Origin:
    """Who wrote this command into the state, and when: from the state head, follow a
    parent that still holds the command; the commit none of whose parents holds it
    introduced it (through a sync merge, the other side's commit, not the merge)."""
    from git_handoff.core import state_tree
    from git_handoff.core.model import epoch_iso
    from git_handoff.state.snapshot import CONFIG_PATH, task_path

    repo = store.repo
    path = CONFIG_PATH if item_id == "config" else task_path(item_id)
    verdicts: dict[str, bool] = {}

    def holds(commit: str) -> bool:
        # every object here is another clone's, and only the tip passed the edge: an older
        # commit may hold anything at the path (a list, a gitlink, a tree, megabytes,
        # JSON nested too deep), or name a parent this clone lacks (a shallow clone)
        found = repo.object_kind(commit)
        if found is None or found[0] != "commit":
            return False
        entry = repo.tree_lookup(repo.commit_tree(commit), path)
        if entry is None or entry[1]:
            return False
        blob = entry[0]
        if blob not in verdicts:
            read = repo.small_blob(blob, state_tree.MAX_STATE_BLOB_BYTES)
            raw = read[2] if read is not None else None
            if raw is None:  # absent, not a blob (a gitlink), or larger than any record
                verdicts[blob] = False
            elif item_id == "config":
                verdicts[blob] = command in raw.decode(errors="replace")
            else:
                verdicts[blob] = _task_command(raw, path, kind) == command
        return verdicts[blob]

    current = store.head()
    if current is None or not holds(current):
        return {"introduced_by": None, "introduced_at": None, "commit": None}
    for _ in range(HISTORY_LIMIT):
        parents = repo.commit_info(current)[1]
        older = next((p for p in parents if holds(p)), None)
        if older is None:
            break
        current = older
    message, _, when, author = repo.commit_info(current)
    first = message.splitlines()[0] if message else ""
    # a commit's time is whatever its writer put there: one no calendar holds is no time
    return {"introduced_by": author, "introduced_at": epoch_iso(when),
            "commit": current, "log": first}


def untrusted(store: StateStore, *, with_origin: bool = True) -> list[Untrusted]:
    """Every command in the state this clone has not approved where it is used, once per
    command: the first task (or 'config') using it, every unapproved use with its place,
    the places the same text is approved at already, and who introduced it and when."""
    snap = store.snapshot()
    trusted = _load(store.repo)
    by_command: dict[str, Untrusted] = {}
    for item_id, kind, command in _commands(snap):
        where = place(item_id, kind)
        if _covers(trusted, command, where):
            continue
        entry = by_command.get(command)
        if entry is None:
            entry = by_command[command] = {"id": item_id, "kind": kind, "place": where, "command": command,
                                           "uses": [], "trusted_at": []}
        entry["uses"].append({"id": item_id, "kind": kind, "place": where})
    for entry in by_command.values():  # the places this text is already approved at, if any
        known = trusted.get(command_key(entry["command"]))
        entry["trusted_at"] = sorted(known["places"]) if known else []
    out = list(by_command.values())
    if with_origin:
        for entry in out:
            origin = _introduced(store, entry["id"], entry["kind"], entry["command"])
            entry["introduced_by"] = origin["introduced_by"]
            entry["introduced_at"] = origin["introduced_at"]
            entry["commit"] = origin["commit"]
            if "log" in origin:
                entry["log"] = origin["log"]
    return out


def approve(store: StateStore, ids: Iterable[str] = (), *, approve_all: bool = False) -> list[Untrusted]:
    """Trust the untrusted commands of the given task ids ('config': the init command), or
    all: each at every place the listing showed for it."""
    wanted = list(dict.fromkeys(ids))
    if not approve_all and not wanted:
        raise UsageError("name the task IDs to trust, or give --all (see `git handoff trust` for the list)")
    snap = store.snapshot()
    known = set(snap.tasks()) | {"config"}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise UsageError(f"no task {unknown[0]!r} (see `git handoff trust` for what needs trust)")
    pending = untrusted(store, with_origin=False)
    chosen = pending if approve_all else [p for p in pending if any(u["id"] in wanted for u in p["uses"])]
    remember(store.repo, [(use["place"], p["command"]) for p in chosen for use in p["uses"]])
    return chosen
