"""The one place that touches pygit2 or runs the git CLI.

Everything above this module speaks in oids (hex strings), paths and bytes.
pygit2 is imported lazily: `import pygit2` costs ~100 ms, and a few entry
points (the post-commit hook's Python side, `--help`) must not pay for it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from git_handoff.core.errors import GitFailure, NotARepository, UsageError
from git_handoff.infra import gitconfig

if TYPE_CHECKING:
    import pygit2

T = TypeVar("T")

# libgit2 file modes
MODE_BLOB = 0o100644
MODE_TREE = 0o040000

# libgit2 racing a concurrent `git gc` (ours runs in the background): prune-packed
# removes an empty objects/xx/ between libgit2's mkdir and its rename of a new loose
# object, and repack deletes packs libgit2 has listed. Object writes are idempotent,
# so such a failure is retried a few times before it is reported.
GC_RACE_RETRIES = 8

# A ref lock older than this, found while we hold our own state lock, was left by
# a killed process (libgit2 never retries a held .lock, so it would block forever).
STALE_REF_LOCK_SECONDS = 2.0
SMALL_MERGE_BLOBS = 32  # up to this many new blobs, a merge commit is written without fast-import
# From this many blobs on, a transaction writes them with one fast-import: below it, git
# fast-import unpacks what it imported into loose objects anyway (fastimport.unpackLimit).
PACKED_BLOBS = 100
# Delta chains of fast-import's packs: its default (50) chains each blob to the one before
# it, and reading 50,000 task files back in tree order then took 2-3x as long as with
# chains of at most 10 (the pack is ~20% larger).
FAST_IMPORT_DEPTH = "--depth=10"
TMP_REFS = "refs/handoff-tmp/"  # scratch refs of fast-import, each named after its process


def _pygit2() -> Any:
    import pygit2

    return pygit2


# The git commands that can outlive a killed `git handoff` and go on writing (fetch,
# push, fast-import): only they get the parent-death signal. A preexec_fn makes
# subprocess fork the whole process instead of vfork-ing it (~5-20 ms per git call in
# a large, long-lived process such as the MCP server), and is unsafe with threads.
OUTLIVING_COMMANDS = frozenset({"fetch", "push", "fast-import"})

_PR_SET_PDEATHSIG = 1
_PRCTL: Any = None


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that ends a git child when this process dies (Linux; None elsewhere).

    A git fetch, push or fast-import outlives a SIGKILLed `git handoff`: it goes on
    writing objects and moving refs after the command is gone, racing the next
    command's own fetch (a held ref lock) and any `git fsck` (it reports the half-written
    objects as missing). SIGTERM, not SIGKILL: git then removes its lock and temp files.
    """
    global _PRCTL
    if not sys.platform.startswith("linux"):
        return None
    if _PRCTL is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _PRCTL = libc.prctl
        except (OSError, AttributeError):
            _PRCTL = False
    if not _PRCTL:
        return None
    prctl = _PRCTL
    parent = os.getpid()

    def child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)

    return child


def _fast_import_path(raw: bytes) -> bytes:
    """A path as `git fast-import` reads it: C-style quoted when it holds a space, a
    quote, a backslash or a newline, or starts with a quote."""
    if any(c in raw for c in b' "\\\n') or raw.startswith(b'"'):
        return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'
    return raw



def _private_dir(path: Path) -> Path:
    """`path`, made when it is not there yet. In a repository this process can not write
    to (a read-only mount, or permissions that keep it out) it is only named: a reader then finds
    nothing in it, and a writer fails where it writes, naming the file."""
    try:
        path.mkdir(exist_ok=True)
    except OSError:
        pass
    return path

