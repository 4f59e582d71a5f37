"""dispatch: runs of a scripted backend, in the foreground and the background."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from git_handoff.infra import procs
from tests.support.repo import dispatch_record, git, run, run_exe, state_head

BACKEND = r'''
import json, os, sys, time
from pathlib import Path
args = sys.argv[1:]
prompt = sys.stdin.read()
spool = Path(os.environ["SPOOL"])
assert Path(os.environ["HANDOFF_PROMPT_FILE"]).read_text() == prompt
if prompt.startswith("barrier"):
    # wait until every run of the batch has started: proves they run in parallel
    (spool / f"started-{os.getpid()}").write_text("")
    deadline = time.time() + 60
    while len(list(spool.glob("started-*"))) < int(prompt.split()[1]) and time.time() < deadline:
        time.sleep(0.02)
if prompt.startswith("fail"):
    print("partial output before the failure")
    print("backend exploded", file=sys.stderr)
    sys.exit(3)
if prompt.startswith("hang"):
    time.sleep(300)
if args[:1] == ["--resume"]:
    (spool / "resumed-with").open("a").write(args[1] + "\n")
    sid = args[1]
else:
    sid = f"sess-{os.getpid()}"
print("working on:", prompt.strip())
print(json.dumps({"session_id": sid, "result": f"answer to {prompt.strip()}"}))
'''


@pytest.fixture
def backend(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    assert run("init").rc == 0
    script = tmp_path / "backend.py"
    script.write_text(BACKEND)
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setenv("SPOOL", str(spool))
    git("config", "handoff.backend.bot.command", f"{sys.executable} {script}", cwd=repo)
    git("config", "handoff.backend.bot.resume", f"{sys.executable} {script} --resume {{session_id}}", cwd=repo)
    git("config", "handoff.backend.plain.command", "cat", cwd=repo)
    return spool


def new(slug: str, prompt: str, backend: str = "bot") -> str:
    res = run("dispatch", "new", "--backend", backend, "--slug", slug, stdin=prompt)
    assert res.rc == 0, res.err
    return res.out.strip()


def test_new_prints_run_id_and_records_one_blob_per_run(repo: Path, backend: Path) -> None:
    first = new("fix-auth", "do it")
    second = new("write-docs", "docs")
    assert first == "001-fix-auth"
    assert second == "002-write-docs"
    record = json.loads(dispatch_record(first, cwd=repo))
    assert record["status"] == "new" and record["prompt"] == "do it" and record["backend"] == "bot"
    listed = run("dispatch", "list", "--json").json()
    assert [r["run_id"] for r in listed] == [first, second]


@pytest.mark.parametrize("slug", [
    "2026-07-01", "20260701", "42", "fix-42", "Fix-auth", "fix_auth", "fix auth", "a-b-c-d", "fix--auth",
    "-fix", "fix-", "", "fix.auth", "über", "0720-op-06",
])
def test_bad_slugs_are_refused_and_nothing_changes(repo: Path, backend: Path, slug: str) -> None:
    before = state_head(repo)
    res = run("dispatch", "new", "--backend", "bot", "--slug", slug, stdin="x")
    assert res.rc == 2, res
    assert res.err.startswith("error: ") and len(res.err.strip().splitlines()) == 1
    assert state_head(repo) == before


@pytest.mark.parametrize("args,stdin", [
    (["dispatch", "new", "--backend", "nosuch", "--slug", "fix"], "x"),
    (["dispatch", "new", "--backend", "bot", "--slug", "fix"], "   \n"),
    (["dispatch", "run", "999-nope"], None),
    (["dispatch", "run", "../../etc"], None),
    (["dispatch", "result", "001"], None),
    (["dispatch", "wait", "999-nope"], None),
])
def test_bad_input_exit_2(repo: Path, backend: Path, args: list[str], stdin: str | None) -> None:
    before = state_head(repo)
    res = run(*args, stdin=stdin)
    assert res.rc == 2, res
    assert state_head(repo) == before


def test_foreground_run_prints_result_and_keeps_output(repo: Path, backend: Path) -> None:
    run_id = new("fix-auth", "the question")
    res = run_exe("dispatch", "run", run_id, cwd=repo)
    assert res.rc == 0, res.err
    assert res.out.strip() == "answer to the question"
    record = run("dispatch", "result", run_id, "--json").json()
    assert record["status"] == "succeeded" and record["exit_status"] == 0
    assert record["session_id"].startswith("sess-")
    assert "working on: the question" in record["stdout_tail"]
    before = state_head(repo)
    assert run("dispatch", "run", run_id).rc == 2  # a run runs once; its results are kept
    assert run("dispatch", "run", run_id, "--background").rc == 2
    assert state_head(repo) == before


@pytest.mark.slow  # four background runners waiting on each other: the slow layer
def test_four_runs_in_parallel_in_the_background(repo: Path, backend: Path) -> None:
    ids = [new(slug, f"barrier 4 {slug}") for slug in ("one", "two", "three", "four")]
    for run_id in ids:
        res = run_exe("dispatch", "run", run_id, "--background", cwd=repo)
        assert res.rc == 0, res.err
        assert res.out.strip() == run_id
    res = run_exe("dispatch", "wait", *ids, "--timeout", "90", cwd=repo)
    assert res.rc == 0, res.out + res.err
    assert len(list(backend.glob("started-*"))) == 4  # every run was running while the others waited
    for run_id, slug in zip(ids, ("one", "two", "three", "four"), strict=True):
        assert run("dispatch", "result", run_id).out.strip() == f"answer to barrier 4 {slug}"
    assert all(r["status"] == "succeeded" for r in run("dispatch", "list", "--json").json())


def test_failing_backend_exit_status_and_output_are_kept(repo: Path, backend: Path) -> None:
    fg = new("fail-fast", "fail now")
    res = run_exe("dispatch", "run", fg, cwd=repo)
    assert res.rc == 1  # a failed backend is a negative answer (exit 1); its own status 3 is in the message
    assert res.err.startswith("error: ") and "backend exit status 3" in res.err and len(res.err.splitlines()) == 1
    bg = new("fail-later", "fail later")
    assert run_exe("dispatch", "run", bg, "--background", cwd=repo).rc == 0
    waited = run_exe("dispatch", "wait", bg, "--timeout", "60", cwd=repo)
    assert waited.rc == 1 and "failed" in waited.out
    for run_id in (fg, bg):
        record = json.loads(dispatch_record(run_id, cwd=repo))
        assert record["status"] == "failed" and record["exit_status"] == 3
        assert "partial output before the failure" in record["stdout_tail"]
        assert "backend exploded" in record["stderr_tail"]
        assert "partial output" in record["output"] and "backend exploded" in record["output"]
    res = run("dispatch", "result", bg)
    assert res.rc == 1 and "partial output" in res.out


def test_resume_passes_the_first_runs_session_id(repo: Path, backend: Path) -> None:
    first = new("fix-auth", "first round")
    assert run_exe("dispatch", "run", first, cwd=repo).rc == 0
    sid = run("dispatch", "result", first, "--json").json()["session_id"]
    res = run_exe("dispatch", "resume", first, cwd=repo, stdin="second round")
    assert res.rc == 0, res.err
    lines = res.out.strip().splitlines()
    assert lines[0] == "002-fix-auth" and lines[-1] == "answer to second round"
    res = run_exe("dispatch", "resume", first, "--background", cwd=repo, stdin="third round")
    assert res.rc == 0
    third = res.out.strip()
    assert run_exe("dispatch", "wait", third, cwd=repo).rc == 0
    assert (backend / "resumed-with").read_text().split() == [sid, sid]
    record = run("dispatch", "result", third, "--json").json()
    assert record["resume_of"] == first and record["conversation"] == first


def test_resume_refusals(repo: Path, backend: Path) -> None:
    never_ran = new("fix-auth", "not run")
    assert run("dispatch", "resume", never_ran, stdin="more").rc == 2
    plain = new("plain-run", "hello", backend="plain")
    assert run_exe("dispatch", "run", plain, cwd=repo).rc == 0
    before = state_head(repo)
    res = run("dispatch", "resume", plain, stdin="more")
    assert res.rc == 2 and "resume" in res.err
    assert state_head(repo) == before


@pytest.mark.slow  # several processes racing: the slow layer
def test_sequence_numbers_are_unique_under_concurrency(repo: Path, backend: Path) -> None:
    env = dict(os.environ)
    procs = [
        subprocess.Popen([sys.executable, "-m", "git_handoff", "dispatch", "new", "-b", "bot", "-s", "race"],
                         cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(6)
    ]
    outs = [p.communicate("go")[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(outs) == [f"{n:03d}-race" for n in range(1, 7)]


def test_wait_and_result_on_unfinished_runs(repo: Path, backend: Path) -> None:
    fresh = new("not-started", "x")
    assert run("dispatch", "wait", fresh).rc == 2
    hang = new("hang-on", "hang")
    assert run_exe("dispatch", "run", hang, "--background", cwd=repo).rc == 0
    assert run("dispatch", "result", hang).rc == 1
    assert run("dispatch", "wait", hang, "--timeout", "0.3").rc == 1
    # the runner dies (machine rebooted, process killed): the run is reported lost, not running forever
    record = json.loads(dispatch_record(hang, cwd=repo))
    pid = record["pid"]
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while procs.alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    res = run("dispatch", "wait", hang, "--json")
    assert res.rc == 1
    assert res.json()[0]["status"] == "failed" and res.json()[0]["lost"] is True


def test_dispatch_run_of_a_failing_backend_exits_1_with_its_status(repo: Path) -> None:
    assert run("init").rc == 0
    for status in (2, 3, 130):
        git("config", "handoff.backend.bad.command", f"cat >/dev/null; echo boom; exit {status}", cwd=repo)
        for extra in ([], ["--json"]):
            run_id = run("dispatch", "new", "--backend", "bad", "--slug", "boom", stdin="x\n").out.strip()
            r = run("dispatch", "run", run_id, *extra)
            assert r.rc == 1, r
            assert r.err.startswith("error: ") and len(r.err.splitlines()) == 1
            assert f"backend exit status {status}" in r.err
            if extra:
                record = json.loads(r.out)
                assert record["status"] == "failed" and record["exit_status"] == status
                assert r.out.count("\n") == 1  # one JSON document, printed once
