# ruff: noqa: F811  (pytest fixtures imported from tests.support.remotes)
"""What a remote piles up costs this clone only what it reads (docs/threat-model.md):
junk refs are quarantined one by one, refs outside the namespaces this version reads are
never fetched, a plain `git fetch` brings nothing where commands look, a fleet of 1,000
clone heads merges in linear work into commits of bounded fan-in, and a fetched chain
5,000 deep is drawn by `graph`."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.env import FIXED_DATE
from tests.support.fleet_heads import publish_heads, publish_unknown_refs
from tests.support.remotes import clones, ok, remote_url, task  # noqa: F401
from tests.support.repo import git, run, state_head


def pair(clones: Callable[[str], Path]) -> tuple[Path, Path]:
    a = clones("a")
    ok("init", "--mode", "concurrent", cwd=a)
    ok("add", "first", "--id", "t1", "--check", "true", cwd=a)
    ok("sync", cwd=a)
    b = clones("b")
    ok("sync", cwd=b)
    return a, b


def _clean(res: object, what: str) -> None:
    text = res.out + res.err  # type: ignore[attr-defined]
    assert "unexpected" not in text.lower() and "Traceback" not in text, f"{what}: {text[-400:]}"


def test_a_plain_git_fetch_brings_nothing_unchecked_where_commands_look(clones: Callable[[str], Path]) -> None:
    """The refspecs sync configures made a plain `git fetch` mirror everything under
    refs/harness/ into the remote-tracking refs, junk included, where `status`, `claim`
    and `sync` read it (`unexpected InvalidSpecError`)."""
    a, b = pair(clones)
    blob = git("hash-object", "-w", "--stdin", cwd=a, input_text="junk")
    junk = {"refs/harness/claims/t1": blob, "refs/harness/clones/NOTHEX/state": state_head(a),
            "refs/harness/clones/\u202eevil/state": state_head(a), "refs/harness/locks/relay": blob,
            "refs/harness/clones/0123456789abcdef/state": blob, "refs/harness/other/x": blob}
    for ref, oid in junk.items():
        git("push", "-q", "origin", f"{oid}:{ref}", cwd=a)
    ok("add", "second", "--id", "t2", cwd=a)
    ok("sync", cwd=a)
    git("fetch", "-q", "origin", cwd=b)  # the user's own fetch, through the configured refspecs
    tracking = git("for-each-ref", "--format=%(refname)", "refs/remotes/", cwd=b)
    assert not [ref for ref in junk if ref[len("refs/"):] in tracking], tracking
    for args in (("status",), ("status", "--json"), ("list", "--json"), ("next", "--json"), ("log", "-n", "5")):
        res = run(*args, cwd=b)
        _clean(res, " ".join(args))
        assert res.rc in (0, 1), f"{args}: {res.err}"
    res = run("sync", "--json", cwd=b)
    _clean(res, "sync")
    assert res.rc == 0, res.err
    held = {item["ref"]: item["why"] for item in json.loads(res.out)["quarantined"]}
    assert set(held) >= {"refs/harness/clones/NOTHEX/state", "refs/harness/clones/0123456789abcdef/state"}
    assert "refs/harness/other/x" not in held and "refs/harness/locks/relay" not in held  # not read: not fetched
    assert task(b, "t2")["title"] == "second"  # the rest of the remote is used
    shown = run("status", cwd=b).out
    assert "quarantined" in shown and "\u202e" not in shown and "xaeevil" in shown, shown
    assert ok("claim", "t1", "--remote", "origin", "--json", cwd=b)["id"] == "t1"  # the junk claim is no claim


@pytest.mark.slow
def test_60000_refs_in_an_unknown_namespace_are_never_fetched(clones: Callable[[str], Path]) -> None:
    """They were mirrored into tracking refs (~50 s a sync)."""
    a, b = pair(clones)
    bare = Path(git("config", "remote.origin.url", cwd=a))
    if not bare.is_dir():
        pytest.skip("the refs are written into the remote's directory")
    publish_unknown_refs(bare, 60_000, state_head(a) or "")
    ok("add", "second", "--id", "t2", cwd=a)
    ok("sync", cwd=a)
    start = time.monotonic()
    res = run("sync", "--json", cwd=b)
    took = time.monotonic() - start
    assert res.rc == 0, res.err
    assert json.loads(res.out)["quarantined"] == []
    assert task(b, "t2")["title"] == "second"
    assert "junk" not in git("for-each-ref", cwd=b)
    assert took < 20, took


def test_sync_fetches_in_protocol_2_whatever_the_users_config_says(clones: Callable[[str], Path],
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With protocol.version=0 in the user's config, the fetch of `sync` was told every ref
    of the remote (60,000 piled-up refs: 3.8 MB and ~2 s a sync); in version 2 the server
    lists only the refs under the prefixes sync asks for."""
    a, b = pair(clones)
    bare = Path(git("config", "remote.origin.url", cwd=a))
    if not bare.is_dir():
        pytest.skip("the refs are written into the remote's directory")
    publish_unknown_refs(bare, 2_000, state_head(a) or "")
    git("config", "protocol.version", "0", cwd=b)
    trace = tmp_path / "packets.txt"
    monkeypatch.setenv("GIT_TRACE_PACKET", str(trace))
    ok("add", "second", "--id", "t2", cwd=a)
    ok("sync", cwd=a)
    trace.unlink(missing_ok=True)
    ok("sync", cwd=b)
    got = trace.read_text(errors="replace")
    assert "fetch<" in got and "ls-refs" in got, got[:2000]  # the fetch spoke version 2
    fetched = [line for line in got.splitlines() if line.split("|", 1)[0].strip().startswith("fetch")]
    assert not any("refs/harness/junk/" in line for line in fetched if "< " in line)
    assert task(b, "t2")["title"] == "second"


