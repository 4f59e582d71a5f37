"""git run as a process (git_handoff.infra.gitprocess): a failure's last line, the input
of `git fast-import` as git reads it, and the background repack a command starts
(gc_in_background), in a real repository."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from git_handoff.core.errors import GitFailure
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


def test_run_answers_git_and_a_failure_names_the_command_and_its_last_line(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q", "repo")
    git_dir = tmp_path / "repo" / ".git"
    done = gitprocess.run(("rev-parse", "--is-inside-work-tree"), git_dir=git_dir, workdir=tmp_path / "repo")
    assert done.stdout == b"true\n"
    with pytest.raises(GitFailure, match=r"^git cat-file failed: fatal: Not a valid object name nope$"):
        gitprocess.run(("cat-file", "-p", "nope"), git_dir=git_dir, workdir=tmp_path / "repo")
    assert gitprocess.run(("cat-file", "-p", "nope"), git_dir=git_dir, workdir=None, check=False).returncode != 0


@pytest.mark.parametrize("linked", [False, True])
def test_git_started_in_the_git_directory_works_where_bare_repositories_must_be_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked: bool) -> None:
    """Copilot CLI's shell sets safe.bareRepository=explicit: git started in a .git
    directory (fast-import is, in the common one) would find a bare repository there and
    refuse it; run names the repository instead."""
    _git(tmp_path, "init", "-q", "repo")
    _git(tmp_path / "repo", "commit", "-q", "--allow-empty", "-m", "one")
    git_dir, workdir = tmp_path / "repo" / ".git", tmp_path / "repo"
    if linked:
        _git(workdir, "worktree", "add", "-q", str(tmp_path / "wt"))
        git_dir, workdir = git_dir / "worktrees" / "wt", tmp_path / "wt"
    for key in ("GIT_DIR", "GIT_WORK_TREE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "safe.bareRepository")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "explicit")
    common = tmp_path / "repo" / ".git"
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=common, capture_output=True).returncode != 0
    done = gitprocess.run(("fast-import", "--quiet"), git_dir=git_dir, workdir=workdir, cwd=common,
                          input=gitprocess.blobs_input([b"blob\n"]))
    assert done.returncode == 0
    top = gitprocess.run(("rev-parse", "--show-toplevel"), git_dir=git_dir, workdir=workdir)
    assert Path(top.stdout.decode().strip()) == workdir.resolve()


def test_fast_import_paths_are_quoted_when_git_needs_it() -> None:
    assert gitprocess.fast_import_path(b"plain/path.json") == b"plain/path.json"
    assert gitprocess.fast_import_path(b'a b') == b'"a b"'
    assert gitprocess.fast_import_path(b'q"\\\n') == b'"q\\"\\\\\\n"'


def test_fast_import_writes_the_blobs_and_the_commits_of_its_input(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", "-b", "main", str(repo))
    _git(repo, "commit", "-q", "--allow-empty", "-m", "root")
    root = _git(repo, "rev-parse", "HEAD").strip()
    subprocess.run(["git", "fast-import", "--quiet", "--done"], cwd=repo, check=True,
                   input=gitprocess.blobs_input([b"one\n", b"two\n"]))
    assert _git(repo, "cat-file", "-t", _git(repo, "hash-object", "--stdin", stdin="two\n").strip()) == "blob\n"
    blob = _git(repo, "hash-object", "-w", "--stdin", stdin="by oid\n").strip()
    files: list[tuple[bytes, str, bytes | str | None]] = [(b"with space.txt", "100644", b"inline\n"),
                                                          (b"kept.txt", "100644", blob)]
    stream = gitprocess.commit_input("refs/heads/made", "Me", "me@example.org", 1_700_000_000, "one commit",
                                     [root], files)
    subprocess.run(["git", "fast-import", "--quiet", "--done"], cwd=repo, check=True, input=stream)
    assert _git(repo, "show", "made:with space.txt") == "inline\n" and _git(repo, "show", "made:kept.txt") == "by oid\n"
    assert _git(repo, "log", "-1", "--format=%cn <%ce> %ct %s", "made") == "Me <me@example.org> 1700000000 one commit\n"
    chain = gitprocess.chain_input("refs/heads/chain", b"committer Me <me@example.org> 1700000000 +0000\n", root,
                                   [([], [(b"a", "100644", b"a\n")], "first"),
                                    ([], [(b"a", "100644", None), (b"b", "100644", b"b\n")], "second")])
    subprocess.run(["git", "fast-import", "--quiet", "--done"], cwd=repo, check=True, input=chain)
    assert _git(repo, "log", "--format=%s", "chain").split() == ["second", "first", "root"]
    assert _git(repo, "ls-tree", "--name-only", "chain").split() == ["b"]


def test_loose_estimate_counts_from_a_few_fanout_directories(tmp_path: Path) -> None:
    objects = tmp_path / "objects"
    for n in range(4):
        folder = objects / f"{0x17 + 37 * n:02x}"
        folder.mkdir(parents=True)
        for k in range(n + 1):
            (folder / f"obj{k}").write_text("")
    assert gitprocess.loose_estimate(tmp_path) == (1 + 2 + 3 + 4) * 256 // 4
    assert gitprocess.loose_estimate(tmp_path / "none") == 0


def test_alive_tells_a_running_process_from_a_gone_one() -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert gitprocess.alive(os.getpid()) and not gitprocess.alive(proc.pid)
