"""The one place that touches pygit2 or runs the git CLI: `Repo`, and here its objects,
trees, commits and history.

Everything above this module speaks in oids (hex strings), paths and bytes. `Repo` is
built in three layers, each answering one question in a file of its own: the repository
as opened (git_handoff.infra.gitopen: directories, config, HEAD, git run inside it), its
refs (git_handoff.infra.gitrefs), and, here, its objects and history. The git processes
themselves (environment, fast-import input, packing) are git_handoff.infra.gitprocess's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from git_handoff.core.errors import GitFailure
from git_handoff.infra import gitprocess, tree_format
from git_handoff.infra.gitopen import GC_RACE_RETRIES, lazy_pygit2
from git_handoff.infra.gitrefs import TMP_REFS, GitRefs

T = TypeVar("T")

# libgit2 file modes
MODE_BLOB = 0o100644
MODE_TREE = 0o040000
# git's number for a tree object (GIT_OBJECT_TREE): an entry's `type` is a plain int,
# where its `filemode` is built as an enum member at each read (0.8 us an entry, 8 ms
# over the 10,000 entries of a large task set's leaves)
OBJECT_TREE = 2
# The trees Repo.tree_records split lately, by oid: a sync reads each fetched notes tree
# to check it, then to merge it, and the tree it merges into again at each step
# (at most RECORDS_KEPT entries in all: a long-lived process, the MCP server, reads
# trees of thousands of notes, ~70 bytes an entry)
_RECORDS: dict[str, list[bytes]] = {}
RECORDS_KEPT = 200_000
_KEPT = [0]
SMALL_MERGE_BLOBS = 32  # up to this many new blobs, a merge commit is written without fast-import
# From this many blobs on, a transaction writes them with one fast-import: below it, git
# fast-import unpacks what it imported into loose objects anyway (fastimport.unpackLimit).
PACKED_BLOBS = 100


class Repo(GitRefs):
    """A git repository (or linked worktree) seen through pygit2 and the git CLI."""

    # -- objects -----------------------------------------------------------------

    def _retry_gc_race(self, write: Callable[[], T]) -> T:
        pygit2 = lazy_pygit2()
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
        pygit2 = lazy_pygit2()
        self.git("fast-import", "--quiet", gitprocess.FAST_IMPORT_DEPTH, input=gitprocess.blobs_input(datas),
                 cwd=self.common_dir)
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
                if entry.type != OBJECT_TREE and entry.name.endswith(suffix)]

    def has_object(self, oid: str) -> bool:
        """Whether the object `oid` (its full hex) is here: asked of the object database,
        which does not read it (`oid in raw` read and parsed the object, 56 us for a tree
        of 200 entries, and took a short hex for any object it begins)."""
        try:
            return oid in self._odb_now()
        except (ValueError, TypeError):
            return False

    def resolve_commit(self, rev: str) -> str | None:
        """The commit `rev` names, or None when it does not exist here."""
        pygit2 = lazy_pygit2()
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
            yield entry.name, str(entry.id), entry.type == OBJECT_TREE

    def tree_entries_raw(self, tree_oid: str) -> Iterator[tuple[str, str, int]]:
        """(name, oid, file mode) for each entry of a tree, names exactly as stored
        (undecodable bytes as surrogate escapes): for checking fetched trees."""
        for entry in self.raw[tree_oid]:
            raw_name = getattr(entry, "raw_name", None)
            name = raw_name.decode("utf-8", "surrogateescape") if isinstance(raw_name, bytes) else entry.name
            yield name, str(entry.id), entry.filemode

    def tree_records(self, tree_oid: str) -> list[bytes] | None:
        """The entries of a tree as stored (git_handoff.infra.tree_format), split straight
        from the object database and kept by oid: trees compare as sets of them. None when
        the object is no tree, or one tree_format.split leaves to libgit2: the caller then
        reads it through tree_entries_raw."""
        found = _RECORDS.get(tree_oid)
        if found is not None and self.has_object(tree_oid):  # (split in another repository: here too?)
            return found
        try:
            kind, data = self._odb_now().read(tree_oid)
        except (KeyError, ValueError, TypeError):
            return None
        if int(kind) != OBJECT_TREE:
            return None
        records = tree_format.split(data, len(tree_oid) // 2)
        if records is None:
            return None
        if _KEPT[0] + len(records) > RECORDS_KEPT:
            _RECORDS.clear()
            _KEPT[0] = 0
        _RECORDS[tree_oid] = records  # (an oid names the same tree in any repository)
        _KEPT[0] += len(records)
        return records

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
        return str(entry.id), entry.type == OBJECT_TREE

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
        ea, eb = self._unlike_entries(a, b)
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

    def _unlike_entries(self, a: str | None,
                        b: str | None) -> tuple[dict[str, tuple[str, bool]], dict[str, tuple[str, bool]]]:
        """{name: (oid, is_tree)} of the entries of trees `a` and `b` (None: empty) that
        differ as stored, when both split (tree_records: compared as sets, only those
        decoded; every entry decoded was most of a notes merge in a fleet); otherwise all
        their entries."""
        ra = self.tree_records(a) if a else []
        rb = self.tree_records(b) if b else []
        if ra is None or rb is None:
            return ({n: (o, t) for n, o, t in self.tree_entries(a)} if a else {},
                    {n: (o, t) for n, o, t in self.tree_entries(b)} if b else {})
        sa, sb = set(ra), set(rb)
        return ({n: (o, m == MODE_TREE) for n, o, m in map(tree_format.entry, sa - sb)},
                {n: (o, m == MODE_TREE) for n, o, m in map(tree_format.entry, sb - sa)})

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
        stream = gitprocess.commit_input(tmp_ref, sig.name, sig.email, when, message, parents, files)
        self.git("fast-import", "--quiet", "--done", gitprocess.FAST_IMPORT_DEPTH, input=stream, cwd=self.common_dir)
        commit = self.ref_target(tmp_ref)
        self.delete_ref(tmp_ref)
        if commit is None:
            raise GitFailure("git fast-import wrote no commit")
        return commit

    def commit_chain(self, first: str, links: Sequence[tuple[list[str], Mapping[str, str | bytes | None], str]]
                     ) -> list[str]:
        """A chain of commits written by one `git fast-import` (one pack, no loose object per
        tree): link k ((other parents, {path: blob oid | bytes | None to delete}, message))
        has link k-1 as first parent (link 0: `first`) and that link's tree with its
        changes. Committed now by this repository's signature, as `create_commit` would;
        the commits of the links, in order."""
        import secrets

        sig = self.signature()
        sign, offset = ("-", -sig.offset) if sig.offset < 0 else ("+", sig.offset)
        committer = f"committer {sig.name} <{sig.email}> {sig.time} {sign}{offset // 60:02d}{offset % 60:02d}\n"
        tmp_ref = f"{TMP_REFS}{os.getpid()}-{secrets.token_hex(4)}"
        stream = gitprocess.chain_input(tmp_ref, committer.encode(), first, (
            (merges, [(path.encode("utf-8", "surrogateescape"), "100644", value) for path, value in changes.items()],
             message) for merges, changes, message in links))
        self.git("fast-import", "--quiet", "--done", gitprocess.FAST_IMPORT_DEPTH, input=stream, cwd=self.common_dir)
        last = self.ref_target(tmp_ref)
        self.delete_ref(tmp_ref)
        if last is None:
            raise GitFailure("git fast-import wrote no commit")
        out = [last]
        while len(out) < len(links):
            out.append(self.commit_parents(out[-1])[0])
        return out[::-1]

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return ancestor == descendant or bool(self.raw.descendant_of(descendant, ancestor))

    def commits_not_in(self, include: str, exclude: str | None) -> list[str]:
        """The commits `include` has that `exclude` has not (any order)."""
        pygit2 = lazy_pygit2()
        walker = self.raw.walk(include, pygit2.enums.SortMode.NONE)
        if exclude is not None and self.has_object(exclude):
            walker.hide(exclude)
        return [str(commit.id) for commit in walker]

    def graph_not_in(self, heads: list[str], exclude: str | None) -> dict[str, tuple[str, ...]]:
        """The commits any of `heads` has that `exclude` has not, each with its parents:
        one walk for all the heads."""
        pygit2 = lazy_pygit2()
        if not heads:
            return {}
        walker = self.raw.walk(heads[0], pygit2.enums.SortMode.NONE)
        for head in heads[1:]:
            walker.push(head)
        if exclude is not None and self.has_object(exclude):
            walker.hide(exclude)
        return {str(c.id): tuple(str(p) for p in c.parent_ids) for c in walker}

    def merge_base_many(self, commits: list[str]) -> str | None:
        """The best common ancestor of commits[0] and a merge of all the others (as
        `git merge-base A B C...`)."""
        found = self.raw.merge_base_many(commits)
        return str(found) if found is not None else None

    def count_commits(self, include: str, exclude: str | Iterable[str] | None = None) -> int:
        """How many commits `include` has that `exclude` (a commit, or several) has not."""
        pygit2 = lazy_pygit2()
        walker = self.raw.walk(include, pygit2.enums.SortMode.NONE)
        for oid in [exclude] if isinstance(exclude, str) else exclude or ():
            if self.has_object(oid):
                walker.hide(oid)
        return sum(1 for _ in walker)

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
        pygit2 = lazy_pygit2()
        walker = self.raw.walk(start, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
        for n, commit in enumerate(walker):
            if limit is not None and n >= limit:
                return
            yield str(commit.id)

    def commits_between(self, base: str, head: str, limit: int = 1000) -> list[str]:
        """Commits reachable from `head` but not from `base` (`base..head`), newest first."""
        pygit2 = lazy_pygit2()
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
        _OID_CLASS = lazy_pygit2().Oid
    try:
        return _OID_CLASS(hex=oid)
    except (ValueError, TypeError):
        return oid
