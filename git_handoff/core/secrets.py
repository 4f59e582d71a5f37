"""Secrets in text: the rules that find them, and their redaction (docs/threat-model.md, "Secrets").

A `Scanner` holds the built-in rules (the common providers' key formats, private key
blocks, URLs with a password, JWTs, high-entropy assignments), the user's patterns and
the allow-list (git config `handoff.secretPattern` / `handoff.secretAllow`, read in
git_handoff.state.redaction). `findings(text)` says where each secret is and its kind;
`redact(text)` replaces each with `[redacted: KIND]`; `redact_record(path, data)` does so
to every text value of a state record (JSON walked value by value, so that the record
stays well formed and its fields are named), other files as text.

The built-in rules are one alternation compiled on first use: a text with no secret, the
usual case, costs one regular-expression search. Why our own rules and not a library's:
docs/threat-model.md.

Pure: no git, no I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from git_handoff.core.patterns import lazy

# (kind, anchors, pattern, word start): the pattern runs only on a text holding one of the
# literal anchors its format starts with (`in`: a fast scan each, far faster than one
# alternation of them all, which Python's engine tries at every position); the secret is
# group `s` when the pattern has one, else the whole match; with `word start`, a match
# preceded by a letter or digit does not count.
_END = r"(?![A-Za-z0-9_-])"
RULES: tuple[tuple[str, tuple[str, ...], str, bool], ...] = (
    ("private-key", ("-----BEGIN",), r"-----BEGIN[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----"
                    r"[\s\S]{0,16384}?(?:-----END[A-Z0-9 ]{0,30} PRIVATE KEY(?: BLOCK)?-----|$)", False),
    # a block whose front was cut off (a command's output kept by its tail): its last
    # base64 lines up to the end line
    ("private-key", ("-----END",), r"(?:[A-Za-z0-9+/=]{16,}[ \t]*(?:\r?\n| \| ))+-----END[A-Z0-9 ]{0,30}"
                    r" PRIVATE KEY(?: BLOCK)?-----", False),
    ("aws-access-key", ("AKIA", "ASIA", "ABIA", "ACCA"), r"(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![0-9A-Za-z])", True),
    ("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
     r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})" + _END, True),
    ("gitlab-token", ("gl",), r"gl(?:pat|dt|rt|ptt|cbt|oas|ft|imt|agent|soat)-[A-Za-z0-9_-]{20,255}" + _END, True),
    ("anthropic-key", ("sk-ant-",), r"sk-ant-(?:api|admin|sid|oat)[0-9]{2}-[A-Za-z0-9_-]{32,255}" + _END, True),
    ("openai-key", ("sk-",), r"sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{32,255}"
                             r"|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|[A-Za-z0-9]{48})" + _END, True),
    ("google-api-key", ("AIza",), r"AIza[0-9A-Za-z_-]{35}" + _END, True),
    ("slack-token", ("xox",), r"xox[abposrce]-(?:[0-9A-Za-z]{1,64}-){1,4}[0-9A-Za-z]{8,64}" + _END, True),
    ("slack-webhook", ("hooks.slack.com",), r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,200}",
     False),
    ("stripe-key", ("k_live_", "k_test_"), r"[sr]k_(?:live|test)_[0-9A-Za-z]{20,255}" + _END, True),
    ("stripe-key", ("whsec_",), r"whsec_[0-9A-Za-z]{24,255}" + _END, True),
    ("jwt", ("eyJ",), r"eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{8,4096}" + _END, True),
    # a URL's password: scheme://user:PASSWORD@host (a database's above all)
    ("url-password", ("://",),
     r"://[^\s:/@\"'\\]{0,128}:(?P<s>[^\s:/@\"'\\$%<{*][^\s/@\"'\\]{0,255})@[A-Za-z0-9\[]", False),
)
_COMPILED = [lazy(pattern) for _, _, pattern, _ in RULES]
# NAME = VALUE where NAME says secret and VALUE looks random (_random_enough): each secret
# word (anchor, pattern) found in the lowered text, then the rest matched where it ends
ASSIGNMENT = "secret-assignment"
_SECRET_WORDS = tuple((anchor, lazy(pattern)) for anchor, pattern in (
    ("passw", r"passw(?:or)?d"), ("passphrase", "passphrase"), ("pwd", "pwd"), ("secret", "secret"),
    ("token", "token"), ("api", r"api[_-]?key"), ("access", r"access[_-]?key"), ("auth", r"auth[_-]?key"),
    ("private", r"private[_-]?key"), ("credential", r"credentials?")))
_ASSIGNED = lazy(r"[A-Za-z0-9_.-]{0,40}[\"']?\s{0,4}(?::=|=>|=|:)\s{0,4}(?:\\?[\"'])?"
                 r"(?P<s>[^\s\"'\\,;()\[\]{}<>`]{8,256})")
_DOTTED_NAME = lazy(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+|[A-Za-z_]+|[A-Za-z_]+[0-9]{1,2}")
_PLACEHOLDER = lazy(r"(?i)(?:x{4,}|\*{3,}|changeme|example|redacted|placeholder|dummy|your[_-]|<[^>]*>|\$\{?[A-Z_])")
# a record's own name and the names it points at: ids the user chose, kept as they are
# (a task file holds its id, which its path and its dependents name too)
NAMES = frozenset({"id", "depends_on"})
MIN_ENTROPY = 3.0  # bits per character of an assigned value that counts as random


@dataclass(frozen=True)
class Finding:
    """One secret in a text: its kind and where it is (`start`:`end` of the text scanned)."""

    kind: str
    start: int
    end: int


MARKER = lazy(r"\[redacted: ([A-Za-z0-9-]{1,64})\]")  # what `marker` writes, the kind its group


def marker(kind: str) -> str:
    return f"[redacted: {kind}]"


def entropy(text: str) -> float:
    """Shannon entropy of `text`, in bits per character."""
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def _random_enough(value: str) -> bool:
    """Whether an assigned value looks like a secret rather than a name, a number or a
    placeholder: letters and digits mixed, no dotted name, high entropy."""
    if _DOTTED_NAME.fullmatch(value) or _PLACEHOLDER.search(value) or value.startswith(marker("")[:10]):
        return False
    if not any(c.isdigit() for c in value) or not any(c.isalpha() for c in value):
        return False
    return entropy(value) >= MIN_ENTROPY


class Scanner:
    """The built-in rules, plus `patterns` (user regexes: a named group's name is the kind,
    `custom` otherwise), less what `allow` (regexes) matches."""

    def __init__(self, patterns: Iterable[re.Pattern[str]] = (), allow: Iterable[re.Pattern[str]] = ()) -> None:
        self.patterns = tuple(patterns)
        self.allow = tuple(allow)

    def findings(self, text: str) -> list[Finding]:
        """The secrets in `text`, in order, not overlapping."""
        if not text:
            return []
        found = _builtin(text)
        for pattern in self.patterns:
            kind = next(iter(pattern.groupindex), "custom").replace("_", "-")
            for m in pattern.finditer(text):
                if m.end() > m.start():
                    span = m.span(1) if pattern.groups == 1 and m.group(1) is not None else m.span()
                    found.append(Finding(kind, *span))
        found = [f for f in found if not any(a.search(text[f.start:f.end]) for a in self.allow)]
        return _disjoint(found)

    def redact(self, text: str, known: str = "") -> tuple[str, list[str]]:
        """`text` with each secret replaced by its marker; the kinds replaced, in order. A
        secret that `known` holds too (what the record held before) is left as it is."""
        found = self.findings(text)
        if known:
            found = [f for f in found if text[f.start:f.end] not in known]
        if not found:
            return text, []
        out, at = [], 0
        for f in found:
            out.append(text[at:f.start])
            out.append(marker(f.kind))
            at = f.end
        out.append(text[at:])
        return "".join(out), [f.kind for f in found]

    def redact_record(self, path: str, data: bytes,
                      before: Callable[[], bytes | None] | None = None) -> tuple[bytes, list[tuple[str, str]]]:
        """A state file's bytes with every secret redacted, and (kind, field) of each: a JSON
        record value by value (the field a dotted path, `checkpoints[0].description`), any
        other file as text (the field its path). Unchanged bytes when there is none.

        A secret the file held `before()` (its previous version) is not this write's: it is
        left as it was (already published; `git handoff secrets` finds it), so that a
        write that rewrites another writer's record as a side effect (a claim, a rename's
        `depends_on`) changes nothing of what that writer wrote."""
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return data, []
        if not self.findings(text):
            return data, []
        known = _known(before() if before is not None else None)
        if path.endswith(".json"):
            try:
                doc = json.loads(text)
            except ValueError:
                doc = None
            if doc is not None:  # value by value: a key's name is no assignment (`"agent_token": "…"`)
                kinds: list[tuple[str, str]] = []
                clean = self._walk(doc, "", kinds, known)
                if not kinds:
                    return data, []
                return (json.dumps(clean, indent=2, ensure_ascii=False) + "\n").encode(), kinds
        clean_text, found = self.redact(text, known)
        if not found:
            return data, []
        return clean_text.encode(), [(kind, path) for kind in found]

    def _walk(self, value: Any, where: str, kinds: list[tuple[str, str]], known: str) -> Any:
        if isinstance(value, str):
            clean, found = self.redact(value, known)
            kinds.extend((kind, where or "value") for kind in found)
            return clean
        if isinstance(value, dict):
            return {k: v if not where and k in NAMES
                    else self._walk(v, f"{where}.{k}" if where else str(k), kinds, known)
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v, f"{where}[{i}]", kinds, known) for i, v in enumerate(value)]
        return value


def _known(before: bytes | None) -> str:
    """The text of a file's previous version to compare a secret with: its JSON strings
    decoded (a secret escaped there is the same secret), else its text."""
    if not before:
        return ""
    text = before.decode(errors="replace")
    try:
        doc = json.loads(text)
    except ValueError:
        return text
    out: list[str] = []
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return "\0".join(out)


def _builtin(text: str) -> list[Finding]:
    found: list[Finding] = []
    for (kind, anchors, _, word_start), pattern in zip(RULES, _COMPILED, strict=True):
        if not any(anchor in text for anchor in anchors):
            continue
        for m in pattern.compiled.finditer(text):
            if word_start and m.start() and (text[m.start() - 1].isalnum()):
                continue
            found.append(Finding(kind, *(m.span("s") if "s" in m.re.groupindex else m.span())))
    lowered = text.lower()
    if len(lowered) != len(text):  # lowering moved characters (a rare letter): lower what maps one to one
        lowered = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
    for anchor, words in _SECRET_WORDS:
        if anchor not in lowered:
            continue
        for word in words.compiled.finditer(lowered):
            assigned = _ASSIGNED.match(text, word.end())
            if assigned is None:
                continue
            start, end = assigned.span("s")
            if any(f.start < end and start < f.end for f in found):
                continue  # a provider's key assigned: named as its own kind
            if _random_enough(text[start:end]):
                found.append(Finding(ASSIGNMENT, start, end))
    return found


def _disjoint(found: list[Finding]) -> list[Finding]:
    """Findings in order of start; one overlapping an earlier (longer first) is dropped."""
    out: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if out and f.start < out[-1].end:
            continue
        out.append(f)
    return out


def compile_patterns(values: Iterable[str], key: str) -> list[re.Pattern[str]]:
    """The user's regexes of git config `key`, compiled; ValueError names a bad one."""
    out = []
    for value in values:
        try:
            out.append(re.compile(value))
        except re.error as exc:
            raise ValueError(f"{key}: {value!r} is not a regular expression ({exc})") from None
    return out


DEFAULT = Scanner()
