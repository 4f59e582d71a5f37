"""`git handoff completion bash|zsh`: shell completion that works through `git handoff`."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import TypedDict

import click

from git_handoff.cli import emit_json, json_option
from git_handoff.core.errors import UsageError


class CompletionScript(TypedDict):
    """`completion SHELL`."""

    shell: str
    script: str

class CompletionInstalled(TypedDict):
    """`completion SHELL --install`."""

    shell: str
    installed: str  # the file written

SCRIPTS = {"bash": "git-handoff.bash", "zsh": "_git-handoff"}


def script(shell: str) -> str:
    return resources.files("git_handoff.completion").joinpath(SCRIPTS[shell]).read_text(encoding="utf-8")


def install_path(shell: str) -> Path:
    home = Path(os.path.expanduser("~"))
    if shell == "bash":
        data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        return data / "bash-completion" / "completions" / "git-handoff"
    return home / ".zfunc" / "_git-handoff"


@click.command("completion")
@click.argument("shell", type=click.Choice(sorted(SCRIPTS)))
@click.option("--install", is_flag=True, help="Write the script where the shell finds it, instead of printing it.")
@json_option
def completion_cmd(shell: str, install: bool, as_json: bool) -> None:
    """Shell completion for `git handoff <TAB>` (and `git-handoff <TAB>`).

    \b
    bash:  git handoff completion bash --install   # ~/.local/share/bash-completion/completions/
           or: eval "$(git handoff completion bash)"   in ~/.bashrc, after git's completion
    zsh:   git handoff completion zsh --install    # ~/.zfunc/_git-handoff
           then in ~/.zshrc, before compinit: fpath=(~/.zfunc $fpath)

    Git's own completion calls `_git_handoff` (bash) or `_git-handoff` (zsh) for
    the `handoff` subcommand, which the script defines; it completes commands,
    options and choices by asking `git handoff` itself.
    """
    text = script(shell)
    if not install:
        if as_json:
            shown: CompletionScript = {"shell": shell, "script": text}
            emit_json(shown)
        else:
            click.echo(text, nl=False)
        return
    target = install_path(shell)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    if as_json:
        installed: CompletionInstalled = {"shell": shell, "installed": str(target)}
        emit_json(installed)
        return
    click.echo(f"Installed {shell} completion in {target}")
    if shell == "zsh":
        click.echo("  make sure ~/.zshrc has `fpath=(~/.zfunc $fpath)` before `compinit`")
    else:
        click.echo("  new shells complete `git handoff <TAB>` (bash-completion loads it on demand)")
