"""What the command server's client and server compute alike: the identity of the code and
settings a worker would run with, the server's profile (what the fast client takes from
it), the frame their messages travel in, and the switch in git config.

Imported by the client (git_handoff/cmdclient.py) before anything else of the program, so
it imports only what Python has loaded at start-up (os, sys); see docs/command-server.md.
"""

from __future__ import annotations

import os
import sys

MAGIC = b"HANDOFF-CMDSERVER-2"
# The client's one byte after the worker's `ok`: it still waits, the worker may run the
# command. A client that gave up on a slow answer never sends it, and runs the command itself.
GO = b"g"
# How long the client waits for the server's first answer before it runs the command itself.
ANSWER_SECONDS = 2.0
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# -- which server may serve ---------------------------------------------------------------

def interpreter() -> list[str]:
    """What the identity takes from the running interpreter: git handoff's version, the
    executable, Python's version, flags and -X options, the package's directory, then
    `sys.path` but its first entry (the script's or the current directory)."""
    flags = repr(sys.flags).replace("safe_path=True", "safe_path=False")  # the server runs with -P
    return [_version(), sys.executable, sys.version, flags,
            repr(sorted(getattr(sys, "_xoptions", {}).items())), PACKAGE_DIR, *sys.path[1:]]


def identity(environ: os._Environ[str] | dict[str, str], interp: list[str] | None = None) -> bytes:
    """What a worker's behaviour depends on beyond its argv, cwd and environment: the
    interpreter (`interpreter()`, or the server's own as the fast client takes it from its
    profile), each `sys.path` entry's and each package file's stamp, the variables read at
    import time. Client and server compute it alike; any difference means another server."""
    version, executable, py_version, flags, xoptions, pkg, *path = interpreter() if interp is None else interp
    parts = [version, executable, py_version, flags, xoptions, pkg, repr(path)]
    for place in path:
        parts.append(f"{place}:{_names(place) if _in_work_tree(place) else _stamp(place)}")
    stack = [pkg]
    while stack:
        top = stack.pop()
        try:
            entries = sorted(os.scandir(top), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    stack.append(entry.path)
            elif entry.name.endswith(".py"):
                st = entry.stat()
                parts.append(f"{entry.path}:{st.st_mtime_ns}:{st.st_size}")
    for key in sorted(environ):
        if (key.startswith(("PYTHON", "HANDOFF_", "GIT_HANDOFF_", "GIT_CONFIG", "LC_"))
                or key in ("LANG", "HOME", "XDG_CONFIG_HOME")):
            parts.append(f"{key}={environ[key]}")
    return "\0".join(parts).encode("utf-8", "surrogateescape")


def _version() -> str:
    """git handoff's version, from the package this module belongs to (imported first)."""
    return str(getattr(sys.modules.get(__package__ or ""), "__version__", "?"))


IMPORTABLE = (".py", ".pyc", ".so", ".pth", ".zip", ".egg-link")


def _in_work_tree(place: str) -> bool:
    """A `sys.path` entry in a git work tree: the working directory an empty or relative
    PYTHONPATH element (`PYTHONPATH=lib:`) put there, or a project's own source folder."""
    here = place
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return True
        up = os.path.dirname(here)
        if up == here:
            return False
        here = up


def _names(place: str) -> str:
    """What a work tree's folder offers to `import`: its module files and its folders. Its
    mtime would not do: it moves with every file an agent writes there, and a fresh server
    for each would make the fast path slower than none."""
    try:
        entries = os.scandir(place)
    except OSError:
        return "-"
    with entries:
        names = sorted(e.name for e in entries
                       if e.name.endswith(IMPORTABLE) or e.is_dir(follow_symlinks=True))
    return "/".join(names)


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_mtime_ns}:{st.st_size}"


