"""A fleet on a real git server with per-machine rights (docs/server-rights.md).

- gitolite (Debian's gitolite3) over its own sshd on 127.0.0.1, with the rule set of
  docs/server-rights.md: each machine's key writes only the clone refs under the prefix
  its clone is given (`handoff.cloneId`), creates, moves and deletes claim refs, creates
  attempts and takes the relay lock;
- smart HTTP with basic authentication (git http-backend behind a small server), the
  rights kept by the shipped `update` hook (hooks-templates/server-update).

Four clones, each with its own key (or password), complete 40 tasks with no task
claimed or completed twice and none lost; a clone that pushes to another clone's ref is
refused by the server, and `sync` reports that as a policy refusal, exit 3, in one line
naming the ref.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from git_handoff.infra.gitrepo import Repo
from git_handoff.ops.fleet_claims import claim_record, finished
from tests.support import fleet, gitolite, transports

pytestmark = pytest.mark.slow  # a real server, four clones, 40 tasks

K = 4
TASKS = 40
HOOK = Path(__file__).resolve().parents[2] / "hooks-templates" / "server-update"


def prefix(i: int) -> str:
    return f"c{i}"  # clone i's handoff.cloneId: the start of its id, which the server grants its key


def gitolite_conf(machines: list[str]) -> str:
    """The rule set of docs/server-rights.md for `machines` (machine i: prefix(i))."""
    own = "".join(f"    RW+ refs/harness/clones/{prefix(i)}[0-9a-f]{{{16 - len(prefix(i))}}}/ = {name}\n"
                  for i, name in enumerate(machines))
    return (f"@fleet = {' '.join(machines)}\n"
            "repo gitolite-admin\n    RW+ = admin\n"
            "repo remote\n"
            "    RW+ = admin\n"
            f"{own}"
            "    RW+ refs/harness/claims/ = @fleet\n"
            "    RW  refs/harness/attempts/ = @fleet\n"
            "    RW  refs/harness/work/ = @fleet\n"
            "    RW+ refs/harness/locks/relay$ = @fleet\n"
            "    RW  refs/heads/ = @fleet\n"
            "    R   = @fleet\n")


def remote_refs(path: Path, pattern: str = "refs/harness/*") -> dict[str, str]:
    out = fleet.sh("git", "ls-remote", "origin", pattern, cwd=path)
    return {line.split("\t")[1]: line.split("\t")[0] for line in out.splitlines() if line}


def clone_ref(path: Path, i: int) -> str:
    """Clone i's state ref on the server (its id starts with its prefix)."""
    refs = [r for r in remote_refs(path, f"refs/harness/clones/{prefix(i)}*") if r.endswith("/state")]
    assert len(refs) == 1, refs
    return refs[0]


def work_the_fleet(clones: list[Path], bare: Path) -> None:
    """A failed attempt first (an attempt ref the server must take), then the fleet's loop
    until nothing is eligible; then the audit."""
    first = clones[0]
    r = fleet.handoff(first, "claim", "--remote", "origin", "--json")
    assert r.returncode == 0, r.stderr
    failed = json.loads(r.stdout)["id"]
    r = fleet.handoff(first, "fail", failed, "--reason", "first try")
    assert r.returncode == 0, r.stderr
    r = fleet.handoff(first, "sync", "origin", "--json")
    assert r.returncode == 0, r.stderr
    assert f"refs/harness/attempts/{failed}/1" in remote_refs(first)

    ran = fleet.run_fleet(clones, deadline=time.monotonic() + 1200)
    assert all(r.finished for r in ran.reports), [r.errors for r in ran.reports]
    assert not [e for r in ran.reports for e in r.errors], [r.errors for r in ran.reports]
    print(f"{TASKS} tasks, {len(clones)} clones: {ran.seconds:.1f} s ({TASKS / ran.seconds:.2f} tasks/s), "
          f"CPU {ran.cpu_seconds / TASKS:.2f} s per task, exit 3: {sum((r.exit3 for r in ran.reports), Counter())}")
    result = fleet.audit(clones, ran.reports)
    claimed = Counter(tid for r in ran.reports for tid in r.claimed)
    assert not [tid for tid, n in claimed.items() if n > 1], claimed
    assert result.tasks == TASKS and result.completed == TASKS, result
    assert not result.lost and not result.double_done and not result.double_logged, result
    assert result.same_list and result.same_tree and not result.sync_failures, result
    assert sum(len(r.completed) for r in ran.reports) == TASKS
    # every clone published under its own prefix, and every claim ref left is closed: at
    # a commit that records its task completed (deleted once that is an hour old)
    refs = remote_refs(first)
    repo = Repo.discover(first)
    for ref, oid in refs.items():
        if ref.startswith("refs/harness/claims/"):
            record = claim_record(repo, oid, ref[len("refs/harness/claims/"):])
            assert record is not None and finished(record), (ref, record)
    for i in range(K):
        clone_ref(first, i)
    # the server moved refs for every machine (its reference-transaction log)
    moved = {line.split()[2] for line in fleet.ref_updates(bare)}
    assert {clone_ref(first, i) for i in range(K)} <= moved