SERVER_HIDING = [("receive.hideRefs", "refs/harness/"),
                 *[("receive.hideRefs", f"!refs/harness/{ns}") for ns in ("clones/", "claims/", "attempts/", "work/",
                                                                         "locks/", "state")],
                 ("core.alternateRefsPrefixes", "refs/heads/")]


def test_the_servers_hiding_of_unread_namespaces_keeps_every_handoff_push_working(
        clones: Callable[[str], Path]) -> None:
    """The settings docs/server-rights.md gives a server against piled-up refs: the fleet
    still syncs, claims through the remote, saves attempts and finishes work; the piled
    refs are not advertised to a push; a push into a hidden namespace is refused."""
    a, b = pair(clones)
    bare = Path(git("config", "remote.origin.url", cwd=a))
    if not bare.is_dir():
        pytest.skip("the settings are written into the remote's directory")
    for key, value in SERVER_HIDING:
        git("config", "--add", key, value, cwd=bare)
    publish_unknown_refs(bare, 2_000, state_head(a) or "")
    ok("add", "second", "--id", "t2", "--check", "false", "--max-attempts", "1", cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    ok("trust", "t1", cwd=b)
    assert ok("claim", "t1", "--remote", "origin", "--json", cwd=b)["id"] == "t1"
    assert run("claim", "t1", "--remote", "origin", cwd=a).rc == 3  # the claim ref is seen: taken
    ok("done", "t1", cwd=b)
    ok("claim", "t2", "--remote", "origin", cwd=a)
    assert run("done", "t2", cwd=a).rc == 1  # its check fails: an attempt saved
    ok("sync", cwd=b)
    ok("sync", cwd=a)
    assert task(b, "t1")["status"] == "completed" and task(a, "t1")["status"] == "completed"
    assert git("ls-remote", str(bare), "refs/harness/attempts/*", cwd=a)
    advertised = git("ls-remote", "--refs", str(bare), cwd=a, check=False)
    assert "refs/harness/junk/" in advertised  # hidden from pushes only: reads see it (fetch never asks)
    pushed = subprocess.run(["git", "push", "--porcelain", "origin", "HEAD:refs/harness/junk/new"], cwd=a,
                            capture_output=True, text=True)
    assert pushed.returncode != 0 and "hidden ref" in pushed.stdout + pushed.stderr


@pytest.mark.slow
def test_1000_clone_heads_merge_into_commits_of_bounded_fan_in(clones: Callable[[str], Path]) -> None:
    """1,000 clone heads each adding a task: every task comes in, every head is an
    ancestor of the merged state, no commit has more than 16 parents (it had 1,001), and
    the next sync finds nothing to do."""
    a, b = pair(clones)
    ids = publish_heads(a, 1000)
    start = time.monotonic()
    res = run("sync", "--json", cwd=b)
    took = time.monotonic() - start
    assert res.rc == 0, res.err
    got = json.loads(res.out)
    assert got["action"] == "merged" and got["quarantined"] == []
    listed = {t["id"] for t in json.loads(run("list", "--json", cwd=b).out)}
    assert set(ids) <= listed
    head = state_head(b)
    assert head is not None
    fan_in = git("rev-list", "--parents", "--merges", head, cwd=b).splitlines()
    assert fan_in and max(len(line.split()) - 1 for line in fan_in) <= 16
    heads = git("ls-remote", "origin", "refs/harness/clones/*", cwd=b).splitlines()
    for line in heads[::97]:
        oid = line.split()[0]
        assert git("merge-base", "--is-ancestor", oid, head, cwd=b, check=False) == ""
    again = run("sync", "--json", cwd=b)
    assert again.rc == 0 and json.loads(again.out)["action"] in ("up-to-date", "pushed"), again.out
    assert git("rev-parse", "refs/harness/state", cwd=b) == head
    assert took < 120, took


@pytest.mark.slow
def test_graph_draws_a_fetched_chain_5000_deep(clones: Callable[[str], Path]) -> None:
    """`graph` recursed once per level: a fetched chain 5,000 deep failed with
    `unexpected RecursionError`; its indentation is capped, so the output stays linear."""
    a, b = pair(clones)
    plan = "".join(f'[[task]]\nid = "c{n}"\ntitle = "link {n}"\n' + (f'depends_on = ["c{n - 1}"]\n' if n else "")
                   for n in range(5000))
    (a.parent / "chain.toml").write_text(plan)
    ok("import", str(a.parent / "chain.toml"), cwd=a)
    ok("sync", cwd=a)
    ok("sync", cwd=b)
    res = run("graph", cwd=b)
    _clean(res, "graph")
    assert res.rc == 0, res.err
    lines = res.out.splitlines()
    assert len(lines) == 5001  # t1 and the chain
    assert "c4999: link 4999" in lines[-1] and "(4999 deep)" in lines[-1]
    assert max(len(line) for line in lines) < 300


def test_the_notes_of_many_clones_merge_into_commits_of_bounded_fan_in(clones: Callable[[str], Path]) -> None:
    """20 clones' notes refs, each noting the same commit: one notes merge had 21 parents."""
    a, b = pair(clones)
    noted = git("rev-parse", "HEAD", cwd=a)
    for i in range(20):
        blob = git("hash-object", "-w", "--stdin", cwd=a, input_text=f"note of clone {i}\n")
        tree = git("mktree", cwd=a, input_text=f"100644 blob {blob}\t{noted}\n")
        commit = git("commit-tree", tree, "-m", f"notes {i}", cwd=a)
        git("push", "-q", "origin", f"{commit}:refs/harness/clones/{0xE000000000000000 + i:016x}/notes", cwd=a)
    res = run("sync", "--json", cwd=b)
    assert res.rc == 0 and json.loads(res.out).get("quarantined", []) == [], res.out + res.err
    notes = git("rev-parse", "refs/notes/harness", cwd=b)
    merges = git("rev-list", "--parents", "--merges", notes, cwd=b).splitlines()
    assert merges and max(len(line.split()) - 1 for line in merges) <= 16
    text = git("notes", "--ref=harness", "show", noted, cwd=b)
    assert all(f"note of clone {i}" in text for i in range(20)), text
    assert json.loads(run("sync", "--json", cwd=b).out)["notes"] == "up-to-date"


def test_a_clone_whose_state_others_hold_retires_and_can_come_back(clones: Callable[[str], Path]) -> None:
    """Issue 27: clone refs only accumulated. A clone idle past handoff.retireAfter whose
    state a's published state contains loses its refs on the remote (a's push deletes
    them, by compare-and-swap); nothing is lost, and when it comes back it publishes and
    merges as before."""
    a, b = pair(clones)
    c = clones("c")
    ok("sync", cwd=c)
    ok("add", "from c", "--id", "c1", cwd=c)
    ok("sync", cwd=c)
    c_ref = next(line.split()[1] for line in git("ls-remote", "origin", "refs/harness/clones/*/state", cwd=c)
                 .splitlines() if line.split()[0] == state_head(c))
    git("config", "handoff.retireAfter", "0", cwd=a)
    ok("sync", cwd=a)  # merges c's state and publishes it in a's own ref
    got = ok("sync", "--json", cwd=a)  # a's published state holds c's: c retires
    assert c_ref[len("refs/harness/clones/"):].split("/")[0] in got["retired"], got
    on_remote = git("ls-remote", "origin", "refs/harness/clones/*", cwd=a)
    assert c_ref not in on_remote and len(on_remote.splitlines()) == 1  # a's only: b's state is in a's too
    ok("sync", cwd=b)
    assert task(b, "c1")["title"] == "from c"  # nothing lost
    ok("add", "c again", "--id", "c2", cwd=c)  # c comes back
    ok("sync", cwd=c)
    assert c_ref in git("ls-remote", "origin", "refs/harness/clones/*", cwd=c)
    ok("sync", cwd=b)
    assert task(b, "c2")["title"] == "c again" and task(b, "c1")["title"] == "from c"
    # a clone younger than retireAfter (the default, 7 days) is never retired
    assert ok("sync", "--json", cwd=b)["retired"] == []


def test_state_commits_are_dated_by_the_clock_retirement_compares_with(repo: Path) -> None:
    """ops/retire.py retires a clone whose head commit is older than handoff.retireAfter
    by time.time(). The state's commits are written in-process with the wall clock, not
    with GIT_COMMITTER_DATE, which every test pins to 2026-07-01: had they taken it, every
    clone contained in another's state would look months idle and retire at once."""
    assert os.environ["GIT_COMMITTER_DATE"] == FIXED_DATE
    before = time.time()
    assert run("init").rc == 0
    assert run("add", "x", "--id", "t").rc == 0
    dated = int(git("log", "-1", "--format=%ct", "refs/harness/state", cwd=repo))
    assert before - 2 <= dated <= time.time() + 2
