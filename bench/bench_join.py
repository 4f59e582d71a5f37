"""What a new machine pays to join a fleet: time and bytes to its first claim.

    PYTHONPATH=$PWD python bench/bench_join.py [--quick]

The remote holds a state of 10,000 tasks with 100,000 state transactions behind it
(quick: 2,000 tasks, 20,000 transactions; each transaction rewrites one task's record,
as claims and completions do), and 20 active clones that each published one task on
top. A new machine clones the project (its code branch only), then runs `git handoff
sync` and `git handoff claim --remote origin`. Timed: those two commands; bytes: what
they added to its object store. Against the size of the current state alone (one pack
of the state tree's objects, no history). Targets: <= 10 s, and <= 10x that size.
The same join with the whole history (handoff.join = full, what earlier versions did)
is the baseline.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Row, build_state, disk_bytes, fresh_dir, git, handoff_ok, kib, ms, workdir
from tests.support.fleet_heads import publish_heads

ACTIVE = 20


def _grow(repo: Path, n_tasks: int, count: int) -> None:
    """`count` more state commits, each rewriting one task's record (its title), in one
    `git fast-import` pack."""
    from git_handoff.state.snapshot import task_path

    tip = git("rev-parse", "refs/harness/state", cwd=repo)
    chunks = []
    originals: dict[int, bytes] = {}
    for n in range(count):
        k = n % n_tasks
        path = task_path(f"t{k:05d}")
        if k not in originals:
            originals[k] = git("cat-file", "blob", f"{tip}:{path}", cwd=repo).encode()
        record = json.loads(originals[k])
        record["title"] = f"Task number {k}, revision {n}"
        blob = json.dumps(record, indent=2, sort_keys=True).encode() + b"\n"
        msg = f"[2026-07-01T10:00:00Z] [SESSION-0] NOTE [t{k:05d}] revision {n}\n".encode()
        chunks.append(f"commit refs/harness/state\ncommitter bench <bench@example.com> {1782900000 + n} +0000\n"
                      f"data {len(msg)}\n".encode() + msg + (f"from {tip}\n".encode() if n == 0 else b"")
                      + f"M 100644 inline {path}\ndata {len(blob)}\n".encode() + blob + b"\n")
    git("fast-import", "--quiet", "--force", cwd=repo, input=b"".join(chunks))


def _state_alone_bytes(repo: Path) -> int:
    """One pack of the current state's tree and blobs (no commit, no history)."""
    objects = git("ls-tree", "-r", "-t", "--format=%(objectname)", "refs/harness/state", cwd=repo).splitlines()
    objects.append(git("rev-parse", "refs/harness/state^{tree}", cwd=repo))
    pack = subprocess.run(["git", "pack-objects", "--stdout", "-q"], cwd=repo, input="\n".join(objects).encode(),
                          capture_output=True, check=True)
    return len(pack.stdout)


def join_world(n_tasks: int, transactions: int) -> tuple[Path, int]:
    """(the bare remote, the size of its current state alone)."""
    base = fresh_dir(f"join-{n_tasks}")
    base.mkdir(parents=True)
    remote = base / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=base)
    a = build_state(base / "a", n_tasks)
    _grow(a, n_tasks, transactions)
    git("remote", "add", "origin", remote.as_uri(), cwd=a)
    git("push", "-q", "origin", "main", cwd=a)
    git("symbolic-ref", "HEAD", "refs/heads/main", cwd=remote)
    handoff_ok(["sync"], a)
    publish_heads(a, ACTIVE, prefix="new", first=1 << 40)
    git("gc", "-q", cwd=remote)
    return remote, _state_alone_bytes(a)


def _join(remote: Path, mode: str) -> tuple[float, int, bool]:
    """A new machine's sync and first claim: (seconds, bytes added, whether it stayed shallow)."""
    where = fresh_dir(f"joiner-{mode}")
    git("clone", "-q", remote.as_uri(), str(where), cwd=remote.parent)
    git("config", "handoff.join", mode, cwd=where)
    before = disk_bytes(where / ".git" / "objects")
    took = handoff_ok(["sync"], where) + handoff_ok(["claim", "--remote", "origin"], where)
    added = disk_bytes(where / ".git" / "objects") - before
    shallow = (where / ".git" / "shallow").exists()
    shutil.rmtree(where, ignore_errors=True)
    return took, added, shallow


def join_rows(quick: bool) -> list[Row]:
    workdir()
    n_tasks, transactions = (2_000, 20_000) if quick else (10_000, 100_000)
    remote, alone = join_world(n_tasks, transactions)
    full_t, full_b, _ = _join(remote, "full")
    t, b, shallow = _join(remote, "shallow")
    label = f"{n_tasks:,} tasks, {transactions:,} transactions, {ACTIVE} active clones"
    return [
        Row(f"join: time to the first claim, {label}", ms(t), f"whole history: {ms(full_t)}", t / full_t,
            "<= 10 s", t <= 10),
        Row(f"join: bytes fetched to the first claim, {label}", kib(b), f"state alone: {kib(alone)}", b / alone,
            "<= 10x the state alone", b <= 10 * alone),
        Row("  join: bytes with the whole history (the baseline)", kib(full_b), f"state alone: {kib(alone)}",
            full_b / alone),
        Row("  join: the joined clone is shallow after its first claim", str(shallow), "-", None, "True", shallow),
    ]


if __name__ == "__main__":
    from bench.run import print_table

    print_table(join_rows("--quick" in sys.argv))
