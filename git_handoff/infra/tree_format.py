"""A git tree object's entries as stored, split without libgit2.

A tree is a run of entries `<mode> <name>NUL<oid>` (the oid as 20 or 32 raw bytes). Two
trees compare entry by entry as sets of these bytes at C speed, and only the entries that
differ need decoding: libgit2 builds an entry object for each entry it reads (2 us each),
which was most of a fleet sync's checks and merges of fetched trees. `split` leaves to
libgit2 any tree it does not read exactly as libgit2 would (Repo.tree_records).
"""

from __future__ import annotations

# The modes git writes in a tree, as stored. libgit2 normalises any other (100664 of old
# gits, or one made up) when it reads one: such a tree is not split here.
PLAIN_MODES = {b"100644": 0o100644, b"100755": 0o100755, b"120000": 0o120000, b"160000": 0o160000,
               b"40000": 0o040000}
STORED_MODES = {mode: stored for stored, mode in PLAIN_MODES.items()}


def split(data: bytes, width: int) -> list[bytes] | None:
    """The entries of a tree object's data, each as stored (`width`: the bytes of an oid);
    None for data that holds a mode not in PLAIN_MODES, an empty name, a name with a slash,
    a name twice, or is cut short."""
    records: list[bytes] = []
    names: set[bytes] = set()
    pos, end, find = 0, len(data), data.find
    while pos < end:
        nul = find(b"\0", pos)
        stop = nul + 1 + width
        if nul < 0 or stop > end:
            return None
        space = find(b" ", pos, nul)
        if data[pos:space] not in PLAIN_MODES or space + 1 == nul or find(b"/", space, nul) >= 0:
            return None
        names.add(data[space + 1:nul])
        records.append(data[pos:stop])
        pos = stop
    return records if len(names) == len(records) else None


def entry(record: bytes) -> tuple[str, str, int]:
    """(name, oid, file mode) of one entry as stored, as Repo.tree_entries_raw gives them
    (the name's bytes that are not UTF-8 as surrogate escapes)."""
    space = record.index(b" ")
    nul = record.index(b"\0", space)
    return record[space + 1:nul].decode("utf-8", "surrogateescape"), record[nul + 1:].hex(), PLAIN_MODES[record[:space]]


def name(record: bytes) -> bytes:
    """The name of one entry as stored, its bytes."""
    return record[record.index(b" ") + 1:record.index(b"\0")]


def stored(name: str, oid: str, mode: int) -> bytes:
    """An entry as libgit2 reads it (its mode normalised), written the way git stores it."""
    return STORED_MODES[mode] + b" " + name.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(oid)
