"""The state as it is read: the layout of `refs/harness/state`, and one commit of it
seen read-only (`Snapshot`).

Layout of the state tree (every file human-readable; `git show refs/harness/state:<path>`):

    format                      marker: "git-handoff-state <version>"
    config.toml                 state-wide settings (tomlkit, comments survive)
    meta.json                   session_count, last_session, counters
    tasks/<h>/<h>/<id>.json     one blob per task; <h> = hex digits of sha1(id)
    sessions/, docs/, dispatch/ written by the modules that own them

Each record is parsed by its checker (git_handoff.core.record_schemas) when it is read; the
tasks are read through this clone's task index (git_handoff.state.task_index).
Writing is git_handoff.state.store's: one transaction engine on top of these reads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, Protocol

from git_handoff.core import decoding, record_schemas, state_tree
from git_handoff.core.errors import InvalidState
from git_handoff.core.model import WORK_PREFIX as WORK_PREFIX
from git_handoff.core.model import Config, Task
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.task_index import TaskIndex, load_task

STATE_REF = "refs/harness/state"
ATTEMPTS_PREFIX = "refs/harness/attempts/"
# (WORK_PREFIX, a task's published work: named in core/model.py, where `status` reads it too)
# the namespaces of refs created once and never moved, which sync fetches and pushes alike
KEPT_PREFIXES = (ATTEMPTS_PREFIX, WORK_PREFIX)
# a failed attempt whose files hold a secret: kept here, a namespace no sync pushes
LOCAL_ATTEMPTS_PREFIX = "refs/harness/local/attempts/"
NOTES_REF = "refs/notes/harness"
FORMAT_PATH = "format"
FORMAT_NAME = "git-handoff-state"
FORMAT_VERSION = 1
CONFIG_PATH = "config.toml"
META_PATH = "meta.json"
TASKS_DIR = "tasks"


def task_path(task_id: str) -> str:
    h = hashlib.sha1(task_id.encode()).hexdigest()
    return f"{TASKS_DIR}/{h[0]}/{h[1]}/{task_id}.json"


def task_id_of(path: str) -> str:
    """The task id a task file's path names (task_path's inverse)."""
    return path.rsplit("/", 1)[-1][: -len(".json")]


# The record kinds read through read_json, each by its parser (git_handoff.core.record_schemas): a
# hand-corrupted local record is an InvalidState naming the path and the field, as a
# fetched one is, never an internal error further on.
_PARSERS: dict[str | None, Callable[[bytes, str], Any]] = {
    "meta": record_schemas.meta,
    "session": record_schemas.session,
    "doc": record_schemas.handoff_doc,
    "relay": record_schemas.relay,
    "dispatch": record_schemas.dispatch_run,
}


def parse_json(raw: bytes | None, path: str) -> Any:
    """A state file's JSON (None when absent), through the parser of its kind; InvalidState
    (exit 2) naming the path and the field when it does not parse."""
    if raw is None:
        return None
    parser = _PARSERS.get(state_tree.kind_of(path))
    if parser is None:
        return decoding.load_json(raw, f"state file {path}")
    return parser(raw, f"state file {path}")


class Snapshot:
    """A read-only view of one state commit. Blobs are read on demand and cached."""

    def __init__(self, repo: Repo, commit: str) -> None:
        self.repo = repo
        self.commit = commit
        self.tree = repo.commit_tree(commit)
        self._tasks: dict[str, Task] | None = None
        self._config: Config | None = None
        # what an index answered for this commit (state/status_index.py), asked once per process
        self.derived: dict[str, Any] = {}
        self._check_format()

    def _check_format(self) -> None:
        raw = self.read(FORMAT_PATH)
        if raw is None:
            raise InvalidState(f"{STATE_REF} is not a git handoff state (no '{FORMAT_PATH}' file)")
        text = raw.decode(errors="replace").strip()
        name, _, version = text.partition(" ")
        if name != FORMAT_NAME or not version.isdigit():
            raise InvalidState(f"{STATE_REF} has an unreadable format marker: {text[:60]!r}")
        if int(version) > FORMAT_VERSION:
            raise InvalidState(
                f"{STATE_REF} was written by a newer git handoff (state format {version}, "
                f"this one reads {FORMAT_VERSION}); upgrade git-handoff"
            )

    def read(self, path: str) -> bytes | None:
        found = self.repo.tree_lookup(self.tree, path)
        if found is None or found[1]:
            return None
        return self.repo.read_blob(found[0])

    def read_json(self, path: str) -> Any:
        return parse_json(self.read(path), path)

    def listdir(self, path: str) -> list[str]:
        found = self.repo.tree_lookup(self.tree, path)
        if found is None or not found[1]:
            return []
        return [name for name, _, _ in self.repo.tree_entries(found[0])]

    def config(self) -> Config:
        if self._config is None:
            raw = self.read(CONFIG_PATH)
            self._config = Config() if raw is None else record_schemas.config(raw, CONFIG_PATH)
        return self._config

    def meta(self) -> dict[str, Any]:
        data = self.read_json(META_PATH)
        return data if isinstance(data, dict) else {}

    def task(self, task_id: str) -> Task | None:
        if self._tasks is not None:
            return self._tasks.get(task_id)
        raw = self.read(task_path(task_id))
        return None if raw is None else load_task(raw, task_id)

    def tasks_tree(self) -> str | None:
        """The oid of the tasks directory (None when the state has none)."""
        found = self.repo.tree_lookup(self.tree, TASKS_DIR)
        return found[0] if found is not None and found[1] else None

    def tasks(self) -> dict[str, Task]:
        """Every task, in creation order, through this clone's task index (`TaskIndex`):
        read once per process, and after a change only the changed leaves are parsed."""
        if self._tasks is None:
            self._tasks = TaskIndex.of(self.repo).tasks(self.tasks_tree())
        return self._tasks


class StateReader(Protocol):
    """What reads a state: a Snapshot (one commit) or a Tx (a commit being built)."""

    @property
    def repo(self) -> Repo: ...
    def read(self, path: str) -> bytes | None: ...
    def read_json(self, path: str) -> Any: ...
    def listdir(self, path: str) -> list[str]: ...
    def config(self) -> Config: ...
    def meta(self) -> dict[str, Any]: ...
    def task(self, task_id: str) -> Task | None: ...
    def tasks(self) -> dict[str, Task]: ...
