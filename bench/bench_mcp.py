"""The harness skill's 100-task end-to-end shape, three ways, in one run:

    claim -> write a file -> git add + git commit -> done      (until nothing is eligible)

- skill: the skill's own scripts (`baseline_harness.py claim` / `done`, one Python
  process each, one `.harness/tasks.json`);
- cli:   today's CLI, `git handoff claim --json` / `git handoff done ID --json`, one
  process per step (`python -m git_handoff`, what the console script runs);
- mcp:   one `git handoff mcp` server process for the whole run, driven over its
  stdin/stdout with newline-delimited JSON-RPC (`tools/call claim` / `done`), its
  start and handshake included in the total;
- floor: a process per step that only imports pygit2 and click (no state at all): the
  least a per-process CLI on those libraries costs, so the bound of the CLI flow's ratio;
- cli served / cli fast: the CLI's steps through the command server
  (docs/command-server.md), started by the full client or by the fast client
  (`python -I -S`, what the installed hooks run when the server is on); the server is
  started once and kept warm;
- harness claim: where HARNESS_HOOKS names the skill's hook scripts (see
  bench_cmdserver.py), the skill's real `harness-claim.py` under a bare venv for the
  claim, and the reduction's `done` (the skill has no done script: its agent runs the
  validation and edits tasks.json itself).

All three start from the same plan (the skill's tasks.json, which `git handoff import`
reads), with the same validation command for every task, and do the same git work.
The flows run in lockstep, one task of each in turn, so the machine's noise hits all
three alike. Per-call latency (p50/p99) of claim and done is wall time around each
step: a process for skill and cli, a request/answer round trip for mcp.

    python bench/bench_mcp.py [--quick]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_cmdserver import bare_python, start_server, stop_server
from bench.common import (
    HANDOFF,
    PY,
    Row,
    fresh_dir,
    git,
    handoff_ok,
    make_repo,
    median,
    ms,
    percentile,
    run_proc,
)
from git_handoff import cmdclient

BASELINE = [PY, str(Path(__file__).resolve().parent / "baseline_harness.py")]
CHECK = "test -d work"  # every task's validation: the same cheap command in every flow
MCP_TARGET = 0.3  # the server started and handshaken inside the total
CLI_TARGET = 1.7
SERVED_CLI_TARGET = 1.2


@dataclass
class Flow:
    name: str
    total: float = 0.0
    claim: list[float] = field(default_factory=list)
    done: list[float] = field(default_factory=list)
    completed: int = 0
    startup: float = 0.0  # a server's start, spawn to the initialize answer (counted in total)


def _project(name: str, n: int) -> Path:
    """A repository holding the skill's plan of `n` tasks, every check set to CHECK."""
    root = make_repo(fresh_dir(name))
    r = run_proc([*BASELINE, "setup", str(root), str(n)], root)
    if r.rc != 0:
        raise RuntimeError(f"baseline setup failed: {r.err.decode(errors='replace')}")
    plan = root / ".harness" / "tasks.json"
    data = json.loads(plan.read_text())
    for t in data["tasks"]:
        t["validation"]["command"] = CHECK
    plan.write_text(json.dumps(data, indent=2) + "\n")
    (root / ".gitignore").write_text(".harness/\n")
    git("add", ".gitignore", cwd=root)
    git("commit", "-q", "-m", "ignore the plan", cwd=root)
    return root


def _handoff_project(name: str, n: int) -> Path:
    root = _project(name, n)
    handoff_ok(["init", "--mode", "concurrent"], root)
    handoff_ok(["import", str(root / ".harness" / "tasks.json")], root)
    return root


def _work(root: Path, task: str) -> None:
    """The agent's work for one task: a file, committed."""
    (root / "work").mkdir(exist_ok=True)
    (root / "work" / f"{task}.txt").write_text(f"work for {task}\n")
    git("add", f"work/{task}.txt", cwd=root)
    git("commit", "-q", "-m", f"{task}: the work", cwd=root)


def _timed(fn: Callable[[], Any], into: list[float]) -> Any:
    start = time.perf_counter()
    out = fn()
    into.append(time.perf_counter() - start)
    return out


class ProcessFlow:
    """A flow whose every step is a process (the skill's scripts, the CLI)."""

    def __init__(self, flow: Flow, root: Path, claim: list[str], done: Callable[[str], list[str]],
                 task_of: Callable[[bytes], str], env: dict[str, str] | None = None,
                 done_env: dict[str, str] | None = None) -> None:
        self.flow, self.root, self.claim_argv, self.done_argv, self.task_of = flow, root, claim, done, task_of
        self.env, self.done_env = env, env if done_env is None else done_env

    def start(self) -> None:
        pass

    def claim(self) -> str | None:
        r = _timed(lambda: run_proc(self.claim_argv, self.root, env=self.env), self.flow.claim)
        if r.rc == 1:
            return None
        if r.rc != 0:
            raise RuntimeError(f"{self.flow.name} claim exited {r.rc}: {r.err.decode(errors='replace')[-300:]}")
        return self.task_of(r.out)

    def done(self, task: str) -> None:
        d = _timed(lambda: run_proc(self.done_argv(task), self.root, env=self.done_env), self.flow.done)
        if d.rc != 0:
            raise RuntimeError(f"{self.flow.name} done {task} exited {d.rc}: {d.err.decode(errors='replace')[-300:]}")

    def stop(self) -> None:
        pass


