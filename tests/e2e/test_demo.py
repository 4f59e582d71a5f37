"""`git handoff demo`: the whole product, run as a user would."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from git_handoff.cli.demo import DemoResult
from git_handoff.ops import demo
from tests.support.remotes import published
from tests.support.repo import git, run, run_exe, state_record
from tests.support.shapes import shape_problems


@pytest.mark.slow
def test_demo_runs_end_to_end_and_keeps_its_repositories(tmp_path: Path) -> None:
    """The whole demo, once (it takes most of a minute): with --json, so the one-object
    JSON contract is checked on the same run as everything the demo shows."""
    kept = tmp_path / "kept"
    started = time.monotonic()
    res = run_exe("demo", "--keep", str(kept), "--json", cwd=tmp_path, timeout=300)
    elapsed = time.monotonic() - started
    assert res.rc == 0, res.out[-3000:] + res.err
    value = json.loads(res.out)  # one JSON object and nothing else on stdout
    assert isinstance(value, dict) and value["ok"] is True and value["kept"] is True
    assert shape_problems(value, DemoResult, "demo") == []
    assert value["repository"] == str(kept.resolve())
    out = "\n".join(value["transcript"])
    for section in ("== 1.", "== 2.", "== 3.", "== 4.", "== 5.", "== 6.", "== 7."):
        assert section in out
    # at least two sessions handed off by the post-commit hook, under the relay
    assert out.count("(trigger=commits") >= 2
    assert "relay: session 2: acknowledged" in out
    assert "max_sessions (2) reached" in out and "(exit 1, as expected)" in out
    # the failed attempt: rolled back, then its files restored
    assert "ROLLBACK [api]" in out and "not yet api" in out
    assert "Restored attempt 1 of api" in out
    # the second clone finished the work through the bare remote
    assert "relay finished: all 5 task(s) completed" in out
    assert "tasks: 5  completed=5" in out
    alice, bob = kept / "alice", kept / "bob"
    state = git("rev-parse", "refs/harness/state", cwd=alice)
    assert state == git("rev-parse", "refs/harness/state", cwd=bob)
    # each clone published its state to its own ref on the remote
    for clone in (alice, bob):
        assert state == git("--git-dir", str(kept / "origin.git"), "rev-parse", published(clone), cwd=kept)
    listed = run("list", "--json", cwd=alice).json()
    assert sorted(t["id"] for t in listed) == ["api", "cli", "docs", "schema", "tests"]
    assert all(t["status"] == "completed" for t in listed)
    assert git("rev-parse", "--verify", "refs/harness/attempts/api/1", cwd=alice)
    docs = [json.loads(state_record("docs", n, cwd=alice)) for n in (1, 2)]
    assert all(d["trigger"] == "commits" for d in docs)
    assert git("status", "--porcelain", cwd=alice) == ""
    stats = [line.split("] ", 1)[1] for line in run("log", "--type", "STATS", cwd=alice).out.splitlines()]
    assert len(stats) == len(set(stats)), "a STATS line is repeated"
    print(f"\ndemo: {elapsed:.1f}s")


def test_demo_keep_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "file").write_text("mine\n")
    res = run("demo", "--keep", str(target))
    assert res.rc == 2 and "not an empty directory" in res.err
    assert sorted(p.name for p in target.iterdir()) == ["file"]


def test_demo_removes_its_throwaway_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Path] = []

    def fake_run(self: demo.Demo) -> None:
        seen.append(self.root)
        assert (self.root / "bin" / "git-handoff").exists()

    monkeypatch.setattr(demo.Demo, "run", fake_run)
    lines: list[str] = []
    demo.run_demo(None, lines.append)
    assert seen and not seen[0].exists()
    assert lines[0] == f"# git handoff demo in {seen[0]}"


def test_demo_text_output_names_the_kept_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The text form of `demo --keep` (the end-to-end run above uses --json)."""
    monkeypatch.setattr(demo.Demo, "run", lambda self: self.say("== 1. a step"))
    kept = tmp_path / "kept"
    res = run("demo", "--keep", str(kept))
    assert res.rc == 0, res.err
    lines = res.out.splitlines()
    assert lines[0] == f"# git handoff demo in {kept.resolve()}" and "== 1. a step" in lines
    assert lines[-1] == f"kept: {kept.resolve()}"
