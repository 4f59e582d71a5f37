"""Secrets stay here (docs/threat-model.md, "Secrets"): a corpus of secrets of every kind
the scanner knows, placed in every text field the state publishes and in a failed
attempt's untracked file, and nothing of it on the remote after a sync; the attempt kept
in a local-only ref, restorable; each redaction logged; `git handoff secrets` finding
what was published before (exit 1) and nothing in a clean clone (exit 0)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support import secret_corpus
from tests.support.repo import git, run


def ok(*args: str) -> str:
    got = run(*args)
    assert got.rc == 0, (args, got.err)
    return got.out


def all_objects(where: Path) -> bytes:
    """The content of every object the repository at `where` holds (loose and packed),
    commits and trees included: what `git cat-file --batch-all-objects` shows."""
    proc = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"], cwd=where,
                          capture_output=True, check=True)
    return proc.stdout


def leaked(blob: bytes) -> list[str]:
    """The corpus' secrets found in `blob` (a PEM block by each of its lines)."""
    found = []
    for kind, secret in secret_corpus.SECRETS.items():
        pieces = secret.splitlines()[1:-1] if kind == "private-key" else [secret]
        if any(piece.encode() in blob for piece in pieces):
            found.append(kind)
    return found


@pytest.fixture
def remote(repo: Path, tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=repo)
    return bare


def test_a_corpus_of_secrets_in_every_field_never_reaches_the_remote(repo: Path, remote: Path, tmp_path: Path) -> None:
    kinds = list(secret_corpus.SECRETS)
    assert len(kinds) >= 11
    leak = tmp_path / "leak.txt"  # what the failing check prints: outside the work tree
    leak.write_text(secret_corpus.all_pasted("\n") + "\n")
    every = secret_corpus.all_pasted()
    ok("init")
    ok("session", "start")
    # titles (one per kind, so that each kind meets the title's checks), the checkpoint,
    # decisions, blockers, the document, the failure's reason, the check's output
    for n, kind in enumerate(kinds):
        ok("add", f"task {n}: {secret_corpus.one_line(kind)}", "--id", f"t{n}", "--check", "true")
    ok("add", "leaky check", "--id", "leaky", "--check", f"cat {leak}; exit 1", "--priority", "P0")
    ok("trust", "--all")
    ok("claim", "leaky")
    ok("checkpoint", "leaky", f"progress, {every}", "--step", "1", "--of", "2")
    ok("decide", f"use {every}", "--why", f"because {every}")
    ok("blocker", f"blocked on {every}")
    assert run("done", "leaky").rc == 1  # the check's output, with every secret, kept as the error
    ok("claim", "leaky")
    (repo / ".env.local").write_text(secret_corpus.all_pasted("\n") + "\n")  # untracked, not ignored
    failed = run("fail", "leaky", "--reason", f"gave up: {every}", "--json")
    assert failed.rc == 0, failed.err
    ok("doc", "write")
    ok("session", "end")

    # sync: the remote holds none of them, in any object (first: today's code fails here)
    sync = run("sync", "origin", "--json")
    assert sync.rc == 0, sync.err
    assert git("for-each-ref", "--format=%(refname)", "refs/harness/", cwd=remote)
    held = all_objects(remote)
    assert held and leaked(held) == []
    assert not git("for-each-ref", "refs/harness/local", cwd=remote)
    for ref in git("for-each-ref", "--format=%(refname)", "refs/", cwd=remote).splitlines():
        for kind, secret in secret_corpus.SECRETS.items():  # git grep over each ref's tree
            needle = secret.splitlines()[1] if kind == "private-key" else secret
            grep = subprocess.run(["git", "grep", "-F", "-q", "-e", needle, ref], cwd=remote, capture_output=True)
            assert grep.returncode == 1, (ref, kind)

    # fail said where the attempt is kept, and why
    outcome = failed.json()
    assert outcome["attempt_local_only"] is True
    assert outcome["attempt_ref"] == "refs/harness/local/attempts/leaky/2"
    assert set(outcome["secret_files"][".env.local"]) >= set(kinds) - {"github-fine-grained"}

    # what this clone would publish holds none of them; the local-only attempt holds the file
    assert not leaked(git("log", "refs/harness/state", "-p", "--format=%B", cwd=repo).encode())
    shown = run("show", "leaky", "--json").json()
    assert "[redacted: " in shown["error_log"][0] and "[redacted: " in shown["checkpoints"][0]["description"]
    local = git("show", "refs/harness/local/attempts/leaky/2:.env.local", cwd=repo)
    assert leaked(local.encode()) == kinds
    assert not git("for-each-ref", "refs/harness/attempts/leaky/2", cwd=repo)

    # each redaction logged, by kind and field, never the secret
    log = ok("log", "-n", "400")
    warned = [line for line in log.splitlines() if " WARN " in line and "redacted " in line]
    for field in ("title", "checkpoints[0].description", "error_log[0]", "error_log[1]", "log"):
        assert any(f"from {field} " in line for line in warned), field
    assert any("decisions" in line for line in warned) and any("blockers" in line for line in warned)
    assert {kind for kind in kinds if kind != "github-fine-grained"} <= {
        line.split("redacted ", 1)[1].split(" ", 1)[0] for line in warned}
    assert not leaked(log.encode())
    assert "kept on this machine only" in log

    # the saved attempt comes back from the local-only ref
    restored = run("restore", "leaky", "2", "--json")
    assert restored.rc == 0, restored.err
    assert restored.json()["local_only"] is True
    assert leaked((repo / ".env.local").read_bytes()) == kinds
    assert run("secrets").rc == 0


