"""The attacker's toolkit for the hostile-remote tests: a clone that writes state
commits, trees and refs by hand (raw objects, so also entries git itself refuses to
make: `..`, absolute names, gitlinks, blobs where trees belong) and pushes them to the
shared bare remote; and the victim's invariants (files, refs, processes, canaries)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from tests.support.repo import git, make_repo, run
from tests.support.templates import Templates

BLOB, EXEC, TREE, LINK, GITLINK = "100644", "100755", "40000", "120000", "160000"
Node = dict[str, Any]  # name -> (mode, oid) or a nested Node (a tree)


def task_path(task_id: str) -> str:
    h = hashlib.sha1(task_id.encode()).hexdigest()
    return f"tasks/{h[0]}/{h[1]}/{task_id}.json"


def _sort_key(item: tuple[str, Any]) -> bytes:
    name, value = item
    is_tree = isinstance(value, dict) or value[0] == TREE
    return name.encode("utf-8", "surrogateescape") + (b"/" if is_tree else b"")


class Attacker:
    """A clone under an attacker's control; every write goes through raw objects."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.repo = pygit2.Repository(str(path))

    # -- objects --

    def blob(self, data: bytes | str) -> str:
        return str(self.repo.create_blob(data.encode() if isinstance(data, str) else data))

    def raw_tree(self, node: Node) -> str:
        out = b""
        for name, value in sorted(node.items(), key=_sort_key):
            if isinstance(value, dict):
                mode, oid = TREE, self.raw_tree(value)
            else:
                mode, oid = value
            out += mode.encode() + b" " + name.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(oid)
        return str(self.repo.odb.write(pygit2.enums.ObjectType.TREE, out))

    def read_tree(self, oid: str) -> Node:
        node: Node = {}
        tree = self.repo[oid]
        assert isinstance(tree, pygit2.Tree), f"{oid} is a {tree.type_str}, not a tree"
        for entry in tree:
            assert entry.name is not None  # an object read from a tree has its entry's name
            if entry.type_str == "tree":
                node[entry.name] = self.read_tree(str(entry.id))
            else:
                node[entry.name] = (f"{entry.filemode:o}", str(entry.id))
        return node

    def blob_data(self, oid: str) -> bytes:
        """The content of the blob `oid`."""
        blob = self.repo[oid]
        assert isinstance(blob, pygit2.Blob), f"{oid} is a {blob.type_str}, not a blob"
        return blob.data

    def commit(self, tree: str, parents: list[str], message: str) -> str:
        sig = pygit2.Signature("Mallory", "mallory@example.com", 1782900000, 0)
        return str(self.repo.create_commit(None, sig, sig, message, pygit2.Oid(hex=tree),
                                           [pygit2.Oid(hex=p) for p in parents]))

    # -- the shared state --

    def fetch(self) -> None:
        git("fetch", "-q", "origin", "+refs/harness/*:refs/harness/*", "+refs/notes/*:refs/notes/*", cwd=self.path)
        self.repo = pygit2.Repository(str(self.path))

    def state(self) -> str:
        return str(self.repo.references["refs/harness/state"].target)

    def state_node(self) -> Node:
        return self.read_tree(str(self.repo[self.state()].peel(pygit2.Commit).tree_id))

    def push(self, oid: str, ref: str) -> None:
        git("push", "-q", "--no-verify", "origin", f"+{oid}:{ref}", cwd=self.path)

    def push_state(self, node: Node, message: str = "[2026-07-01T10:00:00Z] [SESSION-0] INIT crafted\n") -> str:
        commit = self.commit(self.raw_tree(node), [self.state()], message)
        self.push(commit, "refs/harness/state")
        return commit


def put(node: Node, path: str, value: Any) -> None:
    """Set `path` in a Node: bytes/str -> a blob, (mode, oid) as given, a dict -> a tree."""
    *dirs, name = path.split("/")
    for d in dirs:
        child = node.get(d)
        if not isinstance(child, dict):
            child = {}
            node[d] = child
        node = child
    node[name] = value


def task_record(task_id: str, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": task_id, "title": f"task {task_id}", "status": "pending", "priority": "P1", "depends_on": [],
        "attempts": 0, "max_attempts": 3, "started_at_commit": None,
        "validation": {"command": None, "timeout_seconds": 300}, "on_failure": {"cleanup": None},
        "error_log": [], "checkpoints": [], "completed_at": None, "claimed_by": None,
        "lease_expires_at": None, "created_at": "2026-07-01T09:00:00Z", "spec_ref": None,
        "order": 1, "updated_at": "2026-07-01T09:00:00Z",
    }
    record.update(fields)
    return record


def jbytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2) + "\n").encode()


# -- the victim -------------------------------------------------------------------------------


