"""`git handoff hooks versions`: each supported CLI's pinned version (what the suite
proves), the installed one, and whether they differ; and the pins agree everywhere they
are written (the CLI modules, .ci/run, tests/support)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from git_handoff.agent_cli import registry, versions
from tests.support import agent_clis, claude_cli
from tests.support.repo import run

ROOT = Path(__file__).resolve().parents[2]


def _programs(bin_dir: Path, said: dict[str, str]) -> str:
    """Executables printing `said[name]` for --version, on a PATH of their own (and git's)."""
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bin_dir / "git").symlink_to(git)
    for name, text in said.items():
        exe = bin_dir / name
        exe.write_text(f"#!/bin/sh\necho '{text}'\n")
        exe.chmod(0o755)
    return str(bin_dir)


def test_each_clis_version_text_is_read() -> None:
    assert versions.version_in("2.1.332 (Claude Code)") == "2.1.332"
    assert versions.version_in("codex-cli 0.171.0") == "0.171.0"
    assert versions.version_in("GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.") == "1.0.102"
    assert versions.version_in("0.25.0-nightly.20261201") == "0.25.0-nightly.20261201"
    assert versions.version_in("no version here") is None


def test_versions_shows_pinned_installed_and_which_differ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          repo: Path) -> None:
    path = _programs(tmp_path / "bin", {"claude": f"{registry.get('claude').VERSION} (Claude Code)",
                                        "codex": "codex-cli 0.999.0", "qwen": "oops"})
    own = shutil.which("git-handoff")
    assert own is not None
    monkeypatch.setenv("PATH", f"{path}:{Path(own).parent}")  # the fakes, git, and git handoff itself
    found = {one["agent"]: one for one in run("hooks", "versions", "--json").json()}
    assert list(found) == list(registry.CLIS)
    assert found["claude"]["installed"] == found["claude"]["pinned"] and not found["claude"]["differs"]
    assert found["codex"]["installed"] == "0.999.0" and found["codex"]["differs"]
    assert found["codex"]["pinned"] == registry.get("codex").VERSION
    assert found["gemini"]["installed"] is None and not found["gemini"]["differs"]
    assert "not on PATH" in found["gemini"]["problem"]
    assert found["qwen"]["installed"] is None and "printed no version" in found["qwen"]["problem"]
    text = run("hooks", "versions")
    assert text.rc == 0
    assert re.search(r"^codex +Codex CLI +pinned 0\.171\.0 +installed 0\.999\.0 +DIFFERS", text.out, re.M), text.out
    assert re.search(r"^gemini .* not installed$", text.out, re.M), text.out
    checked = run("hooks", "versions", "--check")
    assert checked.rc == 1
    assert checked.err.strip().splitlines() == [
        "error: installed CLIs differ from the versions the suite proves: codex 0.999.0 (pinned 0.171.0)"]


def test_the_pins_agree_with_ci_and_the_test_support() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    line = re.search(r'^AGENT_CLIS="([^"]*)"$', script, re.M)
    assert line is not None
    pinned = {pkg.rsplit("@", 1)[0]: pkg.rsplit("@", 1)[1] for pkg in line.group(1).split()}
    assert re.search(rf"^CLAUDE_CODE_VERSION={re.escape(registry.get('claude').VERSION)}$", script, re.M)
    assert claude_cli.PINNED_VERSION == registry.get("claude").VERSION
    others = {cli.PACKAGE: cli.VERSION for name, cli in registry.CLIS.items() if name != "claude"}
    assert pinned == others
    assert agent_clis.PACKAGES == {
        name: (cli.PACKAGE, cli.VERSION) for name, cli in registry.CLIS.items() if name != "claude"}


def test_the_newest_release_job_runs_test_files_that_exist_for_every_cli() -> None:
    """.ci/agent-clis-latest (docs/agent-clis.md, "Keeping up with the CLIs"): a renamed
    or removed test file would leave it running nothing, and every supported CLI has a
    file of real-CLI tests there."""
    script = (ROOT / ".ci" / "agent-clis-latest").read_text()
    named = re.findall(r"\btests/\S+\.py\b", script)
    assert named and all((ROOT / path).is_file() for path in named), named
    texts = "\n".join((ROOT / path).read_text() for path in named)
    for name in registry.CLIS:
        require = "require_claude" if name == "claude" else f"require_{name}"
        assert require in texts, f"no real-{name} test in .ci/agent-clis-latest's files"
