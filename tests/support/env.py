"""The hermetic environment every test (and the benchmarks) runs in: a temporary HOME,
no user or system git config, fixed identities and dates, no editor or prompt."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

FIXED_DATE = "2026-07-01T10:00:00+00:00"

FIXED_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_AUTHOR_DATE": FIXED_DATE,
    "GIT_COMMITTER_DATE": FIXED_DATE,
    "GIT_EDITOR": "false",
    "GIT_TERMINAL_PROMPT": "0",
}


def hermetic_env(home: Path) -> dict[str, str]:
    """The variables to set for a hermetic git handoff run with `home` as HOME."""
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), **FIXED_ENV}


def leaked_vars(environ: dict[str, str] | None = None) -> list[str]:
    """Variables of the calling environment that would leak in (GIT_*, HANDOFF_*, the harness
    skill's worker name, and a CI service's markers: Gemini CLI runs headless under CI=true
    or GITHUB_ACTIONS=true, whatever its terminal, so a test of its screens would see none)."""
    return [v for v in (os.environ if environ is None else environ)
            if v.startswith(("GIT_", "HANDOFF_")) or v in CI_MARKERS]


CI_MARKERS = frozenset({"HARNESS_WORKER_ID", "CI", "GITHUB_ACTIONS"})


def make_hermetic(home: Path, setenv: Callable[[str, str], None], delenv: Callable[[str], None]) -> None:
    """Apply the hermetic environment through `setenv`/`delenv` (monkeypatch's, or os.environ's)
    and point pygit2 away from the user's and the system's config."""
    for var in leaked_vars():
        delenv(var)
    for name, value in hermetic_env(home).items():
        setenv(name, value)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    import pygit2

    for level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG, pygit2.enums.ConfigLevel.SYSTEM):
        pygit2.settings.search_path[level] = str(home)
