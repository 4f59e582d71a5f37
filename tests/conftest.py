"""Hermetic test setup (tests/support/env.py) for every test, and the `repo` fixture.

The helpers live in the shared testing package tests/support/ (tests and bench both
use it); they are re-exported here for the tests that import them from conftest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.env import FIXED_DATE, make_hermetic
from tests.support.repo import (
    Result,
    dispatch_record,
    git,
    make_repo,
    run,
    run_exe,
    state_head,
    state_record,
)

__all__ = ["FIXED_DATE", "Result", "git", "make_repo", "run", "run_exe", "state_head", "state_record", "dispatch_record"]


@pytest.fixture(autouse=True)
def hermetic(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    make_hermetic(home, monkeypatch.setenv, lambda var: monkeypatch.delenv(var, raising=False))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh git repository with one commit; the current directory."""
    path = make_repo(tmp_path / "repo")
    monkeypatch.chdir(path)
    return path
