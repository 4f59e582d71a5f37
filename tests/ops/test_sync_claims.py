# ruff: noqa: F811  (pytest fixtures imported from tests.sync_helpers)
"""Claims that hold across machines, autoSync, lost-claim notices, and trust of fetched
commands at `done` — against a bare remote and a real git daemon."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from git_handoff.ops.payloads import TaskJson
from git_handoff.ops.sync import SyncReport
from git_handoff.state import quarantine
from tests.support.remotes import clones, ok, remote_state, remote_url, shared_pair, task  # noqa: F401
from tests.support.repo import git, run, run_exe, state_head


@pytest.mark.slow  # several processes racing: the slow layer
def test_three_clones_race_claim_remote(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", "--mode", "concurrent", cwd=a)
    plan = "".join(f'[[task]]\nid = "t{n:02d}"\ntitle = "task {n}"\ncheck = "true"\n' for n in range(24))
    (a / "plan.toml").write_text(plan)
    ok("import", str(a / "plan.toml"), cwd=a)
    ok("sync", cwd=a)
    paths = [a, clones("b"), clones("c")]
    for n, path in enumerate(paths):
        git("config", "handoff.worker", f"w{n}", cwd=path)
        if path != a:
            ok("sync", cwd=path)
    won: dict[str, list[str]] = {str(p): [] for p in paths}
    problems: list[str] = []

    def worker(path: Path) -> None:
        for _ in range(80):
            r = run_exe("claim", "--remote", "origin", "--force", "--json", cwd=path)
            if r.rc == 0:
                won[str(path)].append(r.json()["id"])
            elif r.rc == 1:
                return
            elif r.rc != 3:
                problems.append(f"rc={r.rc} {r.err}")
                return
        problems.append("too many rounds")

    threads = [threading.Thread(target=worker, args=(p,)) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not problems, problems
    claimed = [tid for ids in won.values() for tid in ids]
    assert sorted(claimed) == [f"t{n:02d}" for n in range(24)], Counter(claimed).most_common(3)
    for path in paths:
        ok("sync", cwd=path)
    for path in paths:
        ok("sync", cwd=path)
    assert len({state_head(p) for p in paths}) == 1
    tasks = {t["id"]: t for t in json.loads(run("list", "--json", cwd=a).out)}
    for n, path in enumerate(paths):
        for tid in won[str(path)]:
            assert tasks[tid]["status"] == "in_progress" and tasks[tid]["claimed_by"] == f"w{n}"


def test_done_refuses_a_fetched_command_until_trusted(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("add", "x", "--id", "t", "--check", "true"))
    ok("trust", "--all", cwd=b)
    marker = b.parent / "PWNED"
    ok("edit", "t", "--check", f"touch {marker}", cwd=a)  # the hostile change, pushed
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    ok("claim", "t", cwd=b)
    before = state_head(b)
    for args in (("done", "t"), ("verify", "t")):
        r = run(*args, cwd=b)
        assert r.rc == 2, r
        assert "git handoff trust" in r.err and r.err.count("\n") == 1
        assert not marker.exists()
        assert state_head(b) == before
    listed = run("trust", cwd=b).out
    assert f"touch {marker}" in listed and "introduced by Test Author" in listed
    ok("trust", "t", cwd=b)
    ok("done", "t", cwd=b)
    assert marker.exists()
    assert task(b, "t")["status"] == "completed"


def test_auto_sync_pushes_and_keeps_work_offline(clones: Callable[[str], Path], tmp_path: Path) -> None:
    a = clones("a")
    ok("init", cwd=a)
    ok("add", "x", "--id", "t", "--check", "true", cwd=a)
    ok("add", "y", "--id", "u", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    git("config", "handoff.autoSync", "true", cwd=a)
    remote = git("remote", "get-url", "origin", cwd=a)
    ok("claim", "t", cwd=a)
    ok("checkpoint", "t", "half way", cwd=a)
    assert remote_state(a) == state_head(a)
    # offline: the work is kept locally and status says what waits
    git("remote", "set-url", "origin", str(tmp_path / "gone.git"), cwd=a)
    r = run("done", "t", cwd=a)
    assert r.rc == 0 and "not pushed yet" in r.err
    assert task(a, "t")["status"] == "completed"
    status = run("status", cwd=a).out
    assert "waiting to be pushed to origin" in status
    assert any("waiting" in n for n in json.loads(run("status", "--json", cwd=a).out)["notes"])
    git("remote", "set-url", "origin", remote, cwd=a)
    ok("sync", cwd=a)
    assert "waiting to be pushed" not in run("status", cwd=a).out
    assert remote_state(a) == state_head(a)


def test_sync_claims_config_and_lost_claim_notice(clones: Callable[[str], Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    a = clones("a")
    # the task is created before both claims (its hybrid-clock stamp must not be later
    # than theirs, or the clock cannot order two claims that did not see each other)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    ok("init", "--mode", "concurrent", cwd=a)
    ok("add", "x", "--id", "t", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    git("config", "handoff.worker", "alice", cwd=a)
    git("config", "handoff.worker", "bob", cwd=b)
    # offline claims of one task on two machines: one winner after sync, the loser is told
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T11:00:00Z")
    ok("claim", "t", cwd=a)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T11:05:00Z")
    ok("claim", "t", cwd=b)
    ok("sync", cwd=b)
    r: SyncReport = ok("sync", "--json", cwd=a)
    assert [(c["task"], c["worker"]) for c in r["claims_lost"]] == [("t", "alice")]
    told = run("list", cwd=a)  # the next command tells the loser
    assert "your claim of t (as alice) was lost to bob" in told.err
    assert task(a, "t")["claimed_by"] == "bob"
    assert "your claim" not in run("list", cwd=a).err  # told once
    # handoff.syncClaims: a plain `claim` goes through the remote
    ok("add", "z", "--id", "z", "--check", "true", cwd=b)
    ok("sync", cwd=b)
    git("config", "handoff.syncClaims", "true", cwd=a)
    got: TaskJson = ok("claim", "z", "--json", cwd=a)
    assert got["claimed_by"] == "alice"
    assert remote_state(a) == state_head(a)
    # a lost race for a named task is contention (exit 3), nothing changed
    ok("add", "w", "--id", "w", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    git("config", "handoff.syncClaims", "true", cwd=b)
    ok("claim", "w", "--force", cwd=a)
    before = state_head(b)
    refused = run("claim", "w", "--force", cwd=b)
    assert refused.rc == 3 and "claimed by alice" in refused.err
    assert task(b, "w")["claimed_by"] == "alice"
    assert state_head(b) != before  # it did merge the remote's state in, and claimed nothing
    # b published nothing: its own ref on the remote is where its last sync left it
    assert remote_state(b) != state_head(b) and task(a, "w")["claimed_by"] == "alice"


def test_claim_remote_bad_input(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", cwd=a)
    ok("add", "x", "--id", "t", "--check", "true", cwd=a)
    before = state_head(a)
    for args, text in ((("claim", "--remote", "nowhere"), "unknown remote"),
                       (("claim", "bad..id", "--remote", "origin"), "invalid task id")):
        r = run(*args, cwd=a)
        assert r.rc == 2 and text in r.err and r.err.count("\n") == 1, r
        assert state_head(a) == before


def test_claim_remote_in_a_fresh_clone_and_nothing_eligible(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", "--mode", "concurrent", cwd=a)
    ok("add", "x", "--id", "t", "--check", "true", cwd=a)
    ok("claim", "t", "--remote", "origin", cwd=a)  # the remote had no state: the claim is its first push
    b = clones("b")
    assert state_head(b) is None
    r = run("claim", "--remote", "origin", cwd=b)  # adopts the state, then finds nothing eligible
    assert r.rc == 1 and "nothing eligible" in r.err
    assert state_head(b) == state_head(a)
    assert task(b, "t")["status"] == "in_progress"


@pytest.mark.slow  # several processes racing: the slow layer
def test_concurrent_syncs_lose_nothing(clones: Callable[[str], Path]) -> None:
    """Three clones adding tasks and syncing at the same time: every task ends up everywhere."""
    a = clones("a")
    ok("init", cwd=a)
    ok("sync", cwd=a)
    paths = [a, clones("b"), clones("c")]
    for path in paths[1:]:
        ok("sync", cwd=path)
    problems: list[str] = []

    def worker(n: int, path: Path) -> None:
        for k in range(5):
            for args in (("add", f"task {n}-{k}", "--id", f"c{n}-{k}"), ("sync",)):
                r = run_exe(*args, cwd=path)
                if r.rc not in (0, 3):  # 3: the remote kept moving; the next round retries
                    problems.append(f"{args}: rc={r.rc} {r.err}")

    threads = [threading.Thread(target=worker, args=(n, p)) for n, p in enumerate(paths)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not problems, problems
    for _ in range(2):
        for path in paths:
            ok("sync", cwd=path)
    assert len({state_head(p) for p in paths}) == 1
    ids = {t["id"] for t in json.loads(run("list", "--json", cwd=a).out)}
    assert ids == {f"c{n}-{k}" for n in range(3) for k in range(5)}


def _tracked_notes(path: Path) -> dict[str, str]:
    listed = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/remotes/origin/harness/clones/", cwd=path)
    return dict(line.split() for line in listed.splitlines() if line.split()[0].endswith("/notes"))


def test_a_remote_claim_fetches_the_states_and_claims_and_leaves_the_notes_to_sync(
        clones: Callable[[str], Path]) -> None:
    """A claim decides on the states and the claim refs: the notes another clone pushed
    meanwhile are neither fetched nor merged by it, nor are the ones tracked before
    dropped; the next sync brings them."""
    a, b = shared_pair(clones)
    ok("add", "one", "--id", "t1", "--check", "true", cwd=a)
    commit = git("rev-parse", "HEAD", cwd=a)
    git("notes", "--ref=harness", "add", "-m", "first note", commit, cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    before = _tracked_notes(b)
    assert before and "first note" in git("notes", "--ref=harness", "show", commit, cwd=b)
    git("notes", "--ref=harness", "append", "-m", "second note", commit, cwd=a)
    ok("add", "two", "--id", "t2", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    claimed: TaskJson = ok("claim", "--remote", "origin", "--json", cwd=b)
    assert claimed["id"] in ("t1", "t2")
    assert task(b, "t2")["title"] == "two"  # the state came
    assert _tracked_notes(b) == before  # the notes did not, and what was tracked stays
    assert "second note" not in git("notes", "--ref=harness", "show", commit, cwd=b)
    ok("sync", cwd=b)
    assert _tracked_notes(b) != before
    assert "second note" in git("notes", "--ref=harness", "show", commit, cwd=b)


def test_a_notes_ref_sync_quarantined_stays_quarantined_through_a_remote_claim(clones: Callable[[str], Path]) -> None:
    """A remote claim neither fetches the notes nor forgets that sync kept one out."""
    a, b = shared_pair(clones)
    ok("add", "one", "--id", "t1", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    blob = git("hash-object", "-w", "--stdin", cwd=a, input_text="a note\n")
    tree = git("mktree", cwd=a, input_text=f"100644 blob {blob}\tnot-a-note\n")
    bad = git("commit-tree", tree, "-m", "bad notes", cwd=a)
    git("push", "-q", "origin", f"{bad}:refs/harness/clones/0123456789abcdef/notes", cwd=a)
    held = ok("sync", "--json", cwd=b)["quarantined"]
    assert [h["ref"] for h in held] == ["refs/harness/clones/0123456789abcdef/notes"]
    written = b / ".git" / "handoff" / quarantine.DIR / "origin.json"
    before = written.read_text()
    assert ok("claim", "--remote", "origin", "--json", cwd=b)["id"] == "t1"
    assert written.read_text() == before
    shown = run("status", cwd=b)
    assert shown.rc == 0 and "quarantined" in shown.out and "0123456789abcdef/notes" in shown.out
