"""Writers the user chose: with handoff.allowedSigners set, a task whose content was last
set by a state commit no approved writer signed is shown, marked, but never offered to
an agent (docs/allowed-signers.md has the rules and the threat model).

Who wrote a record (a task, a handoff document, a session record, the state's config):
the writer of the commit that introduced its content, through merges, shallow cuts and
side-effect rewrites (git_handoff.state.authorship judges the history).

An approved writer is: this clone (its own state commits, signing.own_commits), a key the
allowed-signers file lists (`%G?` = G), or a key this clone approved by fingerprint
(`git handoff trust --writer SHA256:...`, kept in .git/handoff/writers.json). Everything
this clone's state held when the setting was first used here is the baseline: approved
(whatever it held then is what the user chose to start from), as is every ancestor of it.

Verdicts are cached per commit (authorship.CACHE_FILE): a sync verifies only the commits
it brought. Without handoff.allowedSigners nothing here runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from git_handoff.core.errors import UsageError
from git_handoff.core.model import now_iso
from git_handoff.core.record_schemas import HandoffDoc
from git_handoff.infra import signing
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import session_records
from git_handoff.state.snapshot import CONFIG_PATH, STATE_REF, TASKS_DIR, StateReader
from git_handoff.state.snapshot import task_id_of as _task_id

APPROVALS_FILE = "writers.json"
_TASKS = TASKS_DIR + "/"


def enabled(repo: Repo) -> bool:
    return signing.allowed_signers(repo) is not None


def unapproved(repo: Repo, commit: str | None) -> dict[str, str]:
    """{task id: unapproved writer} for the state at `commit`; {} when the setting is off."""
    return {_task_id(path): who for path, who in unapproved_records(repo, commit).items() if path.startswith(_TASKS)}


def unapproved_records(repo: Repo, commit: str | None) -> dict[str, str]:
    """{record path: unapproved writer} for the state at `commit`: its tasks, handoff
    documents, session records and config; {} when the setting is off."""
    if commit is None or not enabled(repo):
        return {}
    # Only with the setting on: every hook and read comes here.
    from git_handoff.state.authorship import Judge

    allowed = signing.allowed_signers(repo)
    assert allowed is not None
    judge = Judge(repo, allowed, approvals(repo))
    found = judge.of(commit)
    judge.save()
    return dict(found)


def unapproved_at_head(repo: Repo) -> dict[str, str]:
    return unapproved(repo, repo.ref_target(STATE_REF)) if enabled(repo) else {}


@dataclass
class ForPrompt:
    """What the agent's prompt may use of a state (what an unapproved writer wrote last
    left out, never shown marked: a model may follow text however it is labelled).

    `tasks`: {task id: writer} left out; `doc`: the handoff document to show (the latest
    pending one an approved writer wrote, else the latest such), with the entries of the
    tasks left out and, when its session record is an unapproved writer's, that record's
    decisions and blockers taken out; `use_config`: whether the state's config (its spec
    reference) may be used; `notes`: one line for each kind of thing left out."""

    tasks: dict[str, str] = field(default_factory=dict)
    doc: HandoffDoc | None = None
    use_config: bool = True
    notes: list[str] = field(default_factory=list)


def for_prompt(source: StateReader, commit: str | None) -> ForPrompt:
    """The prompt's view of the state at `commit` (`source` reads it). With the setting
    off, everything is used and the document is chosen as it always was."""
    left = unapproved_records(source.repo, commit)
    tasks = {_task_id(path): who for path, who in left.items() if path.startswith(_TASKS)}
    found = session_records.pending_doc_at(source, skip=left)
    if found is None:
        numbers = [n for n, path in session_records.doc_paths(source) if path not in left]
        found = session_records.read_doc_at(source, max(numbers), skip=left) if numbers else None
    out = ForPrompt(tasks=tasks, use_config=CONFIG_PATH not in left)
    docs_left = sum(1 for path in left if path.startswith(session_records.DOCS_DIR + "/"))
    if docs_left:
        out.notes.append(f"Not shown: {docs_left} handoff document(s) last written by a writer this clone has not "
                         "approved (a person reviews them).")
    if found is not None:
        path, doc = found
        out.doc = _without(doc, tasks)
        record = session_records.SESSIONS_DIR + path[len(session_records.DOCS_DIR):]
        if record in left and (doc.get("decisions") or doc.get("blockers")):
            out.doc["decisions"], out.doc["blockers"] = [], []
            out.notes.append("Left out of the handoff document below: the decisions and blockers of its session, "
                             "whose record a writer this clone has not approved changed.")
    if not out.use_config:
        out.notes.append("Not used: the state's config, last changed by a writer this clone has not approved "
                         "(its spec reference is left out).")
    return out


def _without(doc: HandoffDoc, tasks: dict[str, str]) -> HandoffDoc:
    """A copy of `doc` without its entries of the tasks in `tasks`."""
    def keep(items: Any) -> list[Any]:
        return [t for t in items if not (isinstance(t, dict) and t.get("id") in tasks)] if isinstance(items, list) \
            else []

    out = cast(HandoffDoc, dict(doc))
    if not tasks:
        return out
    status = doc.get("status")
    if isinstance(status, dict):
        out["status"] = cast(Any, {k: keep(v) for k, v in status.items()})
    if "failed" in doc:
        out["failed"] = keep(doc.get("failed"))
    return out


def file_note(repo: Repo) -> str | None:
    """A line for `status` when the allowed-signers file named can not be read."""
    path = signing.allowed_signers(repo)
    if path is None or path.is_file():
        return None
    return (f"{signing.ALLOWED_KEY} names {path}, which is not a readable file: no key is allowed, only this "
            "clone's own state commits and the keys approved here (`git handoff trust --writer`)")


def refuse(task_id: str, who: str) -> UsageError:
    """The one-line refusal of an unapproved task (exit 2)."""
    return UsageError(f"task {task_id} was last written by an unapproved writer ({who}): it is not offered to "
                      "agents until a person approves that writer (`git handoff trust --writer KEY`, or the "
                      f"key in the {signing.ALLOWED_KEY} file)")


# -- approvals kept by this clone ---------------------------------------------------------


def _read_approvals(repo: Repo) -> dict[str, Any] | None:
    try:
        data = json.loads((repo.handoff_dir / APPROVALS_FILE).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), dict):
        return None
    baseline = data.get("baseline")
    if baseline is not None and not (isinstance(baseline, str) and len(baseline) in (40, 64)):
        return None
    return data


def approvals(repo: Repo) -> dict[str, Any]:
    """{"baseline": commit|None, "baseline_at": time, "keys": {fingerprint: approved_at}};
    written on first use, with this clone's state head as the baseline."""
    data = _read_approvals(repo)
    if data is None:
        data = {"version": 1, "baseline": repo.ref_target(STATE_REF), "baseline_at": now_iso(), "keys": {}}
        try:
            _write_approvals(repo, data)
        except OSError:
            pass  # a read-only repository (`serve`): its state can not change, so its baseline can not either
    return data


