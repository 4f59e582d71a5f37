"""`git handoff` alone, and shell completion through `git handoff <TAB>` in real bash
(with git's own completion script) and real zsh (with zsh's own `_git`)."""

from __future__ import annotations

import contextlib
import io
import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from git_handoff.cli import main
from tests.support.repo import run, run_exe

GIT_BASH_COMPLETION = Path("/usr/share/bash-completion/completions/git")


def test_bare_command_prints_the_commands_and_the_state(repo: Path) -> None:
    res = run_exe(cwd=repo)
    assert res.rc == 0 and res.err == ""
    assert res.out.startswith("usage: git handoff <command>")
    for name in ("init", "claim", "done", "rm", "rename", "reopen", "serve", "completion", "sync", "relay"):
        assert f"\n   {name} " in res.out, name
    assert "Not initialized here: `git handoff init`" in res.out
    assert run("init").rc == 0 and run("add", "One", "--id", "one").rc == 0
    out = run().out  # the same main, in-process
    assert out.splitlines()[-1].startswith("state: 1 tasks  completed=0 in_progress=0 pending=1")


def test_bare_command_outside_a_repository(tmp_path: Path) -> None:
    res = run_exe(cwd=tmp_path)
    assert res.rc == 0 and "usage: git handoff" in res.out and "not a git repository" in res.out


def test_completion_protocol_answers_commands_options_and_choices(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # in-process: main() reads the protocol's variables as the executable does (the real
    # bash below runs the executable through git's own completion). click writes the
    # answer as bytes, so stdout is a text stream over a byte buffer, as a real one is.
    def ask(words: str, cword: int) -> list[str]:
        raw, err = io.BytesIO(), io.StringIO()
        out = io.TextIOWrapper(raw, encoding="utf-8")
        with monkeypatch.context() as m:
            for name, value in (("COMP_WORDS", words), ("COMP_CWORD", str(cword)),
                                ("_GIT_HANDOFF_COMPLETE", "bash_complete")):
                m.setenv(name, value)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                    pytest.raises(SystemExit) as exited:
                main([])
        out.flush()
        assert exited.value.code in (0, None) and err.getvalue() == "", err.getvalue()
        return [line for line in raw.getvalue().decode().splitlines() if line]

    assert ask("git-handoff cl", 1) == ["plain,claim"]
    assert ask("git-handoff show ", 2) == []  # no state yet: no ids, no error
    assert run("init").rc == 0
    for tid in ("schema", "serve-api", "docs"):
        assert run("add", f"Task {tid}", "--id", tid).rc == 0
    assert ask("git-handoff show s", 2) == ["plain,schema", "plain,serve-api"]
    assert ask("git-handoff rename d", 2) == ["plain,docs"]
    assert ask("git-handoff graph --format ", 3) == ["plain,text", "plain,dot", "plain,mermaid", "plain,svg"]


def test_completion_install_writes_the_script(repo: Path) -> None:
    res = run("completion", "bash", "--install")
    assert res.rc == 0, res.err
    target = Path(os.environ["HOME"]) / ".local/share/bash-completion/completions/git-handoff"
    assert target.read_text() == run("completion", "bash").out and "_git_handoff()" in target.read_text()
    res = run("completion", "zsh", "--install")
    assert res.rc == 0 and (Path(os.environ["HOME"]) / ".zfunc/_git-handoff").read_text().startswith("#compdef")
    assert run("completion", "fish").rc == 2


@pytest.mark.skipif(not GIT_BASH_COMPLETION.exists() or shutil.which("bash") is None,
                    reason="git's bash completion is not installed")
def test_bash_completes_through_git(repo: Path) -> None:
    assert run("init").rc == 0 and run("add", "Schema", "--id", "schema").rc == 0
    script = f"""
source {GIT_BASH_COMPLETION}
eval "$(git handoff completion bash)"
t() {{
    COMP_WORDS=("$@"); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}
    COMPREPLY=()
    if [[ $1 == git ]]; then __git_wrap__git_main; else _git_handoff; fi
    echo "${{COMPREPLY[*]}}"
}}
t git handoff cl
t git handoff reo
t git handoff graph --format ""
t git -C . handoff sh
t git-handoff ren
t git handoff done ""
"""
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], cwd=repo, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["claim", "reopen", "text dot mermaid svg", "show", "renew rename", "schema"]


def _zsh_complete(repo: Path, fpath: Path, lines: list[str]) -> list[str]:
    """Type each line into an interactive zsh, press TAB, and read back the completed line."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a real interactive zsh, no user startup files
        os.chdir(repo)
        os.execvp("zsh", ["zsh", "-f", "-i"])

    def read(seconds: float) -> str:
        out, end = b"", time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    out += os.read(fd, 65536)
                except OSError:
                    break
        return out.decode(errors="replace")

    answers = []
    try:
        os.write(fd, f"PS1='%% '; fpath=({fpath} $fpath); autoload -U compinit; compinit -u -D; bindkey -e\n".encode())
        read(3)
        for line in lines:
            os.write(fd, (line + "\t").encode())
            read(3)
            os.write(fd, b"\x01print -r -- MARK \n")  # to the line's start, then print what TAB made of it
            shown = [x.strip() for x in read(2).splitlines() if x.startswith("MARK ")]
            answers.append(shown[-1][len("MARK "):] if shown else "")
        os.write(fd, b"exit\n")
        read(0.5)
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    return answers


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (.ci/run installs it)")
def test_zsh_completes_through_git(repo: Path, tmp_path: Path) -> None:
    fpath = tmp_path / "zfunc"
    fpath.mkdir()
    (fpath / "_git-handoff").write_text(run("completion", "zsh").out)
    got = _zsh_complete(repo, fpath, ["git handoff cl", "git handoff graph --format m", "git-handoff reo"])
    assert got == ["git handoff claim", "git handoff graph --format mermaid", "git-handoff reopen"]
