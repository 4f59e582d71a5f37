"""A clone whose finished tasks' work is in each place `status` and the dashboard show
(core/selection.work_state), reached through real commands: `done`, `sync`, `integrate`."""

from __future__ import annotations

from pathlib import Path

from tests.support import secret_corpus
from tests.support.remotes import Clones, ok
from tests.support.repo import git, run


def commit_file(where: Path, name: str, text: str) -> None:
    (where / name).write_text(text)
    git("add", name, cwd=where)
    git("commit", "-q", "-m", f"write {name}", cwd=where)


def remote_tip(where: Path, branch: str = "main") -> str:
    return git("ls-remote", "origin", f"refs/heads/{branch}", cwd=where).split()[0]


def four_ways(clones: Clones) -> tuple[Path, dict[str, str]]:
    """Clone b with X landed (by clone a), Y sent back (a conflict with X), W published and
    not integrated, C withheld (a token in its commit); P never started."""
    a = clones("a")
    ok("init", cwd=a)
    ok("add", "x", "--id", "X", "--check", "test -s shared.txt", cwd=a)
    ok("add", "y", "--id", "Y", "--check", "test -s shared.txt", cwd=a)
    ok("add", "w", "--id", "W", "--check", "test -s w.txt", cwd=a)
    ok("add", "config", "--id", "C", "--check", "test -s settings.py", cwd=a)
    ok("add", "plain", "--id", "P", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    ok("trust", "--all", cwd=b)
    ok("claim", "X", cwd=a)
    ok("claim", "Y", cwd=b)
    commit_file(a, "shared.txt", "from x\n")
    commit_file(b, "shared.txt", "from y\n")
    ok("done", "X", cwd=a)
    ok("done", "Y", cwd=b)
    ok("trust", "--all", cwd=a)
    assert run("integrate", cwd=a).rc == 0
    landed = remote_tip(a)
    assert run("integrate", cwd=b).rc == 1  # Y conflicts with X: sent back
    ok("claim", "W", cwd=b)  # leaves Y's refused work for the target's tip
    commit_file(b, "w.txt", "w\n")
    ok("done", "W", cwd=b)
    ok("claim", "C", cwd=b)
    commit_file(b, "settings.py", f"TOKEN = '{secret_corpus.SECRETS['github-token']}'\n")
    assert run("done", "C", cwd=b).rc == 0
    return b, {"landed": landed}
