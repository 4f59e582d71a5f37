"""What a remote sends, checked before this clone uses any of it.

- `check_refs`: every fetched ref points at the kind of object it must (the states, the
  notes, each claim and each attempt at a commit) under a name this version reads.
- `check_state`: every entry of a fetched state tree that differs from what this clone
  already has (and from the state trees this process found good already) is a plain
  name, a blob or a tree where one belongs, within the size limits, and parses as the
  record its path holds (git_handoff.core.state_tree).

Both raise InvalidState (exit 2) naming the ref or the path and the field; nothing is
changed before they pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from git_handoff.core import ancestry, decoding, record_schemas, state_tree
from git_handoff.core.errors import InvalidState
from git_handoff.core.model import check_id
from git_handoff.core.state_tree import FILE_MODES, TREE_MODE
from git_handoff.infra import tree_format
from git_handoff.infra.gitopen import lazy_pygit2
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.snapshot import STATE_REF, Snapshot

ATTEMPTS = "harness/attempts/"
WORK = "harness/work/"
CLONES = "harness/clones/"
CLAIMS = "harness/claims/"
CLONE_ID = re.compile(r"[0-9a-f]{16}")
RELAY_LOCK = "harness/locks/relay"  # the fleet relay lock (git_handoff.remote.fleet_lock)
MAX_LOCK_COMMIT = 4096
MAX_ATTEMPT_MESSAGE = 1 << 20
MAX_INCOMING_PATHS = 2_000_000


def check_refs(repo: Repo, refs: dict[str, str], prefix: str, label: str) -> None:
    """`refs` ({name: oid}, names under `prefix`) as fetched from `label`: InvalidState
    at the first that fails (`ref_problem`)."""
    for name, oid in sorted(refs.items()):
        why = ref_problem(repo, name[len(prefix):], oid, label)
        if why:
            raise InvalidState(why)


def ref_problem(repo: Repo, rest: str, oid: str, label: str) -> str | None:
    """Why the ref `refs/<rest>` fetched from `label` at `oid` can not be used (a line
    naming it, its name escaped), or None: it points at the kind of object it must (the
    states, the notes, each claim and each attempt at a commit) under a name this
    version reads. A name this version does not read is no problem here: it is skipped."""
    what = f"{label}'s refs/{_shown(rest)}"
    try:
        _ref_checks(repo, rest, oid, what)
    except InvalidState as exc:
        return exc.message.removesuffix("; nothing was changed")
    return None


def _ref_checks(repo: Repo, rest: str, oid: str, what: str) -> None:
    if rest == "harness/state" or rest == "notes/harness":
        _require(repo, oid, "commit", what)
    elif rest.startswith(CLONES):
        clone, _, kind = rest[len(CLONES):].partition("/")
        if not CLONE_ID.fullmatch(clone) or kind not in ("state", "notes"):
            raise InvalidState(f"{what}: not a clone's state or notes (refs/harness/clones/<16 hex>/state|notes)")
        _require(repo, oid, "commit", what)
    elif rest.startswith(CLAIMS):
        try:
            check_id(rest[len(CLAIMS):])
        except Exception:  # noqa: BLE001 - any refusal of the id is the same answer
            raise InvalidState(f"{what}: not a claim of a valid task id") from None
        _require(repo, oid, "commit", what)
    elif rest.startswith((ATTEMPTS, WORK)):
        kind = "an attempt" if rest.startswith(ATTEMPTS) else "a task's work"
        task_id, _, number = rest[len(ATTEMPTS if rest.startswith(ATTEMPTS) else WORK):].rpartition("/")
        try:
            check_id(task_id)
        except Exception:  # noqa: BLE001 - any refusal of the id is the same answer
            raise InvalidState(f"{what}: not {kind} of a valid task id") from None
        if not state_tree.is_number_name(number) or int(number) > 1_000_000:
            raise InvalidState(f"{what}: attempts are numbered 1, 2, ... (not {_shown(number[:20])!r})")
        _require(repo, oid, "commit", what)
        found = repo.object_kind(oid)
        if found is not None and found[1] > MAX_ATTEMPT_MESSAGE:
            raise InvalidState(f"{what}: the commit is larger than {MAX_ATTEMPT_MESSAGE} bytes")
    elif rest == RELAY_LOCK:
        _require(repo, oid, "commit", what)
        found = repo.object_kind(oid)
        if found is not None and found[1] > MAX_LOCK_COMMIT:
            raise InvalidState(f"{what}: the lock commit is larger than {MAX_LOCK_COMMIT} bytes")
        _check_lock_record(repo, oid, what)
    # anything else under refs/harness or refs/notes is not read by this version


def _check_lock_record(repo: Repo, oid: str, what: str) -> None:
    """The fleet relay lock's commit holds one lock.json its parser reads."""
    entries = list(repo.tree_entries_raw(repo.commit_tree(oid)))
    if len(entries) != 1 or entries[0][0] != "lock.json" or entries[0][2] not in FILE_MODES:
        raise InvalidState(f"{what}: a lock commit holds exactly one lock.json")
    found = repo.object_kind(entries[0][1])
    if found is None or found[0] != "blob" or found[1] > record_schemas.MAX_LOCK_BYTES:
        raise InvalidState(f"{what}: lock.json is not a small file")
    record_schemas.fleet_lock(repo.read_blob(entries[0][1]), f"{what}:lock.json")