def skill_flow(n: int) -> ProcessFlow:
    root = _project("e2e-skill", n)
    return ProcessFlow(Flow("skill"), root, [*BASELINE, "claim", str(root), "bench-worker"],
                       lambda t: [*BASELINE, "done", str(root), t], lambda out: out.decode().strip())


def cli_flow(n: int) -> ProcessFlow:
    root = _handoff_project("e2e-cli", n)
    return ProcessFlow(Flow("cli"), root, [*HANDOFF, "claim", "--json"], lambda t: [*HANDOFF, "done", t, "--json"],
                       lambda out: json.loads(out)["id"])


SERVED_ENV = {"HANDOFF_COMMAND_SERVER": "1", "HANDOFF_COMMAND_SERVER_IDLE": "600"}


class ServedFlow(ProcessFlow):
    """The CLI's steps through a warm command server: the full client (`python -m
    git_handoff`) or the fast one (`python -I -S`, cmdclient.fast_command)."""

    def __init__(self, n: int, fast: bool) -> None:
        name = "cli fast" if fast else "cli served"
        root = _handoff_project(f"e2e-{name.replace(' ', '-')}", n)
        if fast:
            super().__init__(Flow(name), root, cmdclient.fast_command(["claim", "--json"]),
                             lambda t: cmdclient.fast_command(["done", t, "--json"]), self._task, SERVED_ENV)
        else:
            super().__init__(Flow(name), root, [*HANDOFF, "claim", "--json"],
                             lambda t: [*HANDOFF, "done", t, "--json"], self._task, SERVED_ENV)

    @staticmethod
    def _task(out: bytes) -> str:
        return str(json.loads(out)["id"])

    def start(self) -> None:  # the server's start is not the flow's: kept warm, as in a working day
        start_server(self.root, SERVED_ENV)

    def stop(self) -> None:
        log = self.root / ".git" / "handoff" / "cmdserver" / "log"
        served = sum(1 for line in log.read_text().splitlines() if re.search(r" worker \d+: (claim|done) ", line))
        stop_server(self.root)
        steps = len(self.flow.claim) + len(self.flow.done)
        if served < steps:
            raise RuntimeError(f"{self.flow.name}: {served} of {steps} steps served (the server went stale?)")


def harness_claim_flow(n: int) -> ProcessFlow | None:
    """The skill's own claim script (harness-claim.py, HARNESS_HOOKS) under a bare venv."""
    hooks = os.environ.get("HARNESS_HOOKS")
    script = Path(hooks) / "harness-claim.py" if hooks else None
    if script is None or not script.is_file():
        return None
    root = _project("e2e-harness", n)
    env = {"HARNESS_STATE_ROOT": str(root), "HARNESS_WORKER_ID": "bench-worker"}

    def task_of(out: bytes) -> str:
        doc = json.loads(out)
        return str(doc["task_id"]) if doc.get("claimed") else ""

    flow = ProcessFlow(Flow("harness claim"), root, [bare_python(), str(script)],
                       lambda t: [*BASELINE, "done", str(root), t], task_of, env, {})
    claim = flow.claim

    def claim_or_none() -> str | None:
        task = claim()
        return task or None

    flow.claim = claim_or_none  # type: ignore[method-assign]  # {"claimed": false} ends the flow
    return flow


class FloorFlow(ProcessFlow):
    """The least any per-process CLI built on pygit2 and click can cost: each step is a
    process that imports both and does nothing else (the same git work between steps).
    Its ratio to the skill's scripts bounds what the CLI flow can reach."""

    def __init__(self, n: int) -> None:
        root = make_repo(fresh_dir("e2e-floor"))
        floor = [PY, "-c", "import pygit2, click"]
        super().__init__(Flow("floor"), root, floor, lambda t: floor, lambda out: "")
        self.left = n

    def claim(self) -> str | None:
        super().claim()
        if self.left == 0:
            return None
        self.left -= 1
        return f"task-{self.left:05d}"


