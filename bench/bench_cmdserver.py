"""The agent hooks at their floor: Stop and SessionStart, in-process vs through the command
server vs the harness skill's own hook scripts, at 100 and 10,000 tasks.

Each round runs the three variants one after the other (alternating, so machine noise
hits all alike), with the payload on stdin, in a state with a session open and one task
claimed; the figures are medians, the ratios from the same run. The command server is
started once per state and kept warm (its idle time set long), as in an agent session
whose hooks fire every turn.

The harness's scripts (harness-stop.py, harness-sessionstart.py, _harness_common.py from
the public bundle makoMakoGo/code-dispatcher-toolkit `bundles/harness/hooks`, AGPL, not
part of this repository) are taken from the directory HARNESS_HOOKS names; without it
these rows are "n/a". They run under a bare venv of the same Python (no site-packages),
as a user of the skill would run them.

The hooks as a user gets them: `hooks install --agent claude` in a fresh copy of the
state, and each command it wrote run through `sh -c` as Claude Code runs it, in the
user's environment (no HANDOFF_* variable), against the same harness scripts; the
row's target is the issue's: <= 1.0x.

Also `-X importtime` for a hook and for `next`: the modules each path imports.

    HARNESS_HOOKS=DIR PYTHONPATH=$PWD python bench/bench_cmdserver.py [--quick]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import baseline_harness
from bench.common import (
    HANDOFF,
    PY,
    Row,
    fresh_dir,
    git,
    handoff_ok,
    median,
    ms,
    run_proc,
    state_copy,
    workdir,
)
from git_handoff import cmdclient

# in-process, served, served through the fast client (`python -I -S`, what the hooks
# install writes when the server is on), the harness's script under a bare venv and under
# this Python (its site-packages and .pth files, as git handoff runs), and `python -c pass`
# (the floor); and the hook exactly as `hooks install --agent claude` writes it in a fresh
# copy of the state, run as Claude Code runs it (`sh -c`, the user's environment: nothing
# of HANDOFF_*), whatever that install turned on; and as `--no-command-server` writes it
# (what every install wrote before it turned the server on: the plain command, no server)
VARIANTS = ("plain", "served", "fast", "installed", "installed-off", "harness", "harness-site", "python")
HOOKS = (("Stop", "claude-stop", "harness-stop.py"),
         ("SessionStart", "claude-session-start", "harness-sessionstart.py"))
WORKER = "bench-worker"


def payload(event: str, cwd: Path) -> bytes:
    if event == "Stop":
        doc = {"session_id": "bench", "hook_event_name": "Stop", "stop_hook_active": False, "cwd": str(cwd)}
    else:
        doc = {"session_id": "bench", "hook_event_name": "SessionStart", "source": "resume", "cwd": str(cwd)}
    return json.dumps(doc).encode()


def handoff_state(n: int) -> Path:
    """N tasks, a session open, the first task claimed by this session."""
    path = state_copy(f"hooks-{n}", n)
    for args in (["session", "start"], ["claim", "t00000"]):
        handoff_ok(args, path, env={"HANDOFF_COMMAND_SERVER": "0"})
    return path


def harness_state(n: int) -> Path:
    """The skill's own layout: .harness/tasks.json with N tasks, the first in progress and
    claimed by this worker, the skill marked active, one session counted."""
    root = fresh_dir(f"harness-{n}")
    root.mkdir()
    baseline_harness.setup(root, n)
    tasks_path = root / ".harness" / "tasks.json"
    data = json.loads(tasks_path.read_text())
    first = data["tasks"][0]
    first.update(status="in_progress", claimed_by=WORKER, lease_expires_at="2099-01-01T00:00:00Z",
                 started_at_commit="0" * 40)
    data["session_count"] = 1
    data["session_config"]["max_sessions"] = 0
    tasks_path.write_text(json.dumps(data, indent=2) + "\n")
    (root / ".harness" / "active").write_text("1\n")
    return root


def installed_hooks(path: Path, *options: str) -> dict[str, str]:
    """`hooks install --agent claude [OPTIONS]` in `path`, as a user runs it in a fresh
    repository: event -> the command it wrote into .claude/settings.json."""
    handoff_ok(["hooks", "install", "--agent", "claude", *options], path)
    settings = json.loads((path / ".claude" / "settings.json").read_text())
    commands = {event: entries[0]["hooks"][0]["command"] for event, entries in settings["hooks"].items()}
    # its first run starts the server where the install turned it on: wait for it, as an
    # agent session's second turn would find it
    run_proc(["sh", "-c", commands["Stop"]], path, input=payload("Stop", path))
    if git("config", "--get", "handoff.commandServer", cwd=path, check=False) == "true":
        sock = path / ".git" / "handoff" / "cmdserver" / "sock"
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    return commands


def bare_python() -> str:
    """A venv of this Python without site-packages (made once per run)."""
    venv = workdir() / "bare-venv"
    if not venv.exists():
        subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def start_server(path: Path, env: dict[str, str]) -> None:
    run_proc(HANDOFF + ["status"], path, env=env)
    sock = path / ".git" / "handoff" / "cmdserver" / "sock"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sock.exists():
            r = run_proc(HANDOFF + ["status"], path, env=env)
            log = (sock.parent / "log").read_text()
            if r.rc == 0 and "worker" in log:
                return
        time.sleep(0.1)
    raise RuntimeError("the command server did not start")


def served_count(path: Path) -> int:
    log = path / ".git" / "handoff" / "cmdserver" / "log"
    return sum(1 for line in log.read_text().splitlines() if re.search(r" worker \d+: hook ", line))


def stop_server(path: Path) -> None:
    log = path / ".git" / "handoff" / "cmdserver" / "log"
    if not log.exists():
        return
    for line in log.read_text().splitlines():
        m = re.search(r" start (\d+) ", line)
        if m:
            try:
                os.kill(int(m.group(1)), 15)
            except ProcessLookupError:
                pass


def hooks_scenario(quick: bool) -> list[Row]:
    repeats = 7 if quick else 21
    sizes = (100, 1000) if quick else (100, 10_000)
    hooks_dir = os.environ.get("HARNESS_HOOKS")
    have_harness = bool(hooks_dir) and all((Path(hooks_dir) / f).is_file()  # type: ignore[arg-type]
                                           for f in ("harness-stop.py", "harness-sessionstart.py"))
    rows: list[Row] = []
    bare = bare_python() if have_harness else ""
    for n in sizes:
        ours = handoff_state(n)
        as_installed = handoff_state(n)
        commands = installed_hooks(as_installed)
        installed_off = handoff_state(n)
        commands_off = installed_hooks(installed_off, "--no-command-server")
        theirs = harness_state(n) if have_harness else None
        plain_env = {"HANDOFF_COMMAND_SERVER": "0"}
        served_env = {"HANDOFF_COMMAND_SERVER": "1", "HANDOFF_COMMAND_SERVER_IDLE": "600"}
        start_server(ours, served_env)
        try:
            for event, hook, script in HOOKS:
                before = served_count(ours)
                times: dict[str, list[float]] = {v: [] for v in VARIANTS}
                outs: dict[str, bytes] = {}
                for round_ in range(repeats + 1):
                    for variant in VARIANTS:
                        if variant.startswith("harness"):
                            if theirs is None:
                                continue
                            r = run_proc([bare if variant == "harness" else PY, str(Path(hooks_dir) / script)],  # type: ignore[arg-type]
                                         theirs, env={"HARNESS_WORKER_ID": WORKER, "CLAUDE_PROJECT_DIR": str(theirs)},
                                         input=payload(event, theirs))
                        elif variant.startswith("installed"):
                            where, how = ((as_installed, commands) if variant == "installed"
                                          else (installed_off, commands_off))
                            r = run_proc(["sh", "-c", how[event]], where, env={"CLAUDE_PROJECT_DIR": str(where)},
                                         input=payload(event, where))
                        elif variant == "python":
                            r = run_proc([PY, "-c", "pass"], ours)
                        elif variant == "fast":
                            r = run_proc(cmdclient.fast_command(["hook", hook]), ours, env=served_env,
                                         input=payload(event, ours))
                        else:
                            r = run_proc(HANDOFF + ["hook", hook], ours,
                                         env=plain_env if variant == "plain" else served_env,
                                         input=payload(event, ours))
                        if r.rc != 0:
                            raise RuntimeError(f"{variant} {event} exited {r.rc}: "
                                               f"{r.err.decode(errors='replace')[-300:]}")
                        outs[variant] = r.out
                        if round_:  # the first round warms the caches
                            times[variant].append(r.seconds)
                if not outs["plain"] == outs["served"] == outs["fast"]:
                    raise RuntimeError(f"{event}: the served output differs from the in-process one")
                if served_count(ours) - before < 2 * (repeats + 1):
                    raise RuntimeError(f"{event}: not every served run was served (the server went stale?)")
                plain, served, fast = median(times["plain"]), median(times["served"]), median(times["fast"])
                label = f"{event} hook, {n:,} tasks"
                floor = median(times["python"])
                if theirs is not None:
                    base, same = median(times["harness"]), median(times["harness-site"])
                    installed = median(times["installed"])
                    rows.append(Row(f"{label}: as `hooks install --agent claude` writes it", ms(installed),
                                    f"harness's own {ms(base)}", installed / base, "<= 1.0x", installed / base <= 1.0))
                    off = median(times["installed-off"])
                    rows.append(Row(f"{label}: as `hooks install --agent claude --no-command-server` writes it",
                                    ms(off), f"harness's own {ms(base)}", off / base))
                    rows.append(Row(f"{label}: served, fast client", ms(fast), f"harness's own {ms(base)}", fast / base,
                                    "<= 1.0x", fast / base <= 1.0))
                    rows.append(Row(f"{label}: served", ms(served), f"harness's own {ms(base)}", served / base))
                    rows.append(Row(f"{label}: in-process", ms(plain), f"harness's own {ms(base)}", plain / base))
                    rows.append(Row(f"{label}: served, both under this Python's site", ms(served),
                                    f"harness's own {ms(same)}", served / same))
                else:
                    rows.append(Row(f"{label}: served vs harness", "n/a (HARNESS_HOOKS not set)", target="<= 1.0x"))
                rows.append(Row(f"{label}: served vs starting Python", ms(served), f"python -c pass {ms(floor)}",
                                served / floor))
                rows.append(Row(f"{label}: served, fast client vs served", ms(fast), f"served {ms(served)}",
                                fast / served))
                rows.append(Row(f"{label}: served vs in-process", ms(served), f"in-process {ms(plain)}",
                                served / plain))
        finally:
            stop_server(ours)
            stop_server(as_installed)
    return rows


def server_off_scenario(quick: bool) -> list[Row]:
    """What the client costs a repository that never turned the server on (the default):
    it looks for the socket and reads the git config files for the switch, at every
    start. Against HANDOFF_COMMAND_SERVER=0, where it returns at once."""
    repeats = 11 if quick else 31
    path = state_copy("server-off-100", 100)
    times: dict[str, list[float]] = {"default": [], "off": []}
    for round_ in range(repeats + 1):
        for variant, env in (("default", {}), ("off", {"HANDOFF_COMMAND_SERVER": "0"})):
            r = run_proc(HANDOFF + ["next"], path, env=env)
            if r.rc != 0:
                raise RuntimeError(f"next ({variant}) exited {r.rc}: {r.err.decode(errors='replace')[-300:]}")
            if round_:
                times[variant].append(r.seconds)
    if (path / ".git" / "handoff" / "cmdserver").exists():
        raise RuntimeError("a server started in a repository that did not ask for one")
    default, off = median(times["default"]), median(times["off"])
    return [Row("next, 100 tasks, server off by default (the client reads the git config)", ms(default),
                f"HANDOFF_COMMAND_SERVER=0 {ms(off)}", default / off)]


# -- what each path imports ------------------------------------------------------------

def import_table(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None,
                 top: int = 12) -> tuple[str, int, float]:
    """(the `top` slowest top-level imports as a table, how many modules, their total ms)."""
    r = run_proc(argv, cwd, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, input=stdin)
    rows = []
    for line in r.err.decode(errors="replace").splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)), m.group(4)))
    total = sum(s for s, _, _, _ in rows) / 1000
    tops = sorted((r for r in rows if r[2] <= 1), key=lambda r: -r[1])[:top]
    text = "\n".join(f"    {c / 1000:8.1f} ms  {name}" for _, c, _, name in tops)
    return text, len(rows), total


def importtime_report(n: int = 10_000) -> tuple[str, list[Row]]:
    path = handoff_state(n)
    served_env = {"HANDOFF_COMMAND_SERVER": "1", "HANDOFF_COMMAND_SERVER_IDLE": "600", "PYTHONPROFILEIMPORTTIME": "1"}
    start_server(path, served_env)  # started with the variable: the client measuring its imports still matches
    parts, rows = [], []
    try:
        for title, args, stdin in (("hook claude-stop", ["hook", "claude-stop"], payload("Stop", path)),
                                   ("next", ["next"], None)):
            fast = cmdclient.fast_command(args)
            fast[1:1] = ["-X", "importtime"]  # -I ignores PYTHONPROFILEIMPORTTIME
            for variant, env, argv in (("in-process", {"HANDOFF_COMMAND_SERVER": "0"}, HANDOFF + args),
                                       ("served", served_env, HANDOFF + args),
                                       ("served, fast client", served_env, fast)):
                text, count, total = import_table(argv, path, env, stdin)
                parts.append(f"{title}, {variant}: {count} modules imported, {total:.1f} ms (sum of self times)\n"
                             f"{text}")
                rows.append(Row(f"imports of `{title}`, {variant}", f"{count} modules, {total:.1f} ms"))
    finally:
        stop_server(path)
    return "\n\n".join(parts), rows


def scenario(quick: bool) -> list[Row]:
    rows = hooks_scenario(quick) + server_off_scenario(quick)
    report, import_rows = importtime_report(1000 if quick else 10_000)
    print(report, file=sys.stderr, flush=True)
    return rows + import_rows


if __name__ == "__main__":
    from bench.run import print_table

    print_table(scenario("--quick" in sys.argv))
