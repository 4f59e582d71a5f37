"""Repositories and ways to run git handoff in them: git itself, a fresh repository,
the CLI in-process (fast) or the real executable (as a user runs it)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def git(*args: str, cwd: Path, check: bool = True, input_text: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, input=input_text)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def assert_fsck_clean(repo: Path) -> None:
    """`git fsck --no-dangling` finds nothing wrong in `repo` (nothing on stdout, status 0)."""
    fsck = subprocess.run(["git", "fsck", "--no-progress", "--no-dangling"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and not fsck.stdout.strip(), fsck.stdout + fsck.stderr


def state_record(kind: str, number: int, *, cwd: Path) -> str:
    """The text of session `number`'s record of `kind` (`sessions` or `docs`) in the state:
    `<n>@<clone>.json` (or `<n>.json` in a state from before fleet ids), the only one."""
    names = git("ls-tree", "--name-only", f"refs/harness/state:{kind}", cwd=cwd).splitlines()
    found = [n for n in names if n == f"{number}.json" or n.startswith(f"{number}@")]
    assert len(found) == 1, f"{kind} of session {number}: {found} among {names}"
    return git("show", f"refs/harness/state:{kind}/{found[0]}", cwd=cwd)


def dispatch_record(run_id: str, *, cwd: Path) -> str:
    """The text of dispatch run `run_id`'s record: `dispatch/<run_id>@<clone>.json` (or
    `<run_id>.json` from before fleet ids), the only one."""
    names = git("ls-tree", "--name-only", "refs/harness/state:dispatch", cwd=cwd).splitlines()
    found = [n for n in names if n == f"{run_id}.json" or n.startswith(f"{run_id}@")]
    assert len(found) == 1, f"run {run_id}: {found} among {names}"
    return git("show", f"refs/harness/state:dispatch/{found[0]}", cwd=cwd)


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main", str(path), cwd=path)
    (path / "README").write_text("hello\n")
    git("add", "README", cwd=path)
    git("commit", "-q", "-m", "initial", cwd=path)
    return path


@dataclass
class Result:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run(*args: str, cwd: Path | None = None, stdin: str | None = None) -> Result:
    """Run `git handoff ARGS` in this process (fast); returns exit code and output."""
    from git_handoff.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_cwd = os.getcwd()
    old_stdin = sys.stdin
    rc = 0
    try:
        if cwd is not None:
            os.chdir(cwd)
        if stdin is not None:
            sys.stdin = io.StringIO(stdin)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(old_cwd)
        sys.stdin = old_stdin
    return Result(rc, out.getvalue(), err.getvalue())


def lived_in_state(cwd: Path | None = None) -> None:
    """The state of the repository here made to hold a little of everything a session
    leaves: task `a` ("A task", check `true`), session 1 ended, its decision ("a
    decision", why "a reason") and its handoff document."""
    for args in (("init",), ("add", "A task", "--id", "a", "--check", "true"), ("session", "start"),
                 ("decide", "a decision", "--why", "a reason"), ("doc", "write"), ("session", "end")):
        got = run(*args, cwd=cwd)
        assert got.rc == 0, (args, got.err)


def run_exe(*args: str, cwd: Path, stdin: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 120) -> Result:
    """Run the real `git handoff` executable, as a user would."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run(["git", "handoff", *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          env=full_env, timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def state_head(path: Path) -> str | None:
    proc = subprocess.run(["git", "rev-parse", "-q", "--verify", "refs/harness/state"], cwd=path,
                          capture_output=True, text=True)
    return proc.stdout.strip() or None