def _require(repo: Repo, oid: str, kind: str, what: str) -> None:
    found = repo.object_kind(oid)
    if found is None:
        raise InvalidState(f"{what} points at an object the remote did not send ({oid[:12]})")
    if found[0] != kind:
        raise InvalidState(f"{what} points at a {found[0]}, not a {kind}; nothing was changed")


def check_state(repo: Repo, tree: str, known_good: Iterable[str | None] = ()) -> int:
    """Check every entry of `tree` that is not already in one of the `known_good` trees (trees
    of this clone's own state, whose entries were checked when they came: a blob is
    immutable, so the same entry at the same path needs no second look) or in a state
    tree this process checked last (`_GOOD_TREES`: every entry of those passed, at the
    same path); the number of records parsed. In a fleet, most of what another clone's
    head changed since it met ours came here already through a third clone, and a clone
    that joins, with no state of its own, parses the first head whole and of each other
    head only what differs from the heads before it."""
    parsed = 0
    good = [t for t in reversed(_GOOD_TREES) if repo.has_object(t)]  # another repository's may be absent here
    known_trees = [t for t in dict.fromkeys((*known_good, *good)) if t]
    if tree in known_trees:
        return 0
    stack: list[tuple[str, list[str], str]] = [("", known_trees, tree)]
    while stack:
        prefix, olds, new = stack.pop()
        for name, oid, mode, below in _differing(repo, new, olds):
            path = prefix + name
            why = state_tree.name_problem(name)
            if why:
                raise decoding.problem(_shown(path), f"the name {why}")
            if mode == TREE_MODE:
                if len(stack) + parsed > MAX_INCOMING_PATHS or path.count("/") > 8:
                    raise decoding.problem(_shown(path), "the state tree is deeper or larger than a state can be")
                stack.append((path + "/", below, oid))
                continue
            if mode not in FILE_MODES:
                raise decoding.problem(_shown(path), f"is not a file (mode {mode:o}: a symlink or a submodule)")
            kind = state_tree.kind_of(path)  # asked once, handed to the parser
            if kind is None:
                raise decoding.problem(_shown(path), "is not a file this version of git handoff knows")
            found = repo.small_blob(oid, state_tree.MAX_STATE_BLOB_BYTES)
            if found is None or found[0] != "blob":
                raise decoding.problem(_shown(path), "is not a blob")
            if found[2] is None:
                raise decoding.problem(_shown(path), f"{found[1]} bytes, more than the "
                                             f"{state_tree.MAX_STATE_BLOB_BYTES} a record may hold")
            state_tree.check_record(path, found[2], kind)
            parsed += 1
    _good_tree(tree)
    return parsed


# The entries (as stored) of trees check_state and the notes' check compared against
# lately, by tree: a fleet's heads are each compared with the same base and good trees,
# level by level (10,000 heads read those trees 100,000 times). A tree's oid names its
# entries in any repository. Each: (the set of its entries, {name: entry} once asked).
# At most KNOWN_KEPT entries in all (a long-lived process reads trees of thousands of notes).
_KNOWN: dict[str, tuple[frozenset[bytes], dict[bytes, bytes]]] = {}
KNOWN_KEPT = 200_000
_KEPT = [0]


def _records(repo: Repo, tree: str) -> list[bytes]:
    """A tree's entries as stored; for a tree Repo.tree_records leaves to libgit2, its
    entries as libgit2 reads them (modes normalised), written the way git stores them."""
    records = repo.tree_records(tree)
    if records is None:
        records = [tree_format.stored(*entry) for entry in repo.tree_entries_raw(tree)]
    return records


