"""The work travels (SPEC §10): `done` publishes a task's work, `integrate` lands it on the
target one task at a time with the task's check run on the merged tree, and a claim never
starts from a base missing a dependency's work. Real clones of a real shared remote (a
bare repository; through `git daemon` in the slow layer), real worktrees."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.remotes import Clones, clones, ok, remote_url  # noqa: F401  (fixtures)
from tests.support.repo import git, make_repo, run

SCHEMA = ("add", "schema", "--id", "A", "--check", "test -s schema.sql")
API = ("add", "api", "--id", "B", "--after", "A", "--check", "grep -q users schema.sql && test -s api.py")


def commit_file(where: Path, name: str, text: str) -> str:
    (where / name).write_text(text)
    git("add", name, cwd=where)
    git("commit", "-q", "-m", f"write {name}", cwd=where)
    return git("rev-parse", "HEAD", cwd=where).strip()


def remote_tip(where: Path, branch: str = "main") -> str:
    return git("ls-remote", "origin", f"refs/heads/{branch}", cwd=where).split()[0]


def task(where: Path, task_id: str) -> dict[str, object]:
    shown: dict[str, object] = ok("show", task_id, "--json", cwd=where)
    return shown


def test_the_two_clone_case_b_starts_from_a_base_holding_a_work(clones: Clones) -> None:  # noqa: F811
    """The issue's case, through `git handoff`, exactly as written, then the queue."""
    a = clones("a")
    ok("init", cwd=a)
    ok(*SCHEMA, cwd=a)
    ok(*API, cwd=a)
    ok("claim", "A", cwd=a)
    work = commit_file(a, "schema.sql", "create table users;\n")
    ok("done", "A", cwd=a)
    ok("sync", cwd=a)
    shown = task(a, "A")
    assert shown["work_ref"] == "refs/harness/work/A/1" and shown["completed_commit"] == work
    assert shown.get("integrated_commit") is None  # the target is origin/main: not landed yet
    assert "work:          refs/harness/work/A/1 (not on the target yet" in ok("show", "A", cwd=a)
    # the work is published: the remote holds it under its own ref
    assert git("ls-remote", "origin", "refs/harness/work/A/1", cwd=a).split()[0] == work

    b = clones("b")
    ok("sync", cwd=b)
    refused = run("claim", cwd=b)
    assert refused.rc == 1, refused.out + refused.err
    assert "A's work" in refused.err and "refs/harness/work/A/1" in refused.err and work[:7] in refused.err
    assert not (b / "schema.sql").exists() and task(b, "B")["status"] == "pending"

    # any clone may land anyone's work, once this clone approved the check it runs
    waits = ok("integrate", "--json", cwd=b)
    assert waits["landed"] == [] and "git handoff trust A" in waits["waiting"][0]["why"]
    ok("trust", "--all", cwd=b)
    landed = run("integrate", "--json", cwd=b)
    assert landed.rc == 0, landed.err
    report = landed.json()
    assert [(x["task"], x["how"]) for x in report["landed"]] == [("A", "fast-forward")]
    assert remote_tip(b) == work
    assert f"work:          refs/harness/work/A/1 (landed on the target as {work[:12]})" in ok("show", "A", cwd=b)

    claimed = ok("claim", "--json", cwd=b)
    assert claimed["id"] == "B" and claimed["started_at_commit"] == work
    assert (b / "schema.sql").read_text() == "create table users;\n"  # the worktree was brought forward
    commit_file(b, "api.py", "users = []\n")
    ok("done", "B", cwd=b)
    ok("integrate", cwd=b)
    tip = remote_tip(b)
    for name in ("A", "B"):
        assert task(b, name).get("integrated_commit"), name
        assert git("merge-base", "--is-ancestor", str(task(b, name)["completed_commit"]), tip, cwd=b) == ""
    # and clone a learns it all at its next sync
    ok("sync", cwd=a)
    assert task(a, "B").get("integrated_commit") == task(b, "B").get("integrated_commit")


