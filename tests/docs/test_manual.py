"""The manual: one source (docs/git-handoff.md) rendered to man/git-handoff.1 by
man/render.py, installed where man finds it, shown by `git help handoff`."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "DISCUSSION", "EXAMPLES", "EXIT STATUS", "FILES",
            "SEE ALSO"]


def renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("man_render", ROOT / "man" / "render.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_what_the_source_renders_to() -> None:
    render = renderer()
    page = render.render((ROOT / "docs" / "git-handoff.md").read_text(), render.version())
    assert (ROOT / "man" / "git-handoff.1").read_text() == page, \
        "man/git-handoff.1 is stale: run python man/render.py and commit it"


def test_the_page_has_its_sections_in_order() -> None:
    page = (ROOT / "man" / "git-handoff.1").read_text()
    found = [line[4:].strip('"') for line in page.splitlines() if line.startswith(".SH ")]
    assert [s for s in found if s in SECTIONS] == SECTIONS, found


def test_every_command_is_in_the_manual() -> None:
    from git_handoff.cli import COMMANDS

    source = (ROOT / "docs" / "git-handoff.md").read_text()
    commands = source.split("\n## COMMANDS\n", 1)[1].split("\n## ", 1)[0]
    missing = [name for name in COMMANDS if not re.search(rf"^\s*- `{re.escape(name)}[ `|]", commands, re.M)
               and f", `{name} " not in commands and f", `{name}`" not in commands]
    assert missing == []


def test_the_renderer_refuses_what_it_does_not_know() -> None:
    render = renderer()
    with pytest.raises(ValueError, match="headings"):
        render.render("# t\n\n#### too deep\n", "1")
    with pytest.raises(ValueError, match="not closed"):
        render.render("# t\n\n```\ncode\n", "1")
    page = render.render("# t\n\n## name\n\nA `--flag` and **bold**, *it*, [a](b.md), ≥\n\n- one\n  - two\n", "9")
    assert '.TH GIT-HANDOFF 1 "" "git-handoff 9"' in page and ".SH NAME" in page
    assert "A \\fB\\-\\-flag\\fR and \\fBbold\\fR, \\fIit\\fR, a, \\[u2265]" in page
    assert page.index(".IP \\(bu 2\none") < page.index(".RS 2\n.IP \\(bu 2\ntwo")


def _man_available() -> None:
    if shutil.which("man") is None:
        pytest.skip("man is not installed (.ci/run installs man-db)")


def _git_help(path: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, "HOME": str(home), "MANPAGER": "cat", "PAGER": "cat", "GIT_PAGER": "cat",
           "LANG": "C.UTF-8", "MANWIDTH": "100", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "help", "handoff"], capture_output=True, text=True, env=env, timeout=60)


def test_git_help_shows_the_page_from_where_pip_installs_it(tmp_path: Path) -> None:
    """pip puts the console script in <prefix>/bin and the data files named in
    pyproject.toml under <prefix>; man-db looks in ../share/man of each PATH directory."""
    _man_available()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = pyproject["tool"]["setuptools"]["data-files"]
    [(destination, sources)] = [(d, s) for d, s in data.items() if "man/git-handoff.1" in s]
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    script = prefix / "bin" / "git-handoff"
    script.write_text(f"#!{sys.executable}\nfrom git_handoff.cli import main\nmain()\n")
    script.chmod(0o755)
    git_dir = str(Path(shutil.which("git") or "/usr/bin/git").parent)
    path = f"{prefix / 'bin'}:{git_dir}:/usr/bin:/bin"

    before = _git_help(path, tmp_path)
    assert before.returncode != 0 and "git-handoff" in before.stderr  # no page yet: the check can fail

    (prefix / destination).mkdir(parents=True)
    for source in sources:
        shutil.copy(ROOT / source, prefix / destination)
    shown = _git_help(path, tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert re.search(r"^GIT-HANDOFF\(1\)", text, re.M)
    for section in SECTIONS:
        assert re.search(rf"^{section}$", text, re.M), section
    assert "git handoff claim" in text or "claim [ID]" in text


def test_git_help_shows_the_installed_page() -> None:
    """After the README's non-editable `pip install .`, in this interpreter's prefix."""
    _man_available()
    installed = Path(sys.prefix) / "share" / "man" / "man1" / "git-handoff.1"
    if not installed.exists():
        pytest.skip("git-handoff is not installed in this interpreter's prefix (an editable install has no data files)")
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    shown = _git_help(path, Path.home())
    assert shown.returncode == 0 and re.search(r"^EXAMPLES$", shown.stdout, re.M), shown.stderr