def _files(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            out[rel] = "link:" + os.readlink(p) if p.is_symlink() else hashlib.sha1(p.read_bytes()).hexdigest()
    return out


def _hooks(gitdir: Path) -> dict[str, str]:
    hooks = gitdir / "hooks"
    return {p.name: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(hooks.iterdir()) if p.is_file()}


@dataclass
class Picture:
    """Everything of the victim's a fetched record must never change."""

    head: str
    branch: str
    index: str
    files: dict[str, str]
    hooks: dict[str, str]
    gitconfig: str


@dataclass
class World:
    root: Path
    remote: Path
    evil: Path
    victim: Path
    outside: Path  # canary files live here, outside every work tree
    canary_pid: int
    attacker: Attacker
    log: list[str] = field(default_factory=list)

    def picture(self) -> Picture:
        v = self.victim
        return Picture(
            head=git("rev-parse", "HEAD", cwd=v),
            branch=git("symbolic-ref", "-q", "HEAD", cwd=v, check=False),
            index=git("ls-files", "-s", cwd=v),
            files=_files(v),
            hooks=_hooks(v / ".git"),
            # git handoff's own notes.rewriteRef (set when it first writes a note) aside
            gitconfig=(v / ".git" / "config").read_text().replace("[notes]\n\trewriteRef = refs/notes/harness\n", ""),
        )

    def outside_files(self) -> dict[str, str]:
        return _files(self.outside)

    def pwned(self) -> list[str]:
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):  # git may pack objects meanwhile
            dirnames[:] = [d for d in dirnames if d != "objects"]
            found.extend(os.path.join(dirpath, n) for n in dirnames + filenames if n.startswith("PWNED"))
        return sorted(found)

    def canary_alive(self) -> bool:
        try:
            pid, _ = os.waitpid(self.canary_pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return pid == 0

    def refs(self) -> dict[str, str]:
        out = git("for-each-ref", "--format=%(objectname) %(refname)", "refs/harness", "refs/notes",
                  "refs/remotes", cwd=self.victim)
        return {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in out.splitlines() if line}

    def pwn(self, tag: str) -> str:
        """A command that leaves evidence if it ever runs."""
        return f"touch {self.root}/PWNED-{tag}"


def build_world(tmp: Path) -> None:
    """A bare remote (`remote.git`), the attacker's clone (`evil`, which made the state)
    and the victim's clone (`victim`, which adopted it by syncing)."""
    remote = tmp / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp)
    evil = make_repo(tmp / "evil")
    (evil / ".gitignore").write_text("local.env\n")
    (evil / "app.py").write_text("print('app')\n")
    git("add", ".", cwd=evil)
    git("commit", "-q", "-m", "app", cwd=evil)
    git("remote", "add", "origin", str(remote), cwd=evil)
    git("push", "-q", "origin", "main", cwd=evil)
    for args in (("init",), ("add", "Write the schema", "--id", "schema", "--check", "true"),
                 ("add", "Add the API", "--id", "api", "--after", "schema"), ("sync",)):
        res = run(*args, cwd=evil)
        assert res.rc == 0, (args, res.err)
    victim = tmp / "victim"
    git("clone", "-q", str(remote), str(victim), cwd=tmp)
    git("config", "handoff.backend.bot.command", "cat >/dev/null; echo '{\"session_id\": \"s-1\"}'", cwd=victim)
    git("config", "handoff.backend.bot.resume", "cat >/dev/null; echo resumed '{session_id}' >/dev/null", cwd=victim)
    res = run("sync", cwd=victim)
    assert res.rc == 0, res.err


def make_world(tmp: Path, templates: Templates | None = None) -> Iterator[World]:
    """The world of `build_world` (built in `tmp`, or a copy of the one `templates` holds,
    its two clones pointed at their own copy of the remote), the victim's own files,
    canary files outside both clones, a canary process."""
    remote, evil, victim = tmp / "remote.git", tmp / "evil", tmp / "victim"
    if templates is None:
        build_world(tmp)
    else:
        templates.copy("hostile-world", build_world, tmp)
        for clone in (evil, victim):
            git("remote", "set-url", "origin", str(remote), cwd=clone)
    (victim / "local.env").write_text("SECRET=hunter2\n")  # ignored
    (victim / "notes.txt").write_text("my untracked notes\n")  # untracked
    (victim / "app.py").write_text("print('my edit')\n")  # tracked, modified
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text("do not touch\n")
    (tmp / "x").mkdir()
    (tmp / "x" / "canary.txt").write_text("sibling canary\n")
    canary = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              env=dict(os.environ, HOSTILE_CANARY="HOME=1"))
    attacker = Attacker(evil)
    attacker.fetch()
    try:
        yield World(tmp, remote, evil, victim, outside, canary.pid, attacker)
    finally:
        canary.kill()
        canary.wait()


HOST = socket.gethostname()
