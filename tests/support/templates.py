"""Set-ups built once per test process and copied for each test that needs one.

A set-up of several git commands (a repository with a first commit; the hostile
remote's world of a bare remote and two clones that synced) is built the first time a
test asks for it, in the hermetic environment that test runs in, and then copied
(`shutil.copytree`, symbolic links kept) into each test's own directory. Every test
still gets a repository of its own; what it saves is the git processes of the set-up.

A copy is exactly the directory tree the set-up made. A set-up whose files name their
own location (a clone's `remote.origin.url`) is fixed up by its caller after the copy.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

SETTLE_SECONDS = 60
COPY_ATTEMPTS = 3


class Templates:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[str, Path] = {}

    def built(self, name: str, build: Callable[[Path], object]) -> Path:
        """The directory of the set-up `name`, made by `build(directory)` the first time.
        The caller copies from it and never changes it."""
        source = self._built.get(name)
        if source is None:
            source = self.root / name
            if source.exists():  # a build that failed half-way: start again
                shutil.rmtree(source)
            source.mkdir(parents=True)
            build(source)
            settle(source)
            self._built[name] = source
        return source

    def copy(self, name: str, build: Callable[[Path], object], dest: Path) -> Path:
        """Copy the set-up `name` (made by `build(directory)` the first time) to `dest`,
        which may exist (then it must not hold any of the set-up's top-level names)."""
        source = self.built(name, build)
        dest.mkdir(parents=True, exist_ok=True)
        for attempt in range(COPY_ATTEMPTS):
            copied: list[Path] = []
            try:
                for entry in source.iterdir():
                    target = dest / entry.name
                    copied.append(target)
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.copytree(entry, target, symlinks=True)
                    else:
                        shutil.copy2(entry, target, follow_symlinks=False)
                return dest
            except (shutil.Error, FileNotFoundError):
                # a file or directory listed and gone before it was copied: a repack we
                # did not wait for (settle) ran in the set-up. Copy it all again once the
                # set-up is still; a copy is whole or the test fails.
                if attempt == COPY_ATTEMPTS - 1:
                    raise
                for target in copied:
                    if target.is_dir() and not target.is_symlink():
                        shutil.rmtree(target)
                    else:
                        target.unlink(missing_ok=True)
                settle(source)
                time.sleep(0.5)
        raise AssertionError("unreachable")


def settle(root: Path) -> None:
    """Wait for the background repacks the set-up's commands started (their marker,
    `handoff/gc.running`, is removed last) and for a `git gc` git started itself (its
    `gc.pid`): one still running removes object directories while a copy lists them."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while _marked(root):
        if time.monotonic() > deadline:
            raise AssertionError(f"a background repack under {root} still runs after {SETTLE_SECONDS} s")
        time.sleep(0.02)


def _marked(root: Path) -> bool:
    """Does a repack's marker lie under `root`? A directory the repack removes while the
    walk lists it is a repack at work (the walk raised FileNotFoundError: CI, a set-up's
    copy)."""
    try:
        return any(root.rglob("gc.running")) or any(root.rglob("gc.pid"))
    except FileNotFoundError:
        return True