def test_a_run_of_ordinary_text_of_the_same_size_is_not_redacted(repo: Path) -> None:
    size = len(secret_corpus.all_pasted()) * 8
    text = secret_corpus.ordinary_text(size)
    ok("init")
    ok("add", "ordinary", "--id", "o1", "--check", "true")
    ok("claim", "o1")
    pieces = [text[i:i + 2000].replace("\n", " ") for i in range(0, len(text), 2000)]
    for piece in pieces:
        ok("checkpoint", "o1", piece)
    shown = run("show", "o1", "--json").json()
    assert [" ".join(cp["description"].split()) for cp in shown["checkpoints"]] == [" ".join(p.split()) for p in pieces]
    assert "redacted" not in ok("log", "-n", "100")


def test_secrets_finds_what_an_older_version_published_and_says_how_to_remove_it(repo: Path) -> None:
    ok("init")
    assert run("secrets").rc == 0
    token = secret_corpus.SECRETS["github-token"]
    # an attempt an older git handoff saved with the file, and a state commit it wrote
    (repo / "notes.txt").write_text(f"GITHUB_TOKEN={token}\n")
    git("add", "notes.txt", cwd=repo)
    tree = git("write-tree", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo)
    attempt = git("commit-tree", tree, "-p", head, "-m", "handoff attempt x #1: [TASK_EXEC] old", cwd=repo)
    git("update-ref", "refs/harness/attempts/x/1", attempt, cwd=repo)
    state = git("rev-parse", "refs/harness/state", cwd=repo)
    old = git("commit-tree", f"{state}^{{tree}}", "-p", state, "-m",
              f"[2026-01-01T00:00:00Z] [SESSION-0] CHECKPOINT [x] pasted {token}", cwd=repo)
    git("update-ref", "refs/harness/state", old, cwd=repo)
    got = run("secrets", "--json")
    assert got.rc == 1
    report = got.json()
    assert report["clean"] is False
    where = {(f["ref"], f["where"], f["kind"]) for f in report["findings"]}
    assert where == {("refs/harness/attempts/x/1", "notes.txt", "github-token"),
                     ("refs/harness/state", "message", "github-token")}
    for f in report["findings"]:
        assert token not in f["remove"] and "revoke" in f["remove"]
    text = run("secrets")
    assert text.rc == 1 and "git push REMOTE :refs/harness/attempts/x/1" in text.out and token not in text.out
    # allowed by the user: clean again
    git("config", "handoff.secretAllow", token[:12], cwd=repo)
    assert run("secrets").rc == 0


