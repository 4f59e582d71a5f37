"""Writers the user chose: with handoff.allowedSigners set, a task whose content was last
set by a state commit no approved writer signed is shown, marked, but never offered to
an agent (docs/allowed-signers.md has the rules and the threat model).

Who wrote a record (a task, a handoff document, a session record, the state's config):
the state commit that set its current content. Walking the state history from its roots
(or from the baseline), each commit's unapproved records are derived from its parents':

- a record a parent holds unchanged keeps that parent's verdict (approved when any
  parent holding it is approved: the same bytes an approved writer published);
- a task a one-parent commit changed is approved exactly when the commit's writer is;
  a document, session record or config an unapproved writer changed stays unapproved
  whoever changes it afterwards (until it is deleted): this clone changes those as a side
  effect of other commands (an ack archives a document, a decision is added to a session
  record, `init --max-sessions` keeps the config's other keys), so no person reviewed
  what the unapproved writer put there;
- a record a merge commit wrote new (no parent holds it: a 3-way merge of both sides) is
  approved when the merge's writer is and every side it merged was approved; otherwise
  it keeps the first unapproved side's writer.

An approved writer is: this clone (its own state commits, signing.own_commits), a key the
allowed-signers file lists (`%G?` = G), or a key this clone approved by fingerprint
(`git handoff trust --writer SHA256:...`, kept in .git/handoff/writers.json). Everything
this clone's state held when the setting was first used here is the baseline: approved
(whatever it held then is what the user chose to start from), as is every ancestor of it.

Verdicts are cached per commit (.git/handoff/writers-cache.pickle), keyed by the
allowed-signers file's bytes, the approved keys and the baseline: a sync verifies only the
commits it brought. Without handoff.allowedSigners nothing here runs.
"""

from __future__ import annotations

import hashlib
import json
import pickle
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

APPROVALS_FILE = "writers.json"
CACHE_FILE = "writers-cache.pickle"
CACHE_VERSION = 2  # 1 judged tasks only
CACHE_MAX_COMMITS = 200_000  # past it the cache starts again (only slower)
OWN = "this clone"

Verdict = dict[str, str]  # record path -> who wrote its content (an unapproved writer)
_EMPTY: Verdict = {}
_TASKS = TASKS_DIR + "/"
_STICKY = ("docs/", "sessions/")  # and CONFIG_PATH: see the module's docstring


def _judged(path: str) -> bool:
    """The records whose writer counts: tasks, handoff documents, session records, config."""
    return path == CONFIG_PATH or (path.endswith(".json") and path.startswith((_TASKS, *_STICKY)))


def _sticky(path: str) -> bool:
    return path == CONFIG_PATH or path.startswith(_STICKY)


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
    judge = Judge(repo)
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


def _task_id(path: str) -> str:
    return path.rsplit("/", 1)[-1][: -len(".json")]


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


# -- judging the history ------------------------------------------------------------------