def refused_across(clones: list[Path], deny_words: str) -> None:
    """Clone 0 pushes to clone 1's ref: the server refuses it; then clone 0 is told it
    is clone 1 (handoff.cloneId) and syncs: exit 3, one line naming the ref, nothing moved."""
    a = clones[0]
    victim = clone_ref(a, 1)
    # something new to publish (the fleet has converged: the push would be a no-op)
    fleet.sh(*fleet.handoff_argv("add", "one more", "--id", "extra", "--check", "true"), cwd=a)
    before = remote_refs(a)
    raw = subprocess.run(["git", "push", "--porcelain", "origin", f"refs/harness/state:{victim}"], cwd=a,
                         capture_output=True, text=True, env=fleet.child_env())
    assert raw.returncode != 0 and deny_words in raw.stderr, raw.stderr
    assert f"!\trefs/harness/state:{victim}\t[remote rejected]" in raw.stdout, raw.stdout
    fleet.sh("git", "config", "handoff.cloneId", victim.split("/")[3], cwd=a)
    r = fleet.handoff(a, "sync", "origin")
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: origin refused {victim}: [remote rejected]"), lines[0]
    assert deny_words in lines[0] and "a rule on the server, not a race" in lines[0], lines[0]
    assert remote_refs(a) == before
    fleet.sh("git", "config", "handoff.cloneId", prefix(0), cwd=a)
    r = fleet.handoff(a, "sync", "origin")
    assert r.returncode == 0, r.stderr


def relay_lock(clones: list[Path], bare: Path) -> None:
    """A machine takes the fleet relay lock and releases it (the server logs both)."""
    before = len(fleet.ref_updates(bare))
    r = fleet.handoff(clones[1], "relay", "--fleet-lock", "--agent", "true")
    assert r.returncode == 0, r.stderr
    lock = [line for line in fleet.ref_updates(bare)[before:] if line.endswith(" refs/harness/locks/relay")]
    assert len(lock) == 2 and set(lock[0].split()[0]) == {"0"} and set(lock[1].split()[1]) == {"0"}, lock


def test_a_fleet_under_gitolite_over_sshd(tmp_path: Path) -> None:
    why = gitolite.missing()
    if why:
        pytest.skip(why)
    server = gitolite.Gitolite(tmp_path / "gitolite")
    server.setup()
    bare = fleet.prepare_remote(server.repositories, TASKS)
    machines = [f"machine{i}" for i in range(K)]
    server.configure(gitolite_conf(machines), machines)
    with server.serving():
        clones = fleet.make_clones(tmp_path, server.url("remote"), K, config=lambda i: [
            f"core.sshCommand={server.ssh_command(machines[i])}", f"handoff.cloneId={prefix(i)}"])
        work_the_fleet(clones, bare)
        relay_lock(clones, bare)
        refused_across(clones, "FATAL: W refs/harness/clones/c1")
    assert "DENIED by fallthru" in (server.home / ".gitolite" / "logs").joinpath(
        sorted(p.name for p in (server.home / ".gitolite" / "logs").iterdir())[-1]).read_text()


def with_rights_hook(bare: Path, machines: list[str]) -> None:
    shutil.copy(HOOK, bare / "hooks" / "update")
    (bare / "hooks" / "update").chmod(0o755)
    for i, name in enumerate(machines):
        fleet.sh("git", "config", "--add", f"handoffRights.{name}.clones", prefix(i), cwd=bare)


def test_a_fleet_through_smart_http_with_authentication(tmp_path: Path) -> None:
    served = tmp_path / "served"
    bare = fleet.prepare_remote(served, TASKS)
    machines = [f"machine{i}" for i in range(K)]
    with_rights_hook(bare, machines)
    users = tmp_path / "users"
    users.write_text("".join(f"{name}:pw-{name}\n" for name in machines))
    with transports.smart_http(served, users) as base:
        host = base.removeprefix("http://")
        url = f"{base}/{fleet.REMOTE_NAME}"
        # without credentials, or with a wrong password, the server answers 401: nothing is served
        for who, answer in (("", "could not read Username"), ("machine0:wrong@", "Authentication failed")):
            denied = subprocess.run(["git", "ls-remote", url.replace("://", f"://{who}")], capture_output=True,
                                    text=True, env=fleet.child_env(GIT_TERMINAL_PROMPT="0"))
            assert denied.returncode != 0 and answer in denied.stderr, denied.stderr

        def config(i: int) -> list[str]:
            store = tmp_path / f"credentials-{i}"
            store.write_text(f"http://{machines[i]}:pw-{machines[i]}@{host}\n")
            store.chmod(0o600)
            return ["credential.helper=", f"credential.helper=store --file={store}", f"handoff.cloneId={prefix(i)}"]

        clones = fleet.make_clones(tmp_path, url, K, config=config)
        work_the_fleet(clones, bare)
        relay_lock(clones, bare)
        refused_across(clones, "handoff-rights: DENIED")
