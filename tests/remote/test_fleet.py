# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""The fleet layout on a shared remote: each clone's own state ref, per-task claim refs
moved by compare-and-swap, their pruning and takeover, the one-ref layout of earlier
versions still read (and published when asked), scratch refs swept."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.remotes import clones, ok, published, remote_state, remote_url, task  # noqa: F401
from tests.support.repo import Result, git, run, run_exe, state_head


def remote_refs(path: Path, prefix: str = "refs/harness/") -> dict[str, str]:
    out = git("ls-remote", "origin", prefix + "*", cwd=path)
    return {line.split("\t")[1]: line.split("\t")[0] for line in out.splitlines() if line}


def concurrent_pair(clones: Callable[[str], Path], *ids: str) -> tuple[Path, Path]:
    a = clones("a")
    ok("init", "--mode", "concurrent", cwd=a)
    for tid in ids:
        ok("add", f"task {tid}", "--id", tid, "--check", "true", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    ok("trust", "--all", cwd=b)
    git("config", "handoff.worker", "alice", cwd=a)
    git("config", "handoff.worker", "bob", cwd=b)
    return a, b


def test_each_clone_publishes_its_own_ref_and_all_converge(clones: Callable[[str], Path]) -> None:
    a, b = concurrent_pair(clones, "t1", "t2")
    c = clones("c")
    ok("sync", cwd=c)
    for n, where in enumerate((a, b, c)):
        ok("add", f"from {n}", "--id", f"x{n}", cwd=where)
        ok("sync", cwd=where)
    refs = remote_refs(a)
    assert {published(p) for p in (a, b, c)} <= set(refs)
    assert "refs/harness/state" not in refs
    for _ in range(2):
        for where in (a, b, c):
            ok("sync", cwd=where)
    assert len({state_head(p) for p in (a, b, c)}) == 1
    assert {"x0", "x1", "x2"} <= {t["id"] for t in json.loads(run("list", "--json", cwd=c).out)}
    assert all(remote_state(p) == state_head(a) for p in (a, b, c))


def test_a_sync_merges_every_new_clone_state_in_one_commit(clones: Callable[[str], Path]) -> None:
    """Three clones moved on: a's sync writes one merge whose parents are a's state and
    both others', with a SYNC line for each; merging them one at a time gives the same
    tree (c merges a, then b: no merge in one commit there)."""
    a, b = concurrent_pair(clones, "t1", "t2")
    c = clones("c")
    ok("sync", cwd=c)
    for tid, where in (("xb", b), ("xc", c)):
        ok("add", f"from {tid}", "--id", tid, cwd=where)
        ok("edit", "t1", "--priority", "P1" if where == b else "P2", cwd=where)
        ok("sync", cwd=where)
    ok("add", "from a", "--id", "xa", cwd=a)
    before = state_head(a)
    report = ok("sync", "--json", cwd=a)
    assert report["action"] == "merged" and report["states"] == 3
    merge = state_head(a)
    assert merge is not None
    parents = git("rev-list", "--parents", "-n", "1", merge, cwd=a).split()[1:]
    assert parents[0] == before and set(parents[1:]) == {remote_state(b), remote_state(c)}
    assert git("rev-list", "--count", f"{before}..{merge}", "--not", remote_state(b), remote_state(c),
               cwd=a) == "1"
    message = git("log", "-1", "--format=%B", merge, cwd=a)
    assert message.count("SYNC") >= 2 and "conflict" in message, message
    ids = {t["id"]: t for t in json.loads(run("list", "--json", cwd=a).out)}
    assert {"xa", "xb", "xc", "t1", "t2"} <= set(ids)
    logged = run("log", cwd=a).out
    assert "merged" in logged
    # the others converge on the same tree
    for where in (b, c, a, b, c):
        ok("sync", cwd=where)
    trees = {git("rev-parse", "refs/harness/state^{tree}", cwd=p) for p in (a, b, c)}
    assert len(trees) == 1


def test_a_remote_claim_is_a_claim_ref_pruned_when_done(clones: Callable[[str], Path],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = concurrent_pair(clones, "t1", "t2")
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    got = ok("claim", "t1", "--remote", "origin", "--json", cwd=a)
    assert got["id"] == "t1"
    refs = remote_refs(a)
    # one atomic push: the claim ref and a's own state ref point at the claiming commit
    assert refs["refs/harness/claims/t1"] == refs[published(a)] == state_head(a)
    # b sees it and takes the other task, without contention
    assert ok("claim", "--remote", "origin", "--json", cwd=b)["id"] == "t2"
    r = run("claim", "t1", "--remote", "origin", "--force", cwd=b)
    assert r.rc == 3 and "claimed by alice" in r.err
    ok("done", "t1", cwd=a)
    report = ok("sync", "--json", cwd=a)
    # closed, not deleted: moved to the commit that completed t1, so that a claim decided
    # from an older fetch (wanting the ref absent) cannot take t1 again (test_claim_race.py)
    assert report["claims_closed"] == ["t1"] and report["claims_pruned"] == []
    assert remote_refs(a)["refs/harness/claims/t1"] == state_head(a)
    assert "refs/harness/claims/t2" in remote_refs(a)  # b's, still held
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:59:00Z")
    assert ok("sync", "--json", cwd=a)["claims_pruned"] == []  # not an hour old yet
    # what the closed claim records is kept for the next commands (a commit never changes)
    over = json.loads((a / ".git" / "handoff" / "claims-over.json").read_text())["over"]
    assert [key.split()[0] for key in over] == ["t1"] and over[next(iter(over))][0] is True
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T11:01:00Z")
    report = ok("sync", "--json", cwd=a)
    assert report["claims_pruned"] == ["t1"]
    assert "refs/harness/claims/t1" not in remote_refs(a)
    assert "refs/harness/claims/t2" in remote_refs(a)  # b's, still held


def test_an_unreadable_record_of_closed_claims_is_read_again(clones: Callable[[str], Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    a, _b = concurrent_pair(clones, "t1")
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    ok("claim", "t1", "--remote", "origin", cwd=a)
    ok("done", "t1", cwd=a)
    assert ok("sync", "--json", cwd=a)["claims_closed"] == ["t1"]
    (a / ".git" / "handoff" / "claims-over.json").write_text('{"version": 1, "over": {"t1 x": [1, 2]')
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T12:00:00Z")
    assert ok("sync", "--json", cwd=a)["claims_pruned"] == ["t1"]
    assert "refs/harness/claims/t1" not in remote_refs(a)


def test_a_released_claim_frees_the_task_at_once(clones: Callable[[str], Path]) -> None:
    a, b = concurrent_pair(clones, "t1")
    ok("claim", "t1", "--remote", "origin", cwd=a)
    ok("release", "t1", cwd=a)
    ok("sync", cwd=a)
    assert "refs/harness/claims/t1" not in remote_refs(a)
    assert ok("claim", "--remote", "origin", "--json", cwd=b)["id"] == "t1"


def test_an_expired_claim_is_taken_over_by_compare_and_swap(clones: Callable[[str], Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """a claims and goes away (its claim ref stays); once the lease is over, b takes the
    task over: the claim ref moves from a's commit to b's, in one compare-and-swap."""
    a, b = concurrent_pair(clones, "t1")
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    ok("claim", "t1", "--remote", "origin", "--lease", "60s", cwd=a)
    before = remote_refs(a)["refs/harness/claims/t1"]
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:30Z")
    assert run("claim", "--remote", "origin", cwd=b).rc == 1  # live lease: nothing for b
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:05:00Z")
    got = ok("claim", "--remote", "origin", "--json", cwd=b)
    assert got["id"] == "t1" and got["claimed_by"] == "bob" and got["attempts"] == 1
    after = remote_refs(b)["refs/harness/claims/t1"]
    assert after != before and after == state_head(b)


def test_done_on_an_expired_lease_sees_a_takeover_made_before_it(clones: Callable[[str], Path],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = concurrent_pair(clones, "t1")
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    ok("claim", "t1", "--remote", "origin", "--lease", "60s", cwd=a)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:05:00Z")
    assert ok("claim", "--remote", "origin", "--json", cwd=b)["claimed_by"] == "bob"
    r = run("done", "t1", cwd=a)
    assert r.rc != 0 and "bob" in r.err, r
    assert ok("show", "t1", "--json", cwd=a)["claimed_by"] == "bob"


@pytest.mark.parametrize("after_fetch", [1, 2])
def test_done_on_an_expired_lease_loses_to_a_takeover_racing_it(clones: Callable[[str], Path],
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                after_fetch: int) -> None:
    """b takes the task over while a's `done` runs: just after its first fetch (the look
    for a takeover), or just after the second (its own transaction's, before its push).
    a's completion moves the claim ref by compare-and-swap against a's own claim, so it
    is refused (exit 3, nothing recorded): the task is never completed twice."""
    from git_handoff.ops import sync

    a, b = concurrent_pair(clones, "t1")
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    ok("claim", "t1", "--remote", "origin", "--lease", "60s", cwd=a)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:05:00Z")
    real_fetch, fetches = sync.fetch, [0]
    took: list[Result] = []

    def fetch_then_b_takes_over(*args: object, **kwargs: object) -> object:
        got = real_fetch(*args, **kwargs)  # type: ignore[arg-type]
        fetches[0] += 1
        if fetches[0] == after_fetch and not took:
            took.append(run_exe("claim", "--remote", "origin", "--json", cwd=b))
        return got

    monkeypatch.setattr(sync, "fetch", fetch_then_b_takes_over)
    r = run("done", "t1", cwd=a)
    assert took and took[0].rc == 0 and json.loads(took[0].out)["claimed_by"] == "bob", took
    assert r.rc == 3 and "t1" in r.err, r
    monkeypatch.setattr(sync, "fetch", real_fetch)
    for where in (a, b, a):
        ok("sync", cwd=where)
    for where in (a, b):
        shown = ok("show", "t1", "--json", cwd=where)
        assert shown["status"] == "in_progress" and shown["claimed_by"] == "bob", shown
    assert "Completed" not in run("log", "--task", "t1", cwd=a).out


def test_a_claim_ref_the_state_does_not_show_yet_is_respected(clones: Callable[[str], Path]) -> None:
    """Another machine's claim ref whose state is not published (yet): its own commit says
    who holds the task, and that is enough to leave the task alone."""
    a, b = concurrent_pair(clones, "t1", "t2")
    ok("claim", "t1", cwd=a)  # a local claim: only a's state has it
    git("push", "-q", "origin", f"{state_head(a)}:refs/harness/claims/t1", cwd=a)
    assert ok("claim", "--remote", "origin", "--json", cwd=b)["id"] == "t2"
    ok("done", "t2", cwd=b)
    assert run("claim", "--remote", "origin", cwd=b).rc == 1
    r = run("claim", "t1", "--remote", "origin", cwd=b)
    assert r.rc == 3 and "another machine" in r.err


def test_a_remote_of_an_earlier_version_is_read_and_can_still_be_published(clones: Callable[[str], Path]) -> None:
    """A remote written by earlier versions holds one refs/harness/state: it is fetched and
    merged; with handoff.legacyState a clone keeps it moving for clones not upgraded yet."""
    a = clones("a")
    ok("init", cwd=a)
    ok("add", "old", "--id", "old", cwd=a)
    git("push", "-q", "origin", "refs/harness/state:refs/harness/state", cwd=a)  # as an earlier version did
    b = clones("b")
    assert ok("sync", "--json", cwd=b)["action"] == "adopted"
    assert task(b, "old")["title"] == "old"
    ok("add", "new", "--id", "new", cwd=b)
    ok("sync", cwd=b)
    assert remote_refs(b)["refs/harness/state"] != state_head(b)  # not moved by default
    git("config", "handoff.legacyState", "true", cwd=b)
    ok("sync", cwd=b)
    assert remote_refs(b)["refs/harness/state"] == state_head(b)


def test_a_killed_commands_scratch_refs_are_swept(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", cwd=a)
    head = git("rev-parse", "HEAD", cwd=a)
    dead = "refs/handoff-tmp/999999-0badc0de"  # no such process
    git("update-ref", dead, head, cwd=a)
    alive = f"refs/handoff-tmp/{__import__('os').getppid()}-0badc0de"  # a live process's
    git("update-ref", alive, head, cwd=a)
    ok("sync", cwd=a)
    left = git("for-each-ref", "--format=%(refname)", "refs/handoff-tmp/", cwd=a).split()
    assert left == [alive]


@pytest.mark.parametrize("ref, target, why", [
    ("refs/harness/claims/t1", "blob", "not a commit"),
    ("refs/harness/claims/_not-an-id", "commit", "not a claim of a valid task id"),
    ("refs/harness/clones/NOTHEX/state", "commit", "not a clone's state"),
    ("refs/harness/clones/0123456789abcdef/other", "commit", "not a clone's state"),
])
def test_malformed_fleet_refs_are_quarantined(clones: Callable[[str], Path], ref: str, target: str, why: str) -> None:
    """One malformed ref is kept out (named by sync, shown by status), and the rest of the
    remote is still used; a junk claim ref is pruned (else it would block its task for good)."""
    a, b = concurrent_pair(clones, "t1")
    oid = git("hash-object", "-w", "--stdin", cwd=a, input_text="junk") if target == "blob" else state_head(a)
    git("push", "-q", "origin", f"{oid}:{ref}", cwd=a)
    ok("add", "more work", "--id", "t2", cwd=a)
    for where in (a, b):
        r = run("sync", cwd=where)
        assert r.rc == 0 and r.err == "", r.err
        assert why in r.out and ref in r.out, r.out
        assert ref[len("refs/"):] not in git("for-each-ref", "refs/remotes/", cwd=where)
        if "/claims/" in ref:
            assert ref not in remote_refs(b)  # pruned by a's sync: junk would stay there for good
            break
        status = run("status", cwd=where)
        assert status.rc == 0 and why in status.out
    assert task(b if "/claims/" not in ref else a, "t2")["title"] == "more work"
    if "/claims/" in ref:
        ok("sync", cwd=b)
        assert "quarantined" not in run("status", cwd=a).out + run("status", cwd=b).out
        assert task(b, "t2")["title"] == "more work"
        if ref.endswith("/t1"):
            assert ok("claim", "t1", "--remote", "origin", "--json", cwd=b)["id"] == "t1"
    else:
        assert ref in remote_refs(b, "refs/")  # not ours to delete


def test_a_claim_ref_recording_no_claim_is_ignored_and_pruned(clones: Callable[[str], Path]) -> None:
    """A claim ref at a commit whose task record is garbage, or that holds no such task:
    no claim. It blocked `claim --remote` of that task for good and was never pruned."""
    a, b = concurrent_pair(clones, "t1", "t2")
    blob = git("hash-object", "-w", "--stdin", cwd=a, input_text="{not json")
    tree = git("mktree", cwd=a, input_text=f"100644 blob {blob}\tjunk\n")
    commit = git("commit-tree", tree, "-m", "x", cwd=a)
    git("push", "-q", "origin", f"{commit}:refs/harness/claims/t1", cwd=a)
    git("push", "-q", "origin", f"{state_head(a)}~1:refs/harness/claims/t2", cwd=a)  # before t2 was added
    got = {ok("claim", "--remote", "origin", "--force", "--json", cwd=b)["id"] for _ in range(2)}
    assert got == {"t1", "t2"}
    ok("done", "t1", cwd=b)
    ok("done", "t2", cwd=b)
    ok("sync", cwd=b)
    # b's claims replaced the junk, and are closed at the commit that completed them
    claims = {r: oid for r, oid in remote_refs(b).items() if r.startswith("refs/harness/claims/")}
    assert claims == {"refs/harness/claims/t1": state_head(b), "refs/harness/claims/t2": state_head(b)}
    assert run("status", cwd=b).rc == 0


def test_with_sync_claims_done_publishes_in_one_push(clones: Callable[[str], Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """handoff.syncClaims: `done` pushes this clone's state and closes its finished claim
    ref in one push, with no fetch (another clone's newer work is not merged by it)."""
    a, b = concurrent_pair(clones, "t1", "t2")
    for where in (a, b):
        git("config", "handoff.syncClaims", "true", cwd=where)
    stats = tmp_path / "stats.jsonl"
    monkeypatch.setenv("GIT_HANDOFF_STATS", str(stats))
    ok("claim", "t1", cwd=a)
    ok("add", "later on b", "--id", "b1", cwd=b)
    ok("sync", cwd=b)
    ok("done", "t1", cwd=a)
    assert remote_state(a) == state_head(a)
    assert remote_refs(a)["refs/harness/claims/t1"] == state_head(a)  # closed at the completing commit
    assert "b1" not in {t["id"] for t in json.loads(run("list", "--json", cwd=a).out)}
    assert [json.loads(line)["command"] for line in stats.read_text().splitlines()][-1] == "publish"
    # b sees t1 done at its next claim, and takes another task
    assert ok("claim", "--json", cwd=b)["id"] in ("t2", "b1")
    assert task(b, "t1")["status"] == "completed"


def test_spreading_claimers_keeps_priority_order(clones: Callable[[str], Path]) -> None:
    """With other clones publishing, a remote claim picks at random among the first
    eligible tasks of the best priority only: the P0s go first, whatever the draw."""
    ids = [f"t{n}" for n in range(12)]
    a, b = concurrent_pair(clones, *ids)
    for tid in ("t7", "t9"):
        ok("edit", tid, "--priority", "P0", cwd=a)
    ok("sync", cwd=a)
    got = [ok("claim", "--remote", "origin", "--force", "--json", cwd=b)["id"] for _ in range(2)]
    assert sorted(got) == ["t7", "t9"]
    third = ok("claim", "--remote", "origin", "--force", "--json", cwd=b)["id"]
    assert third not in ("t7", "t9")