def test_a_users_pattern_is_a_secret_and_a_bad_one_is_refused(repo: Path) -> None:
    ok("init")
    git("config", "--add", "handoff.secretPattern", r"(?P<acme_key>acme_[0-9a-f]{16})", cwd=repo)
    git("config", "--add", "handoff.secretPattern", r"internal-[0-9]{6}", cwd=repo)
    ok("add", "ship acme_0123456789abcdef and internal-123456", "--id", "u1", "--check", "true")
    shown = run("show", "u1", "--json").json()
    assert shown["title"] == "ship [redacted: acme-key] and [redacted: custom]"
    before = git("rev-parse", "refs/harness/state", cwd=repo)
    git("config", "--add", "handoff.secretPattern", "(unclosed", cwd=repo)
    bad = run("add", "x", "--id", "u2")
    assert bad.rc == 2 and "handoff.secretPattern" in bad.err and "(unclosed" in bad.err
    assert git("rev-parse", "refs/harness/state", cwd=repo) == before


def test_fail_attempts_and_restore_say_the_attempt_stays_here(repo: Path) -> None:
    ok("init")
    ok("add", "env", "--id", "e1", "--check", "true")
    ok("claim", "e1")
    (repo / ".env").write_text(f"STRIPE_KEY={secret_corpus.SECRETS['stripe-key']}\n")
    (repo / "notes.md").write_text("nothing secret\n")
    failed = run("fail", "e1", "--reason", "stop")
    assert failed.rc == 0, failed.err
    assert "attempt saved as refs/harness/local/attempts/e1/1" in failed.out
    assert "kept on this machine only, never pushed: its files hold a secret (.env: stripe-key)" in failed.out
    listed = run("attempts", "e1")
    assert "refs/harness/local/attempts/e1/1, kept on this machine only: its files hold a secret" in listed.out
    assert run("attempts", "e1", "--json").json()[0]["local_only"] is True
    restored = run("restore", "e1", "1")
    assert restored.rc == 0 and "kept on this machine only" in restored.out
    assert (repo / ".env").read_text().startswith("STRIPE_KEY=sk")
    # an attempt without a secret is published as before
    ok("claim", "e1")
    git("clean", "-fdq", cwd=repo)
    (repo / "plain.txt").write_text("just work\n")
    clean = run("fail", "e1", "--reason", "again", "--json").json()
    assert clean["attempt_ref"] == "refs/harness/attempts/e1/2" and clean["attempt_local_only"] is False
    assert "WARN" in ok("log", "-n", "20") and "attempt 1 kept on this machine only" in ok("log", "-n", "20")


def test_an_attempt_keeps_here_a_secret_it_would_carry_from_before_the_claim_the_index_or_its_history(
        repo: Path, remote: Path) -> None:
    """Three ways an attempt's ref reaches a secret beyond the files it changed since the
    claim: an untracked .env.local that was already there when the task was claimed (the
    attempt's tree is the whole work tree), a file staged and then deleted from the work
    tree (the attempt's index commit), a file committed and removed again since the claim
    (the attempt keeps the commits reachable). Each attempt stays here; the remote holds none."""
    token, stripe = secret_corpus.SECRETS["github-token"], secret_corpus.SECRETS["stripe-key"]
    ok("init")
    for task in ("before", "staged", "history"):
        ok("add", task, "--id", task, "--check", "true")
    (repo / ".env.local").write_text(f"GITHUB_TOKEN={token}\n")  # untracked, not ignored, before the claim
    ok("claim", "before")
    (repo / "work.txt").write_text("work\n")
    before = run("fail", "before", "--reason", "r", "--json").json()
    assert before["attempt_local_only"] is True and before["secret_files"] == {".env.local": ["github-token"]}
    (repo / ".env.local").unlink()

    ok("claim", "staged")
    (repo / ".env.local").write_text(f"GITHUB_TOKEN={token}\n")
    git("add", ".env.local", cwd=repo)
    (repo / ".env.local").unlink()  # in the index only
    staged = run("fail", "staged", "--reason", "r", "--json").json()
    assert staged["attempt_local_only"] is True and staged["secret_files"] == {".env.local": ["github-token"]}

    ok("claim", "history")
    (repo / "creds.txt").write_text(f"STRIPE_KEY={stripe}\n")
    git("add", "creds.txt", cwd=repo)
    git("commit", "-qm", "creds", cwd=repo)
    git("rm", "-q", "creds.txt", cwd=repo)
    git("commit", "-qm", "no creds", cwd=repo)
    history = run("fail", "history", "--reason", "r", "--json").json()
    assert history["attempt_local_only"] is True
    assert [kinds for where, kinds in history["secret_files"].items()
            if where.startswith("creds.txt (commit ")] == [["stripe-key"]]

    assert run("sync", "origin").rc == 0
    held = all_objects(remote)
    assert token.encode() not in held and stripe.encode() not in held
    assert not git("for-each-ref", "refs/harness/attempts", cwd=remote)
    assert run("secrets").rc == 0


