"""The record in an attempt commit's message: what `fail` saved, and what it changed.

`fail` writes an attempt commit (refs/harness/attempts/<id>/<n>) whose message holds,
after its summary line, a JSON record; `attempts`, `restore` and the dashboard read it
back, another clone's too once the ref was fetched. `attempt` is its parser: every field
the readers use of its type, the texts it shows as printable lines, the paths it lists
as any text (see path_text).

Pure: no git, no I/O.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

from git_handoff.core import model
from git_handoff.core.decoding import load_json, problem
from git_handoff.core.errors import InvalidState
from git_handoff.core.field_checks import (
    LINE,
    OID,
    PATH_MAX,
    STAMP,
    Check,
    check_fields,
    integer,
    list_of,
    opt,
    shown,
    text,
)
from git_handoff.core.model import MAX_RECORD_BYTES

MAX_ATTEMPT_BYTES = 64 << 20  # the JSON of one attempt record (a file list of a big work tree)
MAX_ATTEMPT_FILES = 1_000_000  # files one attempt changed


class AttemptFile(TypedDict):
    status: str  # git's status letter: A, M, D, T...
    path: str


class AttemptRecord(TypedDict, total=False):
    """The JSON record `fail` writes after the summary line of an attempt commit
    (refs/harness/attempts/<id>/<n>): what the attempt was, and what it changed."""

    task: str
    attempt: int
    time: str
    category: str
    reason: str
    base: str  # the commit the claim started from
    head: str  # HEAD when the attempt was saved
    branch: str | None
    worker: str | None
    session: int | None
    files: list[AttemptFile]
    index: str | None  # the tree of the index, when it was saved with one
    claim_snapshot: str | None


def _attempt_file(value: Any, at: str) -> None:
    if not isinstance(value, dict):
        raise InvalidState(f"{at} must be an object, not {shown(value)}")
    for name, check in (("status", LINE), ("path", text(PATH_MAX, one_line=False))):
        if name not in value:
            raise InvalidState(f"{at} needs a {name}")
        check(value[name], f"{at}.{name}")


def path_text(path: str) -> str:
    """A path from an attempt's file list as text any output can hold: a file name that was
    not UTF-8 (git's bytes, decoded with surrogateescape when the attempt was saved) keeps
    its bytes as \\xNN escapes. The list is what the attempt changed, for people to read;
    restore reads the attempt's trees, never these names."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        pass
    try:
        data = path.encode("utf-8", "surrogateescape")  # the bytes git gave
    except UnicodeEncodeError:  # a surrogate no byte decodes to: its own three bytes
        data = path.encode("utf-8", "surrogatepass")
    return data.decode("utf-8", "backslashreplace")


# The texts of an attempt record that are only shown (attempts, the dashboard): any text of
# their size, shown as one printable line (model.printable); an attempt saved before its
# reason was made printable (a check's colored output) stays readable and restorable.
ATTEMPT_TEXTS = {"task": 4096, "category": 4096, "reason": MAX_RECORD_BYTES, "branch": PATH_MAX, "worker": 4096}
ATTEMPT_FIELDS: dict[str, Check] = {
    **{name: opt(text(cap, one_line=False)) for name, cap in ATTEMPT_TEXTS.items()},
    "attempt": integer(1),
    "time": opt(STAMP),
    "base": opt(OID),
    "head": opt(OID),
    "session": opt(integer(0)),
    "files": list_of(_attempt_file, MAX_ATTEMPT_FILES),
    "index": opt(OID),
    "claim_snapshot": opt(OID),
}


def attempt(body: str, where: str) -> AttemptRecord:
    """The record in the body of an attempt commit's message (another clone's, when the
    ref was fetched): every field the readers use of its type; the texts it shows
    (ATTEMPT_TEXTS) as printable lines, the paths of `files` as any text (a file name may
    hold a newline, or bytes that are not UTF-8: see path_text), printed escaped.
    InvalidState naming `where` and the field otherwise."""
    try:
        raw = body.encode("utf-8")
    except UnicodeEncodeError:
        raise problem(where, "holds text that is not valid Unicode (a lone surrogate)") from None
    if not raw.strip():
        raise problem(where, "holds no record")
    data = load_json(raw, where, MAX_ATTEMPT_BYTES)
    files = data.pop("files", []) if isinstance(data, dict) else []
    record = check_fields(data, ATTEMPT_FIELDS, where)  # every text but the paths: valid Unicode
    try:
        ATTEMPT_FIELDS["files"](files, "files")
    except InvalidState as exc:
        raise problem(where, f"field {exc.message}") from None
    record["files"] = [{"status": f["status"], "path": path_text(f["path"])} for f in files]
    for name in ATTEMPT_TEXTS:
        if isinstance(record.get(name), str):
            record[name] = model.printable(record[name])
    return cast(AttemptRecord, record)
