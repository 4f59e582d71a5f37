"""The post-commit hook: installation beside a user's hook and under core.hooksPath,
byte-for-byte uninstall, the commit-count trigger, no Python below the threshold."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import hook_install
from tests.support.repo import git, make_repo, run, run_exe

USER_HOOK = b"#!/bin/sh\n# my own hook\necho user-hook-ran >> user-hook.log\n"


def _commit(repo: Path, name: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    (repo / name).write_text(name + "\n")
    subprocess.run(["git", "add", name], cwd=repo, check=True)
    full = dict(os.environ)
    if env:
        full.update(env)
    proc = subprocess.run(["git", "commit", "-q", "-m", name], cwd=repo, capture_output=True, text=True, env=full)
    assert proc.returncode == 0, proc.stderr
    return proc


def _handoff_lines(repo: Path) -> list[str]:
    return [x for x in run("log", "--type", "HANDOFF", cwd=repo).out.splitlines() if x]


def test_install_fresh_sets_hook_and_rewrite_ref(repo: Path) -> None:
    r = run("hooks", "install", "--json")
    assert r.rc == 0, r.err
    hook = repo / ".git" / "hooks" / "post-commit"
    assert hook.exists() and os.access(hook, os.X_OK)
    assert b"git-handoff post-commit hook" in hook.read_bytes()
    assert hook.read_bytes().startswith(b"#!/bin/sh\n")
    assert r.json()["installed"] and r.json()["notes_rewrite_ref"]
    assert git("config", "--get-all", "notes.rewriteRef", cwd=repo) == "refs/notes/harness"
    st = run("hooks", "status", "--json").json()
    assert st["installed"] and st["up_to_date"] and not st["chained_user_hook"]
    assert run("hooks", "uninstall").rc == 0
    assert not hook.exists()
    assert git("config", "--get-all", "notes.rewriteRef", cwd=repo, check=False) == ""


def test_install_beside_existing_user_hook_and_restore(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_bytes(USER_HOOK)
    hook.chmod(0o750)
    assert run("hooks", "install").rc == 0
    assert run("hooks", "install").rc == 0  # idempotent: the user's hook is kept once
    assert (repo / ".git" / "hooks" / "post-commit.handoff-user").read_bytes() == USER_HOOK
    assert run("hooks", "status", "--json").json()["chained_user_hook"]
    _commit(repo, "a.txt")
    assert (repo / "user-hook.log").read_text() == "user-hook-ran\n"  # the user's hook still runs
    assert run("hooks", "uninstall").rc == 0
    assert hook.read_bytes() == USER_HOOK
    assert stat.S_IMODE(hook.stat().st_mode) == 0o750
    assert not (repo / ".git" / "hooks" / "post-commit.handoff-user").exists()


def test_install_under_core_hooks_path(repo: Path) -> None:
    hooks_dir = repo / ".githooks"
    hooks_dir.mkdir()
    (hooks_dir / "post-commit").write_bytes(USER_HOOK)
    (hooks_dir / "post-commit").chmod(0o755)
    git("config", "core.hooksPath", ".githooks", cwd=repo)
    r = run("hooks", "install", "--json")
    assert r.rc == 0, r.err
    assert Path(r.json()["hooks_dir"]) == hooks_dir
    assert b"git-handoff post-commit hook" in (hooks_dir / "post-commit").read_bytes()
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    _commit(repo, "b.txt")
    assert (repo / "user-hook.log").exists()
    assert run("hooks", "uninstall").rc == 0
    assert (hooks_dir / "post-commit").read_bytes() == USER_HOOK
    assert sorted(p.name for p in hooks_dir.iterdir()) == ["post-commit"]


def test_uninstall_leaves_a_foreign_hook_alone(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_bytes(USER_HOOK)
    r = run("hooks", "uninstall", "--json")
    assert r.rc == 0 and r.json()["removed"] is False
    assert hook.read_bytes() == USER_HOOK


def test_rewrite_ref_keeps_notes_through_amend(repo: Path) -> None:
    run("hooks", "install")
    git("notes", "--ref=harness", "add", "-m", "task: t", "HEAD", cwd=repo)
    git("commit", "--amend", "-q", "-m", "amended", cwd=repo)
    assert git("notes", "--ref=harness", "show", "HEAD", cwd=repo) == "task: t"


def test_bad_agent_and_bad_event(repo: Path) -> None:
    assert run("hooks", "install", "--agent", "nope").rc == 2
    r = run("hook", "nope")  # never fails its caller: an unknown event is a warning
    assert r.rc == 0 and "unknown hook event 'nope'" in r.err


def _fake_handoff_bin(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A `git-handoff` earlier on PATH that only records that it was started."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    calls = tmp_path / "calls.log"
    script = bindir / "git-handoff"
    script.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n")
    script.chmod(0o755)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}, calls


def test_below_threshold_the_hook_starts_no_python(repo: Path, tmp_path: Path) -> None:
    run("init")
    git("config", "handoff.commitsPerSession", "3", cwd=repo)
    run("hooks", "install")
    env, calls = _fake_handoff_bin(tmp_path)
    _commit(repo, "before-session.txt", env)  # no session: nothing at all
    run("session", "start")
    _commit(repo, "one.txt", env)
    _commit(repo, "two.txt", env)
    assert not calls.exists()
    _commit(repo, "three.txt", env)
    assert calls.read_text() == "hook post-commit\n"


def test_commit_trigger_writes_the_document_once(repo: Path) -> None:
    run("init")
    run("add", "Work", "--id", "w", "--check", "true")
    git("config", "handoff.commitsPerSession", "2", cwd=repo)
    run("hooks", "install")
    run("session", "start")
    p1 = _commit(repo, "one.txt")
    assert _handoff_lines(repo) == []
    p2 = _commit(repo, "two.txt")
    lines = _handoff_lines(repo)
    assert len(lines) == 1 and "trigger=commits" in lines[0] and "[SESSION-1]" in lines[0]
    doc = run("doc", "show", "--json").json()
    assert doc["trigger"] == "commits" and doc["files_changed"] == ["one.txt", "two.txt"]
    _commit(repo, "three.txt")
    _commit(repo, "four.txt")
    assert len(_handoff_lines(repo)) == 1
    for proc in (p1, p2):
        assert proc.stdout == "" and proc.stderr == ""  # no noise


def test_hook_never_fails_a_commit(repo: Path, tmp_path: Path) -> None:
    run("hooks", "install")
    handoff_dir = repo / ".git" / "handoff"
    handoff_dir.mkdir(exist_ok=True)
    (handoff_dir / "hook-state").write_text("not-a-commit garbage\n")
    proc = _commit(repo, "x.txt")
    assert proc.stderr == "" and proc.stdout == ""
    (handoff_dir / "hook-state").write_text("")
    proc = _commit(repo, "y.txt")
    assert proc.stderr == ""


def test_hook_in_a_linked_worktree(repo: Path, tmp_path: Path) -> None:
    run("init")
    git("config", "handoff.commitsPerSession", "1", cwd=repo)
    run("hooks", "install")
    wt = tmp_path / "linked"
    git("worktree", "add", "-q", "-b", "side", str(wt), cwd=repo)
    run("session", "start", cwd=wt)
    env, calls = _fake_handoff_bin(tmp_path)
    _commit(repo, "main-branch.txt", env)  # the main worktree has no session
    assert not calls.exists()
    _commit(wt, "side.txt", env)
    assert calls.read_text() == "hook post-commit\n"


@pytest.mark.parametrize("threshold", ["0", "-1"])
def test_nonpositive_threshold_disables(repo: Path, tmp_path: Path, threshold: str) -> None:
    run("init")
    git("config", "handoff.commitsPerSession", threshold, cwd=repo)
    run("hooks", "install")
    run("session", "start")
    assert not (repo / ".git" / "handoff" / "hook-state").exists()


def test_other_repo_unaffected(tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other")
    assert run("hooks", "status", "--json", cwd=other).json()["installed"] is False


def test_count_is_checked_against_git_before_triggering(repo: Path, tmp_path: Path) -> None:
    """Commits undone by a reset do not count: git's own count decides at the threshold."""
    run("init")
    git("config", "handoff.commitsPerSession", "3", cwd=repo)
    run("hooks", "install")
    run("session", "start")
    base = git("rev-parse", "HEAD", cwd=repo)
    env, calls = _fake_handoff_bin(tmp_path)
    _commit(repo, "one.txt", env)
    _commit(repo, "two.txt", env)
    git("reset", "-q", "--hard", base, cwd=repo)
    _commit(repo, "three.txt", env)  # 3 hook runs, but 1 commit since the base
    assert not calls.exists()
    state = (repo / ".git" / "handoff" / "hook-state").read_text().split()
    assert state == [base, "3", "1"]
    _commit(repo, "four.txt", env)
    assert not calls.exists()
    _commit(repo, "five.txt", env)
    assert calls.read_text() == "hook post-commit\n"


