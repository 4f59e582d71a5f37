"""`secrets`: the secrets already in what this clone publishes, where each is, and how to
remove it.

What is scanned: every commit of refs/harness/state and refs/notes/harness (the log in
its message, each file it changed, once per blob) and every attempt under
refs/harness/attempts/ (its message, the files it and its index commit changed over
the commit it was saved on, and the commits made since the claim its record names).
Local-only attempts (refs/harness/local/attempts/) are not published and not reported.
The scanner is the one every write goes through (git_handoff.state.redaction), with the
user's patterns and allow-list.
"""

from __future__ import annotations

from typing import TypedDict

from git_handoff.core import attempt_record
from git_handoff.core.errors import InvalidState, Negative
from git_handoff.core.secrets import Scanner
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import redaction
from git_handoff.state.snapshot import ATTEMPTS_PREFIX, NOTES_REF, STATE_REF
from git_handoff.state.store import StateStore

MAX_BLOB = redaction.MAX_SCANNED_FILE

REMOVE = {
    "state": ("revoke the secret first (it left with every sync); edit the record so that new commits stop "
              "carrying it; the history of refs/harness/state is merged by every clone, so removing it means "
              "rewriting that history on the remote and on every clone (docs/threat-model.md, Secrets)"),
    "notes": ("revoke the secret first; `git notes --ref=harness remove COMMIT` ends the note; its history "
              "keeps it until refs/notes/harness is rewritten on the remote and every clone"),
    "attempt": ("revoke the secret first; keep the attempt here only with `git update-ref "
                "refs/harness/local/{rest} {commit} && git update-ref -d {ref}`, delete it on the remote with "
                "`git push REMOTE :{ref}` (and on every clone that fetched it), then "
                "`git reflog expire --expire=now --all && git gc --prune=now`"),
}


class SecretFinding(TypedDict):
    """One kind of secret at one place of a published ref (the newest commit holding it)."""

    kind: str
    ref: str
    commit: str
    where: str  # "message", or the path of the file in the commit's tree
    field: str | None  # a JSON record's field (`checkpoints[0].description`), else None
    commits: int  # how many commits of that ref carry it at that place
    remove: str  # how to remove it


class SecretsReport(TypedDict):
    """`secrets --json`."""

    clean: bool
    findings: list[SecretFinding]
    scanned: dict[str, int]  # commits, blobs, attempts


class _Scan:
    def __init__(self, repo: Repo, scan: Scanner) -> None:
        self.repo = repo
        self.scan = scan
        self.found: dict[tuple[str, str, str | None, str], SecretFinding] = {}
        self.blobs: dict[str, list[tuple[str, str | None]]] = {}  # blob -> its (kind, field)s
        self.commits = 0

    def add(self, ref: str, commit: str, where: str, field: str | None, kind: str, remove: str) -> None:
        key = (ref, where, field, kind)
        if key in self.found:
            self.found[key]["commits"] += 1
        else:
            self.found[key] = {"kind": kind, "ref": ref, "commit": commit, "where": where, "field": field,
                               "commits": 1, "remove": remove}

    def blob(self, path: str, oid: str) -> list[tuple[str, str | None]]:
        if oid not in self.blobs:
            got = self.repo.small_blob(oid, MAX_BLOB)
            data = got[2] if got is not None else None
            kinds: list[tuple[str, str | None]] = []
            if data is not None and b"\0" not in data[:8192]:
                _, found = self.scan.redact_record(path, data)
                kinds = [(kind, None if field == path else field) for kind, field in found]
            self.blobs[oid] = kinds
        return self.blobs[oid]

    def commit(self, ref: str, commit: str, base_tree: str | None, remove: str) -> None:
        """The secrets commit `commit` brings over `base_tree` (its message, its files)."""
        self.commits += 1
        message = self.repo.commit_info(commit)[0]
        for kind in self.scan.redact(message)[1]:
            self.add(ref, commit, "message", None, kind, remove)
        for path, (_, new) in self.repo.tree_diff(base_tree, self.repo.commit_tree(commit)).items():
            if new is not None:
                for kind, field in self.blob(path, new):
                    self.add(ref, commit, path, field, kind, remove)

    def history(self, ref: str, how: str) -> None:
        tip = self.repo.ref_target(ref)
        if tip is None or self.repo.resolve_commit(f"{tip}^{{commit}}") != tip:
            return
        for commit in self.repo.walk(tip):
            parents = self.repo.commit_parents(commit)
            self.commit(ref, commit, self.repo.commit_tree(parents[0]) if parents else None, REMOVE[how])


def _claim_base(repo: Repo, commit: str, ref: str) -> str | None:
    """The claim's commit an attempt names in its record, when it is here."""
    try:
        base = attempt_record.attempt(repo.commit_info(commit)[0].partition("\n\n")[2], ref).get("base")
    except InvalidState:
        return None
    return repo.resolve_commit(base) if base else None


def scan_published(store: StateStore) -> SecretsReport:
    """Every secret in the refs this clone publishes; Negative (exit 1, the report as its
    payload) when there is any."""
    repo = store.repo
    scan = _Scan(repo, redaction.scanner(repo))
    scan.history(STATE_REF, "state")
    scan.history(NOTES_REF, "notes")
    attempts = repo.refs_in(ATTEMPTS_PREFIX)
    for ref, commit in sorted(attempts.items()):
        if repo.resolve_commit(f"{commit}^{{commit}}") != commit:
            continue
        parents = repo.commit_parents(commit)
        base = repo.commit_tree(parents[0]) if parents else None
        remove = REMOVE["attempt"].format(ref=ref, rest=ref[len("refs/harness/"):], commit=commit)
        scan.commit(ref, commit, base, remove)
        if len(parents) >= 2:  # the index, as the attempt saved it
            scan.commit(ref, parents[1], base, remove)
        if parents:  # the commits made since the claim, which the attempt keeps reachable
            for made in repo.commits_between(_claim_base(repo, commit, ref) or parents[0], parents[0],
                                             redaction.MAX_SCANNED_COMMITS):
                above = repo.commit_parents(made)
                scan.commit(ref, made, redaction.tree_of(repo, above[0]) if above else None, remove)
    findings = sorted(scan.found.values(), key=lambda f: (f["ref"], f["where"], f["field"] or "", f["kind"]))
    report: SecretsReport = {"clean": not findings, "findings": findings,
                             "scanned": {"commits": scan.commits, "blobs": len(scan.blobs), "attempts": len(attempts)}}
    if findings:
        raise Negative(f"{len(findings)} secret(s) in published refs (see above; each must be revoked)", payload=report)
    return report
