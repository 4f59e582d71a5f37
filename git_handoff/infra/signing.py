"""Signing this clone's state commits, and checking the signatures of any state commit,
with git's own SSH signatures (docs/allowed-signers.md).

- Signing: when the user has git's SSH commit signing configured (`gpg.format = ssh`,
  `user.signingKey`) and asks for it (`handoff.signState = true`, or `commit.gpgSign =
  true` when handoff.signState is not set), every state commit this clone writes is
  signed as `git commit -S` would sign it: the commit object's bytes signed by
  `ssh-keygen -Y sign -n git`, the signature in its `gpgsig` header. Others verify it
  with `git verify-commit` or `git log --show-signature`.
- Checking: `git log --format=%G?` against the allowed-signers file the user named in
  `handoff.allowedSigners` (git's `gpg.ssh.allowedSignersFile` format), many commits per
  git process. OpenPGP and X.509 signatures are never handed to gpg or gpgsm: a fetched
  commit must not make this clone run another program on its bytes; they count as
  unverifiable.
- This clone's own state commits, written while handoff.allowedSigners is set, are
  remembered by oid in a private file under .git (`own-state-commits`): signed or not,
  they are this clone's.

This is the git boundary for signatures: no state logic here (git_handoff.state.writers decides
what a verdict means for the tasks).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo

ALLOWED_KEY = "handoff.allowedSigners"
SIGN_KEY = "handoff.signState"
OWN_FILE = "own-state-commits"
SIGN_TIMEOUT_SECONDS = 60


def allowed_signers(repo: Repo) -> Path | None:
    """The allowed-signers file handoff.allowedSigners names (`~` expanded, a relative
    path taken from the work tree's root), or None when the setting is absent or empty."""
    value = repo.config_get(ALLOWED_KEY)
    if not value or not value.strip():
        return None
    path = Path(os.path.expanduser(value.strip()))
    if not path.is_absolute():
        path = repo.root() / path
    return path


def signing_key(repo: Repo) -> str | None:
    """The key this clone signs its state commits with, or None (not asked for)."""
    fmt = repo.config_get("gpg.format")
    if (fmt or "").strip().lower() != "ssh":
        return None
    key = repo.config_get("user.signingKey")
    if not key or not key.strip():
        return None
    wanted = repo.config_bool(SIGN_KEY, default=repo.config_bool("commit.gpgSign"))
    return key.strip() if wanted else None


def seal(repo: Repo, commit: str) -> str:
    """The state commit `commit` as this clone publishes it: signed when signing is asked
    for (a new commit, same tree, parents and message), remembered as this clone's own
    when handoff.allowedSigners is set. Unchanged otherwise (and nothing more is read
    than two settings)."""
    key = signing_key(repo)
    out = sign_commit(repo, commit, key) if key else commit
    if allowed_signers(repo) is not None:
        try:
            with open(repo.handoff_dir / OWN_FILE, "a", encoding="ascii") as fh:
                fh.write(out + "\n")
        except OSError as exc:
            raise UsageError(f"could not record this clone's state commit in {OWN_FILE}: {exc}") from None
    return out


def own_commits(repo: Repo) -> set[str]:
    """The state commits this clone wrote while handoff.allowedSigners was set."""
    try:
        text = (repo.handoff_dir / OWN_FILE).read_text(encoding="ascii", errors="replace")
    except OSError:
        return set()
    return {line.strip() for line in text.splitlines() if len(line.strip()) in (40, 64)}


def sign_commit(repo: Repo, commit: str, key: str) -> str:
    """`commit` signed with `key` (a key file, or `key::<public key>` held by ssh-agent)."""
    raw = repo.commit_bytes(commit)
    return repo.create_signed_commit(raw, _ssh_sign(repo, raw, key))


def _ssh_sign(repo: Repo, data: bytes, key: str) -> str:
    program = repo.config_get("gpg.ssh.program") or "ssh-keygen"
    with tempfile.TemporaryDirectory(prefix="handoff-sign-") as tmp:
        if key.startswith("key::"):
            key_file = Path(tmp) / "key.pub"
            key_file.write_text(key[len("key::"):].strip() + "\n")
        else:
            key_file = Path(os.path.expanduser(key))
            if not key_file.is_absolute():
                key_file = repo.root() / key_file
        try:
            proc = subprocess.run([program, "-Y", "sign", "-n", "git", "-f", str(key_file)], input=data,
                                  capture_output=True, timeout=SIGN_TIMEOUT_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UsageError(f"could not sign the state commit with {program}: {exc}") from None
    text = proc.stdout.decode("ascii", "replace")
    if proc.returncode != 0 or "-----BEGIN SSH SIGNATURE-----" not in text:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        reason = err[-1] if err else f"exit {proc.returncode}"
        raise UsageError(f"signing the state commit with user.signingKey failed ({reason}); nothing was changed "
                         f"(fix the key, or set {SIGN_KEY} = false)")
    return text


# -- checking -----------------------------------------------------------------------------

GOOD = "G"  # a good signature by a key the allowed-signers file lists
UNKNOWN = "U"  # a good signature by a key the file does not list
UNSIGNED = "N"
BAD = "B"


def verify(repo: Repo, commits: list[str], allowed: Path) -> dict[str, tuple[str, str]]:
    """{commit: (status, key fingerprint)} for each commit, git's `%G?` and `%GF`: G good
    and allowed, U good but the key is not allowed, N unsigned, B bad, anything else
    unverifiable. One git process for all of them."""
    out: dict[str, tuple[str, str]] = {}
    if not commits:
        return out
    proc = repo.git(
        "-c", f"gpg.ssh.allowedSignersFile={allowed}",
        "-c", "gpg.openpgp.program=false", "-c", "gpg.x509.program=false", "-c", "gpg.program=false",
        "log", "--no-walk=unsorted", "--stdin", "--format=%H %G? %GF",
        input=("\n".join(commits) + "\n").encode(), check=False,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        raise UsageError("could not check the signatures of the state commits "
                         f"({err[-1] if err else 'git log failed'})")
    for line in proc.stdout.decode("ascii", "replace").splitlines():
        parts = line.split(" ", 2)
        if len(parts) >= 2 and len(parts[0]) in (40, 64):
            out[parts[0]] = (parts[1], parts[2].strip() if len(parts) > 2 else "")
    for commit in commits:  # a commit git did not print (cannot happen for an object we hold): unverifiable
        out.setdefault(commit, ("E", ""))
    return out
