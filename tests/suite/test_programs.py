"""The session-start check of the programs the suite runs (tests/support/programs.py,
tests/conftest.py): git-handoff found beside the interpreter of a venv not activated, one
sentence where it is nowhere, and a skip naming the package for an optional program."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import programs
from tests.support.cmdserver import another_interpreter, console_script

ROOT = Path(__file__).resolve().parents[2]


def _session(python: Path, path: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest started by `python` (a venv's, not activated: PATH without its bin/)."""
    env = {"PATH": path, "HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"}
    return subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _only_git(tmp_path: Path) -> str:
    """A PATH of one directory holding git alone (a link to this machine's)."""
    where = tmp_path / "only-git"
    where.mkdir()
    (where / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    return str(where)


def test_a_venv_not_activated_runs_its_own_git_handoff_and_without_one_the_session_says_what_to_do(
        tmp_path: Path) -> None:
    python = another_interpreter(tmp_path / "venv", packages=True)
    path = _only_git(tmp_path)
    probe = [f"{ROOT}/tests/suite/test_speed.py", "--collect-only"]
    got = _session(python, path, tmp_path, *probe)
    assert got.returncode == pytest.ExitCode.USAGE_ERROR, got.stdout + got.stderr
    assert got.stderr.strip() == (
        f"ERROR: git-handoff, this package's own program, is neither on PATH nor beside {python}: install the "
        f"package into this interpreter (`{python} -m pip install -e '.[test]'`; the tests find the git-handoff it "
        f"writes to {python.parent}) or put the directory of a git-handoff on PATH")
    console_script(python.parent)  # as pip writes it into the venv
    got = _session(python, path, tmp_path, *probe)
    assert got.returncode == 0, got.stdout + got.stderr
    assert f"git-handoff: {python.parent / 'git-handoff'}\n" in got.stdout


def test_the_script_directory_goes_first_on_path_once(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    console_script(bin_dir)
    environ = {"PATH": f"/usr/bin{os.pathsep}{bin_dir}{os.pathsep}/bin"}
    assert programs.put_console_script_on_path(environ, [tmp_path / "nothing", bin_dir]) is None
    assert environ["PATH"] == f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"


def test_a_git_handoff_already_on_path_is_kept(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    console_script(elsewhere)
    environ = {"PATH": f"/usr/bin{os.pathsep}{elsewhere}"}
    assert programs.put_console_script_on_path(environ, [tmp_path / "venv" / "bin"]) is None
    assert environ["PATH"] == f"/usr/bin{os.pathsep}{elsewhere}"
    environ = {"PATH": "/usr/bin"}
    assert "is neither on PATH nor beside" in (programs.put_console_script_on_path(environ, []) or "")
    assert environ["PATH"] == "/usr/bin"


def test_git_missing_or_too_old_stops_the_session(tmp_path: Path) -> None:
    assert programs.git_problem({"PATH": str(tmp_path)}) == \
        "git is not on PATH: install git >= 2.30 (`apt-get install git`)"
    old = tmp_path / "git"
    old.write_text("#!/bin/sh\necho git version 2.29.9\n")
    old.chmod(0o755)
    assert programs.git_problem({"PATH": str(tmp_path)}) == f"{old} is git version 2.29.9: the suite needs git >= 2.30"
    assert programs.git_problem(os.environ) is None


def test_a_missing_program_skips_its_tests_with_the_package_that_installs_it(tmp_path: Path) -> None:
    """A test marked `needs` for a program PATH lacks is skipped, its reason printed (-rs in
    addopts), git-handoff found beside this interpreter."""
    test = "tests/ops/test_open_state.py::test_a_command_keeps_the_journal_of_a_fail_not_recorded_yet"
    got = _session(Path(sys.executable), _only_git(tmp_path), tmp_path, test)
    assert got.returncode == 0, got.stdout + got.stderr
    line = next(line for line in got.stdout.splitlines() if line.startswith("SKIPPED"))
    assert re.fullmatch(r"SKIPPED \[1\] tests/ops/test_open_state\.py:\d+: ssh-keygen is not installed "
                        r"\(`apt-get install openssh-client`; \.ci/run installs it\)", line), line
