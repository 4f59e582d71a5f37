"""Writing a private file so that a reader never sees half of it: a temporary file
beside it, then `os.replace` (atomic on POSIX). The one place that does this."""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Replace `path` with `data` in one step; `mode` sets the permission bits first.

    The temporary name carries the pid, so concurrent writers never share one. On
    failure the temporary file is removed and the error passed on; `path` is untouched.
    """
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data)
        if mode is not None:
            tmp.chmod(mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
