"""Rollback returns exactly to the moment of the claim and saves everything else
(`fail` in docs/git-handoff.md): byte-for-byte, on real repositories."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.repo import Result, git, run, state_head


def handoff(*args: str, cwd: Path | None = None, rc: int = 0) -> Result:
    result = run(*args, cwd=cwd)
    assert result.rc == rc, f"git handoff {' '.join(args)}: rc={result.rc}\nout={result.out}\nerr={result.err}"
    return result


def gitb(*args: str, cwd: Path) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def files(root: Path) -> dict[bytes, tuple[str, bytes]]:
    """Every path under the work tree outside .git: kind (file+exec bit, link, dir) and
    content (a digest for big files), keyed by the raw bytes of its name."""
    out: dict[bytes, tuple[str, bytes]] = {}
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        if dirpath == base:
            dirnames[:] = [d for d in dirnames if d != b".git"]
        rel_dir = os.path.relpath(dirpath, base)
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                if os.path.exists(os.path.join(full, b".git")):
                    dirnames.remove(name)  # a submodule: compared on its own
                out[rel] = ("dir", b"")
            else:
                with open(full, "rb") as fh:
                    data = fh.read()
                kind = "exec" if st.st_mode & stat.S_IXUSR else "file"
                out[rel] = (kind, data if len(data) < 1 << 16 else hashlib.sha256(data).digest())
    return out


def picture(root: Path) -> tuple[str, bytes, dict[bytes, tuple[str, bytes]]]:
    """HEAD, the index (every staged entry: mode, blob, stage, path) and every file."""
    head = git("rev-parse", "HEAD", cwd=root)
    return head, gitb("ls-files", "--stage", "-z", cwd=root), files(root)


@pytest.fixture
def ready(repo: Path) -> Path:
    (repo / ".gitignore").write_text("*.log\n")
    git("add", ".gitignore", cwd=repo)
    git("commit", "-q", "-m", "ignore logs", cwd=repo)
    handoff("init")
    handoff("add", "Try", "--id", "t", "--check", "false", "--max-attempts", "9")
    return repo


def test_untracked_files_made_before_the_claim_survive_a_failed_attempt(ready: Path) -> None:
    (ready / "plan.toml").write_bytes(b'[[task]]\ntitle = "mine"\n')
    handoff("hooks", "install", "--agent", "claude")
    settings = (ready / ".claude" / "settings.json").read_bytes()
    (ready / "debug.log").write_bytes(b"ignored\n")
    before = picture(ready)
    out = handoff("claim", "--json").json()
    assert out["claim_snapshot"]  # the tree was not clean: its picture is kept
    (ready / "new.txt").write_bytes(b"the attempt's\n")
    (ready / "README").write_bytes(b"changed by the attempt\n")
    (ready / "debug.log").write_bytes(b"ignored, changed\n")
    failed = handoff("fail", "t", "--reason", "no", "--json").json()
    assert failed["rolled_back"] is True
    after = picture(ready)
    expected = dict(before[2])
    expected[b"debug.log"] = ("file", b"ignored, changed\n")  # ignored files are untouched
    assert after[0] == before[0] and after[1] == before[1] and after[2] == expected
    assert (ready / ".claude" / "settings.json").read_bytes() == settings
    assert "claude code hooks: installed" in handoff("hooks", "status", "--agent", "claude").out
    # the attempt lists what it changed since the claim, and holds it
    assert sorted(f["path"] for f in failed["files"]) == ["README", "new.txt"]
    assert gitb("show", "refs/harness/attempts/t/1:new.txt", cwd=ready) == b"the attempt's\n"
    assert gitb("show", "refs/harness/attempts/t/1:plan.toml", cwd=ready) == b'[[task]]\ntitle = "mine"\n'
    assert not git("for-each-ref", "refs/handoff/claims/", cwd=ready)  # the snapshot ref ended with the claim


def test_a_file_untracked_at_the_claim_comes_back_and_the_attempt_holds_its_change(ready: Path) -> None:
    (ready / "notes.md").write_bytes(b"before the claim\n")
    handoff("claim")
    (ready / "notes.md").write_bytes(b"during the attempt\n")
    out = handoff("fail", "t", "--reason", "no").out
    assert "rolled back to the claim" in out and "untracked files as they were then" in out
    assert (ready / "notes.md").read_bytes() == b"before the claim\n"
    assert git("status", "--porcelain", cwd=ready) == "?? notes.md"  # still untracked
    assert gitb("show", "refs/harness/attempts/t/1:notes.md", cwd=ready) == b"during the attempt\n"
    listed = handoff("attempts", "t", "--json").json()[0]
    assert listed["files"] == [{"status": "M", "path": "notes.md"}]
    handoff("restore", "t", "1")
    assert (ready / "notes.md").read_bytes() == b"during the attempt\n"


def test_staged_only_content_is_saved_and_restored_with_the_index(ready: Path) -> None:
    handoff("claim")
    (ready / "a").write_bytes(b"v1\n")
    git("add", "a", cwd=ready)
    (ready / "a").write_bytes(b"v2\n")
    handoff("fail", "t", "--reason", "no")
    assert not (ready / "a").exists() and git("status", "--porcelain", cwd=ready) == ""
    handoff("restore", "t", "1")
    assert gitb("show", ":a", cwd=ready) == b"v1\n"  # the index, as the attempt left it
    assert (ready / "a").read_bytes() == b"v2\n"
    assert git("status", "--porcelain", cwd=ready) == "AM a"


def test_staged_content_before_the_claim_is_back_in_the_index_after_the_rollback(ready: Path) -> None:
    (ready / "README").write_bytes(b"staged\n")
    git("add", "README", cwd=ready)
    (ready / "README").write_bytes(b"staged, then edited\n")
    (ready / "gone").write_bytes(b"x\n")
    git("add", "gone", cwd=ready)
    git("commit", "-q", "-m", "gone", "--", "gone", cwd=ready)
    git("rm", "-q", "gone", cwd=ready)  # a staged deletion at the claim
    before = picture(ready)
    handoff("claim")
    git("add", "-A", cwd=ready)
    git("commit", "-q", "-m", "the attempt commits everything", cwd=ready)
    (ready / "gone").write_bytes(b"back during the attempt\n")
    handoff("fail", "t", "--reason", "no")
    assert picture(ready) == before
    assert gitb("show", ":README", cwd=ready) == b"staged\n"


def test_a_staged_deletion_during_the_attempt_is_restorable(ready: Path) -> None:
    handoff("claim")
    git("rm", "-q", "README", cwd=ready)
    handoff("fail", "t", "--reason", "no")
    assert (ready / "README").read_bytes() == b"hello\n"
    out = handoff("restore", "t", "1", "--json").json()
    assert out["deleted"] == ["README"] and out["index"] is True
    assert not (ready / "README").exists()
    assert git("status", "--porcelain", cwd=ready) == "D  README"  # staged, as in the attempt


ODD_NAMES = [b"with space.txt", b"new\nline.txt", b"caf\xe9-latin1.txt", b"dir with space/inner file"]


def _odd_files(root: Path, content: bytes) -> None:
    for name in ODD_NAMES:
        path = os.path.join(os.fsencode(root), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(content + name)
    tool = root / "tool.sh"
    tool.write_bytes(b"#!/bin/sh\necho " + content + b"\n")
    tool.chmod(0o755)
    link = root / "link"
    if link.is_symlink():
        link.unlink()
    link.symlink_to("README" if content == b"before" else "tool.sh")


def test_exec_bits_symlinks_and_odd_names_round_trip(ready: Path) -> None:
    _odd_files(ready, b"before")
    git("add", "tool.sh", "link", cwd=ready)
    git("commit", "-q", "-m", "a tool and a link", cwd=ready)
    (ready / "tool.sh").chmod(0o644)  # an exec bit dropped before the claim
    before = picture(ready)
    handoff("claim")
    _odd_files(ready, b"during")
    (ready / "tool.sh").chmod(0o755)
    attempt = files(ready)
    handoff("fail", "t", "--reason", "no")
    assert picture(ready) == before
    handoff("restore", "t", "1")
    assert files(ready) == attempt
    assert os.readlink(ready / "link") == "tool.sh"


@pytest.mark.slow
def test_a_100_mb_binary_made_before_the_claim_and_one_made_during_it(ready: Path) -> None:
    big = os.urandom(1 << 20) * 100
    (ready / "before.bin").write_bytes(big)
    handoff("claim")
    (ready / "during.bin").write_bytes(big[::-1])
    handoff("fail", "t", "--reason", "no")
    assert hashlib.sha256((ready / "before.bin").read_bytes()).digest() == hashlib.sha256(big).digest()
    assert not (ready / "during.bin").exists()
    handoff("restore", "t", "1")
    assert (ready / "during.bin").read_bytes() == big[::-1]


def _submodule(ready: Path) -> Path:
    lib = ready.parent / "lib"
    lib.mkdir()
    git("init", "-q", "-b", "main", cwd=lib)
    (lib / "lib.c").write_text("int x;\n")
    git("add", ".", cwd=lib)
    git("commit", "-q", "-m", "lib", cwd=lib)
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib", cwd=ready)
    git("commit", "-q", "-m", "add lib", cwd=ready)
    return ready / "lib"


def test_a_submodule_with_its_own_work_is_refused_before_anything_changes(ready: Path) -> None:
    sub = _submodule(ready)
    handoff("claim")
    (sub / "lib.c").write_text("int y;\n")
    git("commit", "-q", "-am", "new commit in the submodule", cwd=sub)
    (sub / "lib.c").write_text("int dirty;\n")
    (sub / "untracked.c").write_text("new\n")
    (ready / "top.txt").write_text("attempt\n")
    before, sub_before, state = picture(ready), picture(sub), state_head(ready)
    result = handoff("fail", "t", "--reason", "no", rc=2)
    assert "submodule lib" in result.err and "a new commit" in result.err
    assert "modified files" in result.err and "untracked files" in result.err and "nothing was changed" in result.err
    assert picture(ready) == before and picture(sub) == sub_before and state_head(ready) == state
    assert not git("for-each-ref", "refs/harness/attempts/", cwd=ready)
    assert handoff("show", "t", "--json").json()["status"] == "in_progress"
    # once the submodule is back where it was, the rollback goes ahead
    git("reset", "-q", "--hard", "HEAD~1", cwd=sub)
    git("clean", "-fdq", cwd=sub)
    assert handoff("fail", "t", "--reason", "no", "--json").json()["rolled_back"] is True
    assert not (ready / "top.txt").exists()


def _conflict(ready: Path) -> str:
    """A side branch whose one commit conflicts with main's next commit."""
    git("checkout", "-q", "-b", "side", cwd=ready)
    (ready / "README").write_text("side\n")
    git("commit", "-q", "-am", "side", cwd=ready)
    side = git("rev-parse", "HEAD", cwd=ready)
    git("checkout", "-q", "main", cwd=ready)
    return side