def test_secrets_finds_a_secret_in_the_commits_a_published_attempt_keeps(repo: Path) -> None:
    ok("init")
    base = git("rev-parse", "HEAD", cwd=repo)
    token = secret_corpus.SECRETS["gitlab-token"]
    (repo / "creds.txt").write_text(f"token {token}\n")
    git("add", "creds.txt", cwd=repo)
    git("commit", "-qm", "creds", cwd=repo)
    added = git("rev-parse", "HEAD", cwd=repo)
    git("rm", "-q", "creds.txt", cwd=repo)
    git("commit", "-qm", "no creds", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo)
    # an attempt an older git handoff saved on that branch: its own tree holds no secret
    record = json.dumps({"task": "x", "attempt": 1, "base": base, "head": head, "files": []})
    attempt = git("commit-tree", f"{head}^{{tree}}", "-p", head, "-m",
                  f"handoff attempt x #1: [TASK_EXEC] old\n\n{record}",
                  cwd=repo)
    git("update-ref", "refs/harness/attempts/x/1", attempt, cwd=repo)
    got = run("secrets", "--json")
    assert got.rc == 1, got.err
    assert [(f["ref"], f["commit"], f["where"], f["kind"]) for f in got.json()["findings"]] == [
        ("refs/harness/attempts/x/1", added, "creds.txt", "gitlab-token")]


def test_rename_and_rm_see_the_local_only_attempts(repo: Path) -> None:
    ok("init")
    ok("add", "a", "--id", "a", "--check", "true")
    ok("add", "b", "--id", "b", "--check", "true")
    ok("claim", "a")
    (repo / ".env").write_text(f"STRIPE_KEY={secret_corpus.SECRETS['stripe-key']}\n")
    assert run("fail", "a", "--reason", "r").rc == 0
    ok("rename", "a", "c")
    assert "refs/harness/local/attempts/c/1" in git("for-each-ref", "--format=%(refname)", "refs/harness/", cwd=repo)
    removed = run("rm", "c", "--json")
    assert removed.rc == 0 and removed.json()["attempts_kept"] == ["refs/harness/local/attempts/c/1"]
    before = git("rev-parse", "refs/harness/state", cwd=repo)
    refused = run("rename", "b", "c")  # c's attempt 1 is still kept here under c's name
    assert refused.rc == 2 and "refs/harness/local/attempts/c/" in refused.err
    assert git("rev-parse", "refs/harness/state", cwd=repo) == before


def test_a_failed_checks_output_is_redacted_before_it_is_cut_to_an_error_line(repo: Path, tmp_path: Path) -> None:
    """The error line keeps the output's last three lines and last 300 characters: a key
    block printed last would lose its BEGIN line there, a token its front, and neither be
    known by a rule any more. The output is redacted whole first."""
    token, pem = secret_corpus.SECRETS["github-token"], secret_corpus.SECRETS["private-key"]
    for name, text in (("pem", f"loading key\n{pem}\n"), ("cut", f"{token} {'y' * 280}\n")):
        (tmp_path / f"{name}.txt").write_text(text)
    ok("init")
    for name in ("pem", "cut"):
        ok("add", name, "--id", name, "--check", f"cat {tmp_path / name}.txt; exit 1")
    ok("trust", "--all")
    for name in ("pem", "cut"):
        ok("claim", name)
        assert run("done", name).rc == 1
    history = git("log", "-p", "refs/harness/state", cwd=repo)
    assert not [line for line in pem.splitlines()[1:-1] if line in history]
    assert token[-12:] not in history
    shown = run("show", "pem", "--json").json()["error_log"][0]
    assert shown.endswith("loading key | [redacted: private-key]")
    assert "github-token] yyy" in run("show", "cut", "--json").json()["error_log"][0]  # the marker cut, not the token
