"""Git's own configuration rules, where libgit2 does not follow them: the settings a
command line gives (`git -c key=value`, which git passes to `git-handoff` as
GIT_CONFIG_PARAMETERS; and GIT_CONFIG_COUNT / GIT_CONFIG_KEY_<n> / GIT_CONFIG_VALUE_<n>),
the canonical form of a key, and how git reads a boolean or an integer.

Pure: text in, values out (UsageError where git itself would die). Parsing the variables
here costs microseconds; asking `git config` would start a process per command, which
the hooks and the hot commands cannot afford.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from git_handoff.core.errors import UsageError
from git_handoff.core.patterns import lazy

# A key given without `=` (`git -c handoff.autoSync`): git's "no value", true as a boolean.
NO_VALUE = None

_SPACE = " \t\n\v\f\r"  # C isspace() in the "C" locale


def canonical_key(key: str) -> str:
    """`key` as git compares it: section and variable name lower-cased, a subsection kept
    as written (`Handoff.Backend.Fast.Command` -> `handoff.backend.Fast.command`).
    UsageError, in git's words, for a key git refuses."""
    last = key.rfind(".")
    if last <= 0:
        raise UsageError(f"key does not contain a section: {key}")
    if last == len(key) - 1:
        raise UsageError(f"key does not contain variable name: {key}")
    first = key.find(".")
    out = []
    for i, c in enumerate(key):
        if i < first or i > last:
            if not (c.isascii() and (c.isalnum() or c == "-")) or (i == last + 1 and not c.isalpha()):
                raise UsageError(f"invalid key: {key}")
            c = c.lower()
        elif c == "\n":
            raise UsageError(f"invalid key (newline): {key}")
        out.append(c)
    return "".join(out)


def _dequote_step(text: str, pos: int) -> tuple[str, int | None] | None:
    """One single-quoted word of `text` from `pos`, as git's sq_dequote_step reads it:
    (the word, where the rest starts, None at the end of the text), or None when it is
    not quoted as git quotes (git then reports a bogus format). Outside the quotes only
    `\\'` and `\\!` may stand, each followed by a quote that resumes the word."""
    if pos >= len(text) or text[pos] != "'":
        return None
    out: list[str] = []
    i = pos + 1
    while True:
        if i >= len(text):
            return None
        c = text[i]
        if c != "'":
            out.append(c)
            i += 1
            continue
        i += 1  # stepped out of the quotes
        if i >= len(text):
            return "".join(out), None
        if text[i] == "\\" and i + 2 < len(text) and text[i + 1] in "'!" and text[i + 2] == "'":
            out.append(text[i + 1])
            i += 3
            continue
        return "".join(out), i


def _bogus() -> UsageError:
    return UsageError("bogus format in GIT_CONFIG_PARAMETERS")


def _old_style(text: str) -> tuple[str, str | None]:
    """An old-style entry `'key=value'` (git before 2.31): split at the first `=`; no `=`
    at all is a key without a value; the key is trimmed of white space."""
    key, sep, value = text.partition("=")
    key = key.strip(_SPACE)
    if not key:
        raise UsageError(f"bogus config parameter: {text}")
    return key, (value if sep else NO_VALUE)


def parse_parameters(text: str) -> list[tuple[str, str | None]]:
    """The entries of a GIT_CONFIG_PARAMETERS value, in order: `'key'='value'` (a key with
    `=` and nothing after it has no value), or the old `'key=value'`, separated by white space."""
    out: list[tuple[str, str | None]] = []
    pos: int | None = 0
    while pos is not None and pos < len(text):
        step = _dequote_step(text, pos)
        if step is None:
            raise _bogus()
        word, pos = step
        if pos is None or text[pos] in _SPACE:
            out.append(_old_style(word))
        elif text[pos] == "=":
            pos += 1
            value: str | None
            if pos < len(text) and text[pos] == "'":
                quoted = _dequote_step(text, pos)
                if quoted is None:
                    raise _bogus()
                value, pos = quoted
                if pos is not None and text[pos] not in _SPACE:
                    raise _bogus()
            elif pos >= len(text) or text[pos] in _SPACE:
                value = NO_VALUE
            else:
                raise _bogus()
            out.append((word, value))
        else:
            raise _bogus()
        if pos is not None:
            while pos < len(text) and text[pos] in _SPACE:
                pos += 1
    return out


def from_environment(environ: Mapping[str, str]) -> dict[str, str | None]:
    """{canonical key: value} of the command line's settings, the last of each key winning:
    GIT_CONFIG_COUNT's entries first, then GIT_CONFIG_PARAMETERS (`git -c`), as git reads
    them. Empty when neither is set (the usual case: two dictionary look-ups)."""
    found: dict[str, str | None] = {}
    count_text = environ.get("GIT_CONFIG_COUNT")
    if count_text is not None:
        # strtoul: white space, a sign, digits; an empty value is a count of 0
        match = re.fullmatch(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)", count_text)
        if count_text and match is None:
            raise UsageError("bogus count in GIT_CONFIG_COUNT")
        count = int(match.group(2)) if match else 0
        if match and match.group(1) == "-" and count:
            count = 2**64 - count  # strtoul negates in unsigned arithmetic
        if count > 2**31 - 1:
            raise UsageError("too many entries in GIT_CONFIG_COUNT")
        for n in range(count):
            key = environ.get(f"GIT_CONFIG_KEY_{n}")
            if key is None:
                raise UsageError(f"missing config key GIT_CONFIG_KEY_{n}")
            value = environ.get(f"GIT_CONFIG_VALUE_{n}")
            if value is None:
                raise UsageError(f"missing config value GIT_CONFIG_VALUE_{n}")
            if not key:
                raise UsageError("empty config key")
            found[canonical_key(key)] = value
    text = environ.get("GIT_CONFIG_PARAMETERS")
    if text:
        for key, param in parse_parameters(text):
            found[canonical_key(key)] = param
    return found


# -- typed values, as git reads them ------------------------------------------------------------

_INT = lazy(r"[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)(.*)", re.DOTALL)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
INT_MAX = 2**63 - 1  # intmax_t, and TOML's integers: every count of the state fits


def parse_bool(key: str, value: str | None) -> bool:
    """A boolean as git reads one: no value is true, an empty one false; true/yes/on and
    false/no/off in any case; else an integer (non-zero is true); else UsageError."""
    if value is NO_VALUE:
        return True
    lowered = value.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off", ""):
        return False
    try:
        return parse_int(key, value) != 0
    except UsageError:
        raise UsageError(f"bad boolean config value '{value[:60]}' for '{key}'") from None


def parse_int(key: str, value: str | None) -> int:
    """An integer as git reads one (strtoimax, base 0: 0x1f, 017, 42; then k, m or g for
    1024, 1024^2, 1024^3), within 64-bit range; else UsageError."""
    if value is NO_VALUE or value == "":
        raise UsageError(f"git config {key} must be a whole number, not {value!r}")
    match = _INT.fullmatch(value)
    unit = match.group(3).lower() if match else None
    if match is None or unit not in _UNITS:
        raise UsageError(f"git config {key} must be a whole number, not {value[:40]!r}")
    digits = match.group(2)
    base = 16 if digits[:2] in ("0x", "0X") else 8 if len(digits) > 1 and digits[0] == "0" else 10
    number = int(digits, base) * _UNITS[unit] * (-1 if match.group(1) == "-" else 1)
    if not -INT_MAX - 1 <= number <= INT_MAX:
        raise UsageError(f"git config {key} is out of range (TOML's 64-bit integers): {value[:40]}")
    return number
