"""Hermetic test setup (tests/support/env.py) for every test, and the `repo` fixture.

This one conftest, at the top of tests/, reaches every test in every folder below it.
Helpers are not imported from here: they live in the shared testing package
tests/support/ (tests and bench both use it), imported as `from tests.support.… import`.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support import programs, speed
from tests.support.env import make_hermetic
from tests.support.repo import make_repo
from tests.support.templates import Templates


def pytest_configure(config: pytest.Config) -> None:
    # before the test modules are imported: their @settings(max_examples=examples(n))
    # read which of the two speeds this run is (tests/support/speed.py)
    speed.configure(config.getoption("markexpr", "") or "")
    keep_bytecode_outside_the_tree(config.rootpath / ".pytest_cache" / "pycache")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The programs the suite cannot do without (tests/support/programs.py): git, and the
    package's own `git-handoff`, whose directory goes first on PATH when it is found beside
    this interpreter (a venv not activated); missing, the session stops saying what to do."""
    problems = programs.session_problems(os.environ)
    if problems:
        raise pytest.UsageError("\n".join(problems))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Which `git-handoff` the session ran, and the programs missing whose tests skipped."""
    terminalreporter.write_line(f"git-handoff: {shutil.which('git-handoff')}")
    missing = programs.missing_report()
    if missing:
        terminalreporter.write_line(f"programs missing here (their tests skip): {'; '.join(missing)}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """@pytest.mark.needs("ssh-keygen"): skipped where the program is missing, saying how to
    install it (-rs in addopts prints every skip with its reason)."""
    for item in items:
        for mark in item.iter_markers("needs"):
            why = next(filter(None, map(programs.missing, mark.args)), None)
            if why is not None:
                item.add_marker(pytest.mark.skip(reason=why))


def keep_bytecode_outside_the_tree(prefix: Path) -> None:
    """Under PYTHONDONTWRITEBYTECODE, cache bytecode under `prefix` instead of not at all.

    The variable keeps `__pycache__` directories out of the source tree; without any cache,
    though, every `git handoff` process a test starts compiles the package again and every
    test process rewrites every test module's asserts again. `PYTHONPYCACHEPREFIX` keeps the
    tree just as clean (the prefix is inside pytest's own, ignored, cache directory). This
    process and the processes it starts (xdist workers, `git handoff`) all use it."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    prefix.mkdir(parents=True, exist_ok=True)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    sys.pycache_prefix = str(prefix)
    sys.dont_write_bytecode = False


# HANDOFF_COMMAND_SERVER=1 given to pytest runs every `git handoff` process a test starts
# through the command server (docs/command-server.md): the suite's second way, which
# .ci/run takes for the hooks and CLI contract tests. Without it a server still starts
# wherever a test turns it on, `hooks install --agent NAME` included (ops/hook_server.py).
# Either way each repository's server exits 5 s after its last command (the variable
# travels to the hooks the real agent CLIs run: tests/support/claude_cli.py and
# agent_clis.py keep it), so none outlives its test by more.
COMMAND_SERVER = os.environ.get("HANDOFF_COMMAND_SERVER", "")
SERVER_IDLE = "5"


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    make_hermetic(home, monkeypatch.setenv, lambda var: monkeypatch.delenv(var, raising=False))
    if COMMAND_SERVER:
        monkeypatch.setenv("HANDOFF_COMMAND_SERVER", COMMAND_SERVER)
    monkeypatch.setenv("HANDOFF_COMMAND_SERVER_IDLE", SERVER_IDLE)
    # every record a transaction writes must pass the parser other clones read it with
    # (git_handoff.state.store._check_writes): the whole suite checks every writer
    monkeypatch.setenv("HANDOFF_CHECK_WRITES", "1")


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    """Set-ups built once per test process, copied per test (tests/support/templates.py)."""
    return Templates(tmp_path_factory.mktemp("templates"))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: Templates) -> Path:
    """A fresh git repository with one commit (a copy of the one `make_repo` made for the
    first test of this process); the current directory."""
    path = templates.copy("repo", lambda where: make_repo(where / "repo"), tmp_path) / "repo"
    monkeypatch.chdir(path)
    return path
