"""A git tree object's entries as stored, split without libgit2
(git_handoff.infra.tree_format); tests/infra/test_tree_records.py compares it with
libgit2 over many trees."""

from __future__ import annotations

from git_handoff.infra.tree_format import entry, name, split, stored

OID = bytes(range(20))


def test_split_gives_each_entry_as_stored() -> None:
    data = b"100644 a.json\0" + OID + b"40000 dir\0" + OID
    records = split(data, 20)
    assert records == [b"100644 a.json\0" + OID, b"40000 dir\0" + OID]
    assert split(b"", 20) == []


def test_split_leaves_to_libgit2_what_it_would_not_read_alike() -> None:
    for bad in (b"100664 a\0" + OID,  # a mode libgit2 normalises
                b"100644 \0" + OID,  # an empty name
                b"100644 a/b\0" + OID,  # a slash
                b"100644 a\0" + OID + b"100644 a\0" + OID,  # a name twice
                b"100644 a\0" + OID[:10]):  # cut short
        assert split(bad, 20) is None, bad


def test_an_entry_reads_back_what_stored_writes() -> None:
    record = stored("caf\u00e9 \udcff.txt", OID.hex(), 0o100755)
    assert record == b"100755 caf\xc3\xa9 \xff.txt\0" + OID
    assert entry(record) == ("caf\u00e9 \udcff.txt", OID.hex(), 0o100755)
    assert name(record) == b"caf\xc3\xa9 \xff.txt"
    assert stored("d", OID.hex(), 0o040000).startswith(b"40000 d\0")
