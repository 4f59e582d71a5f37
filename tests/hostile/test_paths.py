"""One path rule, the strictest, for every path another clone wrote (docs/threat-model.md).

A fetched attempt is a commit whose tree the attacker wrote byte by byte: `restore`
would write its files, delete the ones it dropped and stage its index. Each rule of
git_handoff.infra.paths gets an attempt that breaks only it; `restore` refuses it whole (exit
2, `error: refusing path ...`) before touching anything: the victim's files, index,
HEAD, hooks and the files outside its tree stay as they were. The names git itself
refuses on Linux (core.protectNTFS) are refused by the rule before git is asked; the
ones only Windows or macOS would open as `.git` (HFS+ ignorables, backslashes, names of
dots and spaces) and another clone's control and bidi characters git would write.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra import paths
from tests.support.hostile import BLOB, LINK, Node, World, make_world
from tests.support.repo import git, run
from tests.support.templates import Templates

# one path per rule; each breaks that rule only
RULES = {
    "dot_git_any_case": ".GIT/hooks/post-checkout",
    "dot_git_trailing_dot": ".git./hooks/post-checkout",
    "dot_git_trailing_spaces": ".git  /hooks/post-checkout",
    "ntfs_stream": ".git::$INDEX_ALLOCATION/hooks/post-checkout",
    "ntfs_short_name": "GIT~1/hooks/post-checkout",
    "ntfs_short_name_deeper": "sub/git~2/config",
    "hfs_zero_width": ".g\u200cit/hooks/post-checkout",
    "hfs_direction_mark": "sub/.gi\u200et/config",
    "hfs_byte_order_mark": "\ufeff.git/config",
    "backslash": "sub\\..\\..\\outside.txt",
    "dots_and_spaces": "sub/. ./x.txt",
    "dots_only": "sub/.../x.txt",
    "foreign_newline": "notes\n#2 forged.txt",
    "foreign_escape": "x\x1b]52;c;ZXZpbA==\x07.txt",
    "foreign_c1": "x\x9b2J.txt",
    "foreign_bidi": "invoice\u202etxt.sh",
}


@pytest.fixture
def world(tmp_path: Path, templates: Templates) -> Iterator[World]:
    yield from make_world(tmp_path, templates)


def _put(node: Node, path: str, entry: tuple[str, str]) -> None:
    *dirs, name = path.split("/")
    for d in dirs:
        node = node.setdefault(d, {})
    node[name] = entry


def _root(w: World) -> str:
    return git("rev-list", "--max-parents=0", "HEAD", cwd=w.victim)


def _attempt(w: World, *, add: dict[str, tuple[str, str]], base_extra: dict[str, tuple[str, str]] | None = None,
             n: int = 1) -> None:
    """An attempt of `schema` by another worker: its base is the shared root (plus
    `base_extra`, which the attempt then drops), its tree the base's plus `add`."""
    a = w.attacker
    files = {"README": (BLOB, a.blob("hello\n")), "app.py": (BLOB, a.blob("print('app')\n"))}
    base = _root(w)
    if base_extra:
        node: Node = {}
        for p, e in {**files, **base_extra}.items():
            _put(node, p, e)
        base = a.commit(a.raw_tree(node), [base], "base")
    node = {}
    for p, e in {**files, **add, "attempt.txt": (BLOB, a.blob("attempt\n"))}.items():
        _put(node, p, e)
    record = {"task": "schema", "attempt": n, "time": "2026-07-01T10:00:00Z", "category": "TASK_EXEC",
              "reason": "x", "base": base, "head": base, "worker": "mallory@evil:/w",
              "files": [{"status": "A", "path": "attempt.txt"}]}
    commit = a.commit(a.raw_tree(node), [base], f"handoff attempt schema #{n}: x\n\n{json.dumps(record)}\n")
    a.push(commit, f"refs/harness/attempts/schema/{n}")
    res = run("sync", cwd=w.victim)
    assert res.rc == 0, res.err


def _refused(w: World, what: str) -> None:
    before, outside = w.picture(), w.outside_files()
    res = run("restore", "schema", "1", "--force", cwd=w.victim)
    assert res.rc == 2, f"{what}: rc={res.rc} {res.out} {res.err}"
    assert res.err.startswith("error: refusing path ") and len(res.err.strip().splitlines()) == 1, \
        f"{what}: {res.err!r}"
    assert "\x1b" not in res.err and "\u202e" not in res.err
    assert w.picture() == before, f"{what}: the work tree, index, HEAD or hooks changed"
    assert w.outside_files() == outside and not (w.root / "outside.txt").exists()
    assert not (w.victim / "attempt.txt").exists(), f"{what}: restore wrote a file before refusing"


@pytest.mark.slow
@pytest.mark.parametrize("rule", sorted(RULES))
def test_restore_refuses_a_path_that_breaks_the_rule_written(world: World, rule: str) -> None:
    w = world
    _attempt(w, add={RULES[rule]: (BLOB, w.attacker.blob("#!/bin/sh\ntouch PWNED\n"))})
    _refused(w, rule)
    assert not w.pwned()


@pytest.mark.slow
def test_restore_refuses_a_path_that_breaks_the_rule_deleted(world: World) -> None:
    """The attempt drops a path its base held: restore would delete it here."""
    w = world
    _attempt(w, add={}, base_extra={"sub\\x.txt": (BLOB, w.attacker.blob("x\n"))})
    _refused(w, "a dropped path with a backslash")


@pytest.mark.slow
def test_restore_refuses_a_step_through_a_symlink(world: World) -> None:
    w = world
    (w.victim / "lnk").symlink_to(w.outside)  # the victim's own untracked link to outside its tree
    _attempt(w, add={"lnk/canary.txt": (BLOB, w.attacker.blob("overwritten\n"))})
    _refused(w, "a step through a symlink")
    assert (w.outside / "canary.txt").read_text() == "do not touch\n"


@pytest.mark.slow
def test_restore_writes_a_foreign_path_that_keeps_the_rule(world: World) -> None:
    """The rule refuses only what it names: an ordinary attempt of another clone restores."""
    w = world
    _attempt(w, add={"sub/.gitignore": (BLOB, w.attacker.blob("x\n")), "sub/git~x.txt": (BLOB, w.attacker.blob("y\n")),
                     "ünïcode name.txt": (BLOB, w.attacker.blob("z\n")),
                     "sub/link": (LINK, w.attacker.blob("../README"))})
    res = run("restore", "schema", "1", "--force", cwd=w.victim)
    assert res.rc == 0, res.err
    assert (w.victim / "sub" / ".gitignore").read_text() == "x\n" and (w.victim / "ünïcode name.txt").exists()
    assert os.readlink(w.victim / "sub" / "link") == "../README"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_rule_names_each_path(rule: str, tmp_path: Path) -> None:
    path = RULES[rule]
    foreign_only = rule.startswith("foreign_")
    assert paths.path_problem(path) is not None, rule
    assert (paths.path_problem(path, foreign=False) is None) == foreign_only, rule
    with pytest.raises(UsageError, match="^refusing path '"):
        paths.confine(tmp_path, path)
    for fine in ("a/b.txt", ".gitignore", "sub/.github/x", "git~x", "gitx/.git-blame-ignore-revs", "a.b./c"):
        assert paths.path_problem(fine) is None, fine
