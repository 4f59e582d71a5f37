"""A repository's refs: where they point, moving one by compare-and-swap or many at once,
and sweeping what a killed process left (scratch refs, a fetch's namespaces, stale locks).

The second layer of `Repo` (git_handoff.infra.gitrepo), on `OpenRepo` (gitopen).
"""

from __future__ import annotations

import contextlib
import os
import re
import time

from git_handoff.core.errors import GitFailure
from git_handoff.infra.gitopen import GC_RACE_RETRIES, OpenRepo, lazy_pygit2
from git_handoff.infra.gitprocess import alive

# A ref lock older than this, found while we hold our own state lock, was left by
# a killed process (libgit2 never retries a held .lock, so it would block forever).
STALE_REF_LOCK_SECONDS = 2.0
TMP_REFS = "refs/handoff-tmp/"  # scratch refs of fast-import, each named after its process


def _lost_race(text: str) -> bool:
    """Whether libgit2's message (lower case) says another writer got there first: a
    lock held, the old value moved, the ref made meanwhile. Read without what it quotes
    (a path, a ref name), where "lock" or "exists" may be a directory's name."""
    first, last = text.find("'"), text.rfind("'")
    if 0 <= first < last:
        text = text[:first] + text[last + 1:]
    return "lock" in text or "old reference value does not match" in text or "exists" in text


