"""Repo.tree_records: a tree's entries as stored, split without libgit2, and the checks of
fetched trees (git_handoff.remote.incoming) that compare trees through them: the same
entries as libgit2 reads, and the same verdicts, for plain trees and for odd ones."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.infra.gitrepo import Repo
from git_handoff.infra.tree_format import PLAIN_MODES, entry
from git_handoff.remote import incoming
from tests.support.speed import examples

MODES = [b"100644", b"100755", b"120000", b"160000", b"40000",  # what git writes
         b"100664", b"100600", b"040000", b"40755", b"0100644", b"120755"]  # what libgit2 normalises


def _repo(tmp: Path) -> Repo:
    pygit2.init_repository(str(tmp), bare=True)
    return Repo.discover(str(tmp))


def _tree(repo: Repo, entries: list[tuple[bytes, bytes, bytes]]) -> str:
    """A tree object written as given: [(mode, name, raw oid)], in that order."""
    data = b"".join(mode + b" " + name + b"\0" + oid for mode, name, oid in entries)
    return str(repo.raw.odb.write(pygit2.enums.ObjectType.TREE, data))


names = st.binary(min_size=1, max_size=6).filter(lambda b: b"\0" not in b and b"/" not in b)


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(MODES), names), max_size=12, unique_by=lambda e: e[1]))
def test_records_read_as_libgit2_reads_the_entries(tmp_path_factory: pytest.TempPathFactory,
                                                   entries: list[tuple[bytes, bytes]]) -> None:
    repo = _repo(tmp_path_factory.mktemp("r"))
    blob = repo.raw.create_blob(b"x").raw
    empty = repo.raw.TreeBuilder().write().raw
    tree = _tree(repo,
                 [(m, n, empty if m.lstrip(b"0").startswith(b"4") else blob)
                  for m, n in sorted(entries, key=lambda e: e[1])])
    records = repo.tree_records(tree)
    if all(m in PLAIN_MODES for m, _ in entries):
        assert records is not None
        assert [entry(r) for r in records] == list(repo.tree_entries_raw(tree))
    else:
        assert records is None  # left to libgit2, which normalises the mode


def test_records_refuse_what_is_not_a_plain_tree(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    blob = repo.raw.create_blob(b"x")
    assert repo.tree_records(str(blob)) is None  # not a tree
    assert repo.tree_records("0" * 40) is None  # absent
    assert repo.tree_records(_tree(repo, [(b"100644", b"", blob.raw)])) is None  # an empty name
    truncated = str(repo.raw.odb.write(pygit2.enums.ObjectType.TREE, b"100644 a\0" + blob.raw[:7]))
    assert repo.tree_records(truncated) is None


def _reference(repo: Repo, new: str, olds: list[str]) -> list[tuple[str, str, int]]:
    """What the checks walked before: each entry of `new` unless an old tree has the same
    (oid, mode) under its name, entries as libgit2 reads them."""
    known = [{n: (o, m) for n, o, m in repo.tree_entries_raw(old)} for old in olds]
    return [(n, o, m) for n, o, m in repo.tree_entries_raw(new) if not any(k.get(n) == (o, m) for k in known)]


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_differing_is_the_entries_no_known_tree_holds(tmp_path_factory: pytest.TempPathFactory,
                                                      data: st.DataObject) -> None:
    repo = _repo(tmp_path_factory.mktemp("r"))
    blobs = [repo.raw.create_blob(f"{i}".encode()).raw for i in range(3)]
    subs = [_tree(repo, [(b"100644", b"f", b)]) for b in blobs]
    pool = [(b"100644", b) for b in blobs] + [(b"100664", blobs[0]), (b"100755", blobs[1]),
                                              (b"40000", pygit2.Oid(hex=subs[0]).raw),
                                              (b"40000", pygit2.Oid(hex=subs[1]).raw)]
    keys = [b"a", b"b", b"c", b"\xff"]

    def some_tree() -> str:
        chosen = data.draw(st.dictionaries(st.sampled_from(keys), st.sampled_from(pool), max_size=4))
        return _tree(repo, [(m, n, o) for n, (m, o) in sorted(chosen.items())])

    new = some_tree()
    olds = [some_tree() for _ in range(data.draw(st.integers(0, 3)))]
    incoming.forget_checked()
    got = list(incoming._differing(repo, new, olds))
    assert [(n, o, m) for n, o, m, _ in got] == _reference(repo, new, olds)
    for name, _, mode, below in got:  # a tree's counterparts: the old trees' trees of that name
        if mode == 0o040000:
            want = []
            for old in olds:
                entry = {n: (o, m) for n, o, m in repo.tree_entries_raw(old)}.get(name)
                if entry and entry[1] == 0o040000:
                    want.append(entry[0])
            assert below == want


def _flat(repo: Repo, tree: str | None, prefix: str = "") -> dict[str, str]:
    """{path: oid} of every entry below `tree` that is not a tree, read through libgit2."""
    out: dict[str, str] = {}
    for name, oid, mode in repo.tree_entries_raw(tree) if tree else ():
        if mode == 0o040000:
            out.update(_flat(repo, oid, prefix + name + "/"))
        else:
            out[prefix + name] = oid
    return out


@settings(max_examples=examples(80), deadline=None)
@given(st.data())
def test_tree_diff_is_the_difference_of_the_flat_trees(tmp_path_factory: pytest.TempPathFactory,
                                                       data: st.DataObject) -> None:
    """Whatever the trees hold (a file become a directory, modes libgit2 normalises, a
    submodule, a name that is not UTF-8), tree_diff is {path: (old, new)} of the paths
    whose objects differ."""
    repo = _repo(tmp_path_factory.mktemp("r"))
    blobs = [repo.raw.create_blob(f"{i}".encode()).raw for i in range(3)]
    modes = st.sampled_from([b"100644", b"100755", b"100664", b"120000", b"160000"])
    keys = st.sampled_from([b"a", b"b", b"\xff", b"d d"])

    def some_tree(depth: int) -> str:
        chosen = data.draw(st.dictionaries(keys, st.integers(0, 3 if depth else 2), max_size=3))
        entries = []
        for name, pick in sorted(chosen.items()):
            if pick == 3:
                entries.append((b"40000", name, pygit2.Oid(hex=some_tree(depth - 1)).raw))
            else:
                entries.append((data.draw(modes), name, blobs[pick]))
        return _tree(repo, entries)

    a = data.draw(st.sampled_from([None, "tree"]))
    ta = some_tree(2) if a else None
    tb = some_tree(2) if data.draw(st.booleans()) else ta
    fa, fb = _flat(repo, ta), _flat(repo, tb)
    want = {p: (fa.get(p), fb.get(p)) for p in fa.keys() | fb.keys() if fa.get(p) != fb.get(p)}
    assert repo.tree_diff(ta, tb) == want


def test_the_trees_kept_stay_within_their_bound_of_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Split trees are kept by oid for the next reader, at most RECORDS_KEPT entries in all
    (a long-lived process reads trees of thousands of notes), the newest always."""
    from git_handoff.infra import gitrepo

    repo = _repo(tmp_path)
    monkeypatch.setattr(gitrepo, "RECORDS_KEPT", 5)
    monkeypatch.setattr(gitrepo, "_RECORDS", {})
    monkeypatch.setattr(gitrepo, "_KEPT", [0])
    blob = repo.raw.create_blob(b"x").raw
    trees = [_tree(repo, [(b"100644", f"{n}-{i}".encode(), blob) for i in range(3)]) for n in range(4)]
    for tree in trees:
        assert len(repo.tree_records(tree) or []) == 3
        assert sum(map(len, gitrepo._RECORDS.values())) <= 5
        assert tree in gitrepo._RECORDS
