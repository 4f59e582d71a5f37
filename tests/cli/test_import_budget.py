"""The hot commands import only what they use: for every command an agent CLI's hooks or a
fleet's loop runs, the set of git_handoff modules and third-party packages it may import
(from `python -X importtime`), not their time. A read-only command or a hook that pulls in
the write side, the remote transport or the merge pays tens of milliseconds on every call
an agent makes.

The hot commands: every `git handoff hook` event the installed hooks run for Claude Code,
Codex and Gemini (agent_cli/claude.py, codex.py, gemini.py); the verbs the agent's
instructions and prompt have it run (ack, next, status, list, show, claim, renew,
checkpoint, done, fail); the fleet's loop (docs/fleet.md: `claim --remote origin`,
`done`, `sync origin`, as bench/fleet_sim/measure.py runs them).

Each is allowed a budget below, the modules it imports today. A new import fails with its
name and the budget to add it to if it is deliberate; a module a command no longer imports
fails too, so that each budget stays the set the command really loads. The budgets are
checked against the deny lists (WRITE_SIDE, ELSEWHERE) as well as the commands, so that
a budget cannot grow past them."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.repo import git, run

# What no read-only command and no Stop hook may import.
WRITE_SIDE = {
    "git_handoff.ops.tasks", "git_handoff.ops.work", "git_handoff.ops.attempts", "git_handoff.ops.claim",
    "git_handoff.ops.sessions", "git_handoff.ops.session_start", "git_handoff.ops.sync", "git_handoff.ops.sync_plan",
    "git_handoff.ops.history", "git_handoff.ops.relay",
    "git_handoff.core.merge", "git_handoff.core.field_merge",
    "git_handoff.infra.task_commands", "git_handoff.state.claim_journal", "git_handoff.state.notes",
    "tomlkit", "filelock",
}
# What no local command at all imports: the remote side, the other adapters.
ELSEWHERE = {
    "git_handoff.ops.sync", "git_handoff.ops.sync_plan",
    "git_handoff.core.merge", "git_handoff.core.field_merge", "git_handoff.dashboard", "git_handoff.mcp",
    "git_handoff.ops.relay", "git_handoff.ops.dispatch",
}
# What a local `claim` (the agent's, not the fleet's `claim --remote`) does not import either.
NOT_IN_A_LOCAL_CLAIM = {"tomlkit", "filelock", "git_handoff.ops.session_start", "git_handoff.ops.tasks"}


# -- the budgets ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """What a command may import: `modules` of git_handoff (exactly these), `packages`
    third-party top-level packages (at most these)."""

    name: str
    modules: frozenset[str]
    packages: frozenset[str]

    def plus(self, name: str, modules: Iterable[str] = (), packages: Iterable[str] = ()) -> Budget:
        """This budget and `modules` (names under git_handoff.) and `packages`, as `name`."""
        return Budget(name, self.modules | {f"git_handoff.{m}" for m in modules}, self.packages | set(packages))


def _ours(*names: str) -> frozenset[str]:
    return frozenset(f"git_handoff.{n}" if n else "git_handoff" for n in names)


# `git handoff` up to a command that needs no state: the entry point, the fast client's
# protocol, the errors and the display.
LAUNCH = Budget("LAUNCH", _ours("", "cli", "cmdclient", "cmdproto", "core", "core.display", "core.errors",
                                "core.patterns", "infra", "infra.exit_fast"), frozenset({"click"}))
# A command that opens the state: the store, its records and the git boundary.
STATE = LAUNCH.plus("STATE", {
    "core.decoding", "core.field_checks", "core.hlc", "core.model", "core.record_schemas", "core.selection",
    "core.serialization", "core.state_tree", "core.task_file", "infra.file_lock", "infra.fileio", "infra.gitconfig",
    "infra.gitopen", "infra.gitprocess", "infra.gitrefs", "infra.gitrepo", "infra.paths", "infra.procs",
    "infra.rollback", "infra.signing", "infra.tree_format", "infra.worktree", "ops", "ops.open_state", "state",
    "state.identity", "state.notices", "state.session_records", "state.snapshot", "state.store", "state.task_index",
    "state.this_clone", "state.writers",
}, {"pygit2", "_cffi_backend"})
# A command that writes: what it commits is scanned for secrets first (state/store.py build_commit).
SCAN = {"core.secrets", "state.redaction"}
READ = STATE.plus("READ", {"cli.ids", "cli.numbers", "cli.progress", "ops.payloads", "ops.views", "state.claim_index",
                           "state.quarantine", "state.status_index", "state.target"})
ACK = STATE.plus("ACK", SCAN | {"cli.numbers", "ops.handoff", "ops.payloads"})
# (the target branch, ops/claim_base.py and ops/work_refs.py: a claim starts from its
# dependencies' work, `done` publishes its own; git config and refs only, no fetch)
WORK = STATE.plus("WORK", SCAN | {"cli.ids", "cli.numbers", "core.attempt_record", "infra.merge_tree",
                                  "infra.task_commands", "ops.attempt_save", "ops.attempts", "ops.claim",
                                  "ops.claim_base", "ops.claim_plan", "ops.handoff", "ops.payloads", "ops.work",
                                  "ops.work_refs", "state.claim_checks", "state.claim_index", "state.claim_journal",
                                  "state.notes", "state.target", "state.trust"})
FAIL = WORK.plus("FAIL", packages={"filelock"})
# A hook: the adapters (through their registry, a dict of six: agent_cli/registry.py), the
# payload, the decision; no write side. (ops.doc_markdown: the prompt's one-line rendering of
# a value, split out of ops.prompt with the document's Markdown: the same code, one file more.
# ops.stop_cap: the Stop hook's reading of the CLI's own block cap, which every Stop hook runs;
# it imports nothing this budget lacks.)
HOOK = STATE.plus("HOOK", {"agent_cli", "agent_cli.claude", "agent_cli.codex", "agent_cli.gemini", "agent_cli.qwen",
                           "agent_cli.copilot", "agent_cli.opencode",
                           "agent_cli.hook_data", "agent_cli.registry", "ops.handoff", "ops.hook_decisions",
                           "ops.hook_entry", "ops.payloads", "ops.prompt", "ops.doc_markdown", "ops.stop_cap",
                           "ops.usage", "state.claim_index", "state.status_index",
                           "state.trust"})
HOOK_SESSION_START = HOOK.plus("HOOK_SESSION_START", SCAN | {
    "core.attempt_record", "infra.task_commands", "ops.attempt_save", "ops.attempts", "ops.session_start",
    "ops.sessions", "ops.work", "ops.work_refs", "state.claim_checks", "state.claim_journal", "state.notes",
    "state.target"})
# the session's use read (Claude Code's, Gemini CLI's, Qwen Code's and Copilot CLI's SessionEnd)
HOOK_SESSION_END = HOOK.plus("HOOK_SESSION_END", SCAN | {"agent_cli.usage", "ops.sessions", "state.notes"})
# Qwen Code's and Copilot CLI's pre-compaction write the document at once (no event follows
# it), so they scan what they write.
HOOK_DOC_AT_ONCE = HOOK.plus("HOOK_DOC_AT_ONCE", SCAN)
# Codex's SessionEnd hook answers without opening the state (agent_cli/codex.py: its 1 s budget),
# knowing the agent CLIs by name only (agent_cli/__init__.py: a tuple, no import).
CODEX_SESSION_END = LAUNCH.plus("CODEX_SESSION_END", {"agent_cli"})
# The fleet's loop: a claim and a sync through the remote.
REMOTE = {"core.ancestry", "core.field_merge", "core.merge", "ops.fleet_claims", "ops.retire", "ops.sync",
          "ops.sync_plan", "remote", "remote.fetch", "remote.incoming", "remote.layout", "remote.push_outcome",
          "remote.shallow", "remote.tracked", "remote.transport",
          "state.fold_heads", "state.integrate", "state.quarantine", "state.target"}
CLAIM_REMOTE = WORK.plus("CLAIM_REMOTE", REMOTE)
SYNC = STATE.plus("SYNC", REMOTE | {"cli.progress", "state.notes"})

READ_ONLY = (READ,)
STOP_HOOKS = (HOOK,)  # the Stop, SubagentStop, PreCompact, AfterAgent and PreCompress hooks
LOCAL = (LAUNCH, STATE, READ, ACK, WORK, FAIL, HOOK, HOOK_SESSION_START, HOOK_SESSION_END, HOOK_DOC_AT_ONCE)


# -- what a command imports -------------------------------------------------------------------


@functools.cache
def _at_start() -> frozenset[str]:
    """What the interpreter imports before any command (site, an editable install's finder,
    sitecustomize): no command's doing."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, timeout=60,
                          env=os.environ.copy())
    return frozenset(_listed(proc.stderr.decode(errors="replace")))


