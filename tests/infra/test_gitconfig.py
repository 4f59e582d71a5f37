"""Configuration as git users give it: `git -c`, GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT,
`git -C`, GIT_DIR / GIT_WORK_TREE (`git --git-dir --work-tree`), each honoured as git
itself honours it (the quoting checked against the real git), and HANDOFF_WORKER: several
workers in one work tree, each acting on its own claims only."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra import gitconfig
from tests.support.repo import git, run, state_head

# -- the quoting, against the real git ------------------------------------------------------------

VALUES = ["plain", "two words", "it's", "a'b'c", "''", "wow!", "'!'", "back\\slash", "line\nbreak", "a=b=c",
          "", " lead and trail ", "tab\there", "ünïcødé ✓", "\\'", "!'!", "$HOME `x`"]


def _capture_script(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An external git command (`git capture`) writing the GIT_CONFIG_PARAMETERS git passed it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    out = tmp_path / "captured"
    script = bindir / "git-capture"
    script.write_text(f'#!/bin/sh\nprintf %s "$GIT_CONFIG_PARAMETERS" > "{out}"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}, out


def _git_reads(env_vars: dict[str, str], cwd: Path) -> tuple[int, list[tuple[str, str | None]]]:
    """What the real git reads from these variables: (exit code, [(key, value or None)]) of
    the `t.*` keys, in order."""
    proc = subprocess.run(["git", "config", "--list", "-z"], cwd=cwd, capture_output=True,
                          env={**os.environ, **env_vars})
    entries = []
    for item in proc.stdout.decode().split("\0"):
        key, sep, value = item.partition("\n")
        if key.startswith("t."):
            entries.append((key, value if sep else None))
    return proc.returncode, entries


def _ours(env_vars: dict[str, str]) -> list[tuple[str, str | None]] | None:
    try:
        return sorted(gitconfig.from_environment(env_vars).items())
    except UsageError:
        return None


def test_git_c_values_come_back_exactly(tmp_path: Path) -> None:
    env, captured = _capture_script(tmp_path)
    for value in VALUES:
        args = ["git", "-c", f"t.Sub Section.Key={value}", "-c", "t.flag", "-c", "t.empty=", "capture"]
        subprocess.run(args, cwd=tmp_path, env=env, check=True)
        text = captured.read_text()
        assert gitconfig.parse_parameters(text) == [("t.Sub Section.Key", value), ("t.flag", None), ("t.empty", "")]
        assert gitconfig.from_environment({"GIT_CONFIG_PARAMETERS": text}) == {
            "t.Sub Section.key": value, "t.flag": None, "t.empty": ""}
        assert _git_reads({"GIT_CONFIG_PARAMETERS": text}, tmp_path) == (0, [
            ("t.Sub Section.key", value), ("t.flag", None), ("t.empty", "")])


HAND_WRITTEN = [
    "'t.a=old style'",
    "'t.a=x' 't.b'",  # old style, no value
    "  't.a'='1'   't.b'='2'  ",
    "'T.A'='upper'",
    "'t.a'='x'\\''y'",
    "'t.a'='x'\\!'y'",
    "'t.a'=",
    "'t.a'= 't.b'='c'",
    "'t.a'='1' 't.a'='2'",  # the last one wins
    "' t.a =spaced'",
    # refused by git: each is a bogus format or a bad key
    "'t.a",
    "'t.a'x",
    "'t.a'='v'x",
    "'t.a'=v",
    "t.a=v",
    "'t.a'='v",
    "'t.a'\\x'",
    "'notakey'='v'",
    "'t.'='v'",
    "'t.1a'='v'",
    "'=v'",
]


@pytest.mark.parametrize("text", HAND_WRITTEN)
def test_hand_written_parameters_read_as_git_reads_them(tmp_path: Path, text: str) -> None:
    rc, theirs = _git_reads({"GIT_CONFIG_PARAMETERS": text}, tmp_path)
    ours = _ours({"GIT_CONFIG_PARAMETERS": text})
    if rc != 0:
        assert ours is None, f"git refuses {text!r}, we read {ours}"
    else:
        assert ours == sorted(dict(theirs).items())


COUNTED = [
    {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "t.a", "GIT_CONFIG_VALUE_0": "it's",
     "GIT_CONFIG_KEY_1": "T.Sub.B", "GIT_CONFIG_VALUE_1": ""},
    {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "t.a", "GIT_CONFIG_VALUE_0": "counted",
     "GIT_CONFIG_PARAMETERS": "'t.a'='given'"},  # git -c wins over GIT_CONFIG_COUNT
    {"GIT_CONFIG_COUNT": "", "GIT_CONFIG_KEY_0": "t.a", "GIT_CONFIG_VALUE_0": "x"},
    {"GIT_CONFIG_COUNT": " +1", "GIT_CONFIG_KEY_0": "t.a", "GIT_CONFIG_VALUE_0": "x"},
    {"GIT_CONFIG_COUNT": "0"},
    {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "t.a", "GIT_CONFIG_VALUE_0": "x"},  # missing KEY_1
    {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "t.a"},  # missing VALUE_0
    {"GIT_CONFIG_COUNT": "one"},
    {"GIT_CONFIG_COUNT": "1x"},
    {"GIT_CONFIG_COUNT": "-1"},
    {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "", "GIT_CONFIG_VALUE_0": "x"},
    {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "nosection", "GIT_CONFIG_VALUE_0": "x"},
]


@pytest.mark.parametrize("variables", COUNTED)
def test_config_count_reads_as_git_reads_it(tmp_path: Path, variables: dict[str, str]) -> None:
    rc, theirs = _git_reads(variables, tmp_path)
    ours = _ours(variables)
    if rc != 0:
        assert ours is None, f"git refuses {variables}, we read {ours}"
    else:
        assert ours == sorted(dict(theirs).items())


BOOLS = ["true", "Yes", "ON", "false", "no", "Off", "", "0", "1", "2", "-3", "0x10", "1k", "maybe", " true", "truthy"]
INTS = ["0", "42", "-7", "+5", " 9", "0x1f", "0X1F", "017", "08", "1k", "2M", "3g", "-1k", "1kb", "1.5", "", "x",
        "9223372036854775807", "8g"]


@pytest.mark.parametrize("kind, values", [("bool", BOOLS), ("int", INTS)])
def test_typed_values_read_as_git_reads_them(tmp_path: Path, kind: str, values: list[str]) -> None:
    for value in [*values, None]:
        given = "'t.v'" if value is None else "'t.v'='" + value.replace("'", "'\\''") + "'"
        proc = subprocess.run(["git", "config", f"--type={kind}", "--get", "t.v"], cwd=tmp_path, capture_output=True,
                              text=True, env={**os.environ, "GIT_CONFIG_PARAMETERS": given})
        try:
            ours: bool | int | None = (gitconfig.parse_bool("t.v", value) if kind == "bool"
                                       else gitconfig.parse_int("t.v", value))
        except UsageError:
            ours = None
        if kind == "int" and value is not None and proc.returncode == 0 and abs(int(proc.stdout)) > 2**31:
            continue  # git's `--type=int` stops at 32 bits; our counts take TOML's 64
        if proc.returncode != 0:
            # git's int() refuses what does not fit 32 bits, which ours (64) takes
            assert ours is None or (kind == "int" and abs(int(ours)) >= 2**31), (value, ours, proc.stderr)
        elif kind == "bool":
            assert ours == (proc.stdout.strip() == "true"), (value, ours)
        else:
            assert ours == int(proc.stdout), (value, ours)


# -- the commands, through git ---------------------------------------------------------------------


@pytest.fixture
def planned(repo: Path) -> Path:
    assert run("init").rc == 0
    for n in (1, 2):
        assert run("add", f"Task {n}", "--id", f"t{n}", "--check", "true").rc == 0
    return repo


def _git(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=120)


def _task(repo: Path, task_id: str) -> dict[str, object]:
    shown = run("show", task_id, "--json", cwd=repo)
    assert shown.rc == 0, shown
    result: dict[str, object] = shown.json()
    return result


def test_git_c_sets_the_worker_of_a_claim(planned: Path) -> None:
    git("config", "handoff.worker", "from-file", cwd=planned)
    proc = _git("-c", "handoff.worker=it's me!", "handoff", "claim", "--json", cwd=planned)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["claimed_by"] == "it's me!"


def test_git_config_parameters_reach_git_handoff_itself(planned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'handoff.Worker'='param worker'")
    assert run("claim", "--json").json()["claimed_by"] == "param worker"
    run("release", "t1")
    monkeypatch.delenv("GIT_CONFIG_PARAMETERS")
    for name, value in (("GIT_CONFIG_COUNT", "1"), ("GIT_CONFIG_KEY_0", "handoff.worker"),
                        ("GIT_CONFIG_VALUE_0", "counted worker")):
        monkeypatch.setenv(name, value)
    assert run("claim", "--json").json()["claimed_by"] == "counted worker"


def test_a_boolean_given_on_the_command_line_is_read_as_git_reads_it(planned: Path) -> None:
    before = state_head(planned)
    proc = _git("-c", "handoff.syncClaims=maybe", "handoff", "claim", cwd=planned)
    assert proc.returncode == 2
    assert proc.stderr == "error: bad boolean config value 'maybe' for 'handoff.syncClaims'\n"
    assert state_head(planned) == before
    # a key without a value is true: the claim goes through the (missing) remote, and says so
    proc = _git("-c", "handoff.syncClaims", "handoff", "claim", cwd=planned)
    assert proc.returncode != 0 and "origin" in proc.stderr
    assert state_head(planned) == before


def test_bogus_config_parameters_are_refused_in_one_line(planned: Path) -> None:
    before = state_head(planned)
    proc = subprocess.run(["git-handoff", "claim"], cwd=planned, capture_output=True, text=True,
                          env={**os.environ, "GIT_CONFIG_PARAMETERS": "'handoff.worker'='x"})
    assert (proc.returncode, proc.stderr) == (2, "error: bogus format in GIT_CONFIG_PARAMETERS\n")
    assert state_head(planned) == before


def test_git_dash_c_directory_with_settings(planned: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (planned / "sub").mkdir()
    proc = _git("-C", str(planned / "sub"), "-c", "handoff.worker=via -C", "handoff", "claim", "--json", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    claimed = json.loads(proc.stdout)
    assert (claimed["claimed_by"], claimed["worktree"]) == ("via -C", str(planned))


def test_git_dir_and_work_tree_name_the_repository(planned: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    make = subprocess.run(["git", "init", "-q", str(elsewhere)], capture_output=True)
    assert make.returncode == 0  # a repository of its own, which must not be the one used
    rel_git_dir = os.path.relpath(planned / ".git", elsewhere)
    rel_tree = os.path.relpath(planned, elsewhere)
    proc = _git(f"--git-dir={rel_git_dir}", f"--work-tree={rel_tree}", "handoff", "claim", "--json", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["worktree"] == str(planned)
    assert not subprocess.run(["git", "rev-parse", "-q", "--verify", "refs/harness/state"], cwd=elsewhere,
                              capture_output=True).stdout
    # the environment's form, and a rollback that runs git in the work tree
    (planned / "scratch.txt").write_text("made by the attempt\n")
    proc = _git("handoff", "fail", "t1", "--reason", "no", "--json", cwd=elsewhere,
                env={"GIT_DIR": rel_git_dir, "GIT_WORK_TREE": rel_tree})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rolled_back"] is True
    assert not (planned / "scratch.txt").exists()
    assert git("show", "refs/harness/attempts/t1/1:scratch.txt", cwd=planned) == "made by the attempt"


def test_git_dir_without_work_tree_makes_the_current_directory_the_work_tree(planned: Path) -> None:
    sub = planned / "sub"
    sub.mkdir()
    env = {"GIT_DIR": str(planned / ".git")}
    top = _git("rev-parse", "--show-toplevel", cwd=sub, env=env).stdout.strip()
    assert top == str(sub)  # git's rule
    proc = _git("handoff", "claim", "--json", cwd=sub, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["worktree"] == top


def test_a_git_dir_that_is_not_one_is_refused(planned: Path, tmp_path: Path) -> None:
    before = state_head(planned)
    proc = _git("handoff", "claim", cwd=planned, env={"GIT_DIR": str(tmp_path / "nothing")})
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: not a git repository: ") and proc.stderr.count("\n") == 1
    assert state_head(planned) == before


def test_ceiling_directories_stop_the_search(planned: Path) -> None:
    sub = planned / "sub"
    sub.mkdir()
    proc = _git("handoff", "status", cwd=sub, env={"GIT_CEILING_DIRECTORIES": str(planned)})
    assert proc.returncode == 2 and "not a git repository" in proc.stderr
    assert _git("status", cwd=sub, env={"GIT_CEILING_DIRECTORIES": str(planned)}).returncode != 0


# -- several workers in one work tree -------------------------------------------------------------


def test_two_workers_in_one_work_tree_keep_their_claims_apart(planned: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run("init", "--mode", "concurrent")
    monkeypatch.setenv("HANDOFF_WORKER", "alice")
    assert run("claim", "t1", "--json").json()["claimed_by"] == "alice"
    monkeypatch.setenv("HANDOFF_WORKER", "bob")
    before = state_head(planned)
    for args in (("renew", "t1"), ("release", "t1"), ("checkpoint", "t1", "mine now"), ("done", "t1"),
                 ("fail", "t1", "--reason", "x")):
        res = run(*args)
        assert res.rc == 2, (args, res)
        assert "claimed by alice, another worker in this worktree" in res.err and "you are bob" in res.err
        assert res.err.count("\n") == 1
    taken = run("claim")
    assert taken.rc == 3 and "this worktree already holds task t1" in taken.err
    assert state_head(planned) == before
    monkeypatch.setenv("HANDOFF_WORKER", "alice")
    assert run("checkpoint", "t1", "still mine").rc == 0
    monkeypatch.setenv("HANDOFF_WORKER", "bob")
    monkeypatch.delenv("HANDOFF_WORKER")  # no worker named: the worktree's claims are everybody's here
    assert run("checkpoint", "t1", "a person at the shell").rc == 0
    monkeypatch.setenv("HANDOFF_WORKER", "bob")
    assert run("release", "t1", "--force").rc == 0  # a person can override
    assert _task(planned, "t1")["status"] == "pending"


def test_a_worker_may_act_on_another_workers_claim_once_its_lease_is_over(
        planned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:00:00Z")
    monkeypatch.setenv("HANDOFF_WORKER", "alice")
    run("claim", "t1", "--lease", "60s")
    monkeypatch.setenv("HANDOFF_WORKER", "bob")
    assert run("renew", "t1").rc == 2
    monkeypatch.setenv("GIT_HANDOFF_NOW", "2026-07-01T10:01:01Z")
    assert run("release", "t1").rc == 0


def test_imported_claims_of_harness_workers_stay_theirs(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run("init", "--mode", "concurrent")
    head = git("rev-parse", "HEAD", cwd=repo)
    plan = {"version": 2, "tasks": [
        {"id": f"w{n}", "title": f"Worker {n}'s", "status": "in_progress", "claimed_by": f"agent-{n}",
         "started_at_commit": head, "lease_expires_at": "2099-01-01T00:00:00Z",
         "validation": {"command": "true", "timeout_seconds": 30}} for n in (1, 2)]}
    (repo / "tasks.json").write_text(json.dumps(plan))
    assert run("import", "tasks.json").rc == 0
    monkeypatch.setenv("HARNESS_WORKER_ID", "agent-2")
    res = run("release", "w1")
    assert res.rc == 2 and "claimed by agent-1" in res.err and "(HARNESS_WORKER_ID)" in res.err
    assert run("renew", "w2").rc == 0
    monkeypatch.setenv("HANDOFF_WORKER", "agent-1")  # HANDOFF_WORKER first
    assert run("release", "w1").rc == 0
    assert run("release", "w2").rc == 2


def test_a_workers_session_start_leaves_another_workers_live_claim_alone(
        planned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFF_WORKER", "alice")
    assert run("claim", "t1").rc == 0
    (planned / "alice.txt").write_text("work in progress\n")
    monkeypatch.setenv("HANDOFF_WORKER", "bob")
    started = run("session", "start", "--json")
    assert started.rc == 0, started
    assert started.json()["recovery"] == []
    assert _task(planned, "t1")["status"] == "in_progress"
    assert (planned / "alice.txt").read_text() == "work in progress\n"


@pytest.mark.parametrize("where", ["HANDOFF_WORKER", "handoff.worker", "--worker"])
@pytest.mark.parametrize("name", ["a\x1b[31mb", "bell\x07", "x" * 2001], ids=["escape", "bell", "too-long"])
def test_a_worker_name_other_clones_could_not_read_is_refused(planned: Path, monkeypatch: pytest.MonkeyPatch,
                                                              where: str, name: str) -> None:
    args = ["claim"]
    if where == "HANDOFF_WORKER":
        monkeypatch.setenv("HANDOFF_WORKER", name)
    elif where == "handoff.worker":
        monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'handoff.worker'='" + name + "'")
    else:
        args += ["--worker", name]
    before = state_head(planned)
    res = run(*args)
    assert res.rc == 2 and res.err.startswith("error: the worker name from ") and res.err.count("\n") == 1, res
    assert state_head(planned) == before


def test_an_agents_mcp_server_acts_as_the_worker_its_environment_names(planned: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.mcp.test_server import calls

    monkeypatch.setenv("HANDOFF_WORKER", "agent-1")
    assert run("claim", "t1").rc == 0
    monkeypatch.setenv("HANDOFF_WORKER", "agent-2")  # the second agent's server, in the same work tree
    before = state_head(planned)
    refused, forced = calls(planned, [("release", {"id": "t1"}), ("release", {"id": "t1", "force": True})])
    assert refused.is_error and refused.exit_code == 2
    assert "claimed by agent-1, another worker in this worktree" in refused.error_line
    assert not forced.is_error and forced.value["status"] == "pending"
    assert state_head(planned) != before


# -- the config files git's environment moves: GIT_CONFIG_GLOBAL, _SYSTEM, _NOSYSTEM --------------

FILE_CASES = [
    {"GIT_CONFIG_GLOBAL": "moved"},
    {"GIT_CONFIG_GLOBAL": "/dev/null"},
    {"GIT_CONFIG_GLOBAL": "missing"},
    {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "system"},
    {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "system", "GIT_CONFIG_NOSYSTEM": "1"},
    {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "system", "GIT_CONFIG_NOSYSTEM": "no"},
    {"GIT_CONFIG_SYSTEM": "system"},
    {"GIT_CONFIG_GLOBAL": "moved", "local": "1"},
]


@pytest.mark.parametrize("case", FILE_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_moved_config_files_are_read_as_git_reads_them(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      case: dict[str, str]) -> None:
    from git_handoff.infra.gitrepo import Repo

    home = Path(os.environ["HOME"])
    with (home / ".gitconfig").open("a") as f:
        f.write("[handoff]\n\tworker = home\n\tautoSync = true\n")
    (tmp_path / "moved").write_text("[handoff]\n\tworker = moved\n\tautoSync = no\n")
    (tmp_path / "system").write_text("[handoff]\n\tworker = system\n\tcommitsPerSession = 2k\n")
    monkeypatch.delenv("GIT_CONFIG_NOSYSTEM")
    if case.get("local"):
        git("config", "handoff.worker", "local", cwd=repo)
    for var, value in case.items():
        if var.startswith("GIT_"):
            monkeypatch.setenv(var, str(tmp_path / value) if value in ("moved", "missing", "system") else value)
    ours = Repo.discover(repo)
    for key in ("handoff.worker", "handoff.autoSync", "handoff.commitsPerSession"):
        theirs = subprocess.run(["git", "config", "--get", key], cwd=repo, capture_output=True, text=True)
        assert ours.config_get(key) == (theirs.stdout.rstrip("\n") if theirs.returncode == 0 else None), key


def test_git_config_global_sets_the_worker_of_a_claim(planned: Path, tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    with (home / ".gitconfig").open("a") as f:
        f.write("[handoff]\n\tworker = home\n")
    (tmp_path / "ci.gitconfig").write_text("[handoff]\n\tworker = ci-runner\n")
    proc = _git("handoff", "claim", "--json", cwd=planned, env={"GIT_CONFIG_GLOBAL": str(tmp_path / "ci.gitconfig")})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["claimed_by"] == "ci-runner"