def _two_siblings(clones: Clones, x_check: str, y_check: str) -> tuple[Path, Path]:  # noqa: F811
    a = clones("a")
    ok("init", cwd=a)
    ok("add", "x", "--id", "X", "--check", x_check, cwd=a)
    ok("add", "y", "--id", "Y", "--check", y_check, cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    ok("trust", "--all", cwd=b)
    return a, b


def test_a_red_merge_never_reaches_the_target_and_comes_back_as_an_attempt(clones: Clones) -> None:  # noqa: F811
    # each branch passes alone; merged, two notes exist and each check wants at most one
    check = "test $(ls *.note | wc -l) -le 1"
    a, b = _two_siblings(clones, check, check)
    ok("claim", "X", cwd=a)
    ok("claim", "Y", cwd=b)
    commit_file(a, "x.note", "x\n")
    y_work = commit_file(b, "y.note", "y\n")
    ok("done", "X", cwd=a)
    ok("done", "Y", cwd=b)
    assert run("integrate", cwd=a).rc == 0  # X only: Y's work is not published yet
    x_tip = remote_tip(a)
    red = run("integrate", "--json", cwd=b)
    assert red.rc == 1, red.out + red.err
    (back,) = red.json()["returned"]
    assert back["task"] == "Y" and back["status"] == "pending" and back["category"] == "TEST_FAIL"
    assert x_tip[:7] in back["reason"] and "merged onto origin/main" in back["reason"]
    assert remote_tip(b) == x_tip  # the red merge never reached the target
    shown = task(b, "Y")
    assert shown["status"] == "pending" and shown["attempts"] == 1
    assert "merged onto origin/main" in str(shown["error_log"])
    # the work is restorable: the saved attempt holds it
    (saved,) = ok("attempts", "Y", "--json", cwd=b)
    assert saved["head"] == y_work and saved["category"] == "TEST_FAIL"
    listed = git("log", "--format=%H", "-n", "50", "origin/main", cwd=b).split()
    assert y_work not in listed


def test_a_conflict_names_the_files_and_restore_brings_the_work_back(clones: Clones) -> None:  # noqa: F811
    a, b = _two_siblings(clones, "test -s shared.txt", "test -s shared.txt")
    ok("claim", "X", cwd=a)
    ok("claim", "Y", cwd=b)
    commit_file(a, "shared.txt", "from x\n")
    commit_file(b, "shared.txt", "from y\n")
    ok("done", "X", cwd=a)
    ok("done", "Y", cwd=b)
    ok("integrate", cwd=a)
    got = run("integrate", "--json", cwd=b)
    assert got.rc == 1
    (back,) = got.json()["returned"]
    assert back["category"] == "CONFLICT" and "conflicts in shared.txt" in back["reason"]
    assert "git handoff restore Y 1" in back["reason"]
    # b's HEAD is Y's refused work: the next claim of Y leaves it for the target's tip (which
    # holds X's version) instead of building on it again; restore brings Y's back
    refused_head = git("rev-parse", "HEAD", cwd=b).strip()
    claimed = ok("claim", "Y", "--json", cwd=b)
    assert claimed["started_at_commit"] == remote_tip(b) == git("rev-parse", "HEAD", cwd=b).strip()
    assert (b / "shared.txt").read_text() == "from x\n"
    said = ok("log", "--json", "--type", "Starting", cwd=b)[-1]["line"]
    assert "held refused work refs/harness/work/Y/1" in said, said
    assert git("rev-parse", "refs/harness/work/Y/1", cwd=b).strip() == refused_head  # nothing lost
    ok("restore", "Y", "1", "--force", cwd=b)
    assert (b / "shared.txt").read_text() == "from y\n"


def _y_done_after_x_landed(clones: Clones, *add: str) -> tuple[Path, Path]:  # noqa: F811
    """X landed from clone a; in clone b, a task added (`add`), then Y done on a base
    without X's version of shared.txt: Y's work will conflict."""
    a, b = _two_siblings(clones, "test -s shared.txt", "test -s shared.txt")
    ok("add", *add, cwd=b)
    ok("claim", "X", cwd=a)
    commit_file(a, "shared.txt", "from x\n")
    ok("done", "X", cwd=a)
    ok("integrate", cwd=a)
    ok("claim", "Y", cwd=b)
    commit_file(b, "shared.txt", "from y\n")
    ok("done", "Y", cwd=b)
    return a, b


def test_work_built_on_refused_work_goes_back_without_spending_an_attempt(clones: Clones) -> None:  # noqa: F811
    """Y is refused (a conflict with X); Z, done on top of Y's refused work before that, is
    sent back rather than landed (its merge would carry Y's refused commits onto the target
    unchecked by Y's check), its attempts untouched; its next claim starts from the tip."""
    a, b = _y_done_after_x_landed(clones, "z", "--id", "Z", "--after", "Y", "--check", "test -s z.txt")
    ok("claim", "Z", cwd=b)  # Y's work is in b's history: Z may start on it
    commit_file(b, "z.txt", "z\n")
    ok("done", "Z", cwd=b)
    first = run("integrate", "--json", cwd=b)
    returned = {r["task"]: r for r in first.json()["returned"]}
    assert first.rc == 1 and list(returned) == ["Y", "Z"], first.out  # Z in the same round, once Y is refused
    back = returned["Z"]
    assert "was built on refs/harness/work/Y/1" in back["reason"]
    assert "no attempt spent" in back["reason"]
    z = task(b, "Z")
    assert z["status"] == "pending" and z["attempts"] == 0 and z.get("work_ref") is None
    assert remote_tip(b) == git("rev-parse", "origin/main", cwd=a).strip()  # the target never took Y's work
    ok("claim", "Y", cwd=b)
    assert git("rev-parse", "HEAD", cwd=b).strip() == remote_tip(b)


def test_one_worktree_without_a_remote_sees_only_integrated_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "solo")
    ok("init", cwd=repo)
    ok(*SCHEMA, cwd=repo)
    ok(*API, cwd=repo)
    ok("claim", cwd=repo)
    first = commit_file(repo, "schema.sql", "create table users;\n")
    ok("done", "A", cwd=repo)
    assert task(repo, "A")["integrated_commit"] == first
    claimed = ok("claim", "--json", cwd=repo)
    assert claimed["id"] == "B" and claimed["started_at_commit"] == first
    commit_file(repo, "api.py", "x = 1\n")
    ok("done", "B", cwd=repo)
    report = ok("integrate", "--json", cwd=repo)
    assert report["landed"] == [] and report["returned"] == [] and report["waiting"] == []
    assert not (repo / ".git" / "handoff" / "scratch").exists()  # nothing was checked again


