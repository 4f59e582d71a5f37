"""A shared remote is untrusted input (docs/threat-model.md).

An attacker's clone crafts state commits, attempt refs, notes and refs by hand and
pushes them to the shared bare remote; the victim then runs the commands of a normal
day. Whatever was fetched, the victim's files outside the work tree, its processes, its
HEAD, branch, index, tracked and untracked files stay as they were (unless the victim's
own command asked for a change), nothing fetched runs, nothing prints `unexpected` or a
traceback, and `sync` either refuses (exit 2, local and tracking refs unchanged) or
accepts and every later command still works.
"""

from __future__ import annotations

import getpass
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest

from tests.support.hostile import (
    BLOB,
    EXEC,
    GITLINK,
    HOST,
    LINK,
    Attacker,
    World,
    jbytes,
    make_world,
    put,
    task_path,
    task_record,
)
from tests.support.repo import git, run
from tests.support.templates import Templates


@pytest.fixture
def world(tmp_path: Path, templates: Templates) -> Iterator[World]:
    yield from make_world(tmp_path, templates)


Craft = Callable[[World], dict[str, Any]]
CRAFTS: dict[str, Craft] = {}


def craft(fn: Craft) -> Craft:
    CRAFTS[fn.__name__.removeprefix("craft_")] = fn
    return fn


def _with_task(w: World, record: dict[str, Any], raw: bytes | None = None) -> dict[str, Any]:
    node = w.attacker.state_node()
    put(node, task_path(str(record["id"]).strip()), (BLOB, w.attacker.blob(raw if raw is not None else jbytes(record))))
    w.attacker.push_state(node)
    return {"task": str(record["id"]).strip()}


def _root_commit(w: World) -> str:
    return git("rev-list", "--max-parents=0", "HEAD", cwd=w.victim)


def _victim_worker(w: World) -> str:
    return f"{getpass.getuser()}@{HOST}:{w.victim}"


# -- commands in fetched state ----------------------------------------------------------


@craft
def craft_untrusted_check(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", validation={"command": w.pwn("check"), "timeout_seconds": 30}))


@craft
def craft_untrusted_cleanup(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", validation={"command": "true", "timeout_seconds": 30},
                                     on_failure={"cleanup": w.pwn("cleanup")}))


