"""Where a sync's time goes when the remote holds 60,000 refs in a namespace this version
does not read: the fetch and the push measured apart, each with and without the refs,
with the protocol versions git offers, and with the server hiding the namespace.

    PYTHONPATH=$PWD python bench/bench_unknown_refs.py [--quick]

Each figure is the median of N runs of exactly what `git handoff sync` runs (the fetch
with its refspecs into the staging namespace; the push of this clone's state ref with a
lease, --porcelain), each on a fresh copy of the remote and of the clone, plus the bytes
git received as ref advertisement (GIT_TRACE_PACKET). Ratios are against the same
operation, same settings, without the unknown refs, measured in the same run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    Row,
    copy_repo,
    copy_world,
    fleet_world,
    fresh_dir,
    git,
    handoff_ok,
    median,
    ms,
    workdir,
)
from git_handoff.remote.transport import fetch_specs
from tests.support.fleet_heads import publish_unknown_refs

JUNK = "refs/harness/junk/"


# what the server may set (docs/server-rights.md): nothing; hide the namespace; hide it and
# keep receive-pack's connectivity check from listing every ref of the repository again
# as the "alternate" of its quarantine directory
SERVER = {
    "": [],
    "server hides " + JUNK: [("transfer.hideRefs", JUNK.rstrip("/"))],
    "server hides " + JUNK + " + core.alternateRefsPrefixes": [
        ("transfer.hideRefs", JUNK.rstrip("/")), ("core.alternateRefsPrefixes", "refs/heads/")],
}


def _copy(remote: Path, c: Path, base: Path, server: str) -> tuple[Path, Path]:
    copied, clone = copy_world(remote, c, base)
    for key, value in SERVER[server]:
        git("config", "--add", key, value, cwd=copied)
    return copied, clone


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    """(seconds, bytes of packet lines git received) of one git command."""
    trace = cwd.parent / "trace.txt"
    full = {**os.environ, **env, "GIT_TRACE_PACKET": str(trace)}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=full, capture_output=True)
    took = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.decode()[-300:]}")
    received = 0
    if trace.exists():
        for line in trace.read_text(errors="replace").splitlines():
            if "< " in line:
                received += len(line.split("< ", 1)[1]) + 1
        trace.unlink()
    return took, received


def _fetch(c: Path, proto: str) -> tuple[float, int]:
    staging = "refs/handoff-bench/origin/"
    return _timed(["git", "-c", f"protocol.version={proto}", "fetch", "--quiet", "--no-tags", "--prune",
                   "--no-write-fetch-head", "--refmap=", "origin", *fetch_specs(staging)], c, {})


def _push(c: Path, proto: str) -> tuple[float, int]:
    """What sync pushes when this clone has one new state commit: its own state ref, with a lease."""
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state import identity

    handoff_ok(["add", "pushed", "--id", f"p{time.monotonic_ns()}"], c)
    state = git("rev-parse", "refs/harness/state", cwd=c)
    clone_id = identity.clone_id(Repo.discover(c))
    ref = f"refs/harness/clones/{clone_id}/state"
    tracked = git("rev-parse", "-q", "--verify", f"refs/remotes/origin/harness/clones/{clone_id}/state",
                  cwd=c, check=False)
    return _timed(["git", "-c", f"protocol.version={proto}", "push", "--porcelain", "--no-verify",
                   f"--force-with-lease={ref}:{tracked}", "origin", f"{state}:{ref}"], c, {})


def measure(n_refs: int, repeats: int, protocols: tuple[str, ...] = ("0", "2")) -> list[Row]:
    workdir()
    base = fresh_dir("unknown-refs")
    remote, a, c = fleet_world(base / "world")
    handoff_ok(["add", "one more", "--id", "more"], a)
    handoff_ok(["sync"], a)
    piled = base / "piled.git"
    copy_repo(remote, piled)
    publish_unknown_refs(piled, n_refs, git("rev-parse", "HEAD", cwd=a))
    rows: list[Row] = []
    k = 0
    for what, op in (("fetch", _fetch), ("push", _push)):
        for proto in protocols:
            for server in SERVER:
                plain: list[tuple[float, int]] = []
                junk: list[tuple[float, int]] = []
                for _ in range(repeats):
                    for source, out in ((remote, plain), (piled, junk)):
                        k += 1
                        _, clone = _copy(source, c, base / f"run{k}", server)
                        out.append(op(clone, proto))
                        shutil.rmtree(base / f"run{k}", ignore_errors=True)
                p, j = median([t for t, _ in plain]), median([t for t, _ in junk])
                label = f"{what}, protocol.version={proto}{', ' + server if server else ''}"
                rows.append(Row(label, f"{ms(j)} ({junk[0][1] // 1024} KiB adv.)",
                                f"{ms(p)} ({plain[0][1] // 1024} KiB adv.)", j / p, "<= 1.2x", j / p <= 1.2))
    for server in SERVER:
        plain_s: list[float] = []
        junk_s: list[float] = []
        for _ in range(repeats):
            for source, out_s in ((remote, plain_s), (piled, junk_s)):
                k += 1
                _, clone = _copy(source, c, base / f"run{k}", server)
                out_s.append(handoff_ok(["sync"], clone))
                shutil.rmtree(base / f"run{k}", ignore_errors=True)
        p, j = median(plain_s), median(junk_s)
        rows.append(Row(f"whole sync{', ' + server if server else ''}", ms(j), ms(p), j / p, "<= 1.2x",
                        j / p <= 1.2))
    shutil.rmtree(base, ignore_errors=True)
    return rows


if __name__ == "__main__":
    from bench.run import print_table

    quick = "--quick" in sys.argv
    print_table(measure(60_000, 3 if quick else 7, ("2",) if "--v2" in sys.argv else ("0", "2")))