@functools.cache
def _third_party() -> frozenset[str]:
    """The top-level names an installed distribution provides (a name no distribution
    provides, such as a failed probe of `org.python.core`, is no package)."""
    return frozenset(importlib.metadata.packages_distributions())


def _listed(importtime: str) -> set[str]:
    names = set()
    for line in importtime.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def imported(args: list[str], cwd: Path, stdin: str = "", *, prelude: str = "") -> set[str]:
    """The modules one `git handoff ARGS` imports, as `-X importtime` lists them, run in
    this process's interpreter without the command server (its worker would inherit the
    server's modules). `prelude`, a statement run first, is for the check of this test."""
    start = (["-c", f"{prelude}; import runpy; runpy.run_module('git_handoff', run_name='__main__', alter_sys=True)"]
             if prelude else ["-m", "git_handoff"])
    proc = subprocess.run([sys.executable, "-X", "importtime", *start, *args], cwd=cwd, input=stdin.encode(),
                          capture_output=True, env={**os.environ, "HANDOFF_COMMAND_SERVER": "0"}, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr.decode(errors="replace")[-500:]
    names = _listed(proc.stderr.decode(errors="replace"))
    assert "git_handoff.cli" in names  # the listing was read: the entry point is always there
    return names


def over_budget(command: str, names: set[str], budget: Budget) -> list[str]:
    """What is wrong with `names` against `budget`, one sentence each, saying what to do."""
    ours = {n for n in names if n.split(".")[0] == "git_handoff"}
    packages = {n.split(".")[0] for n in names} & _third_party() - _at_start() - {"git_handoff"}
    problems = []
    if new := sorted(ours - budget.modules):
        problems.append(f"`git handoff {command}` now imports {', '.join(new)}: if that is deliberate (the command "
                        f"needs it), add it to {budget.name} in tests/cli/test_import_budget.py; else import it "
                        "where it is used, on the path that needs it")
    if heavy := sorted(packages - budget.packages):
        problems.append(f"`git handoff {command}` now imports the third-party package(s) {', '.join(heavy)}: if that "
                        f"is deliberate, add them to {budget.name}'s packages in tests/cli/test_import_budget.py; else "
                        "import them where they are used")
    if gone := sorted(budget.modules - ours):
        problems.append(f"`git handoff {command}` no longer imports {', '.join(gone)}: take it off {budget.name} in "
                        "tests/cli/test_import_budget.py (or give this command a budget of its own)")
    return problems


def denied(command: str, names: set[str], budget: Budget) -> list[str]:
    """What `names` holds of the deny lists this command's budget falls under."""
    problems = []
    if budget in READ_ONLY + STOP_HOOKS and names & WRITE_SIDE:
        problems.append(f"`git handoff {command}` imports the write side: {sorted(names & WRITE_SIDE)}")
    if budget in LOCAL and names & ELSEWHERE:
        problems.append(f"`git handoff {command}` imports the remote side or another adapter: "
                        f"{sorted(names & ELSEWHERE)}")
    if budget in LOCAL and (remote := sorted(n for n in names if n.startswith("git_handoff.remote"))):
        problems.append(f"`git handoff {command}` imports the remote transport: {remote}")
    if budget in READ_ONLY and (adapters := sorted(n for n in names if n.startswith("git_handoff.agent_cli"))):
        problems.append(f"`git handoff {command}` imports the agent CLIs' adapters: {adapters}")
    if command.startswith("claim") and "--remote" not in command and names & NOT_IN_A_LOCAL_CLAIM:
        problems.append(f"`git handoff {command}` imports {sorted(names & NOT_IN_A_LOCAL_CLAIM)}")
    return problems


class Session:
    """Hot commands run in one repository, each checked against its budget as it runs;
    the problems of all of them are asserted at the end."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.problems: list[str] = []
        self.checked: list[str] = []

    def hot(self, budget: Budget, *args: str, stdin: str = "") -> set[str]:
        command = " ".join(args)
        names = imported(list(args), self.cwd, stdin)
        self.problems += over_budget(command, names, budget) + denied(command, names, budget)
        self.checked.append(command)
        return names

    def check(self) -> None:
        assert not self.problems, "\n".join(self.problems)


# -- the hot commands -----------------------------------------------------------------------


@pytest.fixture
def worked(repo: Path) -> Path:
    assert run("init").rc == 0
    for i in range(3):
        assert run("add", f"T{i}", "--id", f"t{i}", "--check", "true").rc == 0
    return repo


def _payload(repo: Path, event: str, fields: dict[str, object]) -> str:
    """A hook's stdin, with the fields every one of the three CLIs sends."""
    return json.dumps({"session_id": "01a2311b-6bde-7e51-911c-a02f362276fb", "cwd": str(repo),
                       "hook_event_name": event, "transcript_path": "/nonexistent/transcript.jsonl", **fields})


# agent: [(hook, its event, its payload's fields, its budget)] in a session's order
HOOK_EVENTS: dict[str, list[tuple[str, str, dict[str, object], Budget]]] = {
    "claude": [("claude-session-start", "SessionStart", {"source": "startup"}, HOOK_SESSION_START),
               ("claude-stop", "Stop", {"stop_hook_active": False}, HOOK),
               ("claude-subagent-stop", "SubagentStop", {"stop_hook_active": False}, HOOK),
               ("claude-pre-compact", "PreCompact", {"trigger": "auto"}, HOOK),
               ("claude-session-end", "SessionEnd", {"reason": "other"}, HOOK_SESSION_END)],
    "codex": [("codex-session-start", "SessionStart", {"source": "startup"}, HOOK_SESSION_START),
              ("codex-stop", "Stop", {"stop_hook_active": False}, HOOK),
              ("codex-subagent-stop", "SubagentStop", {"stop_hook_active": False}, HOOK),
              ("codex-pre-compact", "PreCompact", {"trigger": "auto"}, HOOK),
              ("codex-session-end", "SessionEnd", {"reason": "other"}, CODEX_SESSION_END)],
    "gemini": [("gemini-session-start", "SessionStart", {"source": "startup"}, HOOK_SESSION_START),
               ("gemini-after-agent", "AfterAgent", {"stop_hook_active": False}, HOOK),
               ("gemini-pre-compress", "PreCompress", {"trigger": "auto"}, HOOK),
               ("gemini-session-end", "SessionEnd", {"reason": "other"}, HOOK_SESSION_END)],
    "qwen": [("qwen-session-start", "SessionStart", {"source": "startup"}, HOOK_SESSION_START),
             ("qwen-stop", "Stop", {"stop_hook_active": False}, HOOK),
             ("qwen-subagent-stop", "SubagentStop", {"stop_hook_active": False}, HOOK),
             ("qwen-pre-compact", "PreCompact", {"trigger": "auto"}, HOOK_DOC_AT_ONCE),
             ("qwen-session-end", "SessionEnd", {"reason": "other"}, HOOK_SESSION_END)],
    "copilot": [("copilot-session-start", "sessionStart", {"source": "new"}, HOOK_SESSION_START),
                ("copilot-agent-stop", "agentStop", {"stop_hook_active": False}, HOOK),
                ("copilot-subagent-stop", "subagentStop", {"stop_hook_active": False}, HOOK),
                ("copilot-pre-compact", "preCompact", {"trigger": "auto"}, HOOK_DOC_AT_ONCE),
                ("copilot-session-end", "sessionEnd", {"reason": "complete"}, HOOK_SESSION_END)],
    "opencode": [("opencode-session-start", "session.start", {"source": "startup"}, HOOK_SESSION_START),
                 ("opencode-stop", "stop", {"stop_hook_active": False}, HOOK),
                 ("opencode-compacting", "session.compacting", {"trigger": "auto"}, HOOK_DOC_AT_ONCE)],
}


def test_every_hook_event_is_checked() -> None:
    from git_handoff.agent_cli import registry

    assert {agent: [h for h, *_ in events] for agent, events in HOOK_EVENTS.items()} == {
        name: list(cli.HOOKS) for name, cli in registry.CLIS.items()}


@pytest.mark.parametrize("agent", sorted(HOOK_EVENTS))
def test_each_hook_imports_its_budget(worked: Path, agent: str) -> None:
    """A session's hooks in order, a task claimed after the session started (so the Stop
    hooks decide about work in progress)."""
    session = Session(worked)
    for hook, event, fields, budget in HOOK_EVENTS[agent]:
        names = session.hot(budget, "hook", hook, stdin=_payload(worked, event, fields))
        if budget is HOOK:
            assert "git_handoff.ops.hook_decisions" in names
        if budget is HOOK_SESSION_START:
            assert run("claim").rc == 0
    session.check()
    assert len(session.checked) == len(HOOK_EVENTS[agent])


def test_the_agents_commands_import_their_budget(worked: Path) -> None:
    assert run("session", "start").rc == 0  # what the SessionStart hook does before the agent's first turn
    session = Session(worked)
    session.hot(ACK, "ack", "--json")
    for args in (["next", "--json"], ["status", "--json"], ["list", "--json"], ["show", "t1"]):
        session.hot(READ, *args)
    assert "git_handoff.ops.claim" in session.hot(WORK, "claim", "--json")
    session.hot(WORK, "renew", "t0", "--json")
    session.hot(WORK, "checkpoint", "t0", "half way", "--json")
    session.hot(WORK, "done", "t0", "--json")
    assert run("claim", "t1").rc == 0
    session.hot(FAIL, "fail", "t1", "--reason", "broke it", "--json")
    session.check()
    assert run("show", "t0", "--json").json()["status"] == "completed"  # the commands did their work


def test_the_fleet_loops_commands_import_their_budget(worked: Path, tmp_path: Path) -> None:
    """The loop of docs/fleet.md against a remote: `claim --remote`, the work, `done`, `sync`."""
    bare = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    git("remote", "add", "origin", str(bare), cwd=worked)
    git("push", "-q", "origin", "main", cwd=worked)
    session = Session(worked)
    claimed = session.hot(CLAIM_REMOTE, "claim", "--remote", "origin", "--json")
    assert "git_handoff.ops.claim" in claimed
    session.hot(WORK, "done", "t0", "--json")
    session.hot(SYNC, "sync", "origin", "--json")
    session.check()
    assert git("ls-remote", str(bare), cwd=tmp_path).count("refs/harness/") >= 1  # the loop reached the remote


# -- the budgets against the deny lists, and the check against a new import -------------------


def test_no_budget_allows_what_its_deny_lists_refuse() -> None:
    """A budget that grew past WRITE_SIDE or ELSEWHERE is refused here, before any command
    runs: the deny lists stay the bound the allow-lists live within."""
    for budget in READ_ONLY + STOP_HOOKS:
        assert not (budget.modules | budget.packages) & WRITE_SIDE, budget.name
    for budget in READ_ONLY:
        assert not {m for m in budget.modules if m.startswith("git_handoff.agent_cli")}, budget.name
    for budget in LOCAL:
        assert not budget.modules & ELSEWHERE, budget.name
        assert not {m for m in budget.modules if m.startswith("git_handoff.remote")}, budget.name
    assert not WORK.modules & NOT_IN_A_LOCAL_CLAIM and not WORK.packages & NOT_IN_A_LOCAL_CLAIM


def test_a_new_import_fails_with_its_name_and_where_to_add_it(worked: Path) -> None:
    """`status` with one more module of ours and one more third-party package imported
    before it runs: both are named, with the budget to add them to; status's own run,
    without them, is within its budget."""
    assert over_budget("status --json", imported(["status", "--json"], worked), READ) == []
    names = imported(["status", "--json"], worked, prelude="import git_handoff.core.merge, tomlkit")
    problems = over_budget("status --json", names, READ)
    assert len(problems) == 2, problems
    assert "now imports git_handoff.core.field_merge, git_handoff.core.merge:" in problems[0]
    assert "add it to READ in tests/cli/test_import_budget.py" in problems[0]
    assert "third-party package(s) tomlkit" in problems[1] and "READ's packages" in problems[1]
    assert denied("status --json", names, READ) == [
        "`git handoff status --json` imports the write side: ['git_handoff.core.field_merge', "
        "'git_handoff.core.merge', 'tomlkit']",
        "`git handoff status --json` imports the remote side or another adapter: ['git_handoff.core.field_merge', "
        "'git_handoff.core.merge']"]
    assert over_budget("status --json", names - {"git_handoff.ops.views"}, READ)[-1].startswith(
        "`git handoff status --json` no longer imports git_handoff.ops.views")


def test_no_regular_expression_is_compiled_at_import() -> None:
    """Importing the modules of the hot paths compiles no pattern of ours: each is compiled
    on first use (git_handoff.core.patterns)."""
    probe = (
        "import re, sys\n"
        "seen = []\n"
        "real = re.compile\n"
        "def spy(p, flags=0):\n"
        "    caller = sys._getframe(1).f_globals.get('__name__', '')\n"
        "    if caller.startswith('git_handoff'):\n"
        "        seen.append(caller)\n"
        "    return real(p, flags)\n"
        "re.compile = spy\n"
        "import git_handoff.cli, git_handoff.cli.tasks, git_handoff.cli.work, git_handoff.ops.hook_entry\n"
        "import git_handoff.ops.views, git_handoff.state.store, git_handoff.core.state_tree\n"
        "import git_handoff.core.attempt_record, git_handoff.core.decoding, git_handoff.core.field_checks\n"
        "print(sorted(set(seen)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ.copy(),
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert proc.stdout.strip() == "[]"
