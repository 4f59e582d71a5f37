"""Git notes on work commits (refs/notes/harness), and the real executable end to end."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from git_handoff.infra.gitrepo import Repo
from git_handoff.state import integrate, notes
from tests.support.repo import git, run, run_exe

ROOT = Path(__file__).resolve().parents[2]


def commit_file(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git("add", name, cwd=repo)
    git("commit", "-q", "-m", f"add {name}", cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def test_checkpoint_and_done_note_the_commits_of_the_claim(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFF_SESSION", "4")
    assert run("init").rc == 0
    assert run("add", "Notes", "--id", "n1", "--check", "true").rc == 0
    before = git("rev-parse", "HEAD", cwd=repo)
    assert run("claim").rc == 0
    c1 = commit_file(repo, "a.txt", "a\n")
    assert run("checkpoint", "n1", "first part", "--step", "1", "--of", "2").rc == 0
    text = git("notes", "--ref=harness", "show", c1, cwd=repo)
    assert "task: n1" in text and "session: 4" in text and 'checkpoint: step=1/2 "first part"' in text
    c2 = commit_file(repo, "b.txt", "b\n")
    assert run("done", "n1").rc == 0
    for c in (c1, c2):
        text = git("notes", "--ref=harness", "show", c, cwd=repo)
        assert "task: n1" in text and "outcome: completed" in text
    assert git("notes", "--ref=harness", "show", before, cwd=repo, check=False) == ""
    shown = git("log", "--notes=harness", "-1", "--format=%N", c2, cwd=repo)
    assert "task: n1" in shown
    assert git("config", "notes.rewriteRef", cwd=repo) == "refs/notes/harness"


def test_fail_notes_the_commits_it_saves(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "Doomed", "--id", "d1", "--check", "false").rc == 0
    assert run("claim").rc == 0
    c1 = commit_file(repo, "a.txt", "a\n")
    assert run("done", "d1").rc == 1
    assert "outcome: failed [TEST_FAIL]" in git("notes", "--ref=harness", "show", c1, cwd=repo)


def test_notes_keep_an_existing_fanned_out_note_in_place(repo: Path) -> None:
    r = Repo.discover(repo)
    c1 = git("rev-parse", "HEAD", cwd=repo)
    fanned = r.update_tree(None, {f"{c1[:2]}/{c1[2:]}": r.write_blob(b"one\n")})
    assert r.cas_ref("refs/notes/harness", r.create_commit(fanned, [], "notes\n"), None, "test")
    assert notes.read_note(r, c1) == "one\n"
    assert notes.write_notes(r, {c1: "one\n"}) == 0  # unchanged: no new notes commit
    assert notes.write_notes(r, {c1: "two\n"}) == 1
    assert git("notes", "--ref=harness", "show", c1, cwd=repo) == "two"
    assert git("ls-tree", "--name-only", "refs/notes/harness", cwd=repo) == c1[:2]


WRITER = textwrap.dedent(
    """
    import sys
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state import notes
    repo = Repo.discover(sys.argv[1])
    for oid in sys.argv[2:]:
        notes.write_notes(repo, {oid: "by " + sys.argv[2][:7] + "\\n"})
    """
)


@pytest.mark.slow  # several processes racing: the slow layer
def test_concurrent_note_writers_lose_nothing(repo: Path) -> None:
    commits = [commit_file(repo, f"f{n}.txt", f"{n}\n") for n in range(24)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(repo), *commits[n::4]], env=env, stderr=subprocess.PIPE)
        for n in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    listed = git("notes", "--ref=harness", "list", cwd=repo).splitlines()
    assert sorted(line.split()[1] for line in listed) == sorted(commits)


def test_the_real_executable_runs_the_cycle(repo: Path) -> None:
    env = {"PYTHONPATH": str(ROOT)}
    # the set-up in-process (test_core's end-to-end test runs init and add through the
    # executable); the work cycle through the real executable
    assert run("init").rc == 0
    assert run("add", "Real", "--id", "r1", "--check", "test -f done.txt").rc == 0
    claimed = run_exe("claim", "--json", cwd=repo, env=env)
    assert claimed.rc == 0 and claimed.json()["id"] == "r1"
    assert run_exe("claim", cwd=repo, env=env).rc == 2
    failed = run_exe("done", "r1", "--json", cwd=repo, env=env)
    assert failed.rc == 1 and failed.json()["category"] == "TEST_FAIL"
    assert failed.err.startswith("error: [TEST_FAIL]")
    assert run_exe("claim", "r1", cwd=repo, env=env).rc == 0
    (repo / "done.txt").write_text("")
    done = run_exe("done", "r1", cwd=repo, env=env)
    assert done.rc == 0 and done.out.startswith("Completed r1 (commit ")
    assert run_exe("claim", cwd=repo, env=env).rc == 1


def _notes_tree(repo: Repo, notes_by_object: dict[str, tuple[str, int]]) -> str:
    """A notes tree: {object: (text, fan-out depth)}."""
    blobs: dict[str, str | None] = {}
    for obj, (text, depth) in notes_by_object.items():
        path = "/".join([obj[2 * k:2 * k + 2] for k in range(depth)] + [obj[2 * depth:]])
        blobs[path] = repo.write_blob(text.encode())
    return repo.update_tree(None, blobs)


def _by_object(repo: Repo, tree: str) -> dict[str, bytes]:
    return {path.replace("/", ""): repo.read_blob(new) for path, (_, new) in repo.tree_diff(None, tree).items()
            if new is not None}


@pytest.mark.parametrize("seed", range(6))
def test_a_notes_union_reads_only_what_differs_and_matches_the_union_note_by_note(repo: Path, seed: int) -> None:
    """Ours and theirs, fanned out differently (flat, 2/38, 2/2/36) and mostly the same:
    every note of both, the texts of a note both have (differing) united, each note once,
    where ours keeps it."""
    rnd = random.Random(seed)
    r = Repo.discover(repo)
    objects = [f"{rnd.getrandbits(160):040x}" for _ in range(60)]
    ours: dict[str, tuple[str, int]] = {}
    theirs: dict[str, tuple[str, int]] = {}
    depth_ours, depth_theirs = rnd.choice([0, 1, 2]), rnd.choice([0, 1, 2])
    for obj in objects:
        kind = rnd.random()
        if kind < 0.5:  # the same note on both sides
            ours[obj] = (f"note of {obj}\n", depth_ours)
            theirs[obj] = (f"note of {obj}\n", depth_theirs)
        elif kind < 0.65:
            ours[obj] = (f"ours {obj}\n", depth_ours)
        elif kind < 0.8:
            theirs[obj] = (f"theirs {obj}\n", depth_theirs)
        else:
            ours[obj] = (f"shared\nours {obj}\n", depth_ours)
            theirs[obj] = (f"shared\ntheirs {obj}\n", depth_theirs)
    ot, tt = _notes_tree(r, ours), _notes_tree(r, theirs)
    merged = _by_object(r, integrate._notes_union(r, ot, tt))
    assert set(merged) == set(ours) | set(theirs)
    for obj in objects:
        if obj in ours and obj in theirs and ours[obj][0] != theirs[obj][0]:
            lines = merged[obj].decode().splitlines()
            assert set(lines) == set(ours[obj][0].splitlines()) | set(theirs[obj][0].splitlines())
            assert len(lines) == len(set(lines))
        elif obj in ours or obj in theirs:
            assert merged[obj].decode() == (ours.get(obj) or theirs[obj])[0]
    assert len(r.tree_diff(None, integrate._notes_union(r, ot, tt))) == len(merged)  # each note once
    assert integrate._notes_union(r, ot, ot) == ot