def _write_approvals(repo: Repo, data: dict[str, Any]) -> None:
    atomic_write(repo.handoff_dir / APPROVALS_FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")


def approve_keys(repo: Repo, keys: Iterable[str]) -> list[str]:
    """Approve writers by key fingerprint (`SHA256:...`, as `git handoff trust` lists them)."""
    if not enabled(repo):
        raise UsageError(f"{signing.ALLOWED_KEY} is not set: every writer's tasks are offered already")
    wanted = list(dict.fromkeys(k.strip() for k in keys))
    for key in wanted:
        body = key[len("SHA256:"):]
        if not key.startswith("SHA256:") or not (40 <= len(body) <= 44) or not all(
                c.isalnum() or c in "+/=" for c in body):
            raise UsageError(f"not a key fingerprint: {key!r} (give it as `git handoff trust` lists it, SHA256:...)")
    from filelock import FileLock

    with FileLock(str(repo.handoff_dir / APPROVALS_FILE) + ".lock", timeout=30):
        data = approvals(repo)
        stamp = now_iso()
        for key in wanted:
            data["keys"].setdefault(key, stamp)
        _write_approvals(repo, data)
    return wanted


class PendingWriter(TypedDict):
    """A writer whose tasks are not offered to agents here (`trust --writers --json`)."""

    writer: str
    key: str | None  # the key fingerprint `trust --writer` approves, when it signed with one
    tasks: list[str]  # the tasks it wrote last


def pending_writers(repo: Repo) -> list[PendingWriter]:
    """Each unapproved writer of the state's tasks: who, a key to approve when it has one,
    and the tasks it wrote last."""
    found = unapproved_at_head(repo)
    by_writer: dict[str, list[str]] = {}
    for task_id, who in found.items():
        by_writer.setdefault(who, []).append(task_id)
    out: list[PendingWriter] = []
    for who, ids in sorted(by_writer.items()):
        key = who.split("key ", 1)[1].split(")", 1)[0] if "key SHA256:" in who else None
        out.append({"writer": who, "key": key, "tasks": sorted(ids)})
    return out
