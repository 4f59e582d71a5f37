"""Git notes on work commits (refs/notes/harness): which task, session and
checkpoint each commit made while a task was claimed belongs to, so that
`git log --notes=harness` tells the story.

`git notes add` and libgit2's create_note force-write the notes ref and lose
notes under concurrency, so the notes commit is built here and the ref moved by
compare-and-swap, under a per-clone lock, with bounded retries.
"""

from __future__ import annotations

from collections.abc import Mapping

from git_handoff.core.errors import Contention
from git_handoff.core.model import Task
from git_handoff.infra.file_lock import StateLock
from git_handoff.infra.gitrepo import Repo
from git_handoff.state.snapshot import NOTES_REF
from git_handoff.state.store import StateStore

NOTES_LOCK = "notes.lock"
CAS_RETRIES = 20
MAX_COMMITS = 500  # commits noted per call: a claim's range, not a whole history


def _note_paths(commit: str) -> tuple[str, str]:
    return commit, f"{commit[:2]}/{commit[2:]}"


def _existing(repo: Repo, tree: str | None, commit: str) -> tuple[str, bytes] | None:
    """(path, text) of the note on `commit` in a notes tree (flat or fanned out), or None."""
    if tree is None:
        return None
    for path in _note_paths(commit):
        found = repo.tree_lookup(tree, path)
        if found is not None and not found[1]:
            return path, repo.read_blob(found[0])
    return None


def read_note(repo: Repo, commit: str) -> str | None:
    """The harness note on `commit`, or None."""
    tip = repo.ref_target(NOTES_REF)
    if tip is None:
        return None
    found = _existing(repo, repo.commit_tree(tip), commit)
    return None if found is None else found[1].decode(errors="replace")


def fetched_notes_trees(repo: Repo) -> list[str]:
    """The trees of every notes ref fetched from a remote (refs/remotes/<r>/notes/harness,
    refs/remotes/<r>/harness/clones/<clone>/notes)."""
    out = []
    for name, oid in sorted(repo.refs_under("refs/remotes/").items()):
        if name.endswith("/notes/harness") or (name.endswith("/notes") and "/harness/clones/" in name):
            tree = repo.commit_tree(oid) if repo.resolve_commit(f"{oid}^{{commit}}") == oid else None
            if tree is not None:
                out.append(tree)
    return out


def read_local_note(repo: Repo, commit: str, fetched: list[str] | None = None) -> str | None:
    """The harness note on `commit` when it is this clone's own and never travelled: None
    when a notes ref fetched from (or pushed to) a remote holds a note on that commit.
    What a local action decides (session recovery) must not rest on fetched text.
    `fetched`: fetched_notes_trees(repo), when the caller asks about many commits."""
    text = read_note(repo, commit)
    if text is None:
        return None
    trees = fetched_notes_trees(repo) if fetched is None else fetched
    if any(_existing(repo, tree, commit) is not None for tree in trees):
        return None
    return text


def write_notes(repo: Repo, notes: Mapping[str, str], message: str = "Notes added by 'git handoff'") -> int:
    """Set the harness note of each commit (replacing an older one); returns how many changed."""
    if not notes:
        return 0
    from git_handoff.state import redaction  # only a command that writes scans

    with StateLock(repo.handoff_dir / NOTES_LOCK, 30):
        for _ in range(CAS_RETRIES):
            tip = repo.ref_target(NOTES_REF)
            base_tree = repo.commit_tree(tip) if tip else None
            changes: dict[str, str | None] = {}
            for commit, text in notes.items():
                data = redaction.redact_text(repo, text)[0].encode()  # pushed with the state: no secret
                found = _existing(repo, base_tree, commit)
                if found is not None and found[1] == data:
                    continue
                path = found[0] if found is not None else commit
                changes[path] = repo.write_blob(data)
            if not changes:
                return 0
            tree = repo.update_tree(base_tree, changes)
            new = repo.create_commit(tree, [tip] if tip else [], message + "\n")
            if repo.cas_ref(NOTES_REF, new, tip, "handoff: notes"):
                _remember_rewrite(repo)
                return len(changes)
    raise Contention(f"{NOTES_REF} kept changing; the notes were not written, retry")


def _remember_rewrite(repo: Repo) -> None:
    """Let notes follow commits through amend and rebase (once per clone)."""
    if repo.config_get("notes.rewriteRef") is None:
        repo.git("config", "--add", "notes.rewriteRef", NOTES_REF, check=False)


def note_text(task: Task, *, session: int, checkpoint: str | None = None, outcome: str | None = None) -> str:
    lines = [
        f"task: {task.id}",
        f"title: {task.title}",
        f"session: {session}",
    ]
    if task.claimed_by:
        lines.append(f"worker: {task.claimed_by}")
    if checkpoint:
        lines.append(f"checkpoint: {checkpoint}")
    if outcome:
        lines.append(f"outcome: {outcome}")
    return "\n".join(lines) + "\n"


def last_checkpoint_text(task: Task) -> str | None:
    if not task.checkpoints:
        return None
    cp = task.checkpoints[-1]
    total = cp.get("total")
    return f"step={cp.get('step')}/{total if total is not None else '?'} \"{cp.get('description', '')}\""


def note_task_commits(
    store: StateStore,
    task: Task,
    *,
    head: str | None = None,
    outcome: str | None = None,
    session: int | None = None,
) -> int:
    """Note every commit made since `task` was claimed (`started_at_commit..head`).

    Call it while the task is still claimed: at checkpoint, done, fail, or at the
    end of a session. Returns how many notes were written or updated.
    """
    repo = store.repo
    base = task.started_at_commit
    head = head or repo.head()
    if not base or not head or base == head or not repo.has_object(base):
        return 0
    commits = repo.commits_between(base, head, limit=MAX_COMMITS)
    if not commits:
        return 0
    text = note_text(
        task,
        session=store.session if session is None else session,
        checkpoint=last_checkpoint_text(task),
        outcome=outcome,
    )
    return write_notes(repo, {c: text for c in commits})