def config_files(git_dir: str, environ: os._Environ[str] | dict[str, str]) -> list[str]:
    home = environ.get("HOME", "")
    xdg = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = [os.path.join(git_dir, "config"), os.path.join(git_dir, "config.worktree")]
    files += [environ["GIT_CONFIG_GLOBAL"]] if "GIT_CONFIG_GLOBAL" in environ else \
        [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config")]
    if not environ.get("GIT_CONFIG_NOSYSTEM"):
        files.append(environ.get("GIT_CONFIG_SYSTEM", "/etc/gitconfig"))
    return files


def config_stamp(git_dir: str) -> bytes:
    return "\0".join(f"{p}:{_stamp(p)}" for p in config_files(git_dir, os.environ)).encode("utf-8", "surrogateescape")


def configured(git_dir: str) -> bool:
    """handoff.commandServer as git reads it. Git is asked only when a config file (or
    the command line's config variables) mentions the key or includes another file, so a
    repository that never heard of the server pays a few reads, not a process."""
    mentions = any("commandserver" in v.lower() for k, v in os.environ.items() if k.startswith("GIT_CONFIG_"))
    for path in config_files(git_dir, os.environ):
        try:
            with open(path, "rb") as f:
                text = f.read().lower()
        except OSError:
            continue
        if b"commandserver" in text or b"include" in text:
            mentions = True
            break
    if not mentions:
        return False
    return _git_config_bool(git_dir, "handoff.commandServer")


def _git_config_bool(git_dir: str, key: str) -> bool:
    read, write = os.pipe()
    try:
        pid = os.posix_spawnp("git", ["git", "--git-dir", git_dir, "config", "--type=bool", "--get", key],
                              dict(os.environ), file_actions=[(os.POSIX_SPAWN_DUP2, write, 1),
                                                              (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as f:
        out = f.read()
    os.waitpid(pid, 0)
    return out.strip() == b"true"


# -- the server's profile, for the fast client ------------------------------------------------

PROFILE_NAME = "profile"


def profile_bytes(interp: list[str], absent: list[str]) -> bytes:
    """The server's profile, beside its socket: its `interpreter()` and the directories a
    fresh start would put on `sys.path` if they existed (the user site). The fast client,
    which runs without `site`, takes these as what a full start of the same interpreter
    would have."""
    return frame([str(len(interp)).encode(), *(f.encode("utf-8", "surrogateescape") for f in (*interp, *absent))])


def read_profile(dir_fd: int) -> tuple[list[str], list[str]] | None:
    """The profile in the checked directory, when it is a file of this user's that no one
    else may write; (interpreter, absent) or None."""
    try:
        fd = os.open(PROFILE_NAME, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077 or st.st_size > 1 << 20:
            return None
        data = os.read(fd, st.st_size + 1)
    finally:
        os.close(fd)
    fields = unframe(data)
    if not fields or not fields[0].isdigit() or int(fields[0]) + 1 > len(fields):
        return None
    text = [f.decode("utf-8", "surrogateescape") for f in fields[1:]]
    n = int(fields[0])
    return text[:n], text[n:]


# -- the frame ----------------------------------------------------------------------------

def frame(fields: list[bytes]) -> bytes:
    body = b"".join(len(f).to_bytes(4, "big") + f for f in fields)
    return MAGIC + len(fields).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body


def unframe(data: bytes) -> list[bytes] | None:
    """The fields of one whole frame (`frame`), or None when it is not one."""
    head = len(MAGIC) + 8
    if len(data) < head or not data.startswith(MAGIC):
        return None
    count = int.from_bytes(data[len(MAGIC):len(MAGIC) + 4], "big")
    size = int.from_bytes(data[len(MAGIC) + 4:head], "big")
    body = data[head:]
    if len(body) != size:
        return None
    fields, at = [], 0
    for _ in range(count):
        n = int.from_bytes(body[at:at + 4], "big")
        if at + 4 + n > size:
            return None
        fields.append(body[at + 4:at + 4 + n])
        at += 4 + n
    return fields
