"""The facts-only handoff document, ACK and archive, the prompt's 10 KB bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from git_handoff.state.store import Tx
from tests.support.repo import git, run, state_head, state_record


def _setup(repo: Path) -> str:
    assert run("init", "--spec", "docs/spec.md").rc == 0
    run("add", "Schema", "--id", "schema", "--check", "true", "--priority", "P0")
    run("add", "API", "--id", "api", "--after", "schema", "--check", "true")
    assert run("session", "start", "--worker", "w").rc == 0
    return git("rev-parse", "HEAD", cwd=repo)


def _git_files_changed(repo: Path, base: str) -> list[str]:
    committed = set(git("diff", "--name-only", base, "HEAD", cwd=repo).split())
    uncommitted = set(git("diff", "--name-only", "HEAD", cwd=repo).split())
    untracked = set(git("ls-files", "--others", "--exclude-standard", cwd=repo).split())
    return sorted(committed | uncommitted | untracked)


def test_document_fields_are_facts_only(repo: Path) -> None:
    base = _setup(repo)
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("a\n")
    git("add", "src/a.py", cwd=repo)
    git("commit", "-qm", "a", cwd=repo)
    (repo / "README").write_text("changed\n")  # uncommitted change to a tracked file
    (repo / "new.txt").write_text("untracked\n")
    (repo / "staged.txt").write_text("s\n")
    git("add", "staged.txt", cwd=repo)
    run("decide", "Postgres", "--why", "already deployed")
    run("blocker", "migration pending")
    r = run("doc", "write", "--json")
    assert r.rc == 0, r.err
    doc = r.json()
    for key in ("spec_ref", "status", "decisions", "blockers", "files_changed", "session", "base", "head"):
        assert key in doc
    assert not any("next" in key.lower() for key in doc)
    assert set(doc["status"]) == {"completed", "in_progress", "pending"}
    assert doc["spec_ref"] == "docs/spec.md"
    assert doc["session"] == 1 and doc["base"] == base
    assert doc["head"] == git("rev-parse", "HEAD", cwd=repo)
    assert doc["decisions"] == [{"what": "Postgres", "why": "already deployed"}]
    assert doc["blockers"] == ["migration pending"]
    assert doc["files_changed"] == _git_files_changed(repo, base)
    assert doc["files_changed"] == ["README", "new.txt", "src/a.py", "staged.txt"]
    assert [t["id"] for t in doc["status"]["pending"]] == ["schema", "api"]
    md = run("doc", "show").out
    assert "# Handoff document: session 1" in md and "next step" not in md.lower()
    assert "- src/a.py" in md and "Postgres - why: already deployed" in md


def test_document_is_stored_in_the_state(repo: Path) -> None:
    _setup(repo)
    run("doc", "write")
    text = state_record("docs", 1, cwd=repo)
    assert '"files_changed"' in text
    assert "HANDOFF Document written for session 1" in run("log").out


def test_doc_show_and_list_errors(repo: Path) -> None:
    _setup(repo)
    assert run("doc", "show").rc == 1  # none yet
    assert run("doc", "list", "--json").json() == []
    run("doc", "write")
    assert run("doc", "show", "1", "--json").json()["session"] == 1
    r = run("doc", "show", "9")
    assert r.rc == 2 and r.err.startswith("error:")
    assert run("doc", "list", "--json").json()[0]["session"] == 1


def test_ack_accepts_and_archives(repo: Path) -> None:
    _setup(repo)
    run("doc", "write")
    run("session", "end")
    assert run("doc", "list", "--json").json()[0]["archived"] is False
    run("session", "start")
    r = run("ack", "--json")
    assert r.rc == 0, r.err
    assert r.json()["status"] == "accepted" and r.json()["handoff"] == 1
    listed = run("doc", "list", "--json").json()[0]
    assert listed["archived"] is True and listed["accepted_by"] == 2
    assert "ACK Session 2 accepted the handoff of session 1" in run("log").out
    assert run("session", "show", "--json").json()["ack"]["status"] == "accepted"
    # a second ack still succeeds (nothing pending now)
    assert run("ack").rc == 0


def test_ack_failed_keeps_the_document_pending(repo: Path) -> None:
    _setup(repo)
    run("doc", "write")
    run("session", "start")
    r = run("ack", "--failed", "HEAD differs from the document", "--json")
    assert r.rc == 0
    assert r.json()["status"] == "failed"
    doc = run("doc", "show", "1", "--json").json()
    assert doc["archived"] is False
    assert doc["rejections"][0]["reason"] == "HEAD differs from the document"
    assert "rejected the handoff of session 1: HEAD differs" in run("log").out
    assert run("ack", "--failed", " ").rc == 2


def test_ack_without_pending_handoff_and_outside_session(repo: Path) -> None:
    run("init")
    before = state_head(repo)
    assert run("ack").rc == 2
    assert state_head(repo) == before
    run("session", "start")
    r = run("ack")
    assert r.rc == 0 and "accepted the prompt" in r.out


def test_relay_queries(repo: Path) -> None:
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.ops import handoff, prompt, session_start, sessions
    from git_handoff.state.store import StateStore

    run("init")
    store = StateStore(Repo.discover())
    rec = session_start.start(store, worker="relay")
    n = rec["session"]
    assert not handoff.handed_off(store, n) and not handoff.acknowledged(store, n)
    handoff.ack(StateStore(Repo.discover()))
    assert handoff.acknowledged(store, n)
    handoff.write_doc(StateStore(Repo.discover()), trigger="relay")
    assert handoff.handed_off(store, n)
    assert "git handoff" in prompt.render_prompt(StateStore(Repo.discover()))
    ended = sessions.end(StateStore(Repo.discover()))
    assert ended["session"] == n


def test_automatic_triggers_write_once_per_session(repo: Path) -> None:
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.ops import handoff
    from git_handoff.state.store import StateStore

    _setup(repo)
    first = handoff.write_doc(StateStore(Repo.discover()), trigger="commits")
    assert first["written"] is True
    again = handoff.write_doc(StateStore(Repo.discover()), trigger="pre-compact")
    assert again["written"] is False and again["trigger"] == "commits"
    manual = handoff.write_doc(StateStore(Repo.discover()), trigger="manual")
    assert manual["written"] is True


def test_prompt_contents(repo: Path) -> None:
    _setup(repo)
    run("decide", "Use SQLite", "--why", "single user")
    run("doc", "write")
    out = run("prompt").out
    assert "Spec: docs/spec.md" in out
    assert "Next eligible task: [schema] Schema (check: `true`)" in out
    assert "### P0 (1)" in out and "- [schema] Schema | check: `true`" in out
    assert "Use SQLite - why: single user" in out
    for verb in ("git handoff ack", "git handoff claim", "git handoff checkpoint", "git handoff done",
                 "git handoff fail"):
        assert verb in out
    assert "next step" not in out.lower().replace("decide the next step yourself", "")


def test_prompt_under_10kb_with_500_tasks(repo: Path) -> None:
    run("init", "--spec", "spec.md")
    lines = []
    for n in range(500):
        prio = ("P0", "P1", "P2")[0 if n < 20 else (1 if n < 120 else 2)]
        lines += ["[[task]]", f'id = "task-{n:03d}"', f'title = "Implement feature number {n} of the big plan"',
                  f'priority = "{prio}"', f'check = "pytest -q tests/test_feature_{n}.py"', ""]
    (repo / "plan.toml").write_text("\n".join(lines))
    assert run("import", "plan.toml").rc == 0
    run("session", "start")
    for n in range(60):
        run("decide", f"decision {n} with some words", "--why", "because of a long explanation " * 3)
    for n in range(300):
        (repo / f"file_{n}.txt").write_text("x\n")
    run("doc", "write")
    r = run("prompt", "--json")
    text = r.json()["prompt"]
    assert len(text.encode()) < 10_000
    assert ("- [task-000] Implement feature number 0 of the big plan | check: "
            "`pytest -q tests/test_feature_0.py`") in text
    assert "check: `pytest -q tests/test_feature_400.py`" not in text  # P2 not in detail
    assert "### P2 (380)" in text
    assert "git handoff done" in text


def test_prompt_small_plan_keeps_p2_details(repo: Path) -> None:
    run("init")
    run("add", "Low", "--id", "low", "--priority", "P2", "--check", "make low")
    out = run("prompt").out
    assert "- [low] Low | check: `make low`" in out


def test_prompt_bound_holds_for_extreme_text(repo: Path) -> None:
    run("init", "--spec", "s" * 3000)
    lines = []
    for n in range(60):
        lines += ["[[task]]", f'id = "t{n}"', f'title = "{"long title " * 44}{n}"', 'priority = "P0"',
                  f'check = "{"x" * 2000}"', ""]
    (repo / "plan.toml").write_text("\n".join(lines))
    assert run("import", "plan.toml").rc == 0
    run("session", "start")
    run("decide", "w" * 20000, "--why", "y" * 20000)
    run("blocker", "b" * 20000)
    run("doc", "write")
    text = run("prompt").out
    assert len(text.encode()) < 10_000
    assert text.rstrip().endswith("`git handoff blocker TEXT`.")  # the protocol survives the cut


def test_a_second_ack_of_an_accepted_session_is_no_new_event(repo: Path) -> None:
    """The SessionStart hook acknowledges and the prompt's first step tells the agent to run
    `git handoff ack`: the same answer again changes nothing and logs nothing (each
    relay session logged two ACKs before)."""
    _setup(repo)
    run("doc", "write")
    run("session", "start")
    first = run("ack", "--json")
    assert first.rc == 0, first.err
    again = run("ack", "--json")
    assert again.rc == 0
    assert {**again.json(), "at": None} == {**first.json(), "at": None}  # the same answer, at its own time
    assert [line for line in run("log").out.splitlines() if " ACK " in line] == [
        line for line in run("log").out.splitlines() if "ACK Session 2 accepted the handoff of session 1" in line]
    assert len([line for line in run("log").out.splitlines() if " ACK " in line]) == 1
    # a rejection after an acceptance is still recorded: it is a different answer
    assert run("ack", "--failed", "the facts do not match").rc == 0
    assert run("session", "show", "--json").json()["ack"]["status"] == "failed"


@pytest.mark.slow  # 6,000 tasks written in one transaction, each record checked as written
def test_a_document_of_thousands_of_tasks_stays_a_record_every_reader_takes(repo: Path) -> None:
    """At 10,000 pending tasks the document was 2.6 MB: more than the 1 MiB a record may
    hold, so the prompt, `doc show` and every other clone's sync refused it. The document
    now lists what fits, the next session's first (pending by priority), and counts the rest."""
    from git_handoff.core.model import MAX_RECORD_BYTES, Task, now_iso
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.ops import handoff
    from git_handoff.state.session_records import doc_path
    from git_handoff.state.store import StateStore

    assert run("init").rc == 0
    store = StateStore(Repo.discover(repo))
    stamp, count = now_iso(), 6000

    def apply(tx: Tx) -> None:
        for n in range(count):
            tx.put_task(Task(id=f"t{n:05d}", title=f"Task {n}: " + "a long title of many words " * 11,
                             priority="P0" if n == count - 1 else "P2", created_at=stamp, order=n + 1))

    store.transact(apply)
    assert run("session", "start").rc == 0
    written = run("doc", "write", "--json")
    assert written.rc == 0, written.err
    snap = store.snapshot()
    raw = snap.read(doc_path(snap, 1))
    assert raw is not None and len(raw) <= handoff.DOC_BYTES < MAX_RECORD_BYTES
    doc = run("doc", "show", "1", "--json").json()
    pending = doc["status"]["pending"]
    assert 0 < len(pending) < count and doc["omitted"]["status.pending"] == count - len(pending)
    assert pending[0]["id"] == f"t{count - 1:05d}"  # the P0 task first: what the next session takes first
    shown = run("doc", "show", "1")
    assert f"## Pending ({count})" in shown.out
    assert f"... and {count - len(pending)} more, not listed" in shown.out
    assert f"pending={count}" in run("log", "--type", "HANDOFF").out
    assert run("session", "end").rc == 0 and run("session", "start").rc == 0
    prompt = run("prompt")
    assert prompt.rc == 0 and "Handoff document of session 1" in prompt.out, prompt.err
