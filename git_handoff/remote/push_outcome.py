"""What git's answer to a push says of each ref: accepted, moved by someone else, held
by another push's lock, refused only because an atomic push failed elsewhere, or refused
by a rule on the server (with the server's own words, quoted).

The classification reads git's `--porcelain` summary lines and the `remote: ` lines of
its standard error (`read`); `transport.push` runs the push and hands its output here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# What a refusal of one ref means (git's porcelain summary, `[rejected] (stale info)` ...):
ACCEPTED = "accepted"  # the remote moved the ref (or it was already there)
MOVED = "moved"  # the ref is not where we expected: someone else moved it; look again
LOCKED = "locked"  # the server could not take the ref's lock (another push holds it): retry
ATOMIC = "atomic"  # refused only because another ref of the same atomic push was
REFUSED = "refused"  # a hook or a policy said no: fetching again will not change that

_LOCK_WORDS = ("failed to update ref", "cannot lock ref", "unable to lock", "failed to lock",
               "atomic transaction failed", "unable to update local ref", "incorrect old value")
_MOVED_WORDS = ("stale info", "non-fast-forward", "fetch first", "already exists")


def classify(flag: str, summary: str) -> str:
    if flag != "!":
        return ACCEPTED
    text = summary.lower()
    if "atomic push fail" in text:  # git's own "failed"; the server's "(atomic push failure)"
        return ATOMIC
    if any(w in text for w in _MOVED_WORDS):
        return MOVED
    if any(w in text for w in _LOCK_WORDS):
        return LOCKED
    return REFUSED


@dataclass(frozen=True)
class Pushed:
    """What the remote said of each ref of one push: {remote ref: (outcome, git's summary)},
    and the lines the server printed (`remote: ...`: where a hook or an access rule says why)."""

    refs: dict[str, tuple[str, str]]
    said: tuple[str, ...] = ()

    def outcome(self, ref: str) -> str | None:
        found = self.refs.get(ref)
        return found[0] if found else None

    def ok(self, ref: str) -> bool:
        return self.outcome(ref) == ACCEPTED

    def already(self, ref: str) -> bool:
        """Whether the remote held `ref` at the pushed value before this push (git's `=`,
        up to date: another push set that very value first, and no lease was checked)."""
        found = self.refs.get(ref)
        return found is not None and found[0] == ACCEPTED and found[1].strip() == "[up to date]"

    def refused(self, among: tuple[str, ...] | None = None) -> str | None:
        """The first policy refusal (`ref: summary`, and the server's reason when it gave
        one) among `among` (all when None)."""
        for ref, (what, summary) in sorted(self.refs.items()):
            if what == REFUSED and (among is None or ref in among or ref.startswith(among)):
                reason = self.reason(ref)
                return f"{ref}: {summary.strip()}" + (f", the server says {reason}" if reason else "")
        return None

    def reason(self, ref: str) -> str | None:
        """The server's own line about `ref` (gitolite's `FATAL: W <ref> ... DENIED`, a hook's
        message), quoted with every control or non-ASCII character escaped: it is the
        server's text, not ours. git's generic `hook declined to update <ref>` says nothing."""
        about = [line for line in self.said if ref in line and "hook declined to update" not in line]
        if not about:
            return None
        return json.dumps(about[0][:300])


def _server_lines(stderr: bytes) -> tuple[str, ...]:
    out = []
    for line in stderr.decode(errors="replace").splitlines():
        if line.startswith("remote: "):
            text = line[len("remote: "):].strip()
            if text:
                out.append(text)
    return tuple(out[:50])


def read(stdout: bytes, stderr: bytes, *, failed: bool) -> Pushed:
    """What `git push --porcelain` said of each ref (its stdout), and when the push
    failed, the server's lines (its stderr)."""
    out: dict[str, tuple[str, str]] = {}
    for line in stdout.decode(errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and len(parts[0]) == 1 and ":" in parts[1]:
            ref = parts[1].split(":", 1)[1]
            summary = parts[2] if len(parts) > 2 else ""
            out[ref] = (classify(parts[0], summary), summary)
    return Pushed(out, _server_lines(stderr) if failed else ())
