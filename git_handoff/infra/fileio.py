"""Writing a private file so that a reader never sees half of it: a temporary file
beside it, then `os.replace` (atomic on POSIX). The one place that does this; and the
one form of this clone's derived files (indexes, caches): a value marshalled behind a
magic line and the sha256 of the marshalled bytes, so that a damaged, truncated or
foreign file is told from a whole one and never believed."""

from __future__ import annotations

import gc
import hashlib
import marshal
import os
from pathlib import Path
from typing import Any


def atomic_write(path: Path, data: str | bytes, *, mode: int | None = None, fsync: bool = False) -> None:
    """Replace `path` with `data` in one step; `mode` sets the permission bits first,
    `fsync` makes the data durable before it replaces `path`.

    The temporary file beside `path` is made new (O_EXCL, O_NOFOLLOW) under a name with
    the pid and random bytes: concurrent writers never share one, and a link or file
    planted under a guessed name (another user's, in a directory both may write) is never
    written through. On failure it is removed and the error passed on; `path` is untouched.
    A link at `path` itself is replaced, not followed.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as fh:
            fh.write(data)
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sealed(magic: bytes, value: Any) -> bytes:
    """`value` marshalled behind `magic` and the digest of the marshalled bytes."""
    body = marshal.dumps(value)
    return magic + hashlib.sha256(body).digest() + body


def unsealed(magic: bytes, raw: bytes) -> Any:
    """What `sealed` wrote behind `magic`; None for any other bytes."""
    n = len(magic)
    body = raw[n + 32:]
    if raw[:n] != magic or hashlib.sha256(body).digest() != raw[n:n + 32]:
        return None
    # marshal.load(fh) reads in small pieces: 10x slower. What marshal makes holds no
    # reference cycle, and the collector would pass over the tens of thousands of new
    # containers of an index many times while they are made (about 3 ms at 10,000 tasks).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    finally:
        if collecting:
            gc.enable()


def read_sealed(path: Path, magic: bytes) -> Any:
    """`unsealed` of the file at `path`; None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return unsealed(magic, raw)


def file_identity(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime in ns) of the file at `path`, None when there is none: what
    changes whenever the file is replaced or written."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)