@pytest.mark.parametrize("content", ["", "abc\n", "abc 3 x\n", "abc  \n", "abc -2 1\n"])
def test_malformed_hook_state_is_ignored_quietly(repo: Path, content: str) -> None:
    run("hooks", "install")
    handoff_dir = repo / ".git" / "handoff"
    handoff_dir.mkdir(exist_ok=True)
    (handoff_dir / "hook-state").write_text(content)
    proc = _commit(repo, "x.txt")
    assert (proc.stdout, proc.stderr) == ("", "")


def _commit_in_env(repo: Path, name: str, env: dict[str, str]) -> None:
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
    _commit_in_env(repo, "one.txt", bare_path)
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
    _commit_in_env(repo, "two.txt", {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})
    assert calls.read_text() == "hook post-commit\n"


def test_status_of_answers_each_shape(repo: Path) -> None:
    """`hooks status [--agent NAME]`: every trigger, Claude Code's part of it, or one other
    CLI's hooks with its MCP entry."""
    here = Repo.discover()
    every = hook_install.status_of(here)
    assert every == hook_install.status(here)
    claude = hook_install.status_of(here, "claude")
    assert claude == {"agent": "claude", "settings": every["claude_settings"], "installed": every["claude"],
                      "mcp": every["claude_mcp"], "unattended": every["claude_unattended"],
                      "command_server": every["command_server"]}
    codex = hook_install.status_of(here, "codex")
    assert codex == {**hook_install.agent_status(here, hook_install.AGENT_SPECS["codex"], with_mcp=True),
                     "command_server": every["command_server"]}
    assert "mcp" in codex and codex["installed"] is False