def _known(repo: Repo, tree: str) -> tuple[frozenset[bytes], dict[bytes, bytes]]:
    found = _KNOWN.get(tree)
    if found is None:
        records = frozenset(_records(repo, tree))
        if _KEPT[0] + len(records) > KNOWN_KEPT:
            _KNOWN.clear()
            _KEPT[0] = 0
        found = _KNOWN[tree] = (records, {})
        _KEPT[0] += len(records)
    return found


def _differing(repo: Repo, new: str, olds: list[str]) -> Iterator[tuple[str, str, int, list[str]]]:
    """(name, oid, mode, and for a tree the trees of that name in `olds`) for each entry
    of tree `new` that is not, byte for byte, the entry of that name in one of the trees
    `olds` (checked when they came: a blob is immutable, so the same entry at the same
    path needs no second look). The trees compare as sets of their entries as stored;
    only what differs is decoded (decoding every entry was most of a fleet sync's checks)."""
    known = [_known(repo, old) for old in olds]
    seen = known[0][0].union(*(k[0] for k in known[1:])) if known else frozenset()
    for record in _records(repo, new):
        if record in seen:
            continue
        name, oid, mode = tree_format.entry(record)
        below: list[str] = []
        if mode == TREE_MODE:
            key = tree_format.name(record)
            for records, by_name in known:
                if not by_name and records:
                    by_name.update((tree_format.name(r), r) for r in records)
                old = by_name.get(key)
                if old is not None and (found := tree_format.entry(old))[2] == TREE_MODE:
                    below.append(found[1])
        yield name, oid, mode, below


# The state trees check_state passed last in this process, newest last: a fleet's heads
# share all but a few subtrees, so each is checked against them, not against an empty
# tree (a clone joining a fleet of 21 heads of 10,000 tasks parsed 210,000 records, not
# 10,000). A few, not all: each one known costs a lookup at every level the walk visits.
_GOOD_TREES: list[str] = []
GOOD_TREES_KEPT = 4


def _good_tree(tree: str, kept: list[str] = _GOOD_TREES) -> None:
    """`tree` passed: the newest of `kept` (the state trees, or _GOOD_NOTES), the oldest beyond
    GOOD_TREES_KEPT dropped."""
    if tree in kept:
        kept.remove(tree)
    kept.append(tree)
    del kept[:-GOOD_TREES_KEPT]


MAX_NOTE_BYTES = 1 << 20  # one note (the commits of a task's attempts, a few lines each)
_NOTE_PART = re.compile(r"[0-9a-f]{2,64}")


def notes_problems(repo: Repo, trees: dict[str, str], known: str | None, label: str) -> dict[str, str]:
    """Each fetched notes tree ({ref: tree}, refs/notes/harness and each clone's notes)
    checked: {ref: why} for those that fail. Every entry is a note as git lays notes out
    (hex names, fanned out in directories of two hex digits, 40 or 64 hex digits in all),
    a blob of at most MAX_NOTE_BYTES. A gitlink there made the notes merge fail every
    sync, and `done`, `checkpoint`, `rename` crash; a note of 512 MiB took 1.5 GiB to
    read. What a tree holds at the same path as this clone's own notes tree (`known`) or
    a notes tree this process passed lately was checked when it came: only the rest is
    read, so a check costs what the clone changed, not every note of the project."""
    out: dict[str, str] = {}
    for ref, tree in sorted(trees.items()):
        if tree in _CHECKED:
            continue
        good = [t for t in reversed(_GOOD_NOTES) if repo.has_object(t)]
        try:
            _check_notes_tree(repo, tree, [t for t in dict.fromkeys((known, *good)) if t],
                              f"{label}'s refs/{_shown(ref)}")
        except InvalidState as exc:
            out[ref] = exc.message.removesuffix("; nothing was changed")
            continue
        mark_checked(tree)
        _good_tree(tree, _GOOD_NOTES)
    return out


