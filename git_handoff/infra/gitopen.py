"""A repository opened as git opens it, and what it is once open: its directories, its
config as git reads it, HEAD, the signature of its commits, git run inside it.

`Repo` (git_handoff.infra.gitrepo), the way the whole package reaches git, is built
in three layers, each answering one question in a file of its own: this one (`OpenRepo`),
then its refs (git_handoff.infra.gitrefs), then its objects and history (gitrepo).
Callers use `Repo` only. pygit2 is imported lazily: `import pygit2` costs ~100 ms, and a
few entry points (the post-commit hook's Python side, `--help`) must not pay for it.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from git_handoff.core.errors import NotARepository, UsageError
from git_handoff.infra import gitconfig, gitprocess

if TYPE_CHECKING:
    import pygit2

# libgit2 racing a concurrent `git gc` (ours runs in the background): prune-packed
# removes an empty objects/xx/ between libgit2's mkdir and its rename of a new loose
# object, and repack deletes packs libgit2 has listed. Object writes are idempotent,
# so such a failure is retried a few times before it is reported.
GC_RACE_RETRIES = 8


def lazy_pygit2() -> Any:
    """The pygit2 module, imported on first use."""
    import pygit2

    return pygit2



def _private_dir(path: Path) -> Path:
    """`path`, made when it is not there yet. In a repository this process can not write
    to (a read-only mount, or permissions that keep it out) it is only named: a reader then finds
    nothing in it, and a writer fails where it writes, naming the file."""
    try:
        path.mkdir(exist_ok=True)
    except OSError:
        pass
    return path

class OpenRepo:
    """A git repository (or linked worktree) as opened: where it is, how it is set up."""

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
            self.raw = lazy_pygit2().Repository(str(self.git_dir))
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
        self.raw = lazy_pygit2().Repository(str(self.git_dir))
        self._pack_stamp = self._pack_dir_stamp()
        self._odb = None
        self._odb_of = None

    # -- opening -----------------------------------------------------------------

    @classmethod
    def discover(cls, start: str | os.PathLike[str] | None = None) -> Self:
        """The repository git would use, started in `start` (default: the current
        directory, where `git -C` has already moved), as git finds it: GIT_DIR names the
        git directory (no search), GIT_WORK_TREE the work tree; without GIT_DIR, the
        search upwards stops at GIT_CEILING_DIRECTORIES and at a file system boundary
        unless GIT_DISCOVERY_ACROSS_FILESYSTEM is true. Relative paths are taken from `start`."""
        pygit2 = lazy_pygit2()
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

    # -- HEAD, config, signature -------------------------------------------------

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
        pygit2 = lazy_pygit2()
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
        levels = lazy_pygit2().enums.ConfigLevel
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

    def config_values(self, key: str) -> list[str]:
        """Every value of a multi-valued `key`, in git's order (system, global, local), then
        the command line's (`git -c`: its last one; libgit2 reads none of them)."""
        canonical = gitconfig.canonical_key(key)
        values = [str(e.value) for e in self.raw.config if e.name == canonical and e.value is not None]
        if self.settings.get(canonical) is not None:
            values.append(str(self.settings[canonical]))
        return values

    def local_config_values(self, key: str) -> list[str]:
        """Every value of `key` in this repository's own config file, in order, as libgit2
        reads it (no process; the other levels left out)."""
        canonical = gitconfig.canonical_key(key)
        local = int(lazy_pygit2().enums.ConfigLevel.LOCAL)
        return [str(e.value) for e in self.raw.config
                if e.name == canonical and int(e.level) == local and e.value is not None]

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

    def signature(self) -> Any:
        pygit2 = lazy_pygit2()
        name = os.environ.get("GIT_AUTHOR_NAME")
        email = os.environ.get("GIT_AUTHOR_EMAIL")
        name = name or self.config_get("user.name")
        email = email or self.config_get("user.email")
        user = os.environ.get("USER") or "handoff"
        return pygit2.Signature(name or user, email or f"{user}@{socket.gethostname()}")

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
        return gitprocess.run(args, git_dir=self.git_dir, workdir=self.workdir, cwd=cwd, check=check,
                              input=input, env=env)

    def loose_estimate(self, dirs: int = 4) -> int:
        """About how many loose objects there are (gitprocess.loose_estimate)."""
        return gitprocess.loose_estimate(self.common_dir, dirs)

    def pack_count(self) -> int:
        """How many packs the object store holds (one directory listing)."""
        try:
            return sum(1 for name in os.listdir(self.common_dir / "objects" / "pack") if name.endswith(".pack"))
        except OSError:
            return 0

    def gc_in_background(self) -> None:
        """Pack loose objects without waiting, one run at a time (gitprocess.gc_in_background)."""
        gitprocess.gc_in_background(self.common_dir, self.handoff_dir / "gc.running")


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
    except (lazy_pygit2().GitError, OSError, ValueError) as exc:
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
    pygit2 = lazy_pygit2()
    try:
        return [e.value for e in pygit2.Config(path) if e.name == canonical]
    except (pygit2.GitError, OSError, ValueError):
        return []


def _file_config(raw: Any, key: str) -> str | None:
    try:
        value = raw.config[key]
    except (KeyError, lazy_pygit2().GitError):
        return None
    return None if value is None else str(value)