class Repo:
    """A git repository (or linked worktree) seen through pygit2 and the git CLI."""

    def __init__(self, raw: pygit2.Repository, settings: Mapping[str, str | None] | None = None) -> None:
        # typed Any: pygit2's stubs cannot tell a Commit from a Tree behind repo[oid]
        self.raw: Any = raw
        # the command line's settings (`git -c`, GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT):
        # libgit2 reads none of them, and they win over every config file, as in git
        self.settings: Mapping[str, str | None] = (
            gitconfig.from_environment(os.environ) if settings is None else settings)
        self._moved_files = _moved_config_files()
        self.git_dir = Path(raw.path).resolve()
        commondir_file = self.git_dir / "commondir"
        if commondir_file.exists():
            common = Path(commondir_file.read_text().strip())
            if not common.is_absolute():
                common = self.git_dir / common
            self.common_dir = common.resolve()
        else:
            self.common_dir = self.git_dir
        self.workdir: Path | None = Path(raw.workdir).resolve() if raw.workdir else None
        self._pack_stamp = self._pack_dir_stamp()
        self._odb: Any = None
        self._odb_of: Any = None

    def _pack_dir_stamp(self) -> int:
        try:
            return os.stat(self.common_dir / "objects" / "pack").st_mtime_ns
        except OSError:
            return 0

    def reopen_if_repacked(self) -> None:
        """Reopen the repository when packs were added or removed since it was opened.

        libgit2 adds new packs to an open repository but never drops the ones a
        repack deleted: in a long-lived process every background repack made each
        later object lookup slower (the long-haul benchmark's latency grew ~3x over
        20,000 transactions). A fresh open costs about a millisecond, once per repack.
        """
        stamp = self._pack_dir_stamp()
        if stamp != self._pack_stamp:
            self.raw = _pygit2().Repository(str(self.git_dir))
            self._pack_stamp = stamp

    def shallow_stamp(self) -> tuple[int, int] | None:
        """When and how <git dir>/shallow (a shallow clone's cut) was last written, None
        without one: libgit2 reads it once per open repository."""
        try:
            found = os.stat(self.common_dir / "shallow")
        except OSError:
            return None
        return found.st_mtime_ns, found.st_size

    def reopen(self) -> None:
        """Open the repository afresh, after a fetch that moved the shallow cut: an open
        repository keeps the cut it read (a commit at the old cut shows no parents, one
        above a new cut points at parents that are not here)."""
        self.raw = _pygit2().Repository(str(self.git_dir))
        self._pack_stamp = self._pack_dir_stamp()
        self._odb = None
        self._odb_of = None

    # -- opening -----------------------------------------------------------------

    @classmethod
    def discover(cls, start: str | os.PathLike[str] | None = None) -> Repo:
        """The repository git would use, started in `start` (default: the current
        directory, where `git -C` has already moved), as git finds it: GIT_DIR names the
        git directory (no search), GIT_WORK_TREE the work tree; without GIT_DIR, the
        search upwards stops at GIT_CEILING_DIRECTORIES and at a file system boundary
        unless GIT_DISCOVERY_ACROSS_FILESYSTEM is true. Relative paths are taken from `start`."""
        pygit2 = _pygit2()
        start_path = os.fspath(start) if start is not None else os.getcwd()
        settings = gitconfig.from_environment(os.environ)
        git_dir = os.environ.get("GIT_DIR")
        if git_dir is not None:
            flags = pygit2.enums.RepositoryOpenFlag
            try:
                raw = pygit2.Repository(os.path.join(start_path, git_dir), flags.NO_SEARCH | flags.NO_DOTGIT)
            except (pygit2.GitError, OSError, ValueError) as exc:
                raise NotARepository(f"not a git repository: '{git_dir}' (GIT_DIR, or git --git-dir)") from exc
        else:
            across = os.environ.get("GIT_DISCOVERY_ACROSS_FILESYSTEM")
            ceiling = os.environ.get("GIT_CEILING_DIRECTORIES")
            found = pygit2.discover_repository(
                start_path, gitconfig.parse_bool("GIT_DISCOVERY_ACROSS_FILESYSTEM", across) if across else False,
                *([ceiling] if ceiling else []))
            if not found:
                raise NotARepository(
                    f"not a git repository (or any parent up to /): {start_path}"
                )
            try:
                raw = pygit2.Repository(found)
            except pygit2.GitError as exc:
                raise NotARepository(f"cannot open git repository at {found}: {exc}") from exc
        _place_work_tree(raw, start_path, explicit=git_dir is not None)
        return cls(raw, settings)

    # -- places ------------------------------------------------------------------

    @property
    def handoff_dir(self) -> Path:
        """Per-clone private directory (shared by linked worktrees; never synced)."""
        return _private_dir(self.common_dir / "handoff")

    @property
    def worktree_dir(self) -> Path:
        """Per-worktree private directory."""
        return _private_dir(self.git_dir / "handoff")

    def root(self) -> Path:
        if self.workdir is None:
            raise UsageError("this command needs a work tree (the repository is bare)")
        return self.workdir

    # -- refs --------------------------------------------------------------------

    def ref_target(self, name: str) -> str | None:
        ref = self.raw.references.get(name)
        if ref is None:
            return None
        try:
            return str(ref.resolve().target)
        except KeyError:
            return None

    def refs_under(self, prefix: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in self.raw.references:
            if name.startswith(prefix):
                target = self.ref_target(name)
                if target is not None:
                    out[name] = target
        return out

    def refs_in(self, prefix: str) -> dict[str, str]:
        """`refs_under` for a namespace that may hold thousands of refs (a fleet's clone
        refs): git for-each-ref reads only that namespace, where libgit2's iterator reads
        every ref of the repository at each call (0.1 s a call with 2,000 loose refs)."""
        proc = self.git("for-each-ref", "--format=%(objectname) %(refname)", prefix, check=False)
        out: dict[str, str] = {}
        for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
            oid, _, name = line.partition(" ")
            if name.startswith(prefix):
                out[name] = oid
        return out

    def cas_ref(self, name: str, new: str, expected: str | None, message: str) -> bool:
        """Compare-and-swap `name` from `expected` (None: must not exist) to `new`.

        Returns False when another writer got there first. A stale `<ref>.lock`
        left by a killed process is removed once and the swap retried.
        """
        pygit2 = _pygit2()
        for attempt in range(2 + GC_RACE_RETRIES):
            try:
                if expected is None:
                    self.raw.create_reference_direct(name, _pygit2().Oid(hex=new), False, message=message)
                    return True
                ref = self.raw.references.get(name)
                if ref is None or str(ref.target) != expected:
                    return False
                ref.set_target(new, message)
                return True
            except pygit2.AlreadyExistsError:
                return False
            except (pygit2.GitError, ValueError, OSError) as exc:
                if self._recover_stale_ref_lock(name):
                    continue
                text = str(exc).lower()
                if "doesn't exist" in text and attempt < GC_RACE_RETRIES:
                    # the new commit is there, but a concurrent `git gc` swapped packs
                    # under libgit2's object lookup: look again, in the packs there are
                    # now, waiting longer each time (under load the swap outlasted five
                    # tries of 10-50 ms: CI's test_transactions_survive_gc_repacking_underneath)
                    time.sleep(0.01 * 2**attempt)
                    self.reopen_if_repacked()
                    continue
                if "lock" in text or "old reference value does not match" in text or "exists" in text:
                    return False
                raise GitFailure(f"cannot update {name}: {exc}") from exc
        return False

    def _recover_stale_ref_lock(self, name: str) -> bool:
        lock = self.common_dir / (name + ".lock")
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return False
        if age < STALE_REF_LOCK_SECONDS:
            return False
        try:
            lock.unlink()
        except FileNotFoundError:
            pass
        return True

    def sweep_tmp_refs(self) -> list[str]:
        """Delete the refs/handoff-tmp/* refs (fast-import's scratch refs) whose process is
        gone: a command killed between `fast-import` and its cleanup leaves one behind."""
        swept = []
        for name in self.refs_under(TMP_REFS):
            match = re.search(r"(?:^|-)([0-9]+)-[0-9a-f]+$", name[len(TMP_REFS):])
            pid = int(match.group(1)) if match else 0
            if pid and pid != os.getpid() and _alive(pid):
                continue
            self.delete_ref(name)
            swept.append(name)
        return swept

    def sweep_incoming(self, prefix: str, fixed: str | None = None) -> list[str]:
        """Delete what a fetch killed midway left under `prefix`: the refs and ref locks of
        every per-fetch namespace (`<prefix><remote>/<pid>-<hex>/...`, as earlier versions
        fetched) whose process is gone, and the ref locks under `fixed` (the caller's own
        namespace, which it holds a lock for: none there is live). A lock left there made
        every later fetch fail. Other namespaces (another remote's) are left alone."""
        owner = re.compile(r"/([0-9]+)-[0-9a-f]{8}/")

        def stale(name: str) -> bool:
            match = owner.search(name)
            if match is None:
                return fixed is not None and name.startswith(fixed) and name.endswith(".lock")
            pid = int(match.group(1))
            return pid != os.getpid() and not _alive(pid)

        swept = [name for name in self.refs_in(prefix) if stale(name)]
        for name in swept:
            self.delete_ref(name)
        root = self.common_dir / prefix
        if root.is_dir():
            for lock in root.rglob("*.lock"):
                relative = prefix + lock.relative_to(root).as_posix()
                if stale(relative):
                    lock.unlink(missing_ok=True)
                    swept.append(relative)
            # and the directories left empty (a loose ref's, once deleted, stay)
            for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if path.is_dir() and stale(prefix + path.relative_to(root).as_posix() + "/"):
                    with contextlib.suppress(OSError):  # not empty, or gone already
                        path.rmdir()
        return swept

    def update_refs(self, updates: list[tuple[str, str | None, str | None]], message: str) -> None:
        """Move many refs at once: each (name, new oid or None to delete, the oid it must
        have now or None when it must not exist). One `git update-ref --stdin` (thousands
        of refs in one process, not a file lock and a write each from here); should that
        transaction fail (a ref moved meanwhile), each ref by compare-and-swap on its own,
        those that moved left as they are."""
        if not updates:
            return
        lines = []
        for name, new, old in updates:
            if new is None:
                lines.append(f"delete {name} {old or ''}\n")
            else:
                lines.append(f"update {name} {new} {old or '0' * len(new)}\n")
        proc = self.git("update-ref", "-m", message, "--stdin", input="".join(lines).encode(), check=False)
        if proc.returncode == 0:
            return
        for name, new, old in updates:
            if new is None:
                if self.ref_target(name) == old:
                    self.delete_ref(name)
            else:
                self.cas_ref(name, new, old, message)

    def delete_ref(self, name: str) -> None:
        ref = self.raw.references.get(name)
        if ref is not None:
            ref.delete()

    # -- objects -----------------------------------------------------------------

    def _retry_gc_race(self, write: Callable[[], T]) -> T:
        pygit2 = _pygit2()
        for attempt in range(GC_RACE_RETRIES):
            try:
                return write()
            except (OSError, pygit2.GitError):
                if attempt == GC_RACE_RETRIES - 1:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    def write_blob(self, data: bytes) -> str:
        return self._retry_gc_race(lambda: str(self.raw.create_blob(data)))

    def write_blobs(self, datas: list[bytes]) -> list[str]:
        """`write_blob` of each of `datas`, in order. Many are written by one `git
        fast-import` into a single pack (a loose object costs ~0.7 ms here: a claim that
        fails a 50,000-task cycle spent half a minute on them); a few, in-process."""
        if len(datas) < PACKED_BLOBS:
            return [self.write_blob(data) for data in datas]
        pygit2 = _pygit2()
        out = [b"feature done\n"]
        for data in datas:
            out.append(b"blob\ndata %d\n" % len(data))
            out.append(data)
            out.append(b"\n")
        out.append(b"done\n")
        self.git("fast-import", "--quiet", FAST_IMPORT_DEPTH, input=b"".join(out), cwd=self.common_dir)
        oids = [str(pygit2.hash(data)) for data in datas]
        if not self.has_object(oids[-1]):  # libgit2 rescans the packs on a miss
            raise GitFailure("git fast-import did not write the blobs")
        return oids

    def read_blob(self, oid: str) -> bytes:
        # by Oid, not by hex text: a text key is looked up as a prefix (slower)
        return bytes(self.raw[_as_oid(oid)].data)

    def tree_files(self, tree_oid: str, suffix: str = "") -> list[tuple[str, bytes]]:
        """(name, data) of each entry of a tree that is not a tree and whose name ends
        with `suffix`, in tree order: reading a fan-out leaf of tasks in one call."""
        raw = self.raw
        return [(entry.name, bytes(raw[entry.id].data)) for entry in raw[_as_oid(tree_oid)]
                if entry.filemode != MODE_TREE and entry.name.endswith(suffix)]

    def has_object(self, oid: str) -> bool:
        try:
            return oid in self.raw
        except (ValueError, TypeError):
            return False

    def resolve_commit(self, rev: str) -> str | None:
        """The commit `rev` names, or None when it does not exist here."""
        pygit2 = _pygit2()
        try:
            obj = self.raw.revparse_single(rev)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            return None
        return str(commit.id)

    def commit_tree(self, commit_oid: str) -> str:
        return str(self.raw[commit_oid].tree_id)

    def commit_parents(self, commit_oid: str) -> list[str]:
        return [str(p) for p in self.raw[_as_oid(commit_oid)].parent_ids]

    def commit_info(self, commit_oid: str) -> tuple[str, list[str], int, str]:
        """(message, parent oids, commit time, author name) of a commit. The message and
        the name are read as UTF-8 whatever the commit's `encoding` header says (pygit2
        decodes by that header, strictly: a fetched commit naming an unknown encoding, or
        bytes that are not that encoding, raised LookupError or UnicodeDecodeError in
        every reader of the history); what is not UTF-8 shows as U+FFFD."""
        c = self.raw[commit_oid]
        return (c.raw_message.decode("utf-8", "replace"), [str(p) for p in c.parent_ids], c.commit_time,
                c.author.raw_name.decode("utf-8", "replace"))

    def tree_entries(self, tree_oid: str) -> Iterator[tuple[str, str, bool]]:
        """(name, oid, is_tree) for each entry of a tree."""
        for entry in self.raw[tree_oid]:
            yield entry.name, str(entry.id), entry.filemode == MODE_TREE

    def tree_entries_raw(self, tree_oid: str) -> Iterator[tuple[str, str, int]]:
        """(name, oid, file mode) for each entry of a tree, names exactly as stored
        (undecodable bytes as surrogate escapes): for checking fetched trees."""
        for entry in self.raw[tree_oid]:
            raw_name = getattr(entry, "raw_name", None)
            name = raw_name.decode("utf-8", "surrogateescape") if isinstance(raw_name, bytes) else entry.name
            yield name, str(entry.id), entry.filemode

    def object_kind(self, oid: str) -> tuple[str, int] | None:
        """('commit' | 'tree' | 'blob' | 'tag', size) of an object, or None when absent;
        the object's data is not read."""
        try:
            kind, size = self._header(oid)
        except (KeyError, ValueError, TypeError):
            return None
        return _KIND_NAMES.get(int(kind), "unknown"), int(size)

    def _odb_now(self) -> Any:
        """The wrapper of this repository's object database (pygit2 makes a new one each
        time `raw.odb` is asked for): made once per opened repository."""
        raw = self.raw
        if self._odb_of is not raw:
            self._odb, self._odb_of = raw.odb, raw
        return self._odb

    def _header(self, oid: str) -> tuple[int, int]:
        """(type number, size) of an object without reading its data (KeyError if absent)."""
        odb = self._odb_now()
        if hasattr(odb, "read_header"):
            kind, size = odb.read_header(oid)
            return int(kind), int(size)
        obj = self.raw[oid]
        return int(obj.type), len(obj.read_raw())

    def small_blob(self, oid: str, limit: int) -> tuple[str, int, bytes | None] | None:
        """(kind, size, data) of an object, None when absent; data only when it is a blob
        of at most `limit` bytes. The header is read first, so an object that inflates to
        gigabytes is refused without being inflated; then the object itself, straight
        from the object database (checking every blob of a fetched state: object_kind
        and read_blob made two lookups and two wrappers per blob)."""
        try:
            kind, size = self._header(oid)
            if kind != _BLOB or size > limit:
                return _KIND_NAMES.get(kind, "unknown"), size, None
            return "blob", size, self._odb_now().read(oid)[1]
        except (KeyError, ValueError, TypeError):
            return None

    def tree_lookup(self, tree_oid: str, path: str) -> tuple[str, bool] | None:
        """(oid, is_tree) at `path` inside the tree, or None."""
        tree = self.raw[tree_oid]
        try:
            entry = tree[path]
        except KeyError:
            return None
        return str(entry.id), entry.filemode == MODE_TREE

    def tree_mode(self, tree_oid: str, path: str) -> int:
        """The file mode of the entry at `path` inside the tree (KeyError when absent)."""
        return int(self.raw[tree_oid][path].filemode)

    def update_tree(self, base: str | None, changes: Mapping[str, str | None]) -> str:
        """A new tree: `base` with each path set to a blob oid (None: removed).

        Only the trees on the changed paths are rewritten: O(depth) objects per path.
        """
        return self._retry_gc_race(lambda: self._update_tree(base, changes))

    def _update_tree(self, base: str | None, changes: Mapping[str, str | None]) -> str:
        direct: dict[str, str | None] = {}
        nested: dict[str, dict[str, str | None]] = {}
        for path, oid in changes.items():
            head, sep, rest = path.partition("/")
            if sep:
                nested.setdefault(head, {})[rest] = oid
            else:
                direct[head] = oid
        builder = self.raw.TreeBuilder(self.raw[base]) if base else self.raw.TreeBuilder()
        for name, oid in direct.items():
            if oid is None:
                if builder.get(name) is not None:
                    builder.remove(name)
            else:
                builder.insert(name, oid, MODE_BLOB)
        for name, sub in nested.items():
            existing = builder.get(name)
            sub_base = str(existing.id) if existing is not None and existing.filemode == MODE_TREE else None
            new_sub = self._update_tree(sub_base, sub)
            if len(self.raw[new_sub]) == 0:
                if existing is not None:
                    builder.remove(name)
            else:
                builder.insert(name, new_sub, MODE_TREE)
        return str(builder.write())

    def tree_diff(self, a: str | None, b: str | None, prefix: str = "") -> dict[str, tuple[str | None, str | None]]:
        """Blob paths that differ between trees `a` and `b` (None: empty): {path: (old, new)}.

        Subtrees with equal oids are skipped, so the cost follows the change, not the state.
        """
        out: dict[str, tuple[str | None, str | None]] = {}
        if a == b:
            return out
        ea = {n: (o, t) for n, o, t in self.tree_entries(a)} if a else {}
        eb = {n: (o, t) for n, o, t in self.tree_entries(b)} if b else {}
        for name in ea.keys() | eb.keys():
            oa, ta = ea.get(name, (None, False))
            ob, tb = eb.get(name, (None, False))
            if oa == ob:
                continue
            path = prefix + name
            if ta or tb:
                out.update(self.tree_diff(oa if ta else None, ob if tb else None, path + "/"))
                if oa is not None and not ta:
                    out[path] = (oa, None)
                if ob is not None and not tb:
                    out[path] = (out.get(path, (None, None))[0], ob)
            else:
                out[path] = (oa, ob)
        return out

    def commit_changes_packed(
        self, parents: list[str], changes: Mapping[str, str | bytes | None], message: str
    ) -> str:
        """A commit of the first parent's tree with `changes` ({path: blob oid | bytes |
        None to delete}), written by one `git fast-import` into a single pack: many
        loose objects (one file each) cost ~1 ms apiece here, a pack a fraction of that.
        A merge of a few records (the usual sync in a fleet) is written in-process instead:
        starting fast-import costs more than a handful of loose objects."""
        if sum(1 for v in changes.values() if isinstance(v, bytes)) <= SMALL_MERGE_BLOBS:
            blobs = {path: (self.write_blob(v) if isinstance(v, bytes) else v) for path, v in changes.items()}
            tree = self.update_tree(self.commit_tree(parents[0]), blobs) if blobs else self.commit_tree(parents[0])
            return self.create_commit(tree, parents, message)

        files = [(path.encode("utf-8", "surrogateescape"), "100644", value) for path, value in changes.items()]
        return self.fast_import_commit(parents, files, message, when=int(time.time()))

    def fast_import_commit(self, parents: list[str], files: Iterable[tuple[bytes, str, bytes | str | None]],
                           message: str, *, when: int = 0) -> str:
        """A commit on `parents[0]`'s tree changing `files` ((path, mode, bytes written
        inline | an existing blob's oid | None to delete)), written by one `git
        fast-import` into one pack, through a temporary ref under TMP_REFS (swept at the
        next sync if this process dies first)."""
        import secrets

        sig = self.signature()
        tmp_ref = f"{TMP_REFS}{os.getpid()}-{secrets.token_hex(4)}"
        msg = message.encode()
        out = [f"commit {tmp_ref}\n".encode(),
               f"committer {sig.name} <{sig.email}> {when} +0000\n".encode(),
               f"data {len(msg)}\n".encode(), msg, b"\n", f"from {parents[0]}\n".encode()]
        for parent in parents[1:]:
            out.append(f"merge {parent}\n".encode())
        for raw_path, mode, value in files:
            path = _fast_import_path(raw_path)
            if value is None:
                out.append(b"D " + path + b"\n")
            elif isinstance(value, bytes):
                out += [f"M {mode} inline ".encode() + path + b"\n", f"data {len(value)}\n".encode(), value, b"\n"]
            else:
                out.append(f"M {mode} {value} ".encode() + path + b"\n")
        out.append(b"\ndone\n")
        self.git("fast-import", "--quiet", "--done", FAST_IMPORT_DEPTH, input=b"".join(out), cwd=self.common_dir)
        commit = self.ref_target(tmp_ref)
        self.delete_ref(tmp_ref)
        if commit is None:
            raise GitFailure("git fast-import wrote no commit")
        return commit

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return ancestor == descendant or bool(self.raw.descendant_of(descendant, ancestor))

    def commits_not_in(self, include: str, exclude: str | None) -> list[str]:
        """The commits `include` has that `exclude` has not (any order)."""
        pygit2 = _pygit2()
        walker = self.raw.walk(include, pygit2.enums.SortMode.NONE)
        if exclude is not None and self.has_object(exclude):
            walker.hide(exclude)
        return [str(commit.id) for commit in walker]

    def merge_base_many(self, commits: list[str]) -> str | None:
        """The best common ancestor of commits[0] and a merge of all the others (as
        `git merge-base A B C...`)."""
        found = self.raw.merge_base_many(commits)
        return str(found) if found is not None else None

    def count_commits(self, include: str, exclude: str | None = None) -> int:
        """How many commits `include` has that `exclude` has not."""
        pygit2 = _pygit2()
        walker = self.raw.walk(include, pygit2.enums.SortMode.NONE)
        if exclude is not None and self.has_object(exclude):
            walker.hide(exclude)
        return sum(1 for _ in walker)

    def signature(self) -> Any:
        pygit2 = _pygit2()
        name = os.environ.get("GIT_AUTHOR_NAME")
        email = os.environ.get("GIT_AUTHOR_EMAIL")
        name = name or self.config_get("user.name")
        email = email or self.config_get("user.email")
        user = os.environ.get("USER") or "handoff"
        return pygit2.Signature(name or user, email or f"{user}@{socket.gethostname()}")

    def create_commit(self, tree: str, parents: list[str], message: str) -> str:
        sig = self.signature()
        return self._retry_gc_race(lambda: str(self.raw.create_commit(None, sig, sig, message, tree, parents)))

    def commit_bytes(self, commit_oid: str) -> bytes:
        """The commit object's bytes, as a signature covers them."""
        return bytes(self.raw[commit_oid].read_raw())

    def create_signed_commit(self, content: bytes, signature: str) -> str:
        """A commit of `content` (a commit object's bytes) with `signature` in its gpgsig header."""
        text = content.decode("utf-8", "surrogateescape")
        return self._retry_gc_race(lambda: str(self.raw.create_commit_with_signature(text, signature, "gpgsig")))

    def merge_base(self, a: str, b: str) -> str | None:
        oid = self.raw.merge_base(a, b)
        return str(oid) if oid is not None else None

    def walk(self, start: str, limit: int | None = None) -> Iterator[str]:
        """Commits reachable from `start`, newest first (topological, then time)."""
        pygit2 = _pygit2()
        walker = self.raw.walk(start, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
        for n, commit in enumerate(walker):
            if limit is not None and n >= limit:
                return
            yield str(commit.id)

    def commits_between(self, base: str, head: str, limit: int = 1000) -> list[str]:
        """Commits reachable from `head` but not from `base` (`base..head`), newest first."""
        pygit2 = _pygit2()
        walker = self.raw.walk(head, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
        try:
            walker.hide(base)
        except (KeyError, ValueError, pygit2.GitError):
            pass
        out: list[str] = []
        for commit in walker:
            out.append(str(commit.id))
            if len(out) >= limit:
                break
        return out

    # -- work tree ---------------------------------------------------------------

    def head(self) -> str | None:
        """The commit HEAD points at, or None on an unborn branch."""
        try:
            if self.raw.head_is_unborn:
                return None
            return str(self.raw.head.target)
        except Exception:  # noqa: BLE001 - libgit2 raises several kinds for a broken HEAD
            return None

    def head_branch(self) -> str | None:
        """The branch HEAD is on (refs/heads/...), or None when detached."""
        try:
            if self.raw.head_is_detached:
                return None
            return str(self.raw.references["HEAD"].target)
        except Exception:  # noqa: BLE001
            return None

    def _config(self, key: str) -> tuple[bool, str | None]:
        """(set?, value) of `key`: the command line's setting, else the config files'
        (None: a key given without a value, true as a boolean)."""
        pygit2 = _pygit2()
        canonical = gitconfig.canonical_key(key)
        if canonical in self.settings:
            return True, self.settings[canonical]
        if self._moved_files is not None:
            return self._config_moved(canonical, *self._moved_files)
        try:
            value = self.raw.config[key]
        except (KeyError, pygit2.GitError):
            return False, None
        return True, (None if value is None else str(value))

    def _config_moved(self, canonical: str, global_file: str | None, system_file: str | None,
                      no_system: bool) -> tuple[bool, str | None]:
        """`_config` where GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM or GIT_CONFIG_NOSYSTEM move
        or drop git's global and system files, which libgit2 reads from their usual places
        whatever the environment says: the repository's own levels from libgit2, the
        others from the files git would read. The highest level wins, then the last entry."""
        levels = _pygit2().enums.ConfigLevel
        allowed = {int(levels.LOCAL), int(levels.WORKTREE), int(levels.APP)}
        if global_file is None:
            allowed |= {int(levels.GLOBAL), int(levels.XDG)}
        if system_file is None and not no_system:
            allowed |= {int(levels.SYSTEM), int(levels.PROGRAMDATA)}
        found = [(int(e.level), e.value) for e in self.raw.config if e.name == canonical and int(e.level) in allowed]
        for path, level in ((global_file, levels.GLOBAL), (None if no_system else system_file, levels.SYSTEM)):
            if path:
                found += [(int(level), value) for value in _file_values(path, canonical)]
        if not found:
            return False, None
        found.sort(key=lambda pair: pair[0])  # stable: the last entry of a level stays last
        value = found[-1][1]
        return True, (None if value is None else str(value))

    def config_get(self, key: str) -> str | None:
        found, value = self._config(key)
        if not found:
            return None
        return "" if value is None else value

    def config_bool(self, key: str, default: bool = False) -> bool:
        found, value = self._config(key)
        return gitconfig.parse_bool(key, value) if found else default

    def config_int(self, key: str) -> int | None:
        found, value = self._config(key)
        return gitconfig.parse_int(key, value) if found else None

    # -- git CLI -----------------------------------------------------------------

    def git(
        self,
        *args: str,
        cwd: Path | None = None,
        check: bool = True,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run the git CLI (used for push/fetch, reset/clean, gc: what libgit2 gets wrong)."""
        run_env = dict(os.environ)
        if "GIT_DIR" in run_env or "GIT_WORK_TREE" in run_env:
            # the repository this process opened, whatever the directory git starts in
            # (a relative GIT_DIR would be taken from there)
            run_env["GIT_DIR"] = str(self.git_dir)
            run_env.pop("GIT_WORK_TREE", None)
            if self.workdir is not None:
                run_env["GIT_WORK_TREE"] = str(self.workdir)
        if env:
            run_env.update(env)
        where = cwd or self.workdir or self.git_dir
        proc = subprocess.run(
            ["git", *args], cwd=where, input=input, capture_output=True, env=run_env,
            preexec_fn=_die_with_parent() if args and args[0] in OUTLIVING_COMMANDS else None,
        )
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            tail = err[-1] if err else f"exit {proc.returncode}"
            raise GitFailure(f"git {args[0]} failed: {tail}")
        return proc

    def loose_estimate(self, dirs: int = 4) -> int:
        """About how many loose objects there are, from a few objects/xx/ dirs (as `git gc --auto` does)."""
        objects = self.common_dir / "objects"
        seen = 0
        for n in range(dirs):
            try:
                seen += len(os.listdir(objects / f"{0x17 + 37 * n:02x}"))
            except OSError:
                pass
        return seen * 256 // dirs

    def gc_in_background(self) -> None:
        """Pack loose objects without waiting: libgit2 never packs on its own.

        `git repack --geometric=2` packs the loose objects and rolls up only the small
        packs, so each run costs about what was written since the last one. `git gc
        --auto` would also walk the whole history (reflog expiry, prune, repack), a
        cost that grows with every state commit. One run at a time: a marker file in
        the handoff dir, taken over when older than 10 minutes. git older than 2.32
        (no --geometric) falls back to `git gc --auto`.
        """
        marker = self.handoff_dir / "gc.running"
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                if time.time() - marker.stat().st_mtime < 600:
                    return
                marker.unlink()
                fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except OSError:
                return
        except OSError:
            return
        os.close(fd)
        script = (
            'git repack -d -l -q --geometric=2 2>/dev/null || '
            'git -c gc.autoDetach=false gc --auto --quiet; rm -f "$1"'
        )
        try:
            subprocess.Popen(
                ["sh", "-c", script, "handoff-gc", str(marker)],
                cwd=self.common_dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            marker.unlink(missing_ok=True)


def _place_work_tree(raw: Any, start: str, *, explicit: bool) -> None:
    """Set the work tree as git does: GIT_WORK_TREE (taken from `start`) when set; else,
    for a git directory GIT_DIR named (`explicit`) that is not bare and has no
    core.worktree, `start` itself. Otherwise libgit2's own answer stands (the directory
    holding `.git`, a linked worktree's, core.worktree, or none for a bare repository)."""
    work_tree = os.environ.get("GIT_WORK_TREE")
    if work_tree is not None:
        work_tree = os.path.join(start, work_tree)
    elif explicit and not raw.is_bare and _file_config(raw, "core.worktree") is None:
        work_tree = start
    else:
        return
    try:
        raw.workdir = work_tree
    except (_pygit2().GitError, OSError, ValueError) as exc:
        raise NotARepository(f"cannot use {work_tree} as the work tree: {exc}") from exc


def _moved_config_files() -> tuple[str | None, str | None, bool] | None:
    """(GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM, GIT_CONFIG_NOSYSTEM) when any is set, else None
    (the usual case: libgit2's own reading of the config files is git's)."""
    environ = os.environ
    if "GIT_CONFIG_GLOBAL" not in environ and "GIT_CONFIG_SYSTEM" not in environ \
            and "GIT_CONFIG_NOSYSTEM" not in environ:
        return None
    no_system = environ.get("GIT_CONFIG_NOSYSTEM")
    return (environ.get("GIT_CONFIG_GLOBAL"), environ.get("GIT_CONFIG_SYSTEM"),
            gitconfig.parse_bool("GIT_CONFIG_NOSYSTEM", no_system) if no_system is not None else False)


def _file_values(path: str, canonical: str) -> list[str | None]:
    """The values of `canonical` in one config file (its includes too), in order; none when
    the file is missing or unreadable (git reads what is there)."""
    pygit2 = _pygit2()
    try:
        return [e.value for e in pygit2.Config(path) if e.name == canonical]
    except (pygit2.GitError, OSError, ValueError):
        return []


def _file_config(raw: Any, key: str) -> str | None:
    try:
        value = raw.config[key]
    except (KeyError, _pygit2().GitError):
        return None
    return None if value is None else str(value)


_KIND_NAMES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
_BLOB = 3  # GIT_OBJECT_BLOB
_OID_CLASS: Any = None


def _as_oid(oid: str) -> Any:
    """A full hex oid as a pygit2.Oid (an exact lookup); anything else as given, so that a
    short or malformed one fails (or matches a prefix) exactly as it always did."""
    global _OID_CLASS
    if len(oid) != 40:
        return oid
    if _OID_CLASS is None:
        _OID_CLASS = _pygit2().Oid
    try:
        return _OID_CLASS(hex=oid)
    except (ValueError, TypeError):
        return oid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, under another user
    return True