def _check_notes_tree(repo: Repo, tree: str, known_good: list[str], label: str) -> None:
    stack: list[tuple[str, str, list[str]]] = [("", tree, known_good)]
    count = 0
    while stack:
        prefix, oid, olds = stack.pop()
        # (what is the same at the same path as in a notes tree checked before: skipped)
        for name, entry, mode, below in _differing(repo, oid, olds):
            path = prefix + name
            note = path.replace("/", "")  # the object noted, whatever the fan-out
            count += 1
            if not _NOTE_PART.fullmatch(name) or len(note) > 64 or count > MAX_INCOMING_PATHS:
                raise InvalidState(f"{label}'s notes: {_shown(path)} is not a note of a commit; nothing was changed")
            if mode == TREE_MODE and len(name) == 2:
                stack.append((path + "/", entry, below))
                continue
            if mode not in FILE_MODES or len(note) not in (40, 64):
                raise InvalidState(f"{label}'s notes: {_shown(path)} is not a note of a commit "
                                   f"(mode {mode:o}); nothing was changed")
            found = repo.object_kind(entry)
            if found is None or found[0] != "blob" or found[1] > MAX_NOTE_BYTES:
                raise InvalidState(f"{label}'s notes: the note {_shown(path)} is not a text of at most "
                                   f"{MAX_NOTE_BYTES} bytes; nothing was changed")


# The notes trees notes_problems passed last in this process, newest last (as _GOOD_TREES).
_GOOD_NOTES: list[str] = []


def _shown(path: str) -> str:
    text = path.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
    return repr(text)[1:-1] if len(text) <= 120 else repr(text[:117])[1:-1] + "..."


def state_problems(repo: Repo, heads: list[tuple[str, str]]) -> dict[str, str]:
    """{label: why} for each fetched state commit of `heads` ([(label, commit)]) that can
    not be used; the others are remembered as checked. Each is checked where it differs
    from the trees of the commits of ours where its history meets ours (`_meeting`)."""
    out: dict[str, str] = {}
    readable: list[tuple[str, str]] = []
    for label, theirs in heads:
        if theirs in _CHECKED:
            continue
        try:
            Snapshot(repo, theirs)
        except InvalidState as exc:
            out[label] = f"the state on {label} cannot be used: {exc.message}"
            continue
        readable.append((label, theirs))
    if not readable:
        return out
    ours = repo.ref_target(STATE_REF)
    meets = _meeting(repo, ours, list(dict.fromkeys(theirs for _, theirs in readable)))
    ours_tree = repo.commit_tree(ours) if ours else None
    for label, theirs in readable:
        if theirs in _CHECKED:
            continue
        known = meets[theirs]
        if known is not None:  # (None: ours holds it, checked when it came)
            try:
                check_state(repo, repo.commit_tree(theirs), [*(repo.commit_tree(c) for c in known), ours_tree])
            except InvalidState as exc:
                out[label] = f"the state on {label} has an unreadable file ({exc.message})"
                continue
        mark_checked(theirs)
    return out


MEETING_TREES = 3  # known trees a head is checked against, at most (each costs a lookup a level)


def _meeting(repo: Repo, ours: str | None, heads: list[str]) -> dict[str, list[str] | None]:
    """{head: the commits of ours where its history meets ours (None when ours holds the
    head, [] when nothing meets)}, from one walk of what the heads have that ours has not
    (a merge base cost a walk of ~1 ms apiece in a fleet's history). Those commits are in
    ours, so their trees were checked; when one meets, it is the merge base."""
    if ours is None:
        return {h: [] for h in heads}
    try:
        graph = repo.graph_not_in(heads, ours)
    except (KeyError, ValueError, OSError, lazy_pygit2().GitError):
        return {h: [] for h in heads}  # a history libgit2 cannot walk: check against ours alone
    out: dict[str, list[str] | None] = {}
    for h in heads:
        meets = sorted(ancestry.boundary(graph, ancestry.closure(graph, h))) if h in graph else None
        # (a shallow cut: absent)
        out[h] = None if meets is None else [c for c in meets if repo.has_object(c)][:MEETING_TREES]
    return out


def check_incoming_states(repo: Repo, heads: list[tuple[str, str]]) -> None:
    """The remote's state commits ([(label, commit)]): InvalidState (exit 2) at the first,
    in order, that cannot be used."""
    problems = state_problems(repo, heads)
    for label, _theirs in heads:
        if label in problems:
            raise InvalidState(f"{problems[label]}; nothing was changed")


# Commits and notes trees this process checked already (a sync checks each at fetch and
# again before merging it): big enough for every head of a big fleet, or that second
# look cost a sync of 10,000 clone heads as much again.
_CHECKED: set[str] = set()
MAX_CHECKED = 1 << 17


def mark_checked(commit: str) -> None:
    if len(_CHECKED) > MAX_CHECKED:
        _CHECKED.clear()
    _CHECKED.add(commit)


def forget_checked() -> None:
    """Forget every verdict of this process (a benchmark that times the checks again)."""
    _CHECKED.clear()
    _GOOD_TREES.clear()
    _GOOD_NOTES.clear()
    _KNOWN.clear()
    _KEPT[0] = 0
