"""The bulk paths (a claim that fails a 50,000-task cycle, the first read of a big state)
made fast without changing a byte of what is stored: each fast piece against the code it
replaced, kept here as the oracle, and a whole state written both ways."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_handoff.core import hlc, model, serialization
from git_handoff.core.errors import UsageError
from git_handoff.core.model import Task
from git_handoff.infra import gitrepo
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import claim as claim_ops
from git_handoff.ops import tasks as task_ops
from git_handoff.state import identity, snapshot, store
from git_handoff.state.store import StateStore
from tests.support.speed import examples

# -- the oracles: the code as it was before the bulk-path work ---------------------------------

_old_leaf = json.JSONEncoder(ensure_ascii=False).encode


def reference_json_indented(value: Any) -> str:
    """serialization.json_indented before the bulk-path work (itself checked against json.dumps)."""
    if isinstance(value, (str, int, float, bool, type(None))):
        return _old_leaf(value)
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        return "[\n  " + ",\n  ".join(reference_json_indented(v).replace("\n", "\n  ") for v in value) + "\n]"
    if isinstance(value, dict) and all(type(k) is str for k in value):
        if not value:
            return "{}"
        return "{\n  " + ",\n  ".join(
            f"{_old_leaf(k)}: " + reference_json_indented(v).replace("\n", "\n  ") for k, v in value.items()) + "\n}"
    return json.dumps(value, indent=2, ensure_ascii=False)


_MISSING = object()


def _canon(value: Any) -> str:
    if value is _MISSING:
        return "\x00missing"
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _eq(a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return a is b
    return type(a) is type(b) and bool(a == b)


def _digest(value: Any) -> str:
    import hashlib

    return hashlib.sha1(_canon(value).encode()).hexdigest()[:12]


# Which fields make up the claim is the merge's rule (tests/core/test_merge.py), not what
# this reference stands for: it takes them from hlc.
_CLAIM_UNIT = hlc.CLAIM_UNIT


def reference_stamp_write(old: Mapping[str, Any] | None, new: dict[str, Any], now_ms: int, node: str,
                          *, task: bool, fields: bool = True) -> dict[str, Any]:
    """merge.stamp_write before it moved to hlc.py."""
    seen = hlc.highest([hlc.seen_in(old), hlc.seen_in(new)])
    when = hlc.next_stamp(seen, now_ms, node)
    out = dict(new)
    out["hlc"] = when
    if not fields:
        return out
    before = old or {}
    clock = dict(out.get("field_clock") or {}) if isinstance(out.get("field_clock"), dict) else {}
    skip = {"field_clock", "hlc", "updated_at", "error_log", "checkpoints", "depends_on", "attempts"}
    names = set(out) | set(before)
    if task:
        names -= set(_CLAIM_UNIT)
        unit_old = {k: before[k] for k in _CLAIM_UNIT if k in before}
        unit_new = {k: out[k] for k in _CLAIM_UNIT if k in out}
        if old is not None and unit_old != unit_new:
            clock["claim"] = [when, _digest(unit_new)]
    for name in names - skip:
        value = out.get(name, _MISSING)
        if old is not None and not _eq(before.get(name, _MISSING), value):
            clock[name] = [when, _digest(value)]
            for key in [k for k in clock if k.startswith(name + ".")]:
                del clock[key]
    if clock:
        out["field_clock"] = dict(sorted(clock.items()))
    else:
        out.pop("field_clock", None)
    return out


# -- json_indented -------------------------------------------------------------------------------


class Text(str):
    pass


class Number(int):
    pass


scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text()
           | st.sampled_from([float("nan"), float("inf"), -float("inf"), -0.0, 2**70, "\u2028", "\x00\"\\"]))
json_like = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
                   | st.dictionaries(st.text(max_size=5), inner, max_size=4)
                   | st.dictionaries(st.integers(0, 9) | st.text(max_size=2), inner, max_size=3)
                   | inner.map(lambda v: [Text("sub"), Number(7), v])),
    max_leaves=25,
)


@settings(max_examples=examples(800), deadline=None)
@given(json_like)
def test_json_indented_is_the_code_it_replaced_and_json_dumps(value: object) -> None:
    new = serialization.json_indented(value)
    assert new == reference_json_indented(value)
    assert new == json.dumps(value, indent=2, ensure_ascii=False)


def test_json_indented_on_what_json_dumps_refuses_or_nests_deep() -> None:
    deep: Any = "x"
    for _ in range(3000):
        deep = [deep]
    with pytest.raises(RecursionError):
        json.dumps(deep, indent=2)
    with pytest.raises(RecursionError):
        serialization.json_indented(deep)
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular"):
        serialization.json_indented(circular)
    with pytest.raises(TypeError):
        serialization.json_indented({"x": object()})
    assert serialization.json_indented({"a": {"b": [1, {"c": []}]}}) == (
        '{\n  "a": {\n    "b": [\n      1,\n      {\n        "c": []\n      }\n    ]\n  }\n}')


# -- task_from_json's quick path -----------------------------------------------------------------

NICE = {
    "id": "t-1", "title": "Write it", "status": "failed", "priority": "P0", "depends_on": ["a", "b.c"],
    "attempts": 1, "max_attempts": 3, "started_at_commit": "abc123",
    "validation": {"command": "true", "timeout_seconds": 60, "other": 1}, "on_failure": {"cleanup": None},
    "error_log": ["[TEST_FAIL] no"], "checkpoints": [{"step": 1, "total": 2, "description": "d", "timestamp": "t"}],
    "completed_at": None, "claimed_by": "w", "lease_expires_at": None, "created_at": "2026-07-01T10:00:00Z",
    "spec_ref": None, "order": 4, "updated_at": "2026-07-01T10:00:01Z", "hlc": "1764590354123.000002.ab",
    "field_clock": {"title": ["x", "y"]}, "failed_at": "2026-07-01T10:00:01Z",
}
odd_values: st.SearchStrategy[object] = st.sampled_from([
    None, 0, 1, -1, True, False, "", " ", "P1", "pending", "in_progress", "x..y", "a.lock", "ok-id", "t\n",
    "12", [], ["a"], ["a", 1], ["bad id"], [{}], {}, {"command": 5}, {"timeout_seconds": "30"},
    {"timeout_seconds": 0}, {"cleanup": 3}, 2**63, 10_001, 1.5, Text("P0"), Number(3),
])


@st.composite
def task_dicts(draw: st.DrawFn) -> dict[str, Any]:
    data = dict(NICE)
    for key in draw(st.lists(st.sampled_from(sorted(NICE)), max_size=4, unique=True)):
        if draw(st.booleans()):
            data.pop(key)
        else:
            data[key] = draw(odd_values)
    if draw(st.booleans()):
        data[draw(st.sampled_from(["check", "cleanup", "extra_field", "timeout_seconds"]))] = draw(odd_values)
    return data


def _full_parse(data: Any, monkeypatch: pytest.MonkeyPatch) -> Task | str:
    with monkeypatch.context() as m:
        m.setattr(serialization, "_well_formed", lambda cls, data: None)
        try:
            return serialization.task_from_json(data, source="t")
        except UsageError as exc:
            return "error: " + exc.message


@settings(max_examples=examples(1500), deadline=None)
@given(task_dicts())
def test_the_quick_parse_builds_what_the_full_parse_builds(data: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        full = _full_parse(data, mp)
    quick = serialization._well_formed(Task, data)
    if quick is not None:  # it never accepts what the full parse refuses, and builds the same task
        assert isinstance(full, Task)
        assert quick == full and quick.__dict__ == full.__dict__
        assert list(quick.extra) == list(full.extra) and serialization.dump_task(quick) == serialization.dump_task(full)
    try:
        answer: Task | str = serialization.task_from_json(data, source="t")
    except UsageError as exc:
        answer = "error: " + exc.message
    assert answer == full  # the same task, or the same error


# A corpus for each row of the task's table: values both parses take (the quick one
# included: it stays the fast path for every value git handoff writes), and values the full
# parse refuses naming the field, which the quick one must answer None to. Held to the table,
# so a new row needs its values here.
_TAKEN: dict[str, list[Any]] = {
    "id": ["a", "t-1.x_2", "A" * 64], "title": ["x", " x ", "t" * 500], "choice": [None],
    "ids": [None, [], ["a", "b.c"]],
    "count": [None], "text": [None, "", "x"], "texts": [None, [], ["e", ""]], "objects": [None, [], [{}, {"a": 1}]],
    "order": [0, -5, 2**70],
}
_REFUSED: dict[str, list[Any]] = {
    "id": [None, 5, "", "a..b", "x.lock", "-a", "a b", "A" * 65], "title": [None, "", "  ", 3, ["t"]],
    "choice": [None, "lost", 1, "p1", "Pending"], "ids": ["b", 3, ["a", 1], ["a..b"], [None]],
    "count": [None, -1, "x", 1.5, True, [], {}], "text": [3, True, [], {}, 1.5], "texts": ["x", 3, [1], [None], [[]]],
    "objects": ["x", 3, ["x"], [None], [[]]], "order": [],
}


def _corpus(table: dict[str, list[Any]], refused: bool) -> list[Any]:
    cases = []
    for row in serialization.TASK_TABLE:
        values = list(table[row.kind])
        if row.kind == "count":
            values = [v for v in values if v is not None] + (
                [row.low - 1, row.high + 1] if refused else [row.default, row.low, row.high])
        if row.kind == "choice" and not refused:
            values += list(row.choices)
        if refused and row.sub is not None:
            values += [_Parent(v) for v in ("make", 3, ["x"], True)]
        cases += [pytest.param(row, v, id=f"{row.name}={v!r}"[:60]) for v in values]
    return cases


@dataclasses.dataclass(frozen=True)
class _Parent:
    """The object a field is inside (validation) set to `value`, not an object."""

    value: Any


def _with(row: serialization.TaskField, value: Any, *, none_is_absent: bool) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(NICE))  # a deep copy of a JSON object
    if isinstance(value, _Parent):
        data[row.key] = value.value
    elif value is None and none_is_absent:
        data.pop(row.key) if row.sub is None else data[row.key].pop(row.sub)  # absent
    elif row.sub is None:
        data[row.key] = value
    else:
        data[row.key][row.sub] = value
    return data


@pytest.mark.parametrize(("row", "value"), _corpus(_TAKEN, refused=False))
def test_the_quick_parse_and_the_full_parse_take_each_good_value_alike(row: Any, value: Any) -> None:
    data = _with(row, value, none_is_absent=row.kind in ("choice", "count"))
    with pytest.MonkeyPatch.context() as mp:
        full = _full_parse(data, mp)
    quick = serialization._well_formed(Task, data)
    assert isinstance(full, Task) and quick is not None, full
    assert quick.__dict__ == full.__dict__ and serialization.dump_task(quick) == serialization.dump_task(full)


@pytest.mark.parametrize(("row", "value"), _corpus(_REFUSED, refused=True))
def test_the_quick_parse_refuses_what_the_full_parse_refuses(row: Any, value: Any) -> None:
    data = _with(row, value, none_is_absent=row.kind in ("id", "title"))
    with pytest.MonkeyPatch.context() as mp:
        full = _full_parse(data, mp)
    assert isinstance(full, str), full  # refused, naming the field (or the id it asks first)
    named = row.key if isinstance(value, _Parent) or row.sub is None else row.sub
    assert named in full or "task id" in full, full
    assert serialization._well_formed(Task, data) is None
    try:
        serialization.task_from_json(data, source="t")
    except UsageError as exc:
        assert "error: " + exc.message == full  # the same refusal through the quick path's fallback
    else:
        raise AssertionError("task_from_json took it")


def test_the_quick_parse_takes_the_task_files_git_handoff_writes() -> None:
    task = Task(id="a1", title="one", depends_on=("b",), error_log=("e",), order=3, created_at="c",
                check="true", extra={"failed_at": "x", "hlc": "1.2.3"})
    parsed = serialization._well_formed(Task, json.loads(serialization.dump_task(task)))
    assert parsed == task and dataclasses.asdict(parsed) == dataclasses.asdict(task)
    assert serialization._well_formed(Task, json.loads(serialization.dump_task(Task(id="b", title="t")))) \
        == Task(id="b", title="t")


# -- stamp_write, moved to hlc.py -------------------------------------------------------------------

records_ = st.dictionaries(
    st.sampled_from(["status", "title", "claimed_by", "attempts", "error_log", "x", "x.y", "updated_at", "hlc",
                     "field_clock", "worktree"]),
    st.none() | st.integers(0, 3) | st.sampled_from(["a", "b", "1764590354123.000002.ab"])
    | st.lists(st.sampled_from(["a", "b"]), max_size=2)
    | st.dictionaries(st.sampled_from(["title", "x.y", "status"]), st.just(["1764590354000.000000.cd", "d"])),
    max_size=6,
)


# The reference is the code before fetched stamps were bounded: the two agree
# wherever every stamp is credible, i.e. no further ahead of `now` than hlc.MAX_SKEW_MS (the
# records' stamps are of 1764590354123 ms at the latest). A stamp beyond the skew is the
# new rule's business: tests/hostile/test_bounds.py and its property test.
CREDIBLE_FROM = 1764590354123 - hlc.MAX_SKEW_MS


@settings(max_examples=examples(600), deadline=None)
@given(st.none() | records_, records_, st.integers(CREDIBLE_FROM, 2_000_000_000_000), st.booleans(), st.booleans())
def test_stamp_write_is_the_code_it_replaced(old: dict[str, Any] | None, new: dict[str, Any], now: int,
                                             task: bool, fields: bool) -> None:
    from git_handoff.core import merge

    expected = reference_stamp_write(old, new, now, "ab12", task=task, fields=fields)
    got = hlc.stamp_write(old, new, now, "ab12", task=task, fields=fields)
    assert got == expected and list(got) == list(expected)
    assert merge.stamp_write is hlc.stamp_write


# -- the clock ------------------------------------------------------------------------------------


def test_now_iso_and_now_ms_read_what_now_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GIT_HANDOFF_NOW", raising=False)
    for _ in range(3):
        before = model.iso(model.now())
        text = model.now_iso()
        after = model.iso(model.now())
        assert before <= text <= after
        ms_before = int(model.now().timestamp() * 1000)
        ms = model.now_ms()
        assert ms_before <= ms <= int(model.now().timestamp() * 1000) + 1
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00.250+02:00")
    assert model.now_iso() == model.iso(model.now()) == "2026-07-01T08:00:00Z"
    assert model.now_ms() == int(model.now().timestamp() * 1000)
    monkeypatch.setenv("GIT_HANDOFF_NOW", "soon")
    for _ in range(2):  # a bad value is refused every time, never remembered
        with pytest.raises(UsageError, match="not an ISO-8601 time"):
            model.now_iso()
        with pytest.raises(UsageError, match="not an ISO-8601 time"):
            model.now_ms()


# -- blobs ----------------------------------------------------------------------------------------


def test_many_blobs_go_into_one_pack_with_the_oids_git_gives_them(repo: Path) -> None:
    r = Repo.discover(repo)
    datas = [f'{{"n": {i}}}\n'.encode() for i in range(gitrepo.PACKED_BLOBS + 8)] + [b"", b"\x00\xff"]
    packs_before = set((r.common_dir / "objects" / "pack").glob("*.pack"))
    oids = r.write_blobs(datas)
    expected = [subprocess.run(["git", "hash-object", "--stdin"], input=d, capture_output=True, check=True,
                               cwd=repo).stdout.decode().strip() for d in datas]
    assert oids == expected
    assert [r.read_blob(o) for o in oids] == datas
    assert len(set((r.common_dir / "objects" / "pack").glob("*.pack")) - packs_before) == 1
    few = r.write_blobs([b"one\n", b"two\n"])  # a few: loose, in-process
    assert [r.read_blob(o) for o in few] == [b"one\n", b"two\n"]
    with pytest.raises(KeyError):
        r.read_blob("0" * 40)


def _same_secret(*repos: Path) -> None:
    for path in repos:
        handoff = path / ".git" / "handoff"
        handoff.mkdir(exist_ok=True)
        (handoff / identity.SECRET_FILE).write_text("11" * 32 + "\n")


def reference_put_task(self: store.Tx, task: Task) -> Task:
    """Tx.put_task before the bulk-path work."""
    before = self.task(task.id)
    if before is None:
        when = hlc.next_stamp(hlc.seen_in(task.extra), int(model.now().timestamp() * 1000),
                              identity.clone_id(self.store.repo))
        task = task.evolve(updated_at=model.iso(model.now()), extra={**task.extra, "hlc": when})
    else:
        new = serialization.task_to_json(task.evolve(updated_at=model.iso(model.now())))
        stamped = self.stamped(serialization.task_to_json(before), new, task=True)
        extra = {k: v for k, v in task.extra.items() if k != "field_clock"}
        extra["hlc"] = stamped["hlc"]
        if "field_clock" in stamped:
            extra["field_clock"] = stamped["field_clock"]
        task = task.evolve(updated_at=new["updated_at"], extra=extra)
    self._tasks[task.id] = task
    self.put(snapshot.task_path(task.id), serialization.dump_task(task))
    return task


def _reference_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """The write and read paths as they were: loose blobs, the old layout and parse, the
    old stamp, the clock and the clone id read per call, blobs looked up by hex text."""
    monkeypatch.setattr(store.Tx, "put_task", reference_put_task)
    monkeypatch.setattr(serialization, "json_indented", reference_json_indented)
    monkeypatch.setattr(serialization, "_well_formed", lambda cls, data: None)
    monkeypatch.setattr(hlc, "stamp_write", reference_stamp_write)
    monkeypatch.setattr(store, "now_iso", lambda: model.iso(model.now()))
    monkeypatch.setattr(store, "now_ms", lambda: int(model.now().timestamp() * 1000))
    monkeypatch.setattr(identity, "_ids", type("Never", (dict,), {"get": lambda self, k, d=None: None})())
    monkeypatch.setattr(Repo, "write_blobs", lambda self, datas: [self.write_blob(d) for d in datas])
    monkeypatch.setattr(Repo, "read_blob", lambda self, oid: bytes(self.raw[oid].data))
    monkeypatch.setattr(Repo, "tree_files", lambda self, tree, suffix="": [
        (name, bytes(self.raw[oid].data)) for name, oid, is_tree in self.tree_entries(tree)
        if not is_tree and name.endswith(suffix)])


def _cycle_then_claim(path: Path, n: int) -> tuple[str, list[str], list[str]]:
    """A state of `n` tasks on one cycle plus a free one, then a claim (it fails the cycle
    and takes the free task), then a change of every title: (state tree, log lines,
    state commits)."""
    from tests.support.repo import make_repo

    make_repo(path)
    _same_secret(path)
    repo = Repo.discover(path)
    st_ = StateStore(repo, session=0)
    task_ops.init(st_, mode="concurrent")

    def apply(tx: store.Tx) -> None:
        for i in range(n):
            tx.put_task(Task(id=f"c{i:03d}", title=f"Task {i}", depends_on=(f"c{(i + 1) % n:03d}",),
                             created_at="2026-07-01T10:00:00Z", order=i + 1, check="true",
                             extra={"zz_note": i} if i % 2 else {}))
        tx.put_task(Task(id="free", title="The free one", created_at="2026-07-01T10:00:00Z", order=n + 1))
        tx.log("INIT", f"Imported {n + 1} task(s)")

    st_.transact(apply)
    # the same claiming worktree in both repositories (the claim records it)
    ctx = dataclasses.replace(claim_ops.claim_context(repo, worker="w1"), worktree="/wt", head="ab" * 20)
    claimed = st_.transact(lambda tx: claim_ops.claim_in_tx(tx, ctx=ctx))
    assert claimed is not None and claimed.id == "free"

    def retitle(tx: store.Tx) -> None:  # records that carry a stamp and a field clock already
        for n, task in enumerate(list(tx.tasks().values())):
            renamed = dataclasses.replace(task, title=task.title + " (renamed)")
            tx.put_task(renamed.with_extra(renamed_by="w1") if n % 3 else renamed)  # a key after the clock
        tx.log("INIT", "Renamed every task")

    st_.transact(retitle)
    head = st_.head()
    assert head is not None
    commits = list(repo.walk(head))
    lines = [line for c in commits for line in repo.commit_info(c)[0].splitlines()]
    return repo.commit_tree(head), lines, commits


def test_a_big_claim_writes_the_state_the_old_code_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T12:00:00Z")
    n = gitrepo.PACKED_BLOBS + 20  # past the packed-write threshold
    new_path, old_path = tmp_path / "new", tmp_path / "old"
    new_tree, new_lines, new_commits = _cycle_then_claim(new_path, n)
    with monkeypatch.context() as m:
        _reference_code(m)
        old_tree, old_lines, old_commits = _cycle_then_claim(old_path, n)
    assert new_tree == old_tree  # every blob and tree byte for byte (content-addressed)
    assert new_lines == old_lines
    assert sum(" ERROR [c" in line for line in new_lines) == n
    assert sum(" Starting [free]" in line for line in new_lines) == 1
    assert len(new_commits) == len(old_commits) == 4
    # the new state went through the pack, the reference through loose objects
    assert list((new_path / ".git" / "objects" / "pack").glob("*.pack"))
    # and a task file reads back (by the quick parse) as the task the full parse gives
    r = Repo.discover(new_path)
    snap = StateStore(r, session=0).snapshot()
    failed = snap.tasks()["c005"]
    assert failed.status == "failed" and failed.error_log[-1].startswith("[DEPENDENCY] Circular dependency")
    assert failed.title == "Task 5 (renamed)" and failed.extra["zz_note"] == 5
    assert set(failed.extra["field_clock"]) == {"claim", "title", "renamed_by"} and failed.extra["renamed_by"] == "w1"
    raw = snap.read(snapshot.task_path("c005"))
    assert raw is not None and raw == (json.dumps(json.loads(raw), indent=2, ensure_ascii=False) + "\n").encode()


# -- import cost ----------------------------------------------------------------------------------


def test_commands_that_do_not_merge_do_not_import_merge(repo: Path) -> None:
    code = ("import sys; import git_handoff.state.store, git_handoff.ops.claim, git_handoff.ops.work, "
            "git_handoff.ops.views, git_handoff.ops.tasks; "
            "print(any(m in sys.modules for m in ('git_handoff.core.merge', 'git_handoff.core.field_merge')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.stdout.strip() == "False"
