"""TOML from a remote or a person, before tomllib sees it (linear costs).

tomllib spends time quadratic in the parts of one dotted key: on this machine (load ~7)
`a.a.a… = 1` took 0.7 s at 5,000 parts, 11 s at 20,000, and one of 100,000 parts (200 KB,
far inside the 1 MB a record may hold) was killed for memory. A key of more than
MAX_JSON_DEPTH parts nests deeper than a record may, so it was refused after parsing
anyway; decoding refuses it before parsing, in one linear scan that skips strings and
comments. The crafted inputs below are the ones that took that long before.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core import decoding, record_schemas
from git_handoff.core.errors import InvalidState, UsageError
from tests.support.hostile import BLOB, World, make_world, put
from tests.support.repo import run
from tests.support.speed import examples
from tests.support.templates import Templates

DEEP = decoding.MAX_JSON_DEPTH


def _key(parts: int, part: str = "a") -> str:
    return ".".join([part] * parts)


# 20,000 parts: 11 s in tomllib before the pre-check (see the docstring)
SLOW_KEY = f'mode = "exclusive"\n{_key(20_000)} = 1\n'
SLOW_HEADER = f'mode = "exclusive"\n[{_key(20_000)}]\nx = 1\n'
SLOW_INLINE = "x = { " + _key(20_000, '"q"') + " = 1 }\n"


@pytest.mark.parametrize("text", [SLOW_KEY, SLOW_HEADER, f"[[{_key(20_000, 'b')}]]\n",
                                  SLOW_INLINE])
def test_a_deep_dotted_key_in_the_state_config_is_refused_naming_the_file(text: str) -> None:
    with pytest.raises(InvalidState) as exc:
        record_schemas.config(text.encode(), "config.toml")
    assert exc.value.message == (f"state file config.toml is nested deeper than {DEEP} levels "
                                 f"(a dotted key of more than {DEEP} parts)")


def test_a_deep_dotted_key_in_a_plan_file_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as exc:
        decoding.load_toml_text(f"[[task]]\ntitle = 'x'\n{_key(20_000)} = 1\n", "plan.toml")
    assert exc.value.message.startswith(f"plan.toml: nested deeper than {DEEP} levels")


@pytest.mark.parametrize("text", [
    f'init_command = "echo {_key(200)}"\n',  # dots in a string
    f"init_command = '{_key(200)}'\n",  # in a literal string
    f"# {_key(200)}\nmode = 'exclusive'\n",  # in a comment
    f'init_command = """\n{_key(200)} = 1\n"""\n',  # a key-like line in a multi-line string
    f"init_command = '''\n[{_key(200)}]\n'''\n",
    f'init_command = """say "hi" \\""" {_key(200)} """\n',  # escaped quotes inside
    f"spec_ref = 'a'\n[x]\ny = [{', '.join(['1.5'] * 200)}]\n",  # many floats
    f"{_key(DEEP)} = 1\n",  # exactly as deep as a record may be
])
def test_dots_that_are_not_a_deep_key_are_parsed_as_before(text: str) -> None:
    assert decoding._dotted_key_over(text, DEEP) is False
    assert decoding.load_toml_text(text, "plan.toml") == tomllib.loads(text)


@pytest.mark.parametrize("parts", [DEEP - 1, DEEP, DEEP + 1, DEEP + 2])
def test_the_pre_check_refuses_exactly_what_the_parse_would(parts: int) -> None:
    for text in (f"{_key(parts)} = 1\n", f"{_key(parts, chr(39) + 'x.y' + chr(39))} = 1\n",
                 f"{' . '.join(['a'] * parts)} = 1\n", f"[t]\n{_key(parts)} = 1\n"):
        deep_after_parse = decoding.nested_deeper(tomllib.loads(text))
        if decoding._dotted_key_over(text, DEEP):
            assert deep_after_parse, text[:80]
        assert deep_after_parse == (decoding.parse_toml(text)[0] is None)


_part = st.one_of(st.from_regex(r"[A-Za-z0-9_-]{1,3}", fullmatch=True),
                  st.from_regex(r'"[a-z.]{0,3}"', fullmatch=True), st.from_regex(r"'[a-z.]{0,3}'", fullmatch=True))


@settings(max_examples=examples(200), deadline=None)
@given(keys=st.lists(st.tuples(st.lists(_part, min_size=1, max_size=40), st.sampled_from(["key", "header", "inline"])),
                     min_size=1, max_size=4),
       junk=st.sampled_from(["", "# a.b.c.d\n", 'z = "1.2.3.4.5"\n', "w = '''\n" + _key(40) + "\n'''\n"]))
def test_generated_documents_never_refused_by_the_pre_check_alone(keys: list[tuple[list[str], str]],
                                                                  junk: str) -> None:
    """Whatever the pre-check refuses, tomllib refuses too or parses into a structure
    nested deeper than a record may be: it never refuses a document the parse accepts."""
    lines = [junk]
    for n, (parts, form) in enumerate(keys):
        key = ".".join(parts)
        lines.append({"key": f"{key} = {n}\n", "header": f"[{key}]\n", "inline": f"v{n} = {{ {key} = 1 }}\n"}[form])
    text = "".join(lines)
    if not decoding._dotted_key_over(text, DEEP):
        return
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    assert decoding.nested_deeper(parsed), text[:200]


@pytest.fixture
def world(tmp_path: Path, templates: Templates) -> Iterator[World]:
    yield from make_world(tmp_path, templates)


def test_sync_quarantines_a_fetched_config_with_a_deep_dotted_key(world: World) -> None:
    """The remote's config.toml holds a 20,000-part key: sync keeps that ref out (per-ref
    quarantine) and names it with the file and the rule, in one entry; the
    local state and tracking refs stay as they were, and status names the quarantine."""
    w = world
    node = w.attacker.state_node()
    put(node, "config.toml", (BLOB, w.attacker.blob(SLOW_KEY)))
    w.attacker.push_state(node)
    refs = w.refs()
    res = run("sync", "--json", cwd=w.victim)
    assert res.rc == 0 and res.err == "", res
    held = json.loads(res.out)["quarantined"]
    assert len(held) == 1, held
    why = held[0]["why"]
    assert "\n" not in why and "config.toml" in why and f"nested deeper than {DEEP} levels" in why, why
    assert "unexpected" not in res.out and "Traceback" not in res.out
    assert w.refs() == refs
    status = run("status", cwd=w.victim)
    assert status.rc == 0 and held[0]["ref"] in status.out, status.out