class GitRefs(OpenRepo):
    """An open repository's refs."""

    def ref_target(self, name: str) -> str | None:
        ref = self.raw.references.get(name)
        if ref is None:
            return None
        try:
            return str(ref.resolve().target)
        except KeyError:
            return None

    def refs_under(self, prefix: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in self.raw.references:
            if name.startswith(prefix):
                target = self.ref_target(name)
                if target is not None:
                    out[name] = target
        return out

    def refs_in(self, prefix: str, *more: str) -> dict[str, str]:
        """`refs_under` for a namespace that may hold thousands of refs (a fleet's clone
        refs): git for-each-ref reads only that namespace, where libgit2's iterator reads
        every ref of the repository at each call (0.1 s a call with 2,000 loose refs).
        Several namespaces: one git process lists them all."""
        prefixes = (prefix, *more)
        proc = self.git("for-each-ref", "--format=%(objectname) %(refname)", *prefixes, check=False)
        out: dict[str, str] = {}
        for line in proc.stdout.decode("utf-8", "surrogateescape").splitlines():
            oid, _, name = line.partition(" ")
            if name.startswith(prefixes):
                out[name] = oid
        return out

    def cas_ref(self, name: str, new: str, expected: str | None, message: str) -> bool:
        """Compare-and-swap `name` from `expected` (None: must not exist) to `new`.

        Returns False when another writer got there first. A stale `<ref>.lock`
        left by a killed process is removed once and the swap retried.
        """
        pygit2 = lazy_pygit2()
        for attempt in range(2 + GC_RACE_RETRIES):
            try:
                if expected is None:
                    self.raw.create_reference_direct(name, lazy_pygit2().Oid(hex=new), False, message=message)
                    return True
                ref = self.raw.references.get(name)
                if ref is None or str(ref.target) != expected:
                    return False
                ref.set_target(new, message)
                return True
            except pygit2.AlreadyExistsError:
                return False
            except (pygit2.GitError, ValueError, OSError) as exc:
                if self._recover_stale_ref_lock(name):
                    continue
                text = str(exc).lower()
                if "doesn't exist" in text and attempt < GC_RACE_RETRIES:
                    # the new commit is there, but a concurrent `git gc` swapped packs
                    # under libgit2's object lookup: look again, in the packs there are
                    # now, waiting longer each time (under load the swap outlasted five
                    # tries of 10-50 ms: CI's test_transactions_survive_gc_repacking_underneath)
                    time.sleep(0.01 * 2**attempt)
                    self.reopen_if_repacked()
                    continue
                if "failed to make directory" in text and attempt < GC_RACE_RETRIES:
                    # a new ref's directories: the background `git pack-refs --all` removes
                    # the ones it left empty, one of them between libgit2's mkdir of a
                    # parent and of its child (CI's fleet under gitolite: a tracking ref
                    # of a new clone); made again on the next try
                    time.sleep(0.001 * 2**attempt)
                    continue
                if _lost_race(text):
                    return False
                raise GitFailure(f"cannot update {name}: {exc}") from exc
        return False

    def _recover_stale_ref_lock(self, name: str) -> bool:
        lock = self.common_dir / (name + ".lock")
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return False
        if age < STALE_REF_LOCK_SECONDS:
            return False
        try:
            lock.unlink()
        except FileNotFoundError:
            pass
        return True

    def sweep_tmp_refs(self) -> list[str]:
        """Delete the refs/handoff-tmp/* refs (fast-import's scratch refs) whose process is
        gone: a command killed between `fast-import` and its cleanup leaves one behind."""
        swept = []
        for name in self.refs_under(TMP_REFS):
            match = re.search(r"(?:^|-)([0-9]+)-[0-9a-f]+$", name[len(TMP_REFS):])
            pid = int(match.group(1)) if match else 0
            if pid and pid != os.getpid() and alive(pid):
                continue
            self.delete_ref(name)
            swept.append(name)
        return swept

    def sweep_incoming(self, prefix: str, fixed: str | None = None, listed: dict[str, str] | None = None) -> list[str]:
        """Delete what a fetch killed midway left under `prefix`: the refs and ref locks of
        every per-fetch namespace (`<prefix><remote>/<pid>-<hex>/...`, as earlier versions
        fetched) whose process is gone, and the ref locks under `fixed` (the caller's own
        namespace, which it holds a lock for: none there is live). A lock left there made
        every later fetch fail. Other namespaces (another remote's) are left alone.
        `listed`: the refs under `prefix` as the caller listed them ({}: sweep only the
        files, the locks and the directories left empty)."""
        owner = re.compile(r"/([0-9]+)-[0-9a-f]{8}/")

        def stale(name: str) -> bool:
            match = owner.search(name)
            if match is None:
                return fixed is not None and name.startswith(fixed) and name.endswith(".lock")
            pid = int(match.group(1))
            return pid != os.getpid() and not alive(pid)

        swept = [name for name in (self.refs_in(prefix) if listed is None else listed) if stale(name)]
        for name in swept:
            self.delete_ref(name)
        root = self.common_dir / prefix
        # deepest first, so that a directory emptied here is removed in its parent's turn
        for folder, dirs, files in os.walk(root, topdown=False):
            below = os.path.relpath(folder, root)
            relative = prefix + ("" if below == "." else below.replace(os.sep, "/") + "/")
            for name in files:
                if name.endswith(".lock") and stale(relative + name):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(folder, name))
                    swept.append(relative + name)
            # and the directories left empty (a loose ref's, once deleted, stay)
            for name in dirs:
                if stale(relative + name + "/"):
                    with contextlib.suppress(OSError):  # not empty, or gone already
                        os.rmdir(os.path.join(folder, name))
        return swept

    def update_refs(self, updates: list[tuple[str, str | None, str | None]], message: str) -> None:
        """Move many refs at once: each (name, new oid or None to delete, the oid it must
        have now or None when it must not exist). One `git update-ref --stdin` (thousands
        of refs in one process, not a file lock and a write each from here); should that
        transaction fail (a ref moved meanwhile), each ref by compare-and-swap on its own,
        those that moved left as they are."""
        if not updates:
            return
        lines = []
        for name, new, old in updates:
            if new is None:
                lines.append(f"delete {name} {old or ''}\n")
            else:
                lines.append(f"update {name} {new} {old or '0' * len(new)}\n")
        proc = self.git("update-ref", "-m", message, "--stdin", input="".join(lines).encode(), check=False)
        if proc.returncode == 0:
            return
        for name, new, old in updates:
            if new is None:
                if self.ref_target(name) == old:
                    self.delete_ref(name)
            else:
                self.cas_ref(name, new, old, message)

    def delete_ref(self, name: str) -> None:
        ref = self.raw.references.get(name)
        if ref is not None:
            ref.delete()
