"""Small contract fixes: show's lease line, edit's help, log -n 0, dispatch
run's exit status."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import git, run, run_exe


def test_show_prints_a_lease_only_for_a_live_claim(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "One", "--id", "one", "--check", "true").rc == 0
    assert "claimed by" not in run("show", "one").out
    assert run("claim", "one", "--lease", "1h").rc == 0
    lease = run("show", "one", "--json").json()["lease_expires_at"]
    assert f"(lease until {lease})" in run("show", "one").out
    assert run("done", "one").rc == 0
    shown = run("show", "one").out
    assert "lease until" not in shown and "None" not in shown
    assert "last claimed:" in shown


def test_edit_help_shows_no_defaults_it_does_not_apply() -> None:
    edit = run("edit", "-h").out
    assert "[default:" not in edit
    assert "kept unless given" in edit
    add = run("add", "-h").out
    assert "[default: 300]" in add and "[default: 3]" in add


def test_log_n_0_prints_nothing(repo: Path) -> None:
    assert run("init").rc == 0
    assert run("add", "One", "--id", "one").rc == 0
    res = run("log", "-n", "0")
    assert res.rc == 0 and res.out == ""
    assert run("log", "-n", "0", "--json").json() == []
    assert len(run("log", "-n", "1").out.splitlines()) == 1
    assert run("log", "-n", "-1").rc == 2


def test_dispatch_run_of_a_failing_backend_exits_1_with_its_status(repo: Path) -> None:
    assert run("init").rc == 0
    for status in (2, 3, 130):
        git("config", "handoff.backend.bad.command", f"cat >/dev/null; echo boom; exit {status}", cwd=repo)
        for extra in ([], ["--json"]):
            run_id = run("dispatch", "new", "--backend", "bad", "--slug", "boom", stdin="x\n").out.strip()
            r = run("dispatch", "run", run_id, *extra)
            assert r.rc == 1, r
            assert r.err.startswith("error: ") and len(r.err.splitlines()) == 1
            assert f"backend exit status {status}" in r.err
            if extra:
                record = json.loads(r.out)
                assert record["status"] == "failed" and record["exit_status"] == status
                assert r.out.count("\n") == 1  # one JSON document, printed once


def _commit(repo: Path, name: str, env: dict[str, str]) -> None:
    (repo / name).write_text(name + "\n")
    subprocess.run(["git", "add", name], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", name], cwd=repo, check=True, env=env)


def test_post_commit_hook_starts_the_git_handoff_it_was_installed_with(repo: Path) -> None:
    """Installed through the real executable, the hook reaches it even when commits are
    made without its virtual environment on PATH; if it is gone, PATH is used."""
    assert run("init").rc == 0
    git("config", "handoff.commitsPerSession", "1", cwd=repo)
    res = run_exe("hooks", "install", "--json", cwd=repo)
    assert res.rc == 0, res.err
    starts = json.loads(res.out)["starts"]
    exe = shutil.which("git-handoff")
    assert exe and starts == [os.path.abspath(exe)]
    hook = repo / ".git" / "hooks" / "post-commit"
    assert f"exe={shlex.quote(os.path.abspath(exe))}" in hook.read_text()
    assert run("hooks", "status", "--json").json()["up_to_date"] is True
    assert run("session", "start").rc == 0
    bare_path = {**os.environ, "PATH": "/usr/bin:/bin"}
    assert shutil.which("git-handoff", path=bare_path["PATH"]) is None
    _commit(repo, "one.txt", bare_path)
    assert len(run("log", "--type", "HANDOFF").out.splitlines()) == 1  # the trigger ran without PATH

    # installed by `python -m git_handoff`: that python and module
    subprocess.run([sys.executable, "-m", "git_handoff", "hooks", "install"], cwd=repo, check=True,
                   capture_output=True)
    assert run("hooks", "status", "--json").json()["starts"] == [os.path.abspath(sys.executable), "-m", "git_handoff"]

    # the recorded executable is gone: PATH is used, as before
    text = hook.read_text()
    hook.write_text(re.sub(r"^exe=.*$", "exe=/nonexistent/git-handoff", text, flags=re.MULTILINE))
    assert run("session", "start").rc == 0
    calls = repo.parent / "calls.log"
    fake = repo.parent / "fakebin"
    fake.mkdir()
    (fake / "git-handoff").write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n")
    (fake / "git-handoff").chmod(0o755)
    _commit(repo, "two.txt", {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})
    assert calls.read_text() == "hook post-commit\n"


def test_sync_adds_only_the_refspecs_it_needs_and_says_so_once(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=repo)
    # a legacy, broader refspec from an earlier version, and a user's own one
    git("config", "--add", "remote.origin.fetch", "+refs/notes/*:refs/remotes/origin/notes/*", cwd=repo)
    assert run("init").rc == 0
    first = run("sync")
    assert first.rc == 0, first.err
    # what a plain `git fetch` brings of the state goes where nothing reads it unchecked
    # (refs/handoff-fetched/: the next sync checks it)
    fetched = "refs/handoff-fetched/origin/harness"
    assert "added to remote.origin.fetch" in first.out
    assert f"+refs/notes/harness*:{fetched}/notes/harness*" in first.out
    assert "removed from remote.origin.fetch (broader than needed): +refs/notes/*:refs/remotes/origin/notes/*" in first.out
    specs = git("config", "--get-all", "remote.origin.fetch", cwd=repo).splitlines()
    assert specs == ["+refs/heads/*:refs/remotes/origin/*",
                     f"+refs/harness/clones/*:{fetched}/clones/*",
                     f"+refs/harness/claims/*:{fetched}/claims/*",
                     f"+refs/harness/attempts/*:{fetched}/attempts/*",
                     f"+refs/harness/state*:{fetched}/state*",
                     f"+refs/notes/harness*:{fetched}/notes/harness*"]
    second = run("sync")
    assert second.rc == 0 and "remote.origin.fetch" not in second.out
    assert run("sync", "--json").json()["refspecs"] == {"added": [], "removed": []}
    # another notes namespace on the remote is not fetched, by sync or by a plain fetch
    git("notes", "--ref=review", "add", "-m", "someone else's", "HEAD", cwd=repo)
    git("push", "-q", str(bare), "refs/notes/review", cwd=repo)
    assert run("sync").rc == 0
    git("fetch", "-q", "origin", cwd=repo)
    assert "review" not in git("for-each-ref", "--format=%(refname)", "refs/remotes/", cwd=repo)
