"""infra/fileio.atomic_write: a reader sees the old file or the new one, never half; the
temporary file beside it is made new, never opened through a link or a file planted
under its name; a failure leaves `path` and the directory as they were."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from git_handoff.infra.fileio import atomic_write


def test_it_writes_text_and_bytes_with_the_mode_asked_for(tmp_path: Path) -> None:
    atomic_write(tmp_path / "a", "text é\n")
    atomic_write(tmp_path / "b", b"\x00bytes", mode=0o755, fsync=True)
    assert (tmp_path / "a").read_text() == "text é\n" and (tmp_path / "b").read_bytes() == b"\x00bytes"
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


@pytest.mark.parametrize("planted", ["a link to another file", "a file"])
def test_a_file_planted_under_the_temporary_name_is_never_written_through(tmp_path: Path, planted: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user of a shared directory guesses the name (the pid was all of it): the
    write fails and neither the file the link names nor the planted file changes."""
    monkeypatch.setattr(os, "urandom", lambda n: b"\x01" * n)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    target = tmp_path / "handoff"
    guess = tmp_path / f".handoff.tmp{os.getpid()}.{'01' * 4}"
    if planted == "a file":
        guess.write_text("theirs\n")
    else:
        guess.symlink_to(victim)
    with pytest.raises(FileExistsError):
        atomic_write(target, "launcher\n", mode=0o755)
    assert victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert not target.exists()
    assert guess.is_symlink() if planted != "a file" else guess.read_text() == "theirs\n"


def test_a_link_at_the_path_is_replaced_not_followed(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.write_text("other\n")
    (tmp_path / "link").symlink_to(other)
    atomic_write(tmp_path / "link", "new\n")
    assert not (tmp_path / "link").is_symlink() and (tmp_path / "link").read_text() == "new\n"
    assert other.read_text() == "other\n"


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "state"
    path.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(path, "half \udcff")  # a lone surrogate: the encoding fails after the file was made
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["state"]
