"""The refs of a remote this clone keeps out (git_handoff.state.quarantine): the record
per remote and the lines `status` shows of it."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra.gitrepo import Repo
from git_handoff.state import quarantine
from git_handoff.state.quarantine import Held


def _held(n: int) -> Held:
    return {"ref": f"refs/harness/clones/c{n}/state", "oid": f"{n:040x}", "why": f"clone c{n}: bad tree {n}"}


def test_the_record_of_a_remote_is_written_read_and_removed(repo: Path) -> None:
    r = Repo.discover(repo)
    assert quarantine.read(r, "origin") == {}
    held = {h["ref"]: h for h in (_held(2), _held(1))}
    quarantine.write(r, "origin", held)
    assert quarantine.read(r, "origin") == held
    assert quarantine.read(r, "other") == {}
    quarantine.write(r, "origin", {})
    assert quarantine.read(r, "origin") == {} and not (r.handoff_dir / "quarantine" / "origin.json").exists()


def test_a_damaged_record_reads_as_what_is_whole_in_it(repo: Path) -> None:
    r = Repo.discover(repo)
    folder = r.handoff_dir / quarantine.DIR
    folder.mkdir()
    (folder / "origin.json").write_text('[{"ref": "r", "oid": "o", "why": "w"}, {"ref": 1}, 5]')
    assert quarantine.read(r, "origin") == {"r": {"ref": "r", "oid": "o", "why": "w"}}
    (folder / "origin.json").write_text("{broken")
    assert quarantine.read(r, "origin") == {}


def test_status_lines_show_a_few_and_count_the_rest_escaped(repo: Path) -> None:
    r = Repo.discover(repo)
    assert quarantine.status_lines(r) == []
    held = {h["ref"]: h for h in map(_held, range(7))}
    held["refs/x"] = {"ref": "refs/x", "oid": "0" * 40, "why": "evil\x1b[2J\u202e"}
    quarantine.write(r, "origin", held)
    lines = quarantine.status_lines(r)
    assert lines[0] == "8 ref(s) on origin quarantined (not read; the rest of origin is used):"
    assert len(lines) == 1 + quarantine.SHOWN + 1
    assert lines[-1] == "  ... and 3 more (`git handoff sync --json` lists them)"
    assert quarantine.shown("evil\x1b[2J\u202e") == "evil\\x1b[2J\\u202e"
