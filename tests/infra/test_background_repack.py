"""The background repack a command starts (gitprocess.gc_in_background), in a real repository."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from git_handoff.infra import gitprocess


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=True).stdout


def _wait_gone(marker: Path) -> None:
    deadline = time.monotonic() + 120
    while marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not marker.exists(), "the background repack did not end within 120 s"


def test_the_repack_packs_the_objects_and_the_refs_and_leaves_every_objects_directory_in_place(tmp_path: Path) -> None:
    """git's prune-packed removes each objects/xx directory it empties, and a write into a
    directory removed between git making it and making its temporary file fails ("unable
    to create temporary file"): a user's `git add` beside a sync. After the repack all
    256 exist, so a write never has to make one while the next repack runs."""
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(repo))
    files = [tmp_path / f"f{n}" for n in range(300)]
    for path in files:
        path.write_text(f"object {path.name}\n")
    _git(repo, "hash-object", "-w", "--stdin-paths", stdin="\n".join(map(str, files)))
    blob = _git(repo, "hash-object", "-w", str(files[0])).strip()
    for n in range(20):
        _git(repo, "update-ref", f"refs/harness/claims/t{n}", blob)
    objects = repo / ".git" / "objects"
    fanout = {d.name for d in objects.iterdir() if len(d.name) == 2}
    assert 0 < len(fanout) < 256  # git makes a directory only for an object that goes there
    marker = repo / ".git" / "marker"
    gitprocess.gc_in_background(repo / ".git", marker)
    _wait_gone(marker)
    assert not [f for d in objects.iterdir() if len(d.name) == 2 for f in d.iterdir()]  # packed, none loose
    assert list((objects / "pack").glob("*.pack"))
    assert {d.name for d in objects.iterdir() if d.is_dir() and len(d.name) == 2} == {f"{n:02x}" for n in range(256)}
    # the refs packed, as `git gc` packs them: one file, not one each
    assert not list((repo / ".git" / "refs" / "harness").rglob("t*"))
    assert (repo / ".git" / "packed-refs").read_text().count("refs/harness/claims/") == 20
    # and a write after it goes where it belongs
    oid = _git(repo, "hash-object", "-w", "--stdin", stdin="one more\n").strip()
    assert (objects / oid[:2] / oid[2:]).is_file()