@pytest.mark.parametrize("operation", ["rebase", "merge", "cherry-pick"])
def test_an_operation_in_progress_is_named_and_refused_then_ended_with_force(ready: Path, operation: str) -> None:
    side = _conflict(ready)
    (ready / "untracked-before").write_text("mine\n")
    before = picture(ready)
    handoff("claim")
    (ready / "README").write_text("main\n")
    git("commit", "-q", "-am", "main", cwd=ready)
    args = {"rebase": ["rebase", "side"], "merge": ["merge", "side"], "cherry-pick": ["cherry-pick", side]}[operation]
    assert subprocess.run(["git", *args], cwd=ready, capture_output=True).returncode != 0  # stopped on the conflict
    during, state = picture(ready), state_head(ready)
    result = handoff("fail", "t", "--reason", "no", rc=2)
    assert f"a {operation} is in progress" in result.err and "--force" in result.err
    assert picture(ready) == during and state_head(ready) == state
    out = handoff("fail", "t", "--reason", "no", "--force", "--json").json()
    assert out["operation_ended"] == operation and out["rolled_back"] is True
    assert picture(ready) == before
    assert git("symbolic-ref", "HEAD", cwd=ready) == "refs/heads/main"
    for abort in (["rebase", "--abort"], ["merge", "--abort"], ["cherry-pick", "--abort"]):
        subprocess.run(["git", *abort], cwd=ready, capture_output=True)  # nothing left to undo the rollback
    assert picture(ready) == before
    # the conflicted work is in the attempt, markers and all
    assert b"<<<<<<<" in gitb("show", "refs/harness/attempts/t/1:README", cwd=ready)


