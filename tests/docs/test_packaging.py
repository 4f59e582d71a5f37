"""The newcomer's path: the README's two commands, the manual, the entry points."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support import programs

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_readme_has_the_two_commands() -> None:
    demo, tests = readme_commands()
    assert "pip install ." in demo and "git handoff demo" in demo
    assert "[test]" in tests and "pytest" in tests


def test_ci_runs_exactly_the_readme_test_command() -> None:
    _, tests = readme_commands()
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines()


def test_ci_installs_the_package_of_every_program_a_test_needs() -> None:
    """A test marked `needs` skips where its program is missing: CI installs each one, so no
    test is skipped in every CI run (tests/support/programs.py)."""
    ci = (ROOT / ".ci" / "run").read_text()
    installed = {pkg for line in re.findall(r"apt-get install -y -qq ([^>\n]+)", ci) for pkg in line.split()}
    assert {pkg for pkg in programs.OPTIONAL.values() if not pkg.startswith("npm:")} - installed == set()
    # the agent CLIs from npm: Claude Code on its own line, the others on AGENT_CLIS
    claude = re.search(r"^CLAUDE_CODE_VERSION=(\S+)$", ci, re.M)
    others = re.search(r'^AGENT_CLIS="([^"]*)"$', ci, re.M)
    assert claude is not None and others is not None
    from_npm = {f"npm:@anthropic-ai/claude-code@{claude.group(1)}", *(f"npm:{pkg}" for pkg in others.group(1).split())}
    assert {pkg for pkg in programs.OPTIONAL.values() if pkg.startswith("npm:")} == from_npm


def test_ci_runs_the_readme_test_command_again_in_a_fresh_activated_venv() -> None:
    _, tests = readme_commands()
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert lines.count(tests) == 2
    second = len(lines) - 1 - lines[::-1].index(tests)
    before = lines[:second]
    assert 'git clone -q . "$fresh/clone"' in before and 'python3 -m venv "$fresh/venv"' in before
    assert before[-4:] == ['cd "$fresh/clone"', "# shellcheck disable=SC1091", '. "$fresh/venv/bin/activate"',
                           "export PYTEST_ADDOPTS='-m \"not slow\"'"]


def test_manual_is_installed_with_the_package() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"share/man/man1" = ["man/git-handoff.1"]' in pyproject
    page = (ROOT / "man" / "git-handoff.1").read_text()
    assert page.startswith(".TH GIT-HANDOFF 1")
    installed = Path(sys.prefix) / "share" / "man" / "man1" / "git-handoff.1"
    if installed.exists():  # present after a non-editable `pip install .`
        assert installed.read_text() == page


def test_the_fast_client_checks_the_dependencies_the_package_declares() -> None:
    """The fast client's full program runs the plain `git handoff` where its interpreter
    cannot find one of cmdclient.REQUIRES: the same names as pyproject's dependencies."""
    from git_handoff import cmdclient

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(cmdclient.REQUIRES) == sorted(re.split(r"[^A-Za-z0-9_.-]", d, maxsplit=1)[0] for d in declared)


def test_module_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "git_handoff", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "Usage:" in proc.stdout


def test_every_readme_command_has_help() -> None:
    from git_handoff.cli import COMMANDS

    text = (ROOT / "README.md").read_text()
    for name in COMMANDS:
        assert f"`{name}" in text or f"{name}|" in text or f"|{name}" in text, name


def test_hook_templates_are_found() -> None:
    from git_handoff.agent_cli.templates import template_text

    assert "hooks install" in template_text("README")


def test_ci_installs_the_claude_code_version_the_tests_pin() -> None:
    from tests.support.claude_cli import PINNED_VERSION

    ci = (ROOT / ".ci" / "run").read_text()
    assert f"CLAUDE_CODE_VERSION={PINNED_VERSION}\n" in ci
    assert '"@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"' in ci
