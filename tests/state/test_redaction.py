"""The scanner as this clone sets it up (git config) and its use on what a transaction
writes (git_handoff.state.redaction), and on an attempt's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import redaction
from git_handoff.state.store import StateStore, Tx
from tests.support import secret_corpus
from tests.support.repo import git, run

TOKEN = secret_corpus.SECRETS["github-token"]


def test_the_patterns_come_from_every_config_level_and_the_command_line(repo: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    git("config", "--add", "handoff.secretPattern", "one-[0-9]{4}", cwd=repo)
    git("config", "--add", "handoff.secretPattern", "two-[0-9]{4}", cwd=repo)
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'handoff.secretAllow=two-0000'")
    scan = redaction.scanner(Repo.discover(repo))
    assert [f.kind for f in scan.findings("one-1234 two-1234 two-0000")] == ["custom", "custom"]


def test_a_pattern_that_is_no_regex_is_a_usage_error(repo: Path) -> None:
    git("config", "handoff.secretAllow", "[", cwd=repo)
    with pytest.raises(UsageError, match="handoff.secretAllow"):
        redaction.scanner(Repo.discover(repo))


def test_a_transaction_writes_and_logs_no_secret_and_logs_the_redaction(repo: Path) -> None:
    assert run("init").rc == 0
    store = StateStore(Repo.discover(repo))

    def apply(tx: Tx) -> None:
        tx.put_json("meta.json", {**tx.meta(), "note": f"pasted {TOKEN}"})
        tx.log("INIT", f"noted {TOKEN}")

    store.transact(apply)
    head = store.head()
    assert head is not None
    message = store.repo.commit_info(head)[0]
    assert TOKEN not in message and "[redacted: github-token]" in message
    assert "WARN redacted github-token from meta.json note" in message
    assert "WARN redacted github-token from log" in message
    meta = json.loads(git("show", "refs/harness/state:meta.json", cwd=repo))
    assert meta["note"] == "pasted [redacted: github-token]"


def test_redact_transaction_names_the_task_of_a_task_file(repo: Path) -> None:
    changes: dict[str, bytes | None] = {
        "tasks/a/b/t1.json": json.dumps({"id": "t1", "title": TOKEN}).encode(), "gone.json": None}
    lines = ["plain line"]
    done = redaction.redact_transaction(Repo.discover(repo), changes, lines)
    assert done == [("github-token", "title", "t1")]
    assert changes["tasks/a/b/t1.json"] is not None and TOKEN.encode() not in (changes["tasks/a/b/t1.json"] or b"")
    assert lines == ["plain line"]


def test_secret_files_reads_text_files_of_the_trees_it_is_given_that_differ_from_the_base(repo: Path) -> None:
    (repo / "kept.txt").write_text(f"token: {TOKEN}\n")  # in the claim's commit already: the branch's own
    git("add", "kept.txt", cwd=repo)
    git("commit", "-qm", "base", cwd=repo)
    base = git("rev-parse", "HEAD^{tree}", cwd=repo)
    (repo / ".env").write_text(f"GITHUB_TOKEN={TOKEN}\n")
    (repo / "image.bin").write_bytes(b"\0" + TOKEN.encode())
    (repo / "fine.txt").write_text("nothing here\n")
    git("add", ".env", "image.bin", "fine.txt", cwd=repo)
    tree = git("write-tree", cwd=repo)
    found = redaction.secret_files(Repo.discover(repo), base, [tree, None])
    assert found == {".env": ["github-token"]}
    assert redaction.secret_files(Repo.discover(repo), None, [tree]) == {".env": ["github-token"],
                                                                         "kept.txt": ["github-token"]}


def test_secret_history_reads_each_commit_since_the_base_and_its_message(repo: Path) -> None:
    base = git("rev-parse", "HEAD", cwd=repo)
    (repo / "creds.txt").write_text(f"GITHUB_TOKEN={TOKEN}\n")
    git("add", "creds.txt", cwd=repo)
    git("commit", "-qm", "add creds", cwd=repo)
    added = git("rev-parse", "HEAD", cwd=repo)
    git("rm", "-q", "creds.txt", cwd=repo)
    git("commit", "-qm", f"removed, it was {secret_corpus.SECRETS['stripe-key']}", cwd=repo)
    removed = git("rev-parse", "HEAD", cwd=repo)
    found = redaction.secret_history(Repo.discover(repo), base, removed)
    assert found == {f"creds.txt (commit {added[:12]})": ["github-token"],
                     f"commit {removed[:12]} message": ["stripe-key"]}
    assert redaction.secret_history(Repo.discover(repo), removed, removed) == {}
    assert redaction.secret_history(Repo.discover(repo), base, base) == {}