def test_worktrees_of_one_machine_land_on_one_target(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "main")
    ok("init", "--mode", "concurrent", cwd=repo)
    ok(*SCHEMA, cwd=repo)
    ok(*API, cwd=repo)
    w1, w2 = tmp_path / "w1", tmp_path / "w2"
    git("worktree", "add", "-q", "-b", "w1", str(w1), cwd=repo)
    git("worktree", "add", "-q", "-b", "w2", str(w2), cwd=repo)
    ok("claim", "A", cwd=w1)
    work = commit_file(w1, "schema.sql", "create table users;\n")
    ok("done", "A", cwd=w1)
    assert task(w1, "A").get("integrated_commit") is None  # on w1, not on main
    refused = run("claim", "B", cwd=w2)
    assert refused.rc == 1 and "A's work" in refused.err
    landed = ok("integrate", "--json", cwd=w2)
    assert [x["task"] for x in landed["landed"]] == ["A"]
    assert git("rev-parse", "main", cwd=repo).strip() == work
    assert (repo / "schema.sql").exists()  # the main worktree, clean, was brought forward
    claimed = ok("claim", "B", "--json", cwd=w2)
    assert claimed["started_at_commit"] == work and (w2 / "schema.sql").exists()


def test_a_dirty_worktree_is_never_moved_and_the_claim_says_what_is_missing(clones: Clones) -> None:  # noqa: F811
    a = clones("a")
    ok("init", cwd=a)
    ok(*SCHEMA, cwd=a)
    ok(*API, cwd=a)
    ok("claim", "A", cwd=a)
    commit_file(a, "schema.sql", "create table users;\n")
    ok("done", "A", cwd=a)
    ok("integrate", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    git("reset", "-q", "--hard", "HEAD~1", cwd=b)  # behind the target
    (b / "notes.txt").write_text("mine\n")  # untracked: the tree is not clean
    head = git("rev-parse", "HEAD", cwd=b).strip()
    refused = run("claim", "B", cwd=b)
    assert refused.rc == 1 and "A's work" in refused.err and "clean worktree" in refused.err
    assert git("rev-parse", "HEAD", cwd=b).strip() == head and (b / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("bad", ["refs/harness/work/-x/1", "refs/harness/work/A/zero", "refs/harness/work/A/1/2"])
def test_a_malformed_work_ref_on_the_remote_is_quarantined(clones: Clones, bad: str) -> None:  # noqa: F811
    a = clones("a")
    ok("init", cwd=a)
    ok("sync", cwd=a)
    head = git("rev-parse", "HEAD", cwd=a).strip()
    git("push", "-q", "origin", f"{head}:{bad}", cwd=a)
    b = clones("b")
    report = ok("sync", "--json", cwd=b)
    assert [item["ref"] for item in report["quarantined"]] == [bad]
    assert not git("for-each-ref", "refs/harness/work/", cwd=b).strip()


def test_independent_work_on_top_of_work_refused_in_the_same_round_goes_back_unspent(
        clones: Clones) -> None:  # noqa: F811
    """W needs nothing of Y but was done after it in one worktree (its work holds Y's
    commits); Y is refused in a round: W, later in that round, goes back unspent rather than
    conflicting on Y's commits and spending an attempt."""
    _, b = _y_done_after_x_landed(clones, "w", "--id", "W", "--priority", "P2", "--check", "test -s w.txt")
    ok("claim", "W", cwd=b)
    commit_file(b, "w.txt", "w\n")
    ok("done", "W", cwd=b)
    got = run("integrate", "--json", cwd=b)
    returned = {r["task"]: r for r in got.json()["returned"]}
    assert got.rc == 1 and set(returned) == {"Y", "W"}, got.out
    assert "conflicts in shared.txt" in returned["Y"]["reason"]
    assert "was built on refs/harness/work/Y/1" in returned["W"]["reason"]
    assert task(b, "Y")["attempts"] == 1 and task(b, "W")["attempts"] == 0


def test_work_whose_commits_hold_a_secret_is_never_published_nor_queued(clones: Clones) -> None:  # noqa: F811
    """SPEC §11 for the work refs: `done` completes a task whose committed file holds a
    token, but publishes no work ref (the sync would push it to every clone), says why on
    stderr, in `show` and the log, and the queue never lands it."""
    from tests.support import secret_corpus

    token = secret_corpus.SECRETS["github-token"]
    a = clones("a")
    ok("init", cwd=a)
    ok("add", "config", "--id", "C", "--check", "test -s settings.py", cwd=a)
    ok("claim", "C", cwd=a)
    commit_file(a, "settings.py", f"TOKEN = '{token}'\n")
    done = run("done", "C", cwd=a)
    assert done.rc == 0 and "its work was not published: a secret in" in done.err and "settings.py" in done.err
    shown = task(a, "C")
    assert shown["status"] == "completed" and shown.get("work_ref") is None and shown.get("work_withheld")
    assert "its work was not published" in ok("show", "C", cwd=a)
    assert git("for-each-ref", "refs/harness/work/", cwd=a) == ""
    # work done next in this worktree holds those commits too: not published either
    ok("add", "more", "--id", "D", "--check", "test -s d.txt", cwd=a)
    ok("claim", "D", cwd=a)
    commit_file(a, "d.txt", "d\n")
    later = run("done", "D", cwd=a)
    assert later.rc == 0 and "settings.py" in later.err and task(a, "D").get("work_ref") is None, later.err
    assert git("for-each-ref", "refs/harness/work/", cwd=a) == ""
    ok("sync", cwd=a)
    report = ok("integrate", "--json", cwd=a)
    assert report["landed"] == [] and report["returned"] == []
    assert git("ls-remote", "origin", "refs/harness/*", "refs/heads/*", cwd=a).count("work/") == 0
    probe = a.parent / "probe"  # everything the remote holds, every ref
    git("clone", "-q", "--mirror", git("config", "remote.origin.url", cwd=a).strip(), str(probe), cwd=a.parent)
    assert token not in git("log", "-p", "--all", cwd=probe)


def test_work_done_after_other_work_in_one_worktree_lands_after_it_each_check_run(
        clones: Clones) -> None:  # noqa: F811
    """A (P2) then B (P0), done one after the other in one worktree: B's work holds A's. B
    never lands first (a fast-forward would carry A onto the target with only B's check
    run, and record A as "already there"): A lands by its own check, then B. And while
    A cannot land (its check not approved on the integrating clone), B waits too."""
    a = clones("a")
    ok("init", cwd=a)
    ok("add", "a", "--id", "A", "--priority", "P2", "--check", "test -s a.txt", cwd=a)
    ok("add", "b", "--id", "B", "--priority", "P0", "--check", "test -s b.txt", cwd=a)
    for name in ("A", "B"):
        ok("claim", name, cwd=a)
        commit_file(a, f"{name.lower()}.txt", f"{name}\n")
        ok("done", name, cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    ok("trust", "B", cwd=b)  # B's check is approved here, A's is not
    report = ok("integrate", "--json", cwd=b)
    assert report["landed"] == [], report
    why = {w["task"]: w["why"] for w in report["waiting"]}
    assert why["B"] == "its work holds the work of A, which did not land in this round", why
    ok("trust", "--all", cwd=b)
    report = ok("integrate", "--json", cwd=b)
    assert [x["task"] for x in report["landed"]] == ["A", "B"], report
    lines = [x["line"] for x in ok("log", "--json", "--type", "INTEGRATE", cwd=b)]
    assert not any("was on the target already" in line for line in lines), lines


def test_a_check_that_cannot_start_in_the_scratch_waits_and_spends_nothing(clones: Clones) -> None:  # noqa: F811
    """The check runs a tool the task's worktree has but git does not (an untracked
    script): in the scratch worktree it cannot start (exit 127, ENV_SETUP). That is this
    clone's environment, not the work: the task waits, saying so, and no attempt is spent."""
    a = clones("a")
    ok("init", cwd=a)
    ok("add", "t", "--id", "T", "--check", "./tool.sh", cwd=a)
    (a / "tool.sh").write_text("#!/bin/sh\nexit 0\n")
    (a / "tool.sh").chmod(0o755)
    ok("claim", "T", cwd=a)
    commit_file(a, "t.txt", "t\n")
    ok("done", "T", cwd=a)
    got = run("integrate", "--json", cwd=a)
    assert got.rc == 0 and got.json()["returned"] == [], got.out
    (waiting,) = got.json()["waiting"]
    assert waiting["task"] == "T" and "could not run in the scratch worktree" in waiting["why"]
    assert task(a, "T")["attempts"] == 0 and task(a, "T")["status"] == "completed"


def test_a_work_ref_nothing_refused_is_not_refused_work(clones: Clones) -> None:  # noqa: F811
    """A second work ref at a task's very commit (a `done` killed between publishing and
    recording, then done again; or one planted by another clone) does not make the task's
    work 'built on refused work': it lands."""
    a = clones("a")
    ok("init", cwd=a)
    ok(*SCHEMA, cwd=a)
    ok("claim", "A", cwd=a)
    work = commit_file(a, "schema.sql", "create table users;\n")
    git("update-ref", "refs/harness/work/A/7", work, cwd=a)  # the stray one
    ok("done", "A", cwd=a)
    report = ok("integrate", "--json", cwd=a)
    assert [x["task"] for x in report["landed"]] == ["A"] and report["returned"] == [], report


def test_the_relay_does_not_wait_for_work_only_a_person_can_let_land(clones: Clones) -> None:  # noqa: F811
    """Clone b's relay integrates; the only task is done on clone a and its check is not
    approved on b: waiting changes nothing, so the relay ends (every task completed), saying
    why the work waits, instead of waiting out --wait-patience and exiting 1."""
    a = clones("a")
    ok("init", cwd=a)
    ok(*SCHEMA, cwd=a)
    ok("claim", "A", cwd=a)
    commit_file(a, "schema.sql", "create table users;\n")
    ok("done", "A", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    got = run("relay", "--agent", "true", "--integrate", "--wait-patience", "60", cwd=b)
    assert got.rc == 0, got.out + got.err
    assert "not approved on this clone" in got.out and "waits to land" not in got.out, got.out
    assert task(b, "A").get("integrated_commit") is None  # nothing ran unapproved


def test_work_built_on_refused_work_a_second_time_spends_an_attempt(clones: Clones) -> None:  # noqa: F811
    """W (independent, done after refused Y in one worktree) goes back unspent; claimed again
    from a worktree that cannot leave Y's refused work (uncommitted changes: never moved), W
    is done on top of it again: this time the send-back spends an attempt, so that a worktree
    stuck on refused work ends in a failed task rather than an endless loop."""
    _, b = _y_done_after_x_landed(clones, "w", "--id", "W", "--priority", "P2", "--check", "test -s w.txt")
    ok("claim", "W", cwd=b)
    commit_file(b, "w.txt", "w\n")
    ok("done", "W", cwd=b)
    first = run("integrate", "--json", cwd=b)
    assert first.rc == 1 and task(b, "W")["attempts"] == 0, first.out
    refused_head = git("rev-parse", "HEAD", cwd=b).strip()
    (b / "w.txt").write_text("w, edited\n")  # uncommitted: the claim may not move this worktree
    ok("claim", "W", cwd=b)
    assert git("rev-parse", "HEAD", cwd=b).strip() == refused_head  # still on Y's refused work
    git("commit", "-q", "-am", "w again", cwd=b)
    ok("done", "W", cwd=b)
    again = run("integrate", "--json", cwd=b)
    returned = {r["task"]: r for r in again.json()["returned"]}
    assert again.rc == 1 and "W" in returned, again.out
    assert "built on refused work again: an attempt spent" in returned["W"]["reason"]
    assert task(b, "W")["attempts"] == 1


def test_a_server_refusing_work_refs_stops_integrate_before_any_landing(tmp_path: Path) -> None:
    """A server whose rights lack the work refs line (here an update hook) refuses the work
    ref when integrate's sync pushes it: integrate says so in one line naming the ref, exit
    3, and nothing lands (the landing's own atomic push, which carries the work ref with the
    target, is tested in tests/remote/test_landing.py)."""
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    a = Clones(tmp_path, str(bare), None)("a")
    hook = bare / "hooks" / "update"
    hook.write_text('#!/bin/sh\ncase "$1" in refs/harness/work/*) echo "no work refs here" >&2; exit 1;; esac\n')
    hook.chmod(0o755)
    ok("init", cwd=a)
    ok(*SCHEMA, cwd=a)
    ok("claim", "A", cwd=a)
    commit_file(a, "schema.sql", "create table users;\n")
    ok("done", "A", cwd=a)
    before = remote_tip(a)
    got = run("integrate", "--json", cwd=a)
    assert got.rc == 3 and got.json()["exit_code"] == 3, got.out
    said = got.json()["error"]
    assert "origin refused refs/harness/work/A/1" in said and "\n" not in said, said
    assert "moved while this work was being checked" not in said and "kept moving" not in said, said
    assert remote_tip(a) == before  # nothing landed
    assert task(a, "A").get("integrated_commit") is None
    assert git("rev-parse", "refs/harness/work/A/1", cwd=a).strip()  # the work kept here