@craft
def craft_untrusted_init_command(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    cfg = f'mode = "exclusive"\ninit_command = "{w.pwn("init")}"\n'
    put(node, "config.toml", (BLOB, w.attacker.blob(cfg)))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_check_trusted_text_elsewhere(w: World) -> dict[str, Any]:
    # the victim trusted `true` as a validation; the attacker reuses the text as init command
    node = w.attacker.state_node()
    put(node, "config.toml", (BLOB, w.attacker.blob('mode = "exclusive"\ninit_command = "true"\n')))
    w.attacker.push_state(node)
    return {"task": "schema", "trust": ["schema"]}


# -- claims and recovery ---------------------------------------------------------------------


@craft
def craft_left_behind_missing_path(w: World) -> dict[str, Any]:
    return _with_task(w, task_record(
        "evil", status="in_progress", started_at_commit=_root_commit(w), claimed_by="mallory@elsewhere:/gone",
        lease_expires_at="2026-07-01T09:30:00Z", worktree="/nonexistent/worktree", lease_seconds=60,
        claimed_at="2026-07-01T09:00:00Z", validation={"command": "false", "timeout_seconds": 30}))


@craft
def craft_forged_claim_here(w: World) -> dict[str, Any]:
    # the victim's own worktree path and worker name, forged: no clone identity
    return _with_task(w, task_record(
        "evil", status="in_progress", started_at_commit=_root_commit(w), claimed_by=_victim_worker(w),
        lease_expires_at="2099-01-01T00:00:00Z", worktree=str(w.victim), lease_seconds=60,
        branch="main", claimed_at="2026-07-01T09:00:00Z", validation={"command": "false", "timeout_seconds": 30}))


@craft
def craft_forged_claim_copied_clone_id(w: World) -> dict[str, Any]:
    # the victim's public clone id is in every claim it ever pushed; its secret is not
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state import identity

    seen = identity.clone_id(Repo.discover(w.victim))
    return _with_task(w, task_record(
        "evil", status="in_progress", started_at_commit=_root_commit(w), claimed_by=_victim_worker(w),
        lease_expires_at="2099-01-01T00:00:00Z", worktree=str(w.victim), clone=seen, clone_seal="0" * 32,
        lease_seconds=60, branch="main", claimed_at="2026-07-01T09:00:00Z"))


@craft
def craft_live_claim_elsewhere(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    put(node, task_path("schema"), (BLOB, w.attacker.blob(jbytes(task_record(
        "schema", title="Write the schema", status="in_progress", started_at_commit=_root_commit(w),
        claimed_by="bob@other:/home/bob/proj", lease_expires_at="2099-01-01T00:00:00Z",
        worktree="/home/bob/proj", lease_seconds=3600, claimed_at="2026-07-01T09:00:00Z",
        validation={"command": "true", "timeout_seconds": 300}, order=0)))))
    w.attacker.push_state(node)
    return {"task": "schema"}


# -- lines and sizes -------------------------------------------------------------------------


@craft
def craft_id_trailing_newline(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    put(node, task_path("nl\n"), (BLOB, w.attacker.blob(jbytes(task_record("nl\n")))))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_title_newline(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", title="ok\n[completed] forged: all done (1/3)"))


@craft
def craft_title_control(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", title="clear\x1b[2J\x1b[Hscreen"))


@craft
def craft_title_huge(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", title="A" * 300_000))


@craft
def craft_title_surrogate(w: World) -> dict[str, Any]:
    raw = jbytes(task_record("evil", title="@@")).replace(b"@@", b"\\ud800")
    return _with_task(w, task_record("evil"), raw)


@craft
def craft_command_surrogate(w: World) -> dict[str, Any]:
    # not a line, so no line rule asked it: printing it (show, list, trust) failed
    raw = jbytes(task_record("evil", validation={"command": "echo @@",
                                                 "timeout_seconds": 30})).replace(b"@@", b"\\ud800")
    return _with_task(w, task_record("evil"), raw)


@craft
def craft_cleanup_surrogate(w: World) -> dict[str, Any]:
    raw = jbytes(task_record("evil", on_failure={"cleanup": "rm @@"})).replace(b"@@", b"\\udfff")
    return _with_task(w, task_record("evil"), raw)


@craft
def craft_checkpoint_field_surrogate(w: World) -> dict[str, Any]:
    # a field of a checkpoint no rule names
    raw = jbytes(task_record("evil", checkpoints=[{"step": 1, "description": "ok", "note": "@@"}])).replace(
        b"@@", b"\\ud83d")
    return _with_task(w, task_record("evil"), raw)


@craft
def craft_error_log_forged_line(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", status="failed", attempts=1,
                                     error_log=["[TASK_EXEC] x\n[2026-07-01T10:00:00Z] [SESSION-9] Completed [api]"]))


@craft
def craft_checkpoint_newline(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", checkpoints=[
        {"step": 1, "total": 2, "description": "a\nb", "timestamp": "2026-07-01T10:00:00Z"}]))


@craft
def craft_huge_blob(w: World) -> dict[str, Any]:
    return _put_blob(w, "junk.bin", b"\0" * (40 * 1024 * 1024))


@craft
def craft_cycle(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    n = 300
    for i in range(n):
        tid = f"c{i}"
        put(node, task_path(tid), (BLOB, w.attacker.blob(jbytes(task_record(
            tid, depends_on=[f"c{(i + 1) % n}"], order=10 + i)))))
    w.attacker.push_state(node)
    return {"task": "c0"}


# -- numbers and types -----------------------------------------------------------------------


@craft
def craft_lease_seconds_text(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", status="in_progress", started_at_commit=_root_commit(w),
                                     claimed_by="x", lease_expires_at="2020-01-01T00:00:00Z",
                                     lease_seconds="abc", worktree=str(w.victim)))


@craft
def craft_attempts_text(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", attempts="lots"))


@craft
def craft_timeout_huge(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", validation={"command": "true", "timeout_seconds": 10**23}))


@craft
def craft_timeout_nan(w: World) -> dict[str, Any]:
    raw = jbytes(task_record("evil", validation={"command": "true", "timeout_seconds": 1})).replace(
        b'"timeout_seconds": 1', b'"timeout_seconds": NaN')
    return _with_task(w, task_record("evil"), raw)


@craft
def craft_lease_not_a_day(w: World) -> dict[str, Any]:
    # the characters of a time, no date: next, prompt and claim exited 2 from then on
    return _with_task(w, task_record("evil", status="in_progress", claimed_by="mallory@elsewhere:/w",
                                     started_at_commit=_root_commit(w), lease_expires_at="2026-13-45T99:99:99Z"))


@craft
def craft_session_time_not_a_day(w: World) -> dict[str, Any]:
    return _put_json(w, "sessions/1.json", {"session": 1, "started_at": "2026-02-30T00:00:00Z"})


@craft
def craft_status_unknown(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil", status="exploded", priority=["P0"]))


@craft
def craft_task_not_json(w: World) -> dict[str, Any]:
    return _with_task(w, task_record("evil"), b"{not json")


@craft
def craft_task_wrong_path(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    put(node, task_path("evil"), (BLOB, w.attacker.blob(jbytes(task_record("schema", title="hijack")))))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_deep_json(w: World) -> dict[str, Any]:
    raw = b'{"id": "evil", "title": "deep", "extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return _with_task(w, task_record("evil"), raw)


# -- tree shapes ------------------------------------------------------------------------------


@craft
def craft_task_gitlink(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    put(node, task_path("evil"), (GITLINK, _root_commit(w)))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_tasks_is_blob(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    node["tasks"] = (BLOB, w.attacker.blob("not a tree"))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_fanout_is_blob(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    node["tasks"]["f"] = (BLOB, w.attacker.blob("not a tree"))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_dotdot_entry(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    node[".."] = {"x": (BLOB, w.attacker.blob("escape"))}
    node["/abs"] = (BLOB, w.attacker.blob("abs"))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_task_symlink(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    put(node, task_path("evil"), (LINK, w.attacker.blob(str(w.outside / "canary.txt"))))
    w.attacker.push_state(node)
    return {"task": "schema"}


# -- meta, config, format ---------------------------------------------------------------------


def _put_blob(w: World, path: str, data: bytes | str) -> dict[str, Any]:
    """The attacker's state with one file replaced by `data`, pushed; the victim then meets
    a record it must refuse (the "schema" case)."""
    node = w.attacker.state_node()
    put(node, path, (BLOB, w.attacker.blob(data)))
    w.attacker.push_state(node)
    return {"task": "schema"}


def _put_json(w: World, path: str, value: Any, raw: bytes | None = None) -> dict[str, Any]:
    return _put_blob(w, path, raw if raw is not None else jbytes(value))


# One file of the state replaced by a value its parser must refuse: (case, path, content).
_BAD_FILES: list[tuple[str, str, bytes | str]] = [
    ("meta_session_count_text", "meta.json", jbytes({"session_count": "lots", "last_session": 7})),
    ("meta_list", "meta.json", "[1, 2, 3]"),
    ("config_bad_toml", "config.toml", "mode = [[["),
    ("config_bad_values", "config.toml", 'mode = "chaos"\nmax_sessions = -4\n'),
    ("format_future", "format", "git-handoff-state 99\n"),
]


def _bad_file_craft(path: str, data: bytes | str) -> Craft:
    return lambda w: _put_blob(w, path, data)


for _case, _path, _data in _BAD_FILES:
    CRAFTS[_case] = _bad_file_craft(_path, _data)


@craft
def craft_meta_gitlink(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    node["meta.json"] = (GITLINK, _root_commit(w))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_meta_tree(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    node["meta.json"] = {"x": (BLOB, w.attacker.blob("{}"))}
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_format_missing(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    del node["format"]
    w.attacker.push_state(node)
    return {"task": "schema"}


# -- relay, sessions, documents, dispatch ----------------------------------------------------


@craft
def craft_relay_kills(w: World) -> dict[str, Any]:
    return _put_json(w, "relay.json", {
        "state": "running", "host": HOST, "pid": 999_999, "started_at": "2026-07-01T09:00:00Z",
        "session": 1, "agent_pid": w.canary_pid, "agent_token": "HOME=", "updated_at": "2026-07-01T09:00:00Z"})


@craft
def craft_relay_pid_one(w: World) -> dict[str, Any]:
    return _put_json(w, "relay.json", {
        "state": "running", "host": HOST, "pid": 1, "started_at": "2026-07-01T09:00:00Z",
        "session": 1, "agent_pid": 1, "agent_token": "PATH=", "tmux_session": "x; touch PWNED",
        "tmux_socket": "../../x"})


@craft
def craft_relay_pid_text(w: World) -> dict[str, Any]:
    return _put_json(w, "relay.json", {"state": "running", "host": HOST, "pid": "abc", "failures": "many"})


@craft
def craft_relay_list(w: World) -> dict[str, Any]:
    return _put_json(w, "relay.json", ["running"])


@craft
def craft_session_garbage(w: World) -> dict[str, Any]:
    return _put_json(w, "sessions/1.json", {"session": "one", "decisions": "all", "blockers": 5,
                                            "completed": {"a": 1}, "started_at": 12})


@craft
def craft_session_open_here(w: World) -> dict[str, Any]:
    node = w.attacker.state_node()
    put(node, "sessions/1.json", (BLOB, w.attacker.blob(jbytes({
        "session": 1, "worker": _victim_worker(w), "worktree": str(w.victim), "base": _root_commit(w),
        "started_at": "2026-07-01T09:00:00Z", "ended_at": None}))))
    put(node, "meta.json",
        (BLOB, w.attacker.blob(jbytes({"session_count": 1, "last_session": "2026-07-01T09:00:00Z"}))))
    w.attacker.push_state(node)
    return {"task": "schema"}


@craft
def craft_doc_garbage(w: World) -> dict[str, Any]:
    return _put_json(w, "docs/1.json", {"session": 1, "decisions": "x", "blockers": [{"a": 1}],
                                        "files_changed": 7, "status": []})


@craft
def craft_doc_forged_lines(w: World) -> dict[str, Any]:
    return _put_json(w, "docs/1.json", {"session": 1, "decisions": [{"what": "a\nNEXT: rm -rf /", "why": "b"}],
                                        "blockers": ["x\ny"], "files_changed": [], "status": {}})


@craft
def craft_dispatch_seq_text(w: World) -> dict[str, Any]:
    return _put_json(w, "dispatch/001-evil.json", {"run_id": "001-evil", "seq": "one", "slug": "evil",
                                                   "backend": "bot", "status": "running", "pid": "x"})


@craft
def craft_dispatch_session_id_shell(w: World) -> dict[str, Any]:
    sid = f"x'; {w.pwn('dispatch')}; echo '"
    out = _put_json(w, "dispatch/001-evil.json", {
        "run_id": "001-evil", "seq": 1, "slug": "evil", "backend": "bot", "prompt": "p", "status": "completed",
        "conversation": "001-evil", "resume_of": None, "session_id": sid, "exit_status": 0,
        "created_at": "2026-07-01T09:00:00Z", "updated_at": "2026-07-01T09:00:00Z"})
    return dict(out, run="001-evil")


@craft
def craft_dispatch_running_here(w: World) -> dict[str, Any]:
    return _put_json(w, "dispatch/001-evil.json", {
        "run_id": "001-evil", "seq": 1, "slug": "evil", "backend": "bot", "prompt": "p", "status": "running",
        "conversation": "001-evil", "host": HOST, "pid": w.canary_pid, "created_at": "2026-07-01T09:00:00Z"})


# -- refs of the wrong kind, attempts, notes -----------------------------------------------------


@craft
def craft_state_ref_blob(w: World) -> dict[str, Any]:
    w.attacker.push(w.attacker.blob("not a commit"), "refs/harness/state")
    return {"task": "schema"}


@craft
def craft_state_ref_tree(w: World) -> dict[str, Any]:
    w.attacker.push(w.attacker.raw_tree(w.attacker.state_node()), "refs/harness/state")
    return {"task": "schema"}


@craft
def craft_attempt_ref_blob(w: World) -> dict[str, Any]:
    w.attacker.push(w.attacker.blob("x"), "refs/harness/attempts/schema/1")
    return {"task": "schema"}


@craft
def craft_attempt_ref_tree(w: World) -> dict[str, Any]:
    w.attacker.push(w.attacker.raw_tree({"a": (BLOB, w.attacker.blob("x"))}), "refs/harness/attempts/schema/1")
    return {"task": "schema"}


@craft
def craft_notes_ref_blob(w: World) -> dict[str, Any]:
    w.attacker.push(w.attacker.blob("x"), "refs/notes/harness")
    return {"task": "schema"}


def _notes(w: World, entries: dict[str, Any], ref: str = "refs/notes/harness") -> dict[str, Any]:
    """A notes commit of `entries` (name -> (mode, oid)), pushed as `ref`; the victim notes
    its own commits as it works (checkpoint, done), so the sync merges the two."""
    a = w.attacker
    a.push(a.commit(a.raw_tree(entries), [], "Notes added by 'git notes add'\n"), ref)
    return {"task": "schema"}


@craft
def craft_notes_gitlink(w: World) -> dict[str, Any]:
    # the notes merge inserted it as a blob (libgit2 refused: every later sync failed);
    # at a commit the victim notes, done and checkpoint crashed reading it
    return _notes(w, {_root_commit(w): (GITLINK, "1" * 40), "ab" * 20: (GITLINK, _root_commit(w))})


@craft
def craft_notes_odd_names(w: World) -> dict[str, Any]:
    a = w.attacker
    return _notes(w, {"..": (BLOB, a.blob("x")), "not-a-commit": (BLOB, a.blob("x"))},
                  "refs/harness/clones/0123456789abcdef/notes")


@craft
def craft_notes_huge(w: World) -> dict[str, Any]:
    # read whole by every reader of a note (512 MiB took 1.5 GiB): at most 1 MiB now
    return _notes(w, {_root_commit(w): (BLOB, w.attacker.blob(b"\0" * (3 << 20)))})


@craft
def craft_session_numbers_used_up(w: World) -> dict[str, Any]:
    # within the counters' range, but the next session's file name would not be: the
    # victim wrote sessions/1000000000000000000@... and pushed a state every clone refused
    a = w.attacker
    node = a.state_node()
    put(node, "meta.json", (BLOB, a.blob(jbytes({"created": "2026-07-01T09:00:00Z", "session_count": 10**18 - 1,
                                                 "sessions_legacy": 10**18 - 1, "sessions_by_clone": {}}))))
    config = a.blob_data(node["config.toml"][1]).decode()
    put(node, "config.toml", (BLOB, a.blob(config.replace("max_sessions = 50", f"max_sessions = {2**63 - 1}"))))
    a.push_state(node)
    return {"task": "schema"}


def _attempt(w: World, tree: dict[str, Any], base_tree: dict[str, Any], task: str = "schema") -> dict[str, Any]:
    a: Attacker = w.attacker
    head = _root_commit(w)
    base = a.commit(a.raw_tree(base_tree), [head], "base\n")
    record = {"task": task, "attempt": 1, "time": "2026-07-01T10:00:00Z", "category": "TASK_EXEC",
              "reason": "x", "base": base, "head": head, "files": []}
    # the base is the attempt's parent, so that it travels with it
    commit = a.commit(a.raw_tree(tree), [base], f"handoff attempt {task} #1: x\n\n{json.dumps(record)}\n")
    a.push(commit, f"refs/harness/attempts/{task}/1")
    return {"task": task}


@craft
def craft_attempt_deletes_outside(w: World) -> dict[str, Any]:
    a = w.attacker
    blob = a.blob("x")
    base = {"README": (BLOB, a.blob("hello\n")), "..": {"x": {"canary.txt": (BLOB, blob)}},
            str(w.outside / "canary.txt"): (BLOB, blob)}
    return _attempt(w, {"README": (BLOB, a.blob("hello\n"))}, base)


@craft
def craft_attempt_deletes_ignored(w: World) -> dict[str, Any]:
    a = w.attacker
    base = {"README": (BLOB, a.blob("hello\n")), "local.env": (BLOB, a.blob("x")),
            "notes.txt": (BLOB, a.blob("x"))}
    return _attempt(w, {"README": (BLOB, a.blob("hello\n"))}, base)


@craft
def craft_attempt_writes_git_dir(w: World) -> dict[str, Any]:
    a = w.attacker
    hook = (EXEC, a.blob(f"#!/bin/sh\n{w.pwn('hook')}\n"))
    tree = {"README": (BLOB, a.blob("hello\n")), ".git": {"hooks": {"post-checkout": hook, "pre-commit": hook}},
            ".GIT": {"config": (BLOB, a.blob("[core]\n\tfsmonitor = touch PWNED\n"))}}
    return _attempt(w, tree, {"README": (BLOB, a.blob("hello\n"))})


@craft
def craft_attempt_writes_through_symlink(w: World) -> dict[str, Any]:
    a = w.attacker
    tree = {"README": (BLOB, a.blob("hello\n")), "link": (LINK, a.blob(str(w.outside))),
            "link/canary.txt": (BLOB, a.blob("overwritten"))}
    return _attempt(w, tree, {"README": (BLOB, a.blob("hello\n"))})


@craft
def craft_attempt_writes_absolute(w: World) -> dict[str, Any]:
    a = w.attacker
    tree = {"README": (BLOB, a.blob("hello\n")), str(w.outside / "new.txt"): (BLOB, a.blob("planted")),
            "..": {"planted.txt": (BLOB, a.blob("planted"))}}
    return _attempt(w, tree, {"README": (BLOB, a.blob("hello\n"))})


@craft
def craft_attempt_gitlink_and_tree_types(w: World) -> dict[str, Any]:
    a = w.attacker
    tree = {"README": (BLOB, a.blob("hello\n")), "sub": (GITLINK, _root_commit(w)),
            "app.py": {"inner": (BLOB, a.blob("x"))}}
    return _attempt(w, tree, {"README": (BLOB, a.blob("hello\n"))})


def _config_with(w: World, *lines: str) -> list[str]:
    """One state commit per line, each on the current state, its config.toml with the line added."""
    a = w.attacker
    base = a.state()
    text = a.blob_data(a.state_node()["config.toml"][1]).decode()
    commits = []
    for i, line in enumerate(lines):
        node = a.state_node()
        put(node, "config.toml", (BLOB, a.blob(text + line + "\n")))
        commits.append(a.commit(a.raw_tree(node), [base], f"[2026-07-01T10:00:00Z] [SESSION-0] INIT config {i}\n"))
    return commits


@craft
def craft_config_datetime(w: World) -> dict[str, Any]:
    (tip,) = _config_with(w, "when = 1979-05-27T07:32:00Z")
    w.attacker.push(tip, "refs/harness/state")
    return {"task": "schema"}


@craft
def craft_config_datetime_divergent(w: World) -> dict[str, Any]:
    # two heads to merge: the merge of records digests JSON values, and a TOML date is none
    ours, theirs = _config_with(w, "[extra]\nwhen = 1979-05-27", "other = 1")
    w.attacker.push(ours, "refs/harness/state")
    w.attacker.push(theirs, "refs/harness/clones/0123456789abcdef/state")
    return {"task": "schema"}


def _raw_commit(w: World, tree: str, parents: list[str], headers: str, message: bytes) -> str:
    """A commit object written byte for byte (headers git handoff never writes, bytes
    that are not UTF-8)."""
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents), "author Mal\xfflory <m@example.com> 1782900000 +0000",
             "committer Mallory <m@example.com> 1782900000 +0000", headers]
    raw = ("\n".join(lines) + "\n\n").encode("latin-1") + message
    return str(w.attacker.repo.odb.write(pygit2.enums.ObjectType.COMMIT, raw))


def _state_commit_with_header(w: World, header: str, message: bytes) -> dict[str, Any]:
    a = w.attacker
    node = a.state_node()
    put(node, task_path("evil"), (BLOB, a.blob(jbytes(task_record("evil")))))
    a.push(_raw_commit(w, a.raw_tree(node), [a.state()], header, message), "refs/harness/state")
    return {"task": "evil"}


@craft
def craft_state_commit_unknown_encoding(w: World) -> dict[str, Any]:
    # pygit2 decodes a commit's message and names by its `encoding` header, strictly:
    # every reader of the history (status, log, trust) failed with LookupError
    return _state_commit_with_header(w, "encoding x-bogus",
                                     b"[2026-07-01T10:00:00Z] [SESSION-0] INIT [evil] Added \xff\n")


@craft
def craft_state_commit_not_its_encoding(w: World) -> dict[str, Any]:
    return _state_commit_with_header(w, "encoding utf-16", b"[2026-07-01T10:00:00Z] [SESSION-0] INIT [evil] Added\n")


@craft
def craft_attempt_commit_unknown_encoding(w: World) -> dict[str, Any]:
    a = w.attacker
    head = _root_commit(w)
    record = {"task": "schema", "attempt": 1, "time": "2026-07-01T10:00:00Z", "category": "TASK_EXEC",
              "reason": "x", "base": head, "head": head, "files": []}
    commit = _raw_commit(w, a.raw_tree({"README": (BLOB, a.blob("hello\n"))}), [head], "encoding x-bogus",
                         f"handoff attempt schema #1: x\n\n{json.dumps(record)}\n".encode())
    a.push(commit, "refs/harness/attempts/schema/1")
    return {"task": "schema"}


@craft
def craft_attempt_message_garbage(w: World) -> dict[str, Any]:
    a = w.attacker
    commit = a.commit(a.raw_tree({"README": (BLOB, a.blob("hello\n"))}), [],
                      "handoff attempt schema #1\n\n" + json.dumps({"base": ["x"], "files": "all", "session": "x"}))
    a.push(commit, "refs/harness/attempts/schema/1")
    a.push(commit, "refs/harness/attempts/schema/0002")
    a.push(commit, "refs/harness/attempts/schema/99999999999999999999999")
    return {"task": "schema"}


# the suite must keep its breadth
assert len(CRAFTS) >= 40, len(CRAFTS)


# -- the victim's day ---------------------------------------------------------------------------


def _check_clean(res: Any, what: str) -> None:
    text = res.out + res.err
    assert "unexpected" not in text.lower(), f"{what}: {res.err.strip()[-400:]}"
    assert "Traceback" not in text, f"{what}: {res.err.strip()[-400:]}"
    assert res.rc in (0, 1, 2, 3), f"{what}: rc={res.rc} {res.err.strip()[-400:]}"
    if res.rc == 2 or res.rc == 3:
        assert res.err.strip().startswith("error:"), f"{what}: {res.err!r}"


def _invariants(w: World, before: Any, outside: dict[str, str], what: str, *, files: bool = True) -> None:
    assert w.outside_files() == outside, f"{what}: a file outside the work tree changed"
    assert (w.root / "x" / "canary.txt").read_text() == "sibling canary\n", what
    assert not (w.root / "planted.txt").exists(), what
    assert w.canary_alive(), f"{what}: the canary process was signalled"
    assert w.pwned() == [], f"{what}: a fetched command ran"
    now = w.picture()
    assert now.hooks == before.hooks and now.gitconfig == before.gitconfig, f"{what}: .git was written"
    assert (w.victim / "local.env").read_text() == "SECRET=hunter2\n", f"{what}: an ignored file was touched"
    if files:
        assert (now.head, now.branch) == (before.head, before.branch), f"{what}: HEAD or branch moved"
        assert now.index == before.index, f"{what}: the index changed"
        assert now.files == before.files, f"{what}: work tree files changed"


def _sync(w: World) -> int:
    """0: the remote's state was taken; 2: refused. A sync that quarantined the crafted
    ref (per ref, the rest of the remote still used) is a refusal of it: the
    local and tracking refs are as they were, as for an exit 2 of the whole sync."""
    refs = w.refs()
    res = run("sync", "--json", cwd=w.victim)
    _check_clean(res, "sync")
    held = json.loads(res.out).get("quarantined", []) if res.rc == 0 else []
    if held:
        assert res.err == "", res.err
        now = w.refs()
        for item in held:  # what failed the edge is nowhere a command reads
            tracking = "refs/remotes/origin/" + item["ref"][len("refs/"):]
            assert now.get(tracking) == refs.get(tracking) != item["oid"], f"{item}: tracked"
            if item["ref"].endswith("/state") and now.get("refs/harness/state"):
                contained = subprocess.run(["git", "merge-base", "--is-ancestor", item["oid"], "refs/harness/state"],
                                           cwd=w.victim, capture_output=True)
                assert contained.returncode != 0, f"{item}: a quarantined state was merged"
        assert "quarantined" in run("status", cwd=w.victim).out
        return 2
    if res.rc != 0:
        assert res.rc == 2, res.err
        assert w.refs() == refs, "sync refused but changed local or tracking refs"
    return res.rc


def _day(w: World, target: str, commands: list[tuple[str, ...]]) -> None:
    for args in commands:
        res = run(*[a.replace("{T}", target) for a in args], cwd=w.victim,
                  stdin="more\n" if "resume" in args else None)
        _check_clean(res, " ".join(args))
        if "--json" in args and res.rc in (2, 3):
            assert json.loads(res.out)["exit_code"] == res.rc


READS = [("status",), ("status", "--json"), ("list", "--json"), ("show", "{T}"), ("next", "--json"),
         ("log", "-n", "20"), ("log", "--task", "{T}"), ("attempts", "{T}", "--json"), ("dispatch", "list"),
         ("prompt",), ("trust",), ("trust", "--json")]
WORK = [("claim", "{T}", "--json"), ("verify", "{T}"), ("done", "{T}"), ("release", "{T}"),
        ("claim", "--json"), ("checkpoint", "{T}", "half"), ("release", "{T}")]


# torture by crafted input, as test_fuzz's generated input: 75 hostile remotes, each then
# a day of ~27 commands on the victim (most of a minute of CPU in all), so the slow layer;
# test_sync keeps a hostile command and an unreadable remote state in the fast layer
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CRAFTS))
def test_reads_and_work_after_hostile_sync(world: World, name: str) -> None:
    w = world
    info = CRAFTS[name](w)
    before, outside = w.picture(), w.outside_files()
    rc = _sync(w)
    _invariants(w, before, outside, f"{name}: sync")
    _day(w, info["task"], READS + WORK)
    _invariants(w, before, outside, name)
    if rc == 0:
        for args in READS:
            res = run(*[a.replace("{T}", info["task"]) for a in args], cwd=w.victim)
            assert res.rc in (0, 1), f"{name}: after an accepted sync, {args} exit {res.rc}: {res.err}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CRAFTS))
def test_sessions_relay_restore_after_hostile_sync(world: World, name: str) -> None:
    w = world
    info = CRAFTS[name](w)
    for task in info.get("trust", []):
        run("trust", task, cwd=w.victim)
    before, outside = w.picture(), w.outside_files()
    _sync(w)
    _day(w, info["task"], [("session", "start", "--json"), ("doc", "write"), ("session", "end")])
    _invariants(w, before, outside, f"{name}: session")
    _day(w, info["task"], [("relay", "--agent", "git handoff ack", "--max-idle-sessions", "1",
                            "--ack-timeout", "10", "--max-launch-failures", "1", "-q")])
    _invariants(w, before, outside, f"{name}: relay")
    if "run" in info:
        _day(w, info["task"], [("dispatch", "resume", info["run"])])
        _invariants(w, before, outside, f"{name}: dispatch resume")
    _day(w, info["task"], [("restore", "{T}", "1", "--force"), ("restore", "{T}", "2", "--force")])
    _invariants(w, before, outside, f"{name}: restore", files=False)
    assert (w.victim / "notes.txt").read_text() == "my untracked notes\n", f"{name}: restore removed an untracked file"
    _day(w, info["task"], READS)
