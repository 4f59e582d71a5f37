# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""A 200 MB title pushed by another clone (costs are linear in the input):
`sync` refuses it by the object's size, without reading it, and nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.remotes import clones, ok, remote_url, shared_pair  # noqa: F401
from tests.support.repo import git, run, state_head

TITLE_BYTES = 200 * 1024 * 1024


@pytest.mark.slow
def test_a_200_mb_title_from_a_remote_is_quarantined_by_sync(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("add", "small", "--id", "t1", "--check", "true"))
    path = git("ls-tree", "-r", "--name-only", "refs/harness/state", "tasks", cwd=a).splitlines()[0]
    record = json.loads(git("show", f"refs/harness/state:{path}", cwd=a))
    head, tail = json.dumps({**record, "title": ""}).split('"title": ""', 1)
    blob = subprocess.Popen(["git", "hash-object", "-w", "--stdin"], cwd=a, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert blob.stdin is not None and blob.stdout is not None
    blob.stdin.write((head + '"title": "').encode())
    chunk = b"x" * (1 << 20)
    for _ in range(TITLE_BYTES // len(chunk)):
        blob.stdin.write(chunk)
    blob.stdin.write(('"' + tail).encode())
    blob.stdin.close()
    oid = blob.stdout.read().decode().strip()
    assert blob.wait() == 0
    env = {**os.environ, "GIT_INDEX_FILE": str(a / ".git" / "attack-index")}
    subprocess.run(["git", "read-tree", "refs/harness/state"], cwd=a, env=env, check=True)
    subprocess.run(["git", "update-index", "--cacheinfo", f"100644,{oid},{path}"], cwd=a, env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=a, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()
    commit = git("commit-tree", tree, "-p", "refs/harness/state", "-m", "a big title", cwd=a)
    git("push", "-q", "origin", f"{commit}:refs/harness/state", cwd=a)

    before = state_head(b)
    tracking = git("for-each-ref", "refs/remotes", cwd=b)
    res = run("sync", "--json", cwd=b)
    # quarantined: that ref kept out, named with the path; nothing of it used
    assert res.rc == 0 and res.err == "", res
    held = json.loads(res.out)["quarantined"]
    assert [item["ref"] for item in held] == ["refs/harness/state"]
    assert path in held[0]["why"] and "bytes, more than the 1048576" in held[0]["why"]
    assert state_head(b) == before and git("for-each-ref", "refs/remotes", cwd=b) == tracking
    status = run("status", cwd=b)
    assert status.rc == 0 and "[pending] t1: small (0/3)" in status.out and len(status.out) < 10_000
