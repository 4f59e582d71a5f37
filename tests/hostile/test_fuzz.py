"""Fuzzing the edges where outside data comes in: the TOML plan and tasks.json
importers, the Claude Code hook payloads, and the merge of a fetched state.

Every input either works or gets a clean exit 2 (one `error:` line on stderr, no
traceback, no exception name), and a refused input leaves refs/harness/state as it was.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from git_handoff.core import errors
from tests.support.repo import git, make_repo, run, state_head

pytestmark = pytest.mark.slow  # torture by generated input: the slow layer

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SLOW_FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
EXCEPTION_NAME = re.compile(r"\b[A-Z]\w*(Error|Exception)\b|Traceback|unexpected ")

SPEC_KEYS = ["id", "title", "status", "priority", "depends_on", "attempts", "max_attempts", "started_at_commit",
             "validation", "on_failure", "error_log", "checkpoints", "completed_at", "claimed_by",
             "lease_expires_at", "created_at", "spec_ref", "tokens", "order", "updated_at"]
PLAN_KEYS = ["id", "title", "priority", "depends_on", "check", "timeout", "max_attempts", "cleanup", "spec"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False), st.text(max_size=30),
    st.sampled_from(["P0", "P1", "P2", "pending", "failed", "completed", "in_progress", "a", "a..b", "x.lock",
                     "-x", "2026-07-01T10:00:00Z", "", " ", "t1", "t2"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=8)


def task_objects(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.one_of(st.sampled_from(keys), st.text(max_size=10)), values, max_size=8)


def assert_clean(r: Any, before: str | None, cwd: Path) -> None:
    assert r.rc in (0, 2), (r.rc, r.err)
    assert not EXCEPTION_NAME.search(r.err), r.err
    if r.rc == 2:
        lines = r.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), r.err
        assert state_head(cwd) == before
    else:
        assert state_head(cwd) != before


@pytest.fixture
def inited(repo: Path) -> Path:
    assert run("init").rc == 0
    assert run("add", "Existing", "--id", "t1").rc == 0
    return repo


def import_text(repo: Path, name: str, data: bytes) -> None:
    path = repo / name
    path.write_bytes(data)
    before = state_head(repo)
    r = run("import", str(path))
    assert_clean(r, before, repo)


# -- importers ---------------------------------------------------------------------------------


@FUZZ
@given(text=st.text(max_size=300))
def test_plan_arbitrary_text(inited: Path, text: str) -> None:
    import_text(inited, "plan.toml", text.encode("utf-8", "surrogatepass") if _encodable(text) else b"\xff")


@FUZZ
@given(tasks=st.lists(task_objects(PLAN_KEYS), max_size=4),
       top=st.dictionaries(st.text(max_size=6), scalars, max_size=2))
def test_plan_structured(inited: Path, tasks: list[dict[str, Any]], top: dict[str, Any]) -> None:
    import tomlkit

    doc: dict[str, Any] = dict(top)
    doc["task"] = tasks
    try:
        text = tomlkit.dumps(_tomlable(doc))
    except Exception:  # noqa: BLE001 - a value TOML cannot hold: not a plan anyone can write
        assume(False)
        return
    import_text(inited, "plan.toml", text.encode())


@FUZZ
@given(tasks=st.lists(task_objects(SPEC_KEYS), max_size=4),
       version=st.one_of(st.just(2), scalars),
       extra=st.dictionaries(st.sampled_from(["session_config", "project", "x"]), values, max_size=2))
def test_tasks_json_structured(inited: Path, tasks: list[dict[str, Any]], version: Any, extra: dict[str, Any]) -> None:
    doc = {"version": version, "tasks": tasks, **extra}
    import_text(inited, "tasks.json", json.dumps(doc).encode())


@FUZZ
@given(doc=values)
def test_tasks_json_any_json(inited: Path, doc: Any) -> None:
    import_text(inited, "tasks.json", json.dumps(doc).encode())


@FUZZ
@given(data=st.binary(max_size=200))
def test_import_binary(inited: Path, data: bytes) -> None:
    import_text(inited, "tasks.json" if data[:1] == b"{" else "plan.toml", data)


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _tomlable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _tomlable(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_tomlable(v) for v in value if v is not None]
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return str(value)
    return value


# -- Claude Code hook payloads ---------------------------------------------------------------

HOOK_EVENTS = ["claude-session-start", "claude-stop", "claude-subagent-stop", "claude-pre-compact"]
payload_objects = st.dictionaries(
    st.sampled_from(["session_id", "transcript_path", "cwd", "hook_event_name", "stop_hook_active", "source",
                     "trigger", "custom_instructions", "x"]),
    values, max_size=6)


@SLOW_FUZZ
@given(event=st.sampled_from(HOOK_EVENTS),
       payload=st.one_of(payload_objects.map(json.dumps), st.text(max_size=200), values.map(json.dumps)))
def test_hook_payloads_never_break_the_agent(inited: Path, event: str, payload: str) -> None:
    r = run("hook", event, stdin=payload)
    # a hook must never fail its caller, nor trip over a payload
    assert r.rc == 0, (r.rc, r.err)
    assert not EXCEPTION_NAME.search(r.err), r.err
    assert len(r.err.splitlines()) <= 1, r.err
    if r.out.strip():
        json.loads(r.out)


def test_unknown_hook_event_is_a_warning_and_exit_0(inited: Path) -> None:
    """A hook never fails its caller (to Claude Code exit 2 means "block"): an
    unknown event is one warning line on stderr, exit 0, nothing changed."""
    before = state_head(inited)
    r = run("hook", "claude-unknown", stdin="{}")
    assert r.rc == 0 and r.out == "" and len(r.err.splitlines()) == 1
    assert "unknown hook event 'claude-unknown'" in r.err
    assert state_head(inited) == before


# -- the merge ---------------------------------------------------------------------------------

blobs = st.one_of(st.none(), st.binary(max_size=60), values.map(lambda v: json.dumps(v).encode()),
                  task_objects(SPEC_KEYS).map(lambda d: json.dumps({"id": "t1", "title": "x", **d}).encode()))


@settings(max_examples=400, deadline=None)
@given(path=st.sampled_from(["tasks/a/b/t1.json", "meta.json", "config.toml", "format", "sessions/1.json", "other"]),
       base=blobs, ours=blobs, theirs=blobs)
def test_merge_file_any_bytes(path: str, base: bytes | None, ours: bytes | None, theirs: bytes | None) -> None:
    from git_handoff.core import merge

    try:
        one = merge.merge_file(path, base, ours, theirs)
        two = merge.merge_file(path, base, theirs, ours)
    except errors.HandoffError:
        return
    assert one.data == two.data


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    remote = tmp_path / "remote.git"
    remote.mkdir()
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    a = make_repo(tmp_path / "a")
    git("remote", "add", "origin", str(remote), cwd=a)
    assert run("init", cwd=a).rc == 0
    assert run("add", "Shared", "--id", "t1", cwd=a).rc == 0
    assert run("sync", cwd=a).rc == 0, run("sync", cwd=a).err
    b = make_repo(tmp_path / "b")
    git("remote", "add", "origin", str(remote), cwd=b)
    assert run("sync", cwd=b).rc == 0
    return a, b


@SLOW_FUZZ
@given(blob=blobs.filter(lambda b: b is not None),
       where=st.sampled_from(["tasks", "meta.json", "config.toml", "format"]))
def test_sync_of_a_hostile_remote_state(pair: tuple[Path, Path], blob: bytes, where: str) -> None:
    """The remote's state is rewritten with a damaged record (by hand, as a stranger could):
    the local clone's sync merges it or refuses it cleanly, never half-applies it."""
    a, b = pair
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state.snapshot import task_path
    from git_handoff.state.store import StateStore

    store = StateStore(Repo.discover(a), session=0)
    path = task_path("t1") if where == "tasks" else where
    a_before = state_head(a)
    b_before = state_head(b)
    assert a_before is not None and b_before is not None

    def damage(tx: Any) -> None:
        tx.put(path, blob)
        tx.log("WARN", "damaged by the fuzzer")

    try:
        assert run("edit", "t1", "--title", "local edit", cwd=b).rc == 0
        before = state_head(b)
        checking = os.environ.pop("HANDOFF_CHECK_WRITES", None)  # a broken record, on purpose
        try:
            store.transact(damage)
        finally:
            if checking is not None:
                os.environ["HANDOFF_CHECK_WRITES"] = checking
        git("push", "-q", "-f", "origin", "refs/harness/state:refs/harness/state", cwd=a)
        r = run("sync", cwd=b)
        assert r.rc in (0, 2, 3), (r.rc, r.err)
        assert not EXCEPTION_NAME.search(r.err), r.err
        if r.rc != 0:
            assert len(r.err.splitlines()) == 1 and r.err.startswith("error: "), r.err
            assert state_head(b) == before
        # whatever sync took in, b's state stays readable
        after = run("list", "--json", cwd=b)
        assert after.rc == 0, after.err
    finally:
        # a sane remote and clones for the next example
        git("update-ref", "refs/harness/state", a_before, cwd=a)
        git("push", "-q", "-f", "origin", "refs/harness/state:refs/harness/state", cwd=a)
        git("update-ref", "refs/harness/state", b_before, cwd=b)
