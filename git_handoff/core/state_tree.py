"""What a state tree may hold: safe entry names, the record kind at each path, and the one
call that puts a file through the parser of its kind.

A fetched state, a merged record and a record about to be written all pass check_record
(the path's kind from kind_of, then that kind's parser in git_handoff.core.record_schemas
or git_handoff.core.task_file, and the checks that tie a file to its name: a task at the
path of its id, a session or document file holding its own number).

Pure: no git, no I/O.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from git_handoff.core.decoding import problem
from git_handoff.core.field_checks import CLONE_ID, CONTROL
from git_handoff.core.patterns import lazy
from git_handoff.core.record_schemas import (
    RUN_ID,
    config,
    dispatch_run,
    handoff_doc,
    meta,
    relay,
    session,
)
from git_handoff.core.task_file import task, written_task_id

MAX_STATE_BLOB_BYTES = 1 << 20  # any blob of a fetched state tree (documented in docs/threat-model.md)
MAX_NAME = 255  # one tree entry name
FILE_MODES = (0o100644, 0o100755)
TREE_MODE = 0o040000


# Names made of these alone, not starting with a dot, pass every rule of name_problem
# (the names git handoff writes): one match instead of the rules one by one.
_PLAIN_NAME = lazy(r"[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,254}")  # 255 = MAX_NAME characters at most


def name_problem(name: str) -> str | None:
    """Why a tree entry name is unsafe anywhere (None when it is fine)."""
    return None if _PLAIN_NAME.fullmatch(name) else _name_rules(name)


def _name_rules(name: str) -> str | None:
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        return "is not a plain file name"
    if name.lower() in (".git", ".git.") or name.lower().startswith(".git~"):
        return "names a git directory"
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME or CONTROL.search(name):
        return "is too long or holds control characters"
    return None


def is_clone_id(text_: str) -> bool:
    return bool(CLONE_ID.fullmatch(text_))


def is_number_name(name: str) -> bool:
    return bool(re.fullmatch(r"[1-9][0-9]{0,17}", name))

# a session or document file: <n>.json (before fleet ids) or <n>@<clone>.json -- the clone
# part makes two clones' numbers distinct even when both minted the same one offline
_SESSION_NAME = lazy(r"[1-9][0-9]{0,17}(?:@[0-9a-f]{16})?\.json")
# a handoff document is named by its session, or 0: `doc write` before any session started
# (which wrote docs/0@<clone>.json, a name every other clone's edge refused)
_DOC_NAME = lazy(r"(?:0|[1-9][0-9]{0,17})(?:@[0-9a-f]{16})?\.json")


def kind_of(path: str) -> str | None:
    """The record kind stored at `path` of a state tree, or None for a path this version
    does not know."""
    if path in ("format", "config.toml", "meta.json", "relay.json"):
        return path.split(".")[0]
    parts = path.split("/")
    if parts[0] == "tasks" and len(parts) == 4 and len(parts[1]) == 1 and len(parts[2]) == 1:
        return "task" if parts[3].endswith(".json") else None
    if len(parts) == 2 and parts[0] == "sessions" and _SESSION_NAME.fullmatch(parts[1]):
        return "session"
    if len(parts) == 2 and parts[0] == "docs" and _DOC_NAME.fullmatch(parts[1]):
        return "doc"
    if len(parts) == 2 and parts[0] == "dispatch" and parts[1].endswith(".json") and RUN_ID.fullmatch(parts[1][:-5]):
        return "dispatch"
    return None


def check_record(path: str, raw: bytes, kind: str | None = None) -> None:
    """Parse the record at `path` of a state tree by its kind (InvalidState if it fails);
    `kind`: kind_of(path), when the caller has asked it already."""
    if kind is None:
        kind = kind_of(path)
    if kind is None:
        raise problem(path, "is not a file this version of git handoff knows")
    if len(raw) > MAX_STATE_BLOB_BYTES:
        raise problem(path, f"{len(raw)} bytes, more than the {MAX_STATE_BLOB_BYTES} a record may hold")
    RECORD_CHECKS[kind](path, raw)


def _check_format(path: str, raw: bytes) -> None:
    text_ = raw.decode("utf-8", "replace").strip()
    name, _, version = text_.partition(" ")
    if name != "git-handoff-state" or not version.isdigit() or len(version) > 6:
        raise problem(path, f"an unreadable format marker {text_[:40]!r}")


def _check_session_file(path: str, raw: bytes) -> None:
    record = session(raw, path)
    number, _, clone = path.split("/")[1][:-5].partition("@")
    if record.get("session") not in (None, int(number)):
        raise problem(path, f"holds session {record.get('session')!r}")
    if clone and record.get("clone") != clone:
        raise problem(path, f"holds a session of clone {record.get('clone')!r}")


def _check_doc_file(path: str, raw: bytes) -> None:
    doc = handoff_doc(raw, path)
    number = path.split("/")[1][:-5].partition("@")[0]
    if doc.get("session") not in (None, int(number)):
        raise problem(path, f"holds the document of session {doc.get('session')!r}")


def _check_task_file(path: str, raw: bytes) -> None:
    task_id = path.rsplit("/", 1)[1][:-5]
    found = written_task_id(raw)
    if found is None:  # not laid out as git handoff writes it: the parser that words what is wrong
        found = task(raw, path).id
    h = hashlib.sha1(found.encode()).hexdigest()
    if found != task_id or path != f"tasks/{h[0]}/{h[1]}/{task_id}.json":
        raise problem(path, f"holds task {found!r}")


# one parser per record kind (kind_of names the kind of a path)
RECORD_CHECKS: dict[str, Callable[[str, bytes], object]] = {
    "format": _check_format,
    "config": lambda path, raw: config(raw, path),
    "meta": lambda path, raw: meta(raw, path),
    "relay": lambda path, raw: relay(raw, path),
    "session": _check_session_file,
    "doc": _check_doc_file,
    "dispatch": lambda path, raw: dispatch_run(raw, path),
    "task": _check_task_file,
}