def test_a_linked_worktree_rolls_back_alone(ready: Path) -> None:
    other = ready.parent / "wt"
    git("worktree", "add", "-q", "-b", "wt", str(other), cwd=ready)
    (ready / "main-only.txt").write_text("main's untracked\n")
    (other / "mine.txt").write_text("before the claim\n")
    main_before = picture(ready)
    before = picture(other)
    handoff("claim", cwd=other)
    (other / "mine.txt").write_text("during\n")
    (other / "created.txt").write_text("new\n")
    git("add", "created.txt", cwd=other)
    handoff("fail", "t", "--reason", "no", cwd=other)
    assert picture(other) == before and picture(ready) == main_before
    handoff("restore", "t", "1", cwd=other)
    assert (other / "mine.txt").read_text() == "during\n" and (other / "created.txt").read_text() == "new\n"


def test_a_failing_done_and_a_recovery_row_roll_back_to_the_claim_too(ready: Path) -> None:
    (ready / "plan.toml").write_text("mine\n")
    before = picture(ready)
    handoff("claim")
    (ready / "work.txt").write_text("attempt\n")
    assert handoff("done", "t", rc=1)
    assert picture(ready) == before
    # an interrupted session: the next session's recovery validates, fails and rolls back
    handoff("claim")
    (ready / "work.txt").write_text("attempt 2\n")
    handoff("session", "start")
    assert picture(ready) == before
    assert gitb("show", "refs/harness/attempts/t/2:work.txt", cwd=ready) == b"attempt 2\n"


