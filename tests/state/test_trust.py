# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""Trust is bound to where a command is used (docs/threat-model.md): the validation or the
cleanup of one task, or the init command, as well as the text."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.support.remotes import clones, ok, remote_url, shared_pair  # noqa: F401
from tests.support.repo import run, state_head


def _listed(repo: Path) -> list[tuple[str, str, str, list[str]]]:
    items = json.loads(run("trust", "--json", cwd=repo).out)
    return [(i["id"], i["kind"], i["command"], [u["place"] for u in i["uses"]]) for i in items]


def test_a_trusted_text_moved_by_a_remote_into_another_task_is_not_run_there(
        clones: Callable[[str], Path], tmp_path: Path) -> None:
    marker = tmp_path / "RAN-AT-B"
    command = f"touch {marker}"
    a, b = shared_pair(clones, ("add", "first", "--id", "ta", "--check", command),
                       ("add", "second", "--id", "tb", "--check", "true"))
    ok("trust", "ta", cwd=b)  # the victim approves the command where it was shown: ta's validation
    assert _listed(b) == [("tb", "validation", "true", ["tb:validation"])]
    ok("trust", "tb", cwd=b)
    # the attacker's clone moves the very same text into tb's validation
    ok("edit", "tb", "--check", command, cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    listed = json.loads(run("trust", "--json", cwd=b).out)
    assert [(i["id"], i["place"], i["command"], i["trusted_at"]) for i in listed] == [
        ("tb", "tb:validation", command, ["ta:validation"])]
    text = run("trust", cwd=b).out
    assert "at tb:validation" in text and "approved at ta:validation, not here" in text
    before = state_head(b)
    res = run("verify", "tb", cwd=b)
    assert res.rc == 2 and "at tb:validation came from another clone" in res.err, res
    ok("claim", "tb", cwd=b)
    claimed = state_head(b)
    res = run("done", "tb", cwd=b)
    assert res.rc == 2 and "not trusted there" in res.err
    assert state_head(b) == claimed != before
    assert not marker.exists()
    # where it was approved, it runs
    assert run("verify", "ta", cwd=b).rc == 0 and marker.exists()
    marker.unlink()
    ok("trust", "tb", cwd=b)
    assert run("done", "tb", cwd=b).rc == 0 and marker.exists()
    assert _listed(b) == []


def test_a_cleanup_trusted_at_one_task_is_not_run_as_another_tasks_cleanup(
        clones: Callable[[str], Path], tmp_path: Path) -> None:
    marker = tmp_path / "CLEANED"
    a, b = shared_pair(clones, ("add", "first", "--id", "ta", "--check", "true", "--cleanup", f"touch {marker}"),
                       ("add", "second", "--id", "tb", "--check", "false"))
    ok("trust", "--all", cwd=b)
    ok("edit", "tb", "--cleanup", f"touch {marker}", cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    assert _listed(b) == [("tb", "cleanup", f"touch {marker}", ["tb:cleanup"])]
    ok("claim", "tb", cwd=b)
    res = run("fail", "tb", "--reason", "no", cwd=b)
    assert res.rc == 2 and "cleanup command" in res.err and "tb:cleanup" in res.err
    assert not marker.exists()


def test_trust_lists_what_is_approved_and_where(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("add", "x", "--id", "t1", "--check", "make test"),
                       ("add", "y", "--id", "t2", "--check", "make test", "--cleanup", "make clean"))
    assert json.loads(run("trust", "--approved", "--json", cwd=b).out) == []
    ok("trust", "--all", cwd=b)
    got = json.loads(run("trust", "--approved", "--json", cwd=b).out)
    assert {e["command"]: e["places"] for e in got} == {"make test": ["t1:validation", "t2:validation"],
                                                       "make clean": ["t2:cleanup"]}
    assert "at t1:validation, t2:validation" in run("trust", "--approved", cwd=b).out
    # created here: trusted at birth, at its own place
    ok("add", "z", "--id", "t3", "--check", "make lint", cwd=b)
    got = json.loads(run("trust", "--approved", "--json", cwd=b).out)
    assert {e["command"]: e["places"] for e in got}["make lint"] == ["t3:validation"]
    bad = run("trust", "--approved", "t1", cwd=b)
    assert bad.rc == 2 and bad.err.startswith("error: --approved lists")


def test_a_rename_here_keeps_the_tasks_approvals(repo: Path) -> None:
    ok("init", cwd=repo)
    ok("add", "x", "--id", "old", "--check", "true", "--cleanup", "true", cwd=repo)
    ok("rename", "old", "new", cwd=repo)
    got = json.loads(run("trust", "--approved", "--json", cwd=repo).out)
    assert got == [{"command": "true", "places": ["new:cleanup", "new:validation"]}]
    assert run("verify", "new", cwd=repo).rc == 0


def test_text_only_approvals_cover_the_places_the_local_state_used_them_at(repo: Path) -> None:
    """A trusted.json written before places were kept is migrated once: each old approval
    covers the places this clone's own state used the text at, and no other."""
    ok("init", cwd=repo)
    ok("add", "x", "--id", "t1", "--check", "true", cwd=repo)
    trusted = repo / ".git" / "handoff" / "trusted.json"
    import hashlib

    legacy = {hashlib.sha256(c.encode()).hexdigest(): {"command": c, "trusted_at": "2026-01-01T00:00:00Z"}
              for c in ("true", "make gone")}
    trusted.write_text(json.dumps(legacy))
    assert run("verify", "t1", cwd=repo).rc == 0
    data = json.loads(trusted.read_text())
    assert data["version"] == 2
    places = {e["command"]: e["places"] for e in data["commands"].values()}
    assert places == {"true": {"t1:validation": "2026-01-01T00:00:00Z"}, "make gone": {}}
    assert "(no place: approved before places were kept)" in run("trust", "--approved", cwd=repo).out


def test_the_places_cache_is_not_believed_when_damaged_or_stale(repo: Path) -> None:
    """is_trusted reads a cache of trusted.json (its commands and places); a damaged cache,
    or one of the file as it was before a change, is read again from the file."""
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state import trust

    assert run("init").rc == 0
    assert run("add", "T1", "--id", "t1", "--check", "true").rc == 0
    handoff = repo / ".git" / "handoff"
    r = Repo.discover(repo)
    assert trust.is_trusted(r, "true", "t1:validation")
    cache = handoff / trust.PLACES_FILE
    good = cache.read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF
    for bad in (bytes(damaged), good[: len(good) // 2], b"", b"not a cache"):
        cache.write_bytes(bad)
        assert trust.is_trusted(r, "true", "t1:validation")
        assert not trust.is_trusted(r, "true", "t2:validation")
        assert cache.read_bytes() == good  # rebuilt from the file
    # the file changes (an approval taken away by hand): the old cache is not believed
    data = json.loads((handoff / trust.TRUST_FILE).read_text())
    for entry in data["commands"].values():
        entry["places"].pop("t1:validation", None)
    (handoff / trust.TRUST_FILE).write_text(json.dumps(data))
    cache.write_bytes(good)
    assert not trust.is_trusted(r, "true", "t1:validation")
    assert run("verify", "t1").rc == 2
