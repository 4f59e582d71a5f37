"""Running the git CLI for one repository: the environment it runs in, the parent-death
signal for the commands that can outlive us, fast-import's input, the background repack.

No pygit2 here. `Repo` (git_handoff.infra.gitrepo) reads and writes through libgit2 and
starts git, through this module, for what libgit2 gets wrong or does slowly: fetch and
push, reset and clean, config writes, many objects or refs at once, packing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from git_handoff.core.errors import GitFailure

# Delta chains of fast-import's packs: its default (50) chains each blob to the one before
# it, and reading 50,000 task files back in tree order then took 2-3x as long as with
# chains of at most 10 (the pack is ~20% larger).
FAST_IMPORT_DEPTH = "--depth=10"


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


def _in_git_dir(where: Path, git_dir: Path, workdir: Path | None) -> bool:
    """Is `where` in the repository's git directory (or in the `.git` holding a linked
    worktree's)? Anywhere else git discovers the repository as it always did."""
    try:
        place = where.resolve()
        if place.is_relative_to(git_dir.resolve()) or place.name == ".git" and git_dir.resolve().is_relative_to(place):
            return True
        return workdir is not None and place.is_relative_to(workdir.resolve()) and \
            ".git" in place.relative_to(workdir.resolve()).parts
    except (OSError, ValueError):
        return False


