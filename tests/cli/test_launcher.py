"""`git handoff launcher [FILE]`: a program of its own that runs `git handoff ARGS` through
the command server's fast client, run as a script or a loop runs it (a real shell, real
processes, a real server); refusals leave every file as it was."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from git_handoff import __version__, cmdclient
from git_handoff.cli import launcher
from tests.support.cmdserver import (
    client_env,
    console_script,
    log_lines,
    run_cmd,
    served,
    stop_servers,
    wait_until_serving,
)
from tests.support.repo import git, run

pytestmark = pytest.mark.slow


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    path = tmp_path / "bin"
    console_script(path)
    return path


@pytest.fixture
def project(repo: Path) -> Iterator[Path]:
    assert run("init").rc == 0
    for n in (1, 2):
        assert run("add", f"Task {n}", "--id", f"t{n}", "--check", "true").rc == 0
    try:
        yield repo
    finally:
        stop_servers(repo)


def test_the_launcher_is_served_by_the_fast_client_and_answers_as_git_handoff(project: Path, bin_dir: Path,
                                                                             tmp_path: Path) -> None:
    env = client_env(bin_dir, server="1")
    target = tmp_path / "handoff"
    wrote = run_cmd(["git", "handoff", "launcher", str(target), "--json"], project, env)
    assert wrote.returncode == 0, wrote.stderr
    shown = json.loads(wrote.stdout)
    assert shown["launcher"] == str(target) and shown["script"] == target.read_text() == launcher.script()
    assert shown["python"] == cmdclient.fast_command([])[0] and shown["package"] == cmdclient.PACKAGE_DIR
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    plain = client_env(bin_dir, server="0")
    want = run_cmd(["git", "handoff", "next", "--json"], project, plain)
    first = run_cmd([str(target), "next", "--json"], project, env)  # no server yet: in full, starting one
    assert (first.returncode, first.stdout, first.stderr) == (want.returncode, want.stdout, want.stderr)
    wait_until_serving(project)
    assert not served(project)
    for args in (["next", "--json"], ["show", "nope"], ["claim", "t1", "--worker", "w", "--json"]):
        got = run_cmd([str(target), *args], project, env)
        assert got.returncode == (2 if args[1] == "nope" else 0), got.stderr
    assert served(project) == ["next --json", "show nope", "claim t1"], log_lines(project)
    assert json.loads(run_cmd(["git", "handoff", "show", "t1", "--json"], project, plain).stdout)["claimed_by"] == "w"
    # a command that is never served (a long-running one's kind) runs in full, as git handoff runs it
    got = run_cmd([str(target), "launcher"], project, env)
    assert (got.returncode, got.stdout) == (0, launcher.script())


def test_the_launcher_without_a_server_or_its_python_runs_git_handoff(project: Path, bin_dir: Path,
                                                                     tmp_path: Path) -> None:
    env = client_env(bin_dir, server="0")
    target = tmp_path / "handoff"
    assert run_cmd(["git", "handoff", "launcher", str(target)], project, env).returncode == 0
    want = run_cmd(["git", "handoff", "status"], project, env)
    got = run_cmd([str(target), "status"], project, env)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
    python = cmdclient.fast_command([])[0]
    gone = tmp_path / "gone"
    gone.write_text(target.read_text().replace(python, "/nonexistent/python"))
    gone.chmod(0o755)
    got = run_cmd([str(gone), "status"], project, env)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
    got = run_cmd([str(gone), "nope"], project, env)  # the plain program's own answer and exit code
    assert got.returncode == 2 and "No such command 'nope'" in got.stderr


def test_without_file_it_prints_the_launcher_and_writes_nothing(project: Path, bin_dir: Path) -> None:
    env = client_env(bin_dir, server="0")
    before = sorted(os.listdir(project))
    got = run_cmd(["git", "handoff", "launcher"], project, env)
    assert (got.returncode, got.stdout) == (0, launcher.script())
    assert got.stdout.startswith("#!/bin/sh\n" + launcher.MARK)
    assert json.loads(run_cmd(["git", "handoff", "launcher", "--json"], project, env).stdout)["launcher"] is None
    assert sorted(os.listdir(project)) == before


def _listing(where: Path) -> dict[str, object]:
    """What is in `where`, each entry by its kind: a link by where it points, a regular
    file by its bytes, anything else (a FIFO) by its mode -- never opened."""
    got: dict[str, object] = {}
    for p in where.iterdir():
        st = p.lstat()
        got[p.name] = (os.readlink(p) if stat.S_ISLNK(st.st_mode) else p.read_bytes() if stat.S_ISREG(st.st_mode)
                       else stat.S_IFMT(st.st_mode))
    return got


@pytest.mark.parametrize("case", ["named git-handoff", "a file of another", "a directory", "no directory",
                                  "a FIFO", "a link to a launcher", "a dangling link", "a newline in the name"])
def test_a_refused_file_gets_one_line_exit_2_and_is_left_as_it_was(project: Path, bin_dir: Path, tmp_path: Path,
                                                                 case: str) -> None:
    env = client_env(bin_dir, server="0")
    where = tmp_path / "out"
    where.mkdir()
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = {"named git-handoff": where / "git-handoff", "a file of another": where / "mine",
              "a directory": where, "no directory": where / "absent" / "handoff", "a FIFO": where / "fifo",
              "a link to a launcher": where / "handoff", "a dangling link": where / "handoff",
              "a newline in the name": where / "absent\nx" / "handoff"}[case]
    if case == "a file of another":
        target.write_text("#!/bin/sh\necho my own script\n")
    elif case == "a FIFO":
        os.mkfifo(target)  # reading it to tell a launcher would wait for a writer for ever
    elif case == "a link to a launcher":
        # a dotfiles checkout's launcher linked into bin: replacing the link would leave the
        # one the link names stale, and writing through it is not what FILE said
        (dotfiles / "handoff").write_text("#!/bin/sh\n" + launcher.MARK + " (git handoff 0.0.1)\nexit 9\n")
        target.symlink_to(dotfiles / "handoff")
    elif case == "a dangling link":
        target.symlink_to(dotfiles / "gone")
    before, kept = _listing(where), _listing(dotfiles)
    got = run_cmd(["git", "handoff", "launcher", str(target)], project, env, timeout=30)
    assert got.returncode == 2 and got.stdout == ""
    assert len(got.stderr.strip().splitlines()) == 1 and got.stderr.startswith("error: "), got.stderr
    assert _listing(where) == before and _listing(dotfiles) == kept
    if case == "a newline in the name":
        assert got.stderr == f"error: no directory {where}/absent\\nx\n"  # the whole name, escaped
    if case in ("a link to a launcher", "a dangling link"):
        assert "symbolic link" in got.stderr and "--force" in got.stderr


def test_with_force_a_link_is_replaced_by_the_launcher_and_what_it_named_is_untouched(
        project: Path, bin_dir: Path, tmp_path: Path) -> None:
    env = client_env(bin_dir, server="0")
    mine = tmp_path / "mine"
    mine.write_text("#!/bin/sh\n# mine\n")
    target = tmp_path / "handoff"
    target.symlink_to(mine)
    assert run_cmd(["git", "handoff", "launcher", str(target), "--force"], project, env).returncode == 0
    assert not target.is_symlink() and target.read_text() == launcher.script()
    assert mine.read_text() == "#!/bin/sh\n# mine\n"


def test_its_own_launcher_is_replaced_and_another_file_only_with_force(project: Path, bin_dir: Path,
                                                                       tmp_path: Path) -> None:
    env = client_env(bin_dir, server="0")
    target = tmp_path / "handoff"
    target.write_text("#!/bin/sh\n" + launcher.MARK + " (git handoff 0.0.1): an older one\nexit 9\n")
    assert run_cmd(["git", "handoff", "launcher", str(target)], project, env).returncode == 0
    assert target.read_text() == launcher.script()
    other = tmp_path / "other"
    other.write_text("#!/bin/sh\n# mine\n")
    assert run_cmd(["git", "handoff", "launcher", str(other)], project, env).returncode == 2
    assert run_cmd(["git", "handoff", "launcher", str(other), "--force"], project, env).returncode == 0
    assert other.read_text() == launcher.script()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_git_config_turns_the_launcher_served(project: Path, bin_dir: Path, tmp_path: Path) -> None:
    """As a fleet machine is set up: the config on, no variable; the launcher's commands
    go to the server the first one started."""
    git("config", "handoff.commandServer", "true", cwd=project)
    env = client_env(bin_dir, server=None)
    target = tmp_path / "handoff"
    assert run_cmd(["git", "handoff", "launcher", str(target)], project, env).returncode == 0
    assert run_cmd([str(target), "status"], project, env).returncode == 0
    wait_until_serving(project)
    assert run_cmd([str(target), "status"], project, env).returncode == 0
    assert served(project) == ["status"], log_lines(project)


def test_the_launcher_runs_the_package_it_names_even_where_another_is_installed(project: Path, bin_dir: Path,
                                                                                tmp_path: Path) -> None:
    """Written from a checkout (`python -m git_handoff` in it) while another copy is the
    installed one: every command the server does not take runs the checkout's, as the
    launcher says (the full program it becomes was `python -m git_handoff`, which found
    the installed copy)."""
    src = tmp_path / "src"
    shutil.copytree(Path(cmdclient.PACKAGE_DIR), src / "git_handoff", ignore=shutil.ignore_patterns("__pycache__"))
    init = src / "git_handoff" / "__init__.py"
    init.write_text(init.read_text().replace(f'__version__ = "{__version__}"', '__version__ = "9.9-checkout"'))
    env = client_env(bin_dir, server="0")  # PYTHONPATH: the package under test, the "installed" one
    target = tmp_path / "handoff"
    wrote = run_cmd([sys.executable, "-m", "git_handoff", "launcher", str(target)], src, env)
    assert wrote.returncode == 0, wrote.stderr
    assert str(src / "git_handoff") in target.read_text()
    for args in (["--version"], ["status"]):
        got = run_cmd([str(target), *args], project, env)
        assert got.returncode == 0, got.stderr
    assert run_cmd([str(target), "--version"], project, env).stdout == "git handoff, version 9.9-checkout\n"
    assert run_cmd(["git", "handoff", "--version"], project, env).stdout == f"git handoff, version {__version__}\n"