def test_a_clean_claim_records_no_snapshot_and_old_records_roll_back_as_before(ready: Path) -> None:
    out = handoff("claim", "--json").json()
    assert "claim_snapshot" not in out or out["claim_snapshot"] is None
    (ready / "x").write_text("attempt\n")
    handoff("fail", "t", "--reason", "no")
    assert not (ready / "x").exists() and git("status", "--porcelain", cwd=ready) == ""


def test_a_killed_rollback_is_finished_by_the_next_command(ready: Path) -> None:
    from git_handoff.infra import rollback
    from git_handoff.infra.gitrepo import Repo

    (ready / "plan.toml").write_text("mine\n")
    before = picture(ready)
    handoff("claim")
    (ready / "work.txt").write_text("attempt\n")
    handoff("fail", "t", "--reason", "no", "--keep-worktree")
    # as if a fail had recorded its failure and been killed before touching the tree
    task = handoff("show", "t", "--json").json()
    repo = Repo.discover(ready)
    snapshot = handoff("attempts", "t", "--json").json()[0]["claim_snapshot"]
    assert snapshot
    plan = rollback.RollbackPlan(task="t", base=task["started_at_commit"], snapshot=snapshot,
                         attempt_ref=task["last_attempt_ref"], operation=None)
    rollback.write_journal(repo, plan)
    result = handoff("status")
    assert "finished the interrupted rollback of t" in result.err
    assert not (ready / "work.txt").exists() and not rollback.has_journal(repo)
    assert picture(ready) == before
    # a journal whose failure was never recorded changes nothing
    handoff("claim")
    (ready / "again.txt").write_text("x\n")
    rollback.write_journal(repo, rollback.RollbackPlan(task="t", base=task["started_at_commit"], snapshot=None,
                                               attempt_ref="refs/harness/attempts/t/99", operation=None))
    handoff("status")
    assert (ready / "again.txt").exists() and not rollback.has_journal(repo)


def test_restore_never_deletes_an_ignored_file_or_one_git_does_not_hold(ready: Path) -> None:
    # a crafted attempt (as if fetched): its base lists secret.log, its tree drops it
    (ready / "secret.log").write_bytes(b"my local secret\n")
    (ready / "plain.txt").write_bytes(b"mine, not in git\n")
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=ready, input=b"other\n",
                          capture_output=True, check=True).stdout.decode().strip()
    readme = git("rev-parse", "HEAD:README", cwd=ready)
    listing = f"100644 blob {blob}\tsecret.log\n100644 blob {blob}\tplain.txt\n100644 blob {readme}\tREADME\n"
    base_tree = subprocess.run(["git", "mktree"], cwd=ready, input=listing.encode(), capture_output=True,
                               check=True).stdout.decode().strip()
    base = git("commit-tree", base_tree, "-m", "crafted base", cwd=ready)
    tree = git("rev-parse", "HEAD^{tree}", cwd=ready)
    record = {"task": "t", "attempt": 1, "base": base, "files": []}
    attempt = git("commit-tree", tree, "-p", base, "-m", "crafted\n\n" + json.dumps(record), cwd=ready)
    git("update-ref", "refs/harness/attempts/t/1", attempt, cwd=ready)
    handoff("restore", "t", "1", "--force")
    assert (ready / "secret.log").read_bytes() == b"my local secret\n"
    assert (ready / "plain.txt").read_bytes() == b"mine, not in git\n"


def test_the_packed_picture_is_the_tree_git_add_would_build(ready: Path) -> None:
    from git_handoff.infra import worktree
    from git_handoff.infra.gitrepo import Repo

    _odd_files(ready, b"before")
    git("add", "tool.sh", "with space.txt", cwd=ready)
    git("commit", "-q", "-m", "some", cwd=ready)
    _odd_files(ready, b"during")
    (ready / "README").unlink()
    (ready / "staged.txt").write_bytes(b"v1\n")
    git("add", "staged.txt", cwd=ready)
    (ready / "staged.txt").write_bytes(b"v2\n")
    (ready / "x.log").write_bytes(b"ignored\n")
    repo = Repo.discover(ready)
    head = git("rev-parse", "HEAD", cwd=ready)
    fast = worktree.picture(repo, head)
    with worktree.TempIndex(repo, copy=True) as ix:
        index = ix.tree()
        ix.git("add", "-A", "--", ".")
        slow = ix.tree()
    assert (fast.worktree, fast.index) == (slow, index)
    assert gitb("show", f"{fast.worktree}:staged.txt", cwd=ready) == b"v2\n"
    assert gitb("show", f"{fast.index}:staged.txt", cwd=ready) == b"v1\n"
