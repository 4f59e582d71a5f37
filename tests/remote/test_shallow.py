# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""A clone that joins one commit deep (handoff.join = shallow) against real bare remotes
(a path, and git daemon on 127.0.0.1): it claims, syncs and converges with full clones;
a merge base below its cut is fetched before it merges (the same tree as a full clone);
`log` and `trust` fetch the history they read; a hostile ref is quarantined as in any
sync and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from bench.bench_join import _grow
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.identity import clone_id
from tests.support.remotes import Clones, clones, ok, remote_url  # noqa: F401
from tests.support.repo import git, run, state_head


def _joiner(clones: Callable[[str], Path], name: str, mode: str = "shallow") -> Path:
    """A new machine: the project cloned over git's transport (a local clone would copy
    every object), handoff.join = `mode`."""
    assert isinstance(clones, Clones)  # the fixture's: it knows the clones it made
    first = clones.made[0]
    url = git("config", "remote.origin.url", cwd=first)
    where = first.parent / name
    git("clone", "-q", "--no-local", url, str(where), cwd=first.parent)
    git("config", "handoff.join", mode, cwd=where)
    return where


def _tree(path: Path) -> str:
    return git("rev-parse", "refs/harness/state^{tree}", cwd=path)


def _commits(path: Path) -> int:
    return int(git("rev-list", "--count", "refs/harness/state", cwd=path))


def _seed(clones: Callable[[str], Path], transactions: int) -> Path:
    a = clones("a")
    ok("init", "--mode", "concurrent", cwd=a)
    for n in range(5):
        ok("add", f"task {n}", "--id", f"t{n:05d}", "--check", "true", cwd=a)
    _grow(a, 5, transactions)
    ok("sync", cwd=a)
    return a


def test_a_shallow_join_claims_syncs_and_converges_with_full_clones(clones: Callable[[str], Path]) -> None:
    a = _seed(clones, 80)
    b = clones("b")
    ok("sync", cwd=b)
    ok("add", "from b", "--id", "b1", cwd=b)
    ok("sync", cwd=b)
    ok("add", "from a", "--id", "a1", cwd=a)  # a and b diverge: two heads on the remote
    git("push", "-q", "origin", f"refs/harness/state:refs/harness/clones/{clone_id(Repo.discover(a))}/state", cwd=a)
    c = _joiner(clones, "c")
    got = ok("sync", "--json", cwd=c)
    assert got["action"] in ("adopted", "merged"), got
    assert (c / ".git" / "shallow").exists()
    assert _commits(c) < 40 < _commits(b)
    claimed = ok("claim", "--remote", "origin", "--json", cwd=c)
    assert claimed["id"] in {"t00000", "t00001", "t00002", "t00003", "t00004", "a1", "b1"} or claimed, claimed
    ok("add", "from c", "--id", "c1", cwd=c)
    ok("sync", cwd=c)
    for where in (a, b, c, a, b):
        ok("sync", cwd=where)
    assert _tree(a) == _tree(b) == _tree(c)
    listed = {t["id"]: t for t in json.loads(run("list", "--json", cwd=a).out)}
    assert {"a1", "b1", "c1"} <= set(listed)
    assert sum(1 for t in listed.values() if t["status"] == "in_progress") == 1


def test_a_merge_base_below_the_cut_is_fetched_before_merging(clones: Callable[[str], Path]) -> None:
    """b's head and a's meet 101 commits below a's head: one commit deep, the shallow
    clone would see no common ancestor and merge two ways; it deepens until the base is
    there and merges to the tree a full clone makes, without the history below."""
    a = _seed(clones, 300)
    b = clones("b")
    ok("sync", cwd=b)
    _grow(a, 5, 100)
    ok("sync", cwd=a)
    ok("add", "from b", "--id", "b1", cwd=b)  # published without a fetch: b never saw a's 100
    git("push", "-q", "origin", f"refs/harness/state:refs/harness/clones/{clone_id(Repo.discover(b))}/state", cwd=b)
    full = _joiner(clones, "full", "full")
    part = _joiner(clones, "part")
    ok("sync", cwd=full)
    ok("sync", cwd=part)
    assert _tree(part) == _tree(full)
    assert (part / ".git" / "shallow").exists()
    assert _commits(part) < _commits(full)
    listed = {t["id"] for t in json.loads(run("list", "--json", cwd=part).out)}
    assert "b1" in listed


def test_log_and_trust_fetch_the_history_below_the_cut(clones: Callable[[str], Path]) -> None:
    a = _seed(clones, 60)
    full = _joiner(clones, "full", "full")
    part = _joiner(clones, "part")
    ok("sync", cwd=full)
    ok("sync", cwd=part)
    assert (part / ".git" / "shallow").exists()
    trust_full = json.loads(run("trust", "--json", cwd=full).out)
    trust_part = json.loads(run("trust", "--json", cwd=part).out)
    assert trust_part == trust_full and trust_full, trust_part
    assert not (part / ".git" / "shallow").exists()
    log_full = run("log", cwd=full).out
    assert "git handoff initialized" in log_full
    assert run("log", cwd=part).out == log_full
    assert _commits(part) == _commits(a)


def test_a_shallow_join_log_fetches_its_history(clones: Callable[[str], Path]) -> None:
    a = _seed(clones, 60)
    part = _joiner(clones, "part")
    ok("sync", cwd=part)
    assert (part / ".git" / "shallow").exists()
    res = run("log", cwd=part)
    assert res.rc == 0, res.err
    assert "git handoff initialized" in res.out and "revision 0\n" in res.out + "\n"
    assert _commits(part) == _commits(a)


def test_a_hostile_state_ref_is_quarantined_in_a_shallow_join(clones: Callable[[str], Path]) -> None:
    a = _seed(clones, 40)
    repo = Repo.discover(a)
    head = state_head(a)
    assert head is not None
    tree = repo.update_tree(repo.commit_tree(head), {"tasks/0/0/evil.json": repo.write_blob(b"{not json")})
    evil = repo.create_commit(tree, [head], "evil\n")
    git("push", "-q", "origin", f"{evil}:refs/harness/clones/0123456789abcdef/state", cwd=a)
    part = _joiner(clones, "part")
    res = run("sync", "--json", cwd=part)
    assert res.rc == 0, res.err
    held = [item["ref"] for item in json.loads(res.out)["quarantined"]]
    assert held == ["refs/harness/clones/0123456789abcdef/state"]
    assert _tree(part) == _tree(a)
    assert "0123456789abcdef" not in git("for-each-ref", "refs/remotes/", cwd=part)
