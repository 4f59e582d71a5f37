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

from git_handoff.core.errors import UsageError
from git_handoff.core.secrets import DEFAULT, Scanner, compile_patterns
from git_handoff.infra.gitrepo import Repo

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


def redact_transaction(repo: Repo, changes: dict[str, bytes | None], lines: list[str]) -> list[tuple[str, str, str | None]]:
    """Redact, in place, the files a transaction writes and its log lines; what was
    redacted as (kind, field, task id) for the log (never the secret itself)."""
    scan = scanner(repo)
    done: list[tuple[str, str, str | None]] = []
    for path, data in changes.items():
        if data is None:
            continue
        clean, found = scan.redact_record(path, data)
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


MAX_SCANNED_FILE = 8 << 20  # a saved file larger than this is not read (docs/threat-model.md)


def secret_files(repo: Repo, trees: list[str | None], paths: list[str]) -> dict[str, list[str]]:
    """{path: kinds} of the files at `paths` in any of `trees` (an attempt's work tree and
    index) that hold a secret; binary files (a NUL in their first 8 KiB) and files over
    MAX_SCANNED_FILE are not read."""
    scan = scanner(repo)
    found: dict[str, list[str]] = {}
    for tree in trees:
        if tree is None:
            continue
        for path in paths:
            entry = repo.tree_lookup(tree, path)
            if entry is None or entry[1]:
                continue
            blob = repo.small_blob(entry[0], MAX_SCANNED_FILE)
            data = blob[2] if blob is not None else None
            if data is None or b"\0" in data[:8192]:
                continue
            kinds = [f.kind for f in scan.findings(data.decode(errors="replace"))]
            if kinds:
                found.setdefault(path, [])
                found[path] += [k for k in kinds if k not in found[path]]
    return found
