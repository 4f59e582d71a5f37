"""The edge parsers (git_handoff.core.record_schemas, through git_handoff.core.state_tree),
path confinement (git_handoff.infra.paths) and the clone identity
(git_handoff.state.identity), called directly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from git_handoff.core import model, record_schemas, selection, state_tree
from git_handoff.core.errors import InvalidState, UsageError
from git_handoff.core.model import check_id, check_title, parse_duration
from git_handoff.infra import paths
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import identity
from tests.support.repo import make_repo
from tests.support.speed import examples

KIND_PATHS = ["format", "config.toml", "meta.json", "relay.json", "sessions/3.json", "docs/3.json",
              "dispatch/001-fix.json", "tasks/9/4/x.json"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=30,
)


def _parse(path: str, raw: bytes) -> None:
    try:
        state_tree.check_record(path, raw)
    except InvalidState as exc:
        assert exc.message and "\n" not in exc.message


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(KIND_PATHS), raw=st.binary(max_size=400))
def test_random_bytes_in_every_record_kind_parse_or_refuse(path: str, raw: bytes) -> None:
    _parse(path, raw)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(KIND_PATHS), value=json_values)
def test_random_json_in_every_record_kind_parse_or_refuse(path: str, value: Any) -> None:
    _parse(path, json.dumps(value).encode())


@settings(max_examples=examples(200), deadline=None)
@given(fields=st.dictionaries(st.sampled_from(sorted(record_schemas.RELAY_FIELDS) + ["agent_pid", "pid"]), json_values,
                              max_size=8))
def test_random_relay_fields_parse_or_refuse(fields: dict[str, Any]) -> None:
    _parse("relay.json", json.dumps(fields).encode())


@pytest.mark.parametrize("raw, field", [
    (b'{"session_count": "lots"}', "session_count"),
    (b'{"state": "running", "pid": "abc"}', "pid"),
    (b'{"state": "running", "agent_pid": 1}', "agent_pid"),
    (b'{"state": "running", "agent_token": "HOME="}', "agent_token"),
])
def test_a_refusal_names_the_path_and_the_field(raw: bytes, field: str) -> None:
    path = "meta.json" if b"session_count" in raw else "relay.json"
    with pytest.raises(InvalidState) as exc:
        state_tree.check_record(path, raw)
    assert path in exc.value.message and field in exc.value.message


def test_deep_nesting_nan_and_size_are_refused_without_an_internal_error() -> None:
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"session_count": NaN}', b" " * (model.MAX_RECORD_BYTES + 1)):
        with pytest.raises(InvalidState):
            state_tree.check_record("meta.json", raw)


def test_dispatch_session_id_must_be_a_safe_word() -> None:
    good = {"run_id": "001-fix", "seq": 1, "session_id": "0f3c-uuid_1.2:x@y+z="}
    state_tree.check_record("dispatch/001-fix.json", json.dumps(good).encode())
    for bad in ("x'; touch PWNED; '", "a b", "$(id)", ""):
        with pytest.raises(InvalidState):
            state_tree.check_record("dispatch/001-fix.json", json.dumps(dict(good, session_id=bad)).encode())


def test_ids_match_the_whole_string_and_titles_are_lines() -> None:
    for bad in ("a\n", "a\r", "x" * 65, "a..b", "a.lock", ""):
        with pytest.raises(UsageError):
            check_id(bad)
    assert check_id("a.b-c_1") == "a.b-c_1"
    for bad in ("a\nb", "a\x1b[2J", "A" * 501, "\ud800"):
        with pytest.raises(UsageError):
            check_title(bad)
    with pytest.raises(UsageError):
        parse_duration("999999999999999999h")
    assert parse_duration("2h") == 7200


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../x", ".git/hooks/pre-commit", "a/.GIT/config",
                                  "git~1/config", "a//b", "a\x01b", ""])
def test_confine_refuses_paths_that_leave_the_tree(tmp_path: Path, path: str) -> None:
    with pytest.raises(UsageError):
        paths.confine(tmp_path, path)


def test_confine_refuses_a_step_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "tree" / "link").symlink_to(tmp_path / "out")
    with pytest.raises(UsageError):
        paths.confine(tmp_path / "tree", "link/file")
    assert paths.confine(tmp_path / "tree", "sub/file") == tmp_path / "tree" / "sub" / "file"


def test_seals_are_per_clone_and_bound_to_their_fields(tmp_path: Path) -> None:
    a = Repo.discover(make_repo(tmp_path / "a"))
    b = Repo.discover(make_repo(tmp_path / "b"))
    assert identity.clone_id(a) != identity.clone_id(b)
    seal = identity.claim_seal(a, "t1", "2026-07-01T10:00:00Z", "/w", "abc", "me")
    assert identity.sealed_here(a, seal, "claim", "t1", "2026-07-01T10:00:00Z", "/w", "abc", "me")
    assert not identity.sealed_here(a, seal, "claim", "t1", "2026-07-01T10:00:00Z", "/w", "abd", "me")
    assert not identity.sealed_here(b, seal, "claim", "t1", "2026-07-01T10:00:00Z", "/w", "abc", "me")
    secret = (a.handoff_dir / identity.SECRET_FILE)
    assert secret.stat().st_mode & 0o077 == 0


def test_a_long_cycle_is_reported_once_per_task_in_bounded_text() -> None:
    from git_handoff.core.model import Task

    n = 20_000
    tasks = {f"c{i}": Task(id=f"c{i}", title="t", depends_on=(f"c{(i + 1) % n}",), order=i) for i in range(n)}
    failures = dict(selection.dependency_failures(tasks))
    assert len(failures) == n
    assert max(len(m) for m in failures.values()) < 300
    assert failures["c5"].startswith("[DEPENDENCY] Circular dependency detected: c5 -> c6 -> ")
    assert failures["c5"].endswith("more) -> c5")
    short = {k: Task(id=k, title="t", depends_on=(d,)) for k, d in (("a", "b"), ("b", "a"))}
    assert dict(selection.dependency_failures(short))["a"] == "[DEPENDENCY] Circular dependency detected: a -> b -> a"


@pytest.mark.parametrize("args", [("--ack-timeout", "nan"), ("--ack-timeout", "inf"), ("--session-timeout", "nan"),
                                  ("--max-idle-sessions", "0"), ("--handoff-grace", "-1")])
def test_relay_numbers_must_be_finite_and_in_range(repo: Path, args: tuple[str, str]) -> None:
    from tests.support.repo import run

    res = run("relay", "--agent", "true", *args, "--json")
    assert res.rc == 2 and res.err.startswith("error: ") and args[0] in res.err
    assert json.loads(res.out)["exit_code"] == 2


_USAGE = {"input_tokens": 100, "output_tokens": 10, "tokens": 110, "turns": 2, "cost_usd": 0.0012, "seconds": 3,
          "clis": ["claude", "codex"]}


@pytest.mark.parametrize("usage",
                         [_USAGE, {**_USAGE, "cost_usd": None}, {**_USAGE, "cost_usd": 0}, {"tokens": 0}, None])
def test_a_session_records_its_agents_use(usage: Any) -> None:
    record = record_schemas.session(json.dumps({"session": 1, "usage": usage, "budget": "the run's tokens budget "
                                                "reached (300 of 300; --budget tokens)"}).encode(), "sessions/1.json")
    assert record.get("usage") == usage


@pytest.mark.parametrize(("change", "said"), [
    ({"tokens": -1}, "usage.tokens must be between 0"), ({"turns": 1.5}, "usage.turns must be a whole number"),
    ({"cost_usd": -0.5}, "usage.cost_usd must be a cost in dollars"), ({"cost_usd": True}, "a cost in dollars"),
    ({"cost_usd": 1e12}, "a cost in dollars"), ({"clis": "claude"}, "usage.clis must be a list"),
    ({"clis": ["Claude Code"]}, "an agent CLI's name"), ({"clis": ["x"] * 17}, "more than 16"),
])
def test_a_bad_use_in_a_session_record_is_refused(change: dict[str, Any], said: str) -> None:
    with pytest.raises(InvalidState, match=said):
        record_schemas.session(json.dumps({"session": 1, "usage": {**_USAGE, **change}}).encode(), "sessions/1.json")
    with pytest.raises(InvalidState, match="usage must be an object"):
        record_schemas.session(b'{"session": 1, "usage": [1]}', "sessions/1.json")
    with pytest.raises(InvalidState, match="budget"):
        record_schemas.session(b'{"session": 1, "budget": "two\\nlines"}', "sessions/1.json")
