"""What this clone publishes, redacted: the scanner of git_handoff.core.secrets with the
user's patterns and allow-list from git config, and its use on a transaction's writes.

- `handoff.secretPattern` (multi-valued): a regular expression whose matches are secrets
  too; a named group names the kind (`(?P<acme_key>acme_[0-9a-f]{32})` is `acme-key`),
  else the kind is `custom`; with one plain group, only the group is the secret.
- `handoff.secretAllow` (multi-valued): a regular expression; a finding whose text it
  matches (re.search) is not a secret (a documented example key, a test fixture's value).

`redact_transaction` is called by the one transaction engine (StateStore.build_commit)
on what a transaction writes and logs, before any object is written; the attempts and
the notes use `scanner` on what they write. docs/threat-model.md, "Secrets".
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from git_handoff.core.errors import UsageError
from git_handoff.core.secrets import DEFAULT, Scanner, compile_patterns
from git_handoff.infra.gitrepo import Repo

if TYPE_CHECKING:  # a hook that never runs a check does not import the runner
    from git_handoff.infra.task_commands import RunResult

PATTERN_KEY = "handoff.secretPattern"
ALLOW_KEY = "handoff.secretAllow"
TASKS_DIR = "tasks/"


def scanner(repo: Repo) -> Scanner:
    """This repository's scanner (built once per Repo object): the built-in rules with the
    patterns and allow-list of git config. A pattern that is no regular expression is a
    UsageError (exit 2) naming it."""
    cached = getattr(repo, "_secret_scanner", None)
    if isinstance(cached, Scanner):
        return cached
    patterns, allow = repo.config_values(PATTERN_KEY), repo.config_values(ALLOW_KEY)
    made = DEFAULT
    if patterns or allow:
        try:
            made = Scanner(compile_patterns(patterns, PATTERN_KEY), compile_patterns(allow, ALLOW_KEY))
        except ValueError as exc:
            raise UsageError(f"{exc} (git config)") from None
    repo._secret_scanner = made  # type: ignore[attr-defined]  # a per-repository cache
    return made


def redact_transaction(repo: Repo, changes: dict[str, bytes | None], lines: list[str],
                       before: Callable[[str], bytes | None] | None = None) -> list[tuple[str, str, str | None]]:
    """Redact, in place, the files a transaction writes and its log lines; what was
    redacted as (kind, field, task id) for the log (never the secret itself). `before`
    reads a file as the transaction's base has it: a secret it held already is not this
    transaction's and is left as it was (Scanner.redact_record)."""
    scan = scanner(repo)
    done: list[tuple[str, str, str | None]] = []
    for path, data in changes.items():
        if data is None:
            continue
        clean, found = scan.redact_record(path, data, functools.partial(before, path) if before else None)
        if found:
            changes[path] = clean
            task = path.rsplit("/", 1)[-1][:-len(".json")] if path.startswith(TASKS_DIR) else None
            done.extend((kind, field if task else f"{path} {field}", task) for kind, field in found)
    for i, line in enumerate(lines):
        clean_line, kinds = scan.redact(line)
        if kinds:
            lines[i] = clean_line
            done.extend((kind, "log", None) for kind in kinds)
    return done


def redact_text(repo: Repo, text: str) -> tuple[str, list[str]]:
    """`text` redacted by this repository's scanner, and the kinds replaced."""
    return scanner(repo).redact(text)


def redact_run(repo: Repo, result: RunResult) -> RunResult:
    """A check's or cleanup's result with its output redacted, before anything cuts it to an
    error line (`summary`: its last lines, its last 300 characters), where a secret cut in
    two would no longer be known by its rules."""
    clean = redact_text(repo, result.output_tail)[0] if result.output_tail else result.output_tail
    return result if clean == result.output_tail else dataclasses.replace(result, output_tail=clean)


MAX_SCANNED_FILE = 8 << 20  # a saved file larger than this is not read (docs/threat-model.md)
MAX_SCANNED_COMMITS = 1000  # commits since the claim scanned; beyond, the attempt stays here


def _blob_kinds(repo: Repo, scan: Scanner, oid: str, seen: dict[str, list[str]]) -> list[str]:
    """The kinds of secret in blob `oid` (each once); none for a binary file (a NUL in its
    first 8 KiB), one over MAX_SCANNED_FILE or an object that is no blob."""
    if oid not in seen:
        blob = repo.small_blob(oid, MAX_SCANNED_FILE)
        data = blob[2] if blob is not None else None
        kinds: list[str] = []
        if data is not None and b"\0" not in data[:8192]:
            for f in scan.findings(data.decode(errors="replace")):
                if f.kind not in kinds:
                    kinds.append(f.kind)
        seen[oid] = kinds
    return seen[oid]


def secret_files(repo: Repo, base_tree: str | None, trees: list[str | None]) -> dict[str, list[str]]:
    """{path: kinds} of the files of `trees` (an attempt's work tree and index) that differ
    from `base_tree` (the claim's commit: an untracked file already there at the claim
    counts, a file staged and then deleted from the work tree too) and hold a secret."""
    scan, seen = scanner(repo), dict[str, list[str]]()
    found: dict[str, list[str]] = {}
    for tree in trees:
        if tree is None:
            continue
        for path, (_, new) in repo.tree_diff(base_tree, tree).items():
            kinds = _blob_kinds(repo, scan, new, seen) if new is not None else []
            if kinds:
                found[path] = [*found.get(path, []), *(k for k in kinds if k not in found.get(path, []))]
    return found


def tree_of(repo: Repo, commit: str) -> str | None:
    """The tree of `commit`, None when it is not here."""
    try:
        return repo.commit_tree(commit)
    except (KeyError, ValueError):  # beyond a shallow cut: compared with nothing
        return None


def secret_history(repo: Repo, base: str, head: str) -> dict[str, list[str]]:
    """{where: kinds} of the commits made since the claim (`base..head`: an attempt keeps
    them reachable, so a sync publishes them): each one's message and each text file it
    brought that none of its parents had (a file committed and removed again included).
    More than MAX_SCANNED_COMMITS of them count as a finding (`unscanned`)."""
    if base == head:
        return {}
    return secret_commits(repo, repo.commits_between(base, head, MAX_SCANNED_COMMITS + 1))


def secret_commits(repo: Repo, commits: list[str]) -> dict[str, list[str]]:
    """secret_history's findings for `commits` (more than MAX_SCANNED_COMMITS: a finding)."""
    scan, seen = scanner(repo), dict[str, list[str]]()
    found: dict[str, list[str]] = {}
    if len(commits) > MAX_SCANNED_COMMITS:
        found[f"{len(commits) - 1}+ commits since the claim (not scanned)"] = ["unscanned"]
    for commit in commits[:MAX_SCANNED_COMMITS]:
        kinds = list(dict.fromkeys(f.kind for f in scan.findings(repo.commit_info(commit)[0])))
        if kinds:
            found[f"commit {commit[:12]} message"] = kinds
        tree = repo.commit_tree(commit)
        diffs = [repo.tree_diff(tree_of(repo, parent), tree) for parent in repo.commit_parents(commit)] \
            or [repo.tree_diff(None, tree)]
        for path, (_, new) in diffs[0].items():  # new in this commit: unlike every parent's
            if new is None or any(d.get(path, (None, None))[1] != new for d in diffs[1:]):
                continue
            kinds = _blob_kinds(repo, scan, new, seen)
            if kinds:
                found[f"{path} (commit {commit[:12]})"] = kinds
    return found
