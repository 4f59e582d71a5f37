"""plugin_file: a plugin file of ours written whole from its template, a user's file of the
same name refused unchanged, removal only of ours (its folder with it when left empty)."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.agent_cli import plugin_file
from git_handoff.agent_cli.templates import template_text
from git_handoff.core.errors import UsageError

TEMPLATE = "opencode-plugin.js"
EVENTS = ["a", "b"]


def test_install_writes_the_template_once_and_status_follows(tmp_path: Path) -> None:
    path = tmp_path / ".opencode" / "plugins" / "git-handoff.js"
    assert plugin_file.present(path, TEMPLATE, EVENTS) == {"a": False, "b": False}
    assert plugin_file.install(path, TEMPLATE, EVENTS) == EVENTS
    assert path.read_text() == template_text(TEMPLATE) and plugin_file.ours(path)
    assert plugin_file.present(path, TEMPLATE, EVENTS) == {"a": True, "b": True}
    assert plugin_file.install(path, TEMPLATE, EVENTS) == []  # as it should be: not rewritten


def test_an_older_plugin_of_ours_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "git-handoff.js"
    path.write_text("// git-handoff plugin of another version\n")
    assert not any(plugin_file.present(path, TEMPLATE, EVENTS).values())
    assert plugin_file.install(path, TEMPLATE, EVENTS) == EVENTS
    assert path.read_text() == template_text(TEMPLATE)


@pytest.mark.parametrize("first", ["export const Mine = async () => ({})", "// my git-handoff helper",
                                   "/* git-handoff */", "//git-handoff tweaks"])
def test_a_users_file_is_refused_and_never_removed(tmp_path: Path, first: str) -> None:
    """Only a file whose first line starts as ours do is ours: one that merely names git-handoff is the user's."""
    path = tmp_path / "git-handoff.js"
    path.write_text(f"{first}\nexport const Mine = async () => ({{}})\n")
    before = path.read_text()
    with pytest.raises(UsageError, match="is not git handoff's plugin"):
        plugin_file.install(path, TEMPLATE, EVENTS)
    assert plugin_file.uninstall(path, EVENTS) == []
    assert path.read_text() == before


def test_uninstall_removes_ours_and_its_folder_only_when_empty(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    path = plugins / "git-handoff.js"
    plugin_file.install(path, TEMPLATE, EVENTS)
    (plugins / "mine.js").write_text("// mine\n")
    assert plugin_file.uninstall(path, EVENTS) == EVENTS
    assert not path.exists() and (plugins / "mine.js").exists()
    plugin_file.install(path, TEMPLATE, EVENTS)
    (plugins / "mine.js").unlink()
    assert plugin_file.uninstall(path, EVENTS) == EVENTS and not plugins.exists()
    assert plugin_file.uninstall(path, EVENTS) == []  # nothing there: nothing done