class RawClient:
    """Newline-delimited JSON-RPC over a server's stdin/stdout: the wire an agent CLI speaks."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                          "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the MCP server ended (exit {self.proc.wait()})")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def notify(self, method: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[int, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        return int(result.get("_meta", {}).get("exit_code", 0)), json.loads(result["content"][0]["text"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class McpFlow:
    """One `git handoff mcp` process for the whole flow; its start and handshake count."""

    def __init__(self, n: int) -> None:
        self.flow = Flow("mcp")
        self.root = _handoff_project("e2e-mcp", n)
        self.client: RawClient | None = None

    def start(self) -> None:
        began = time.perf_counter()
        self.client = RawClient([*HANDOFF, "mcp"], self.root)
        self.client.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "bench", "version": "1"}})
        self.client.notify("notifications/initialized")
        self.flow.startup = time.perf_counter() - began

    def claim(self) -> str | None:
        assert self.client is not None
        code, task = _timed(lambda: self.client.tool("claim", {}) if self.client else (2, None), self.flow.claim)
        if code == 1:
            return None
        if code != 0:
            raise RuntimeError(f"mcp claim answered exit {code}: {task}")
        return str(task["id"])

    def done(self, task: str) -> None:
        assert self.client is not None
        code, answer = _timed(lambda: self.client.tool("done", {"id": task}) if self.client else (2, None),
                              self.flow.done)
        if code != 0:
            raise RuntimeError(f"mcp done {task} answered exit {code}: {answer}")

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()


def run_flows(n: int) -> list[Flow]:
    """The three flows in lockstep (one task of each in turn), so the machine's noise hits
    all three alike; each flow's total is the sum of its own steps' wall time."""
    flows: list[Any] = [skill_flow(n), cli_flow(n), McpFlow(n), FloorFlow(n), ServedFlow(n, fast=False),
                        ServedFlow(n, fast=True)]
    harness = harness_claim_flow(n)
    if harness is not None:
        flows.append(harness)
    active = list(flows)
    try:
        for f in flows:
            start = time.perf_counter()
            f.start()
            if not isinstance(f, ServedFlow):  # a served flow's server is warm, as in a working day
                f.flow.total += time.perf_counter() - start
        while active:
            for f in list(active):
                start = time.perf_counter()
                task = f.claim()
                if task is None:
                    f.flow.claim.pop()  # the final "nothing eligible" is no claim
                    active.remove(f)
                else:
                    _work(f.root, task)
                    f.done(task)
                    f.flow.completed += 1
                f.flow.total += time.perf_counter() - start
                if f.flow.completed > n:
                    raise RuntimeError(f"the {f.flow.name} flow claimed more than {n} tasks")
    finally:
        for f in flows:
            f.stop()
    return [f.flow for f in flows]


def _lat(values: list[float]) -> str:
    return f"p50 {ms(median(values))} / p99 {ms(percentile(values, 99))}"


def e2e(quick: bool) -> list[Row]:
    n = 30 if quick else 100
    flows = run_flows(n)
    skill, cli, mcp, floor, served, fast = flows[:6]
    for f in flows:
        if f.completed != n:
            raise RuntimeError(f"the {f.name} flow completed {f.completed} of {n} tasks")
    name = f"e2e {n} tasks (claim, write, commit, done)"
    mcp_ratio, cli_ratio = mcp.total / skill.total, cli.total / skill.total
    return [
        Row(f"{name}: MCP server, total", ms(mcp.total), f"skill scripts {ms(skill.total)}", mcp_ratio,
            f"<= {MCP_TARGET}x", mcp_ratio <= MCP_TARGET),
        Row(f"{name}: CLI, total", ms(cli.total), f"skill scripts {ms(skill.total)}", cli_ratio,
            f"<= {CLI_TARGET}x", cli_ratio <= CLI_TARGET),
        Row(f"{name}: CLI through the command server, fast client, total", ms(fast.total),
            f"skill scripts {ms(skill.total)}", fast.total / skill.total, f"<= {SERVED_CLI_TARGET}x",
            fast.total / skill.total <= SERVED_CLI_TARGET),
        Row(f"{name}: CLI through the command server, total", ms(served.total), f"skill scripts {ms(skill.total)}",
            served.total / skill.total),
        *([Row(f"{name}: CLI through the command server, fast client, total", ms(fast.total),
               f"the skill's harness-claim.py + done {ms(flows[6].total)}", fast.total / flows[6].total),
           Row(f"{name}: MCP server, total", ms(mcp.total),
               f"the skill's harness-claim.py + done {ms(flows[6].total)}", mcp.total / flows[6].total)]
          if len(flows) > 6 else []),
        Row(f"{name}: floor, a process importing pygit2 + click per step, total", ms(floor.total),
            f"skill scripts {ms(skill.total)}", floor.total / skill.total),
        Row(f"{name}: MCP server start (in its total)", ms(mcp.startup), "-"),
        Row(f"{name}: claim latency, MCP", _lat(mcp.claim),
            f"skill {_lat(skill.claim)}; CLI {_lat(cli.claim)}; floor {_lat(floor.claim)}",
            median(mcp.claim) / median(skill.claim)),
        Row(f"{name}: done latency, MCP", _lat(mcp.done), f"skill {_lat(skill.done)}; CLI {_lat(cli.done)}",
            median(mcp.done) / median(skill.done)),
    ]


if __name__ == "__main__":
    from bench.run import print_table

    print_table(e2e("--quick" in sys.argv))