def run(args: tuple[str, ...], *, git_dir: Path, workdir: Path | None, cwd: Path | None = None,
        check: bool = True, input: bytes | None = None,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run `git args...` on the repository whose git directory is `git_dir` (in `cwd`,
    else its work tree, else its git directory); GitFailure with git's last line of
    standard error when it fails and `check`."""
    run_env = dict(os.environ)
    if "GIT_DIR" in run_env or "GIT_WORK_TREE" in run_env:
        # the repository this process opened, whatever the directory git starts in
        # (a relative GIT_DIR would be taken from there)
        run_env["GIT_DIR"] = str(git_dir)
        run_env.pop("GIT_WORK_TREE", None)
        if workdir is not None:
            run_env["GIT_WORK_TREE"] = str(workdir)
    where = cwd or workdir or git_dir
    if "GIT_DIR" not in run_env and _in_git_dir(Path(where), git_dir, workdir):
        # started in a git directory, git would find it as a bare repository, which
        # safe.bareRepository=explicit refuses (Copilot CLI's shell sets it): name it
        run_env["GIT_DIR"] = str(git_dir)
        if workdir is not None:
            run_env["GIT_WORK_TREE"] = str(workdir)
    if env:
        run_env.update(env)
    proc = subprocess.run(
        ["git", *args], cwd=where, input=input, capture_output=True, env=run_env,
        preexec_fn=_die_with_parent() if args and args[0] in OUTLIVING_COMMANDS else None,
    )
    if check and proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        tail = err[-1] if err else f"exit {proc.returncode}"
        raise GitFailure(f"git {args[0]} failed: {tail}")
    return proc


# -- fast-import's input -------------------------------------------------------------------


def fast_import_path(raw: bytes) -> bytes:
    """A path as `git fast-import` reads it: C-style quoted when it holds a space, a
    quote, a backslash or a newline, or starts with a quote."""
    if any(c in raw for c in b' "\\\n') or raw.startswith(b'"'):
        return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'
    return raw


def blobs_input(datas: list[bytes]) -> bytes:
    """`git fast-import` input writing each of `datas` as a blob, nothing else."""
    out = [b"feature done\n"]
    for data in datas:
        out.append(b"blob\ndata %d\n" % len(data))
        out.append(data)
        out.append(b"\n")
    out.append(b"done\n")
    return b"".join(out)


def commit_input(ref: str, name: str, email: str, when: int, message: str, parents: list[str],
                 files: Iterable[tuple[bytes, str, bytes | str | None]]) -> bytes:
    """`git fast-import` input for one commit on `ref` (the first parent's tree changing
    `files`: (path, mode, bytes written inline | an existing blob's oid | None to delete)),
    committed by `name <email>` at `when`."""
    committer = f"committer {name} <{email}> {when} +0000\n".encode()
    return b"".join(_commit_lines(ref, None, committer, message, parents, files)) + b"\ndone\n"


def chain_input(ref: str, committer: bytes, first: str,
                links: Iterable[tuple[list[str], Iterable[tuple[bytes, str, bytes | str | None]], str]]) -> bytes:
    """`git fast-import` input for a chain of commits on `ref`: each link ((other parents,
    files as in `commit_input`, message)) has the link before it as first parent (the
    first link: `first`) and its tree with `files` changed; `committer` is the whole
    committer line."""
    out: list[bytes] = []
    for n, (merges, files, message) in enumerate(links, start=1):
        out += _commit_lines(ref, n, committer, message, [first if n == 1 else f":{n - 1}", *merges], files)
    out.append(b"\ndone\n")
    return b"".join(out)


def _commit_lines(ref: str, mark: int | None, committer: bytes, message: str, parents: list[str],
                  files: Iterable[tuple[bytes, str, bytes | str | None]]) -> list[bytes]:
    msg = message.encode()
    out = [f"commit {ref}\n".encode(), *([f"mark :{mark}\n".encode()] if mark is not None else []),
           committer, f"data {len(msg)}\n".encode(), msg, b"\n", f"from {parents[0]}\n".encode()]
    for parent in parents[1:]:
        out.append(f"merge {parent}\n".encode())
    for raw_path, mode, value in files:
        path = fast_import_path(raw_path)
        if value is None:
            out.append(b"D " + path + b"\n")
        elif isinstance(value, bytes):
            out += [f"M {mode} inline ".encode() + path + b"\n", f"data {len(value)}\n".encode(), value, b"\n"]
        else:
            out.append(f"M {mode} {value} ".encode() + path + b"\n")
    return out


# -- packing ---------------------------------------------------------------------------------


def loose_estimate(common_dir: Path, dirs: int = 4) -> int:
    """About how many loose objects there are, from a few objects/xx/ dirs (as `git gc --auto` does)."""
    objects = common_dir / "objects"
    seen = 0
    for n in range(dirs):
        try:
            seen += len(os.listdir(objects / f"{0x17 + 37 * n:02x}"))
        except OSError:
            pass
    return seen * 256 // dirs


REPACK_AGAIN = 128  # loose objects left after a background repack that make it run again
REPACK_PASSES = 3  # at most, a run


def gc_in_background(common_dir: Path, marker: Path) -> None:
    """Pack loose objects without waiting: libgit2 never packs on its own.

    `git repack --geometric=2` packs the loose objects and rolls up only the small
    packs, so each run costs about what was written since the last one. `git gc
    --auto` would also walk the whole history (reflog expiry, prune, repack), a
    cost that grows with every state commit. The refs are packed too, as `git gc` would:
    a fleet's clone holds hundreds of claim refs, each a file every `git fetch` and
    `for-each-ref` reads when loose. One run at a time: a marker file in
    the handoff dir, taken over when older than 10 minutes. git older than 2.32
    (no --geometric) falls back to `git gc --auto`.

    The 256 objects/xx directories are made before and after the repack. Its `git
    prune-packed` removes each one it leaves empty, and git (as libgit2) writes an
    object into a missing one by making it and then its temporary file: a repack that
    removes it in between fails that write ("unable to create temporary file"), the
    user's own `git add` or `git commit` beside an agent's sync in a fleet. A directory
    that exists when prune-packed comes is removed at most once, and a write that then
    finds it gone makes it again and succeeds.
    """
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
    # (run again while the objects written meanwhile are past REPACK_AGAIN: a writer that
    # finds the marker starts no run, so what it wrote waited for a later trigger)
    script = (
        'marker=$1; shift; mkdir -p "$@" 2>/dev/null; pass=0; '
        'while :; do { git repack -d -l -q --geometric=2 2>/dev/null || '
        'git -c gc.autoDetach=false gc --auto --quiet; }; pass=$((pass + 1)); '
        f'[ $pass -ge {REPACK_PASSES} ] && break; '
        'loose=$(git count-objects 2>/dev/null); '
        f'[ "${{loose%% *}}" -lt {REPACK_AGAIN} ] 2>/dev/null && break; done; '
        'git pack-refs --all 2>/dev/null; mkdir -p "$@" 2>/dev/null; rm -f "$marker"'
    )
    try:
        subprocess.Popen(
            ["sh", "-c", script, "handoff-gc", str(marker), *(f"objects/{n:02x}" for n in range(256))],
            cwd=common_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        marker.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, under another user
    return True
