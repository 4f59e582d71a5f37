"""A remote on which many clones have published: `publish_heads` writes, from one
working clone, `n` clone state refs (refs/harness/clones/<id>/state) that each add one
task of their own to the state the clone holds, as n machines that each ran `add` and
`sync` once would have left them. Used by the cost tests and bench/bench_sync_fleet.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from git_handoff.core.model import Task, now_iso, order_key_now
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.store import StateStore, Tx


def publish_heads(clone: Path, n: int, *, prefix: str = "c", push: bool = True, first: int = 0) -> list[str]:
    """Write `n` clone heads on top of `clone`'s state (each with one new task
    `<prefix><i>`) as refs/harness/clones/<16 hex>/state here, and push them to origin in
    one push when `push`. The clone ids are numbered from `first`: another batch of
    machines, pushed alone (each batch is kept here under refs/fleet-heads/<first>/,
    so that a later batch does not push an earlier one's refs again, which a sync may
    have retired meanwhile). Returns the task ids."""
    repo = Repo.discover(clone)
    store = StateStore(repo)
    base = store.head()
    assert base is not None
    stamp = now_iso()
    ids = []
    lines = []
    batch = "refs/harness/clones/" if first == 0 else f"refs/fleet-heads/{first}/"
    for i in range(n):
        tid = f"{prefix}{i}"
        tx = Tx(store, store.snapshot(base))
        tx.put_task(Task(id=tid, title=f"task of clone {i}", created_at=stamp, order=order_key_now()))
        tx.log("INIT", "Added", task=tid)
        commit = store.build_commit(tx, [base])
        clone_id = f"{0xF000000000000000 + first + i:016x}"
        lines.append(f"create {batch}{clone_id}/state {commit}\n")
        ids.append(tid)
    subprocess.run(["git", "update-ref", "--stdin"], cwd=clone, input="".join(lines), text=True, check=True)
    if push:
        subprocess.run(["git", "push", "-q", "origin", f"{batch}*:refs/harness/clones/*"],
                       cwd=clone, check=True, capture_output=True)
    return ids


def publish_unknown_refs(bare: Path, n: int, target: str, namespace: str = "refs/harness/junk/") -> None:
    """`n` refs under `namespace` in the bare repository `bare`, all at `target`, written
    straight into its packed-refs (the fastest way to pile them up)."""
    packed = bare / "packed-refs"
    old = packed.read_text().splitlines() if packed.exists() else []
    entries = {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in old if line and line[0] not in "#^"}
    entries.update({f"{namespace}{i:06d}": target for i in range(n)})
    packed.write_text("# pack-refs with: sorted \n"
                      + "".join(f"{oid} {name}\n" for name, oid in sorted(entries.items())))