class Judge:
    """Verdicts of state commits, from a cache and the history."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        allowed = signing.allowed_signers(repo)
        assert allowed is not None
        self.allowed = allowed
        data = approvals(repo)
        self.baseline: str | None = data.get("baseline")
        self.keys = {k for k in data["keys"] if isinstance(k, str)}
        try:
            content = allowed.read_bytes()
        except OSError:
            content = b"(absent)"
        self.key = hashlib.sha256(repr((content, sorted(self.keys), self.baseline)).encode()).hexdigest()
        self.sigs: dict[str, tuple[str, str]] = {}
        self.verdicts: dict[str, Verdict] = {}
        self.dirty = False
        self._own: set[str] | None = None
        self._baseline_time: int | None = None
        self._load()

    def _load(self) -> None:
        try:
            with open(self.repo.handoff_dir / CACHE_FILE, "rb") as fh:
                data = pickle.load(fh)
        except Exception:  # noqa: BLE001 - a missing or damaged cache is only slower
            return
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION and data.get("key") == self.key:
            self.sigs = data["sigs"]
            self.verdicts = data["verdicts"]

    def save(self) -> None:
        if not self.dirty:
            return
        if len(self.verdicts) > CACHE_MAX_COMMITS:
            self.verdicts, self.sigs = {}, {}
        blob = pickle.dumps({"version": CACHE_VERSION, "key": self.key, "sigs": self.sigs,
                             "verdicts": self.verdicts}, protocol=4)
        try:
            atomic_write(self.repo.handoff_dir / CACHE_FILE, blob)
        except OSError:
            pass  # a cache: the next command verifies again

    @property
    def own(self) -> set[str]:
        if self._own is None:
            self._own = signing.own_commits(self.repo)
        return self._own

    def _in_baseline(self, commit: str) -> bool:
        """`commit` is the baseline or one of its ancestors. Only commits no newer than the
        baseline are asked (a commit's time is its writer's word: a wrong one costs a walk,
        or judges a baseline commit by its signature, never approves anything more)."""
        if self.baseline is None:
            return False
        if commit == self.baseline:
            return True
        repo = self.repo
        if not repo.has_object(self.baseline):
            return False
        if self._baseline_time is None:
            self._baseline_time = repo.commit_info(self.baseline)[2]
        if repo.commit_info(commit)[2] > self._baseline_time:
            return False
        return repo.is_ancestor(commit, self.baseline)

    def of(self, head: str) -> Verdict:
        if head in self.verdicts:
            return self.verdicts[head]
        order = self._unjudged(head)
        need = [c for c in order if c not in self.own and c not in self.sigs]
        if need:
            self.sigs.update(signing.verify(self.repo, need, self.allowed))
        for commit in order:
            self.verdicts[commit] = self._judge(commit)
        self.dirty = True
        return self.verdicts[head]

    def _unjudged(self, head: str) -> list[str]:
        """The commits behind `head` with no verdict yet, parents before children
        (iterative: a history is as deep as it is)."""
        order: list[str] = []
        expanded: set[str] = set()
        done: set[str] = set()
        stack = [head]
        while stack:
            commit = stack[-1]
            if commit in self.verdicts or commit in done:
                stack.pop()
                continue
            if commit not in expanded:
                expanded.add(commit)
                if self._in_baseline(commit):
                    self.verdicts[commit] = _EMPTY
                    stack.pop()
                    continue
                stack.extend(p for p in self._parents(commit) if p not in self.verdicts and p not in done)
                continue
            stack.pop()
            done.add(commit)
            order.append(commit)
        return order

    def _parents(self, commit: str) -> list[str]:
        """The parents of `commit` this clone holds (a shallow history ends early)."""
        repo = self.repo
        found = repo.object_kind(commit)
        if found is None or found[0] != "commit":
            return []
        out = []
        for parent in repo.commit_parents(commit):
            kind = repo.object_kind(parent)
            if kind is not None and kind[0] == "commit":
                out.append(parent)
        return out

    def _writer(self, commit: str) -> str | None:
        """None when the commit's writer is approved, else who it is."""
        if commit in self.own:
            return None
        status, key = self.sigs.get(commit, ("E", ""))
        if status == signing.GOOD or (status == signing.UNKNOWN and key in self.keys):
            return None
        if status == signing.UNSIGNED:
            return "unsigned"
        if status == signing.UNKNOWN:
            return f"key {key}"
        if status == signing.BAD:
            return f"bad signature (key {key})" if key else "bad signature"
        return f"unverifiable signature ({status}{' key ' + key if key else ''})"

    def _diff(self, a: str | None, b: str) -> dict[str, tuple[str | None, str | None]]:
        """The judged records that differ between the trees of commits `a` (None: none) and `b`."""
        repo = self.repo
        return {p: v for p, v in repo.tree_diff(repo.commit_tree(a) if a else None, repo.commit_tree(b)).items()
                if _judged(p)}

    def _judge(self, commit: str) -> Verdict:
        writer = self._writer(commit)
        parents = [p for p in self._parents(commit) if p in self.verdicts]
        if not parents:
            if writer is None:
                return _EMPTY
            return dict.fromkeys(self._diff(None, commit), writer) or _EMPTY
        diffs = [self._diff(parent, commit) for parent in parents]
        if len(parents) == 1:
            before, diff = self.verdicts[parents[0]], diffs[0]
            if not diff or (writer is None and not any(p in before for p in diff)):
                return before
            after = dict(before)
            for path, (_old, new) in diff.items():
                if new is None or (writer is None and not _sticky(path)):
                    after.pop(path, None)
                elif writer is not None:
                    after[path] = writer
            return after if after else _EMPTY
        candidates: set[str] = set()
        for parent, diff in zip(parents, diffs, strict=True):
            candidates.update(self.verdicts[parent])
            candidates.update(diff)
        out: Verdict = {}
        for path in candidates:
            sides = []  # (parent's blob at path, the parent's verdict of it or None: approved)
            mine: str | None = None
            for parent, diff in zip(parents, diffs, strict=True):
                if path in diff:
                    old, new = diff[path]
                    mine = new
                    sides.append((old, self.verdicts[parent].get(path)))
                else:
                    sides.append(("=", self.verdicts[parent].get(path)))
            if mine is None and all(old == "=" for old, _ in sides):
                mine = "="  # unchanged against every parent
            if mine is None:
                continue  # not in this commit
            holders = [who for old, who in sides if old == "=" or old == mine]
            if holders:
                if any(who is None for who in holders):
                    continue
                out[path] = holders[0] or ""
                continue
            contributed = [who for old, who in sides if old is not None and who is not None]
            if writer is not None:
                out[path] = writer
            elif contributed:
                out[path] = contributed[0]
        return out if out else _EMPTY
