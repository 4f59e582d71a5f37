"""Per-machine rights on a shared remote (docs/server-rights.md), without a server: the
`update` hook shipped in hooks-templates/server-update installed in a plain bare
repository (a local push runs it with the pusher's environment, so HANDOFF_PUSHER
names the machine), and `handoff.cloneId`, which ties a clone's refs to the prefix a
rule grants its key. The same fleet under gitolite over sshd and under smart HTTP with
authentication is in tests/e2e/test_fleet_rights.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from git_handoff.core.errors import Contention
from git_handoff.infra.gitrepo import Repo
from git_handoff.remote import fleet_lock
from git_handoff.state import identity
from tests.support import gitolite
from tests.support.remotes import ok
from tests.support.repo import git, make_repo, run

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "hooks-templates" / "server-update"
ZERO = "0" * 40


def install_rights(bare: Path, rights: dict[str, list[str]], admins: tuple[str, ...] = ()) -> None:
    """The shipped hook as hooks/update of `bare`, with {pusher: [clone id prefixes]}."""
    shutil.copy(HOOK, bare / "hooks" / "update")
    (bare / "hooks" / "update").chmod(0o755)
    for user, prefixes in rights.items():
        for prefix in prefixes:
            git("config", "--add", f"handoffRights.{user}.clones", prefix, cwd=bare)
    for user in admins:
        git("config", f"handoffRights.{user}.admin", "true", cwd=bare)


def push_as(user: str | None, path: Path, *refspecs: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HANDOFF_PUSHER", "REMOTE_USER", "GL_USER")}
    if user is not None:
        env["HANDOFF_PUSHER"] = user
    return subprocess.run(["git", "push", "--porcelain", "origin", *refspecs], cwd=path, capture_output=True,
                          text=True, env=env)


@pytest.fixture
def guarded(tmp_path: Path) -> tuple[Path, Path]:
    """(bare remote with the rights hook, a clone of it with two commits HEAD~1, HEAD)."""
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    work = make_repo(tmp_path / "work")
    git("commit", "-q", "--allow-empty", "-m", "second", cwd=work)
    git("remote", "add", "origin", str(bare), cwd=work)
    install_rights(bare, {"ma": ["aa"], "mb": ["bb", "cc01"]}, admins=("boss",))
    return bare, work


A_STATE = "refs/harness/clones/aa00000000000001/state"
B_STATE = "refs/harness/clones/bb00000000000002/state"


def refused(proc: subprocess.CompletedProcess[str], ref: str) -> bool:
    return any(line.startswith("!") and ref in line for line in proc.stdout.splitlines())


def test_the_hook_lets_a_machine_write_its_own_clone_refs_only(guarded: tuple[Path, Path]) -> None:
    bare, work = guarded
    ok_push = push_as("ma", work, f"HEAD:{A_STATE}", "HEAD:refs/harness/clones/aa00000000000001/notes")
    assert ok_push.returncode == 0, ok_push.stderr
    other = push_as("ma", work, f"HEAD:{B_STATE}")
    assert other.returncode != 0 and refused(other, B_STATE)
    assert f"handoff-rights: DENIED {B_STATE} for ma: ma may write only the clone refs whose id starts with aa" \
        in other.stderr
    # mb has two prefixes; a clone id that is not 16 hex digits is nobody's
    assert push_as("mb", work, "HEAD:refs/harness/clones/cc01000000000003/state").returncode == 0
    bad = push_as("mb", work, "HEAD:refs/harness/clones/bb0000000000000/state")
    assert bad.returncode != 0 and "a clone id is 16 hex digits" in bad.stderr
    # nobody rewinds or deletes another machine's ref either
    assert push_as("mb", work, f"+HEAD~1:{A_STATE}").returncode != 0
    assert push_as("mb", work, f":{A_STATE}").returncode != 0
    assert git("rev-parse", A_STATE, cwd=bare).strip() == git("rev-parse", "HEAD", cwd=work).strip()
    # its own it may rewind and delete (retiring it)
    assert push_as("ma", work, f"+HEAD~1:{A_STATE}").returncode == 0
    assert push_as("ma", work, f":{A_STATE}").returncode == 0


def test_the_hook_lets_every_member_claim_save_attempts_and_take_the_lock(guarded: tuple[Path, Path]) -> None:
    bare, work = guarded
    claim = "refs/harness/claims/t0001"
    assert push_as("ma", work, f"HEAD~1:{claim}").returncode == 0
    assert push_as("mb", work, f"+HEAD:{claim}").returncode == 0  # a takeover is a forced move
    assert push_as("mb", work, f":{claim}").returncode == 0  # pruned
    assert push_as("ma", work, "HEAD:refs/harness/claims/a/b").returncode != 0
    attempt = "refs/harness/attempts/t0001/1"
    assert push_as("ma", work, f"HEAD~1:{attempt}").returncode == 0
    moved = push_as("mb", work, f"HEAD:{attempt}")
    assert moved.returncode != 0 and "a saved attempt is never moved or deleted" in moved.stderr
    assert push_as("mb", work, f":{attempt}").returncode != 0
    lock = "refs/harness/locks/relay"
    assert push_as("ma", work, f"HEAD:{lock}").returncode == 0
    assert push_as("mb", work, f":{lock}").returncode == 0
    # branches are not the hook's business
    assert push_as("ma", work, "HEAD:refs/heads/topic").returncode == 0
    assert git("rev-parse", attempt, cwd=bare).strip() == git("rev-parse", "HEAD~1", cwd=work).strip()


@pytest.mark.parametrize(("user", "ref", "why"), [
    ("ma", "refs/harness/state", "only an admin (handoffRights.ma.admin) writes this ref"),
    ("ma", "refs/notes/harness", "only an admin"),
    ("ma", "refs/harness/locks/other", "only an admin"),
    ("stranger", "refs/harness/claims/t0001", "not a member of the fleet (no handoffRights.stranger.clones"),
    (None, "refs/harness/claims/t0001", "the server names no pusher"),
    ("a b", "refs/harness/claims/t0001", "a pusher name of letters, digits and @._+- only"),
])
def test_the_hook_refuses_the_rest(guarded: tuple[Path, Path], user: str | None, ref: str, why: str) -> None:
    bare, work = guarded
    proc = push_as(user, work, f"HEAD:{ref}")
    assert proc.returncode != 0 and refused(proc, ref), proc.stdout
    assert why in proc.stderr
    assert git("for-each-ref", cwd=bare).strip() == ""


def test_an_admin_may_write_the_one_ref_state(guarded: tuple[Path, Path]) -> None:
    _bare, work = guarded
    assert push_as("boss", work, "HEAD:refs/harness/state", f"HEAD:{B_STATE}").returncode == 0


# -- handoff.cloneId ------------------------------------------------------------------------


def clone_of(tmp_path: Path, bare: Path, name: str, clone_id: str) -> Path:
    path = tmp_path / name
    git("clone", "-q", "-c", f"handoff.cloneId={clone_id}", str(bare), str(path), cwd=tmp_path)
    return path


@pytest.fixture
def fleet_remote(tmp_path: Path) -> Path:
    """A bare remote seeded with a handoff state (by an admin), then guarded by the hook."""
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    seed = make_repo(tmp_path / "seed")
    git("remote", "add", "origin", str(bare), cwd=seed)
    git("push", "-q", "origin", "main", cwd=seed)
    ok("init", "--mode", "concurrent", cwd=seed)
    ok("add", "one", "--id", "t1", "--check", "true", cwd=seed)
    ok("sync", cwd=seed)
    install_rights(bare, {"ma": ["aa"], "mb": ["bb"]})
    return bare


def test_a_clone_publishes_under_the_prefix_it_is_given(tmp_path: Path, fleet_remote: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    a = clone_of(tmp_path, fleet_remote, "a", "aa")
    monkeypatch.setenv("HANDOFF_PUSHER", "ma")
    ok("sync", cwd=a)
    ok("trust", "--all", cwd=a)
    claimed = ok("claim", "--remote", "origin", "--json", cwd=a)
    assert isinstance(claimed, dict) and claimed["id"] == "t1"
    mine = [ref for ref in git("for-each-ref", "--format=%(refname)", "refs/harness/", cwd=fleet_remote).split()
            if ref.startswith("refs/harness/clones/") and ref.endswith("/state")]
    ids = {ref.split("/")[3] for ref in mine}
    assert any(i.startswith("aa") and len(i) == 16 for i in ids), ids
    assert git("rev-parse", "-q", "--verify", "refs/harness/claims/t1", cwd=fleet_remote).strip()


def test_sync_to_a_ref_of_another_machine_is_a_policy_refusal_exit_3(tmp_path: Path, fleet_remote: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """mb's key, but a clone that calls itself by ma's prefix: the server refuses its state
    ref; sync says so in one line naming the ref and the server's reason, exit 3, and
    nothing of the remote or of the clone's own state changes."""
    b = clone_of(tmp_path, fleet_remote, "b", "aa")
    monkeypatch.setenv("HANDOFF_PUSHER", "mb")
    before = git("for-each-ref", cwd=fleet_remote)
    res = run("sync", cwd=b)
    assert res.rc == 3, (res.rc, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1, res.err
    ref = "refs/harness/clones/aa"
    assert lines[0].startswith(f"error: origin refused {ref}"), lines[0]
    assert "/state: [remote rejected] (hook declined), the server says \"handoff-rights: DENIED" in lines[0]
    assert "mb may write only the clone refs whose id starts with bb" in lines[0]
    assert "a rule on the server, not a race" in lines[0]
    assert git("for-each-ref", cwd=fleet_remote) == before
    json_res = run("sync", "--json", cwd=b)
    assert json_res.rc == 3 and '"exit_code": 3' in json_res.out


def test_a_bad_clone_id_setting_is_refused_and_changes_nothing(tmp_path: Path, fleet_remote: Path) -> None:
    b = clone_of(tmp_path, fleet_remote, "b", "not-hex")
    before = git("for-each-ref", cwd=fleet_remote)
    res = run("sync", cwd=b)
    assert res.rc == 2, res.err
    assert res.err.strip().splitlines() == [
        "error: handoff.cloneId is 'not-hex': give 16 hex digits (this clone's id) or fewer (the start of it, "
        "e.g. the prefix a server rule grants this machine's key)"]
    assert git("for-each-ref", cwd=fleet_remote) == before
    assert not git("for-each-ref", "refs/harness/", cwd=b).strip()


def test_a_relay_lock_the_server_refuses_is_a_policy_refusal_not_a_lost_race(
        tmp_path: Path, fleet_remote: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the right to the lock ref, taking the fleet relay lock is refused at once
    (exit 3), naming the ref and the server's reason - not retried as a race and
    reported as a lock that `kept changing`."""
    a = clone_of(tmp_path, fleet_remote, "a", "aa")
    monkeypatch.setenv("HANDOFF_PUSHER", "stranger")
    repo = Repo.discover(a)
    lock = fleet_lock.FleetLock(repo, "origin", identity.clone_id(repo), os.getpid(), lease_seconds=60)
    with pytest.raises(Contention) as caught:
        lock.acquire()
    assert caught.value.message.startswith(f"origin refused {fleet_lock.LOCK_REF}: \"handoff-rights: DENIED "
                                           f"{fleet_lock.LOCK_REF} for stranger: not a member of the fleet"), \
        caught.value.message
    assert "a rule on the server, not a race" in caught.value.message
    assert not git("for-each-ref", "refs/harness/locks/", cwd=fleet_remote).strip()


# -- the gitolite rule set of docs/server-rights.md, as gitolite itself reads it ------------------


def doc_gitolite_conf() -> str:
    text = (ROOT / "docs" / "server-rights.md").read_text()
    section = text[text.index("## gitolite"):]
    return section.split("```\n", 2)[1]


@pytest.fixture(scope="module")
def doc_gitolite(tmp_path_factory: pytest.TempPathFactory) -> gitolite.Gitolite:
    """gitolite (no server: `gitolite access` answers offline) with the doc's rules."""
    why = gitolite.missing()
    if why:
        pytest.skip(why)
    server = gitolite.Gitolite(tmp_path_factory.mktemp("doc-gitolite"))
    server.setup()
    server.configure(doc_gitolite_conf(), ["machine-a", "machine-b", "ci-runner", "stranger"])
    return server


@pytest.mark.parametrize(("user", "perm", "ref", "allowed"), [
    ("machine-a", "W", "refs/harness/clones/a1f741ab0c00c539/state", True),
    ("machine-a", "+", "refs/harness/clones/a1f741ab0c00c539/notes", True),  # its own: rewind, delete
    ("machine-a", "W", "refs/harness/clones/b2f741ab0c00c539/state", False),
    ("machine-b", "+", "refs/harness/clones/a1f741ab0c00c539/state", False),
    ("machine-a", "W", "refs/harness/clones/a1f741ab0c00c53/state", False),  # 15 digits: no clone id
    ("ci-runner", "W", "refs/harness/clones/c30000000000abcd/state", True),
    ("machine-b", "W", "refs/harness/claims/t0001", True),
    ("machine-b", "+", "refs/harness/claims/t0001", True),  # a takeover, a deletion
    ("machine-a", "W", "refs/harness/attempts/t0001/1", True),
    ("machine-a", "+", "refs/harness/attempts/t0001/1", False),
    ("ci-runner", "+", "refs/harness/locks/relay", True),
    ("ci-runner", "W", "refs/harness/locks/relay-other", False),
    ("machine-a", "W", "refs/harness/state", False),
    ("machine-a", "W", "refs/notes/harness", False),
    ("machine-a", "R", "any", True),
    ("stranger", "R", "any", False),
    ("admin", "+", "refs/harness/state", True),
])
def test_the_documented_gitolite_rules_grant_what_the_doc_says(doc_gitolite: gitolite.Gitolite, user: str,
                                                               perm: str, ref: str, allowed: bool) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["HOME"] = str(doc_gitolite.home)
    proc = subprocess.run(["gitolite", "access", "-q", "project", user, perm, ref], env=env, capture_output=True)
    assert (proc.returncode == 0) is allowed, proc.stdout
