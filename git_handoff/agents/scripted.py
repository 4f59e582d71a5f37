"""A scripted coding agent that follows the session protocol, for the demo and tests.

    python -m git_handoff.agents.scripted [options]

It acknowledges its session, then claims, does, commits and completes tasks until
`claim` says to stop (nothing eligible, or the session's task limit) or the session
has handed off. "Doing" task ID means writing `ID.txt` holding `done-ID`, which is
what the demo's and the tests' validation commands check; a task whose title holds
`append:NAME` also appends the line `ID` to the file NAME (two such tasks built from one
base conflict when their work is brought together: tests/e2e/test_work_fleet.py).

Misbehaviour on request, to exercise the relay's failure paths:
  --never-ack          start, then hang without acknowledging
  --crash-on ID        claim ID, write its file, then die before committing (once)
  --fail-first ID      the first attempt at ID writes the wrong content (done fails)
  --slow S             sleep S seconds after each task
  --checkpoints        record a checkpoint once the file is written
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


class Handoff:
    """Runs `git handoff ...`: in this process (fast), or as the real executable."""

    def __init__(self, root: Path, subprocess_mode: bool) -> None:
        self.root = root
        self.subprocess_mode = subprocess_mode

    def __call__(self, *args: str) -> tuple[int, str, str]:
        if self.subprocess_mode:
            proc = subprocess.run(["git", "handoff", *args], cwd=self.root, capture_output=True, text=True)
            return proc.returncode, proc.stdout, proc.stderr
        from git_handoff.cli import main

        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return code, out.getvalue(), err.getvalue()


def git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def handed_off(session: int) -> bool:
    try:
        from git_handoff.infra.gitrepo import Repo
        from git_handoff.ops import handoff
        from git_handoff.state.store import StateStore

        return bool(handoff.handed_off(StateStore(Repo.discover()), session))
    except Exception:  # noqa: BLE001 - the agent keeps going on what claim says
        return False


def say(text: str) -> None:
    print(f"[agent {os.environ.get('HANDOFF_SESSION', '?')}] {text}", flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m git_handoff.agents.scripted", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--never-ack", action="store_true")
    parser.add_argument("--crash-on", action="append", default=[], metavar="ID")
    parser.add_argument("--fail-first", action="append", default=[], metavar="ID")
    parser.add_argument("--slow", type=float, default=0.0, metavar="S")
    parser.add_argument("--checkpoints", action="store_true")
    parser.add_argument("--subprocess", action="store_true", help="run the real `git handoff` executable")
    parser.add_argument("--trace", metavar="FILE", help="append one line per session start/end (for tests)")
    return parser


@dataclass
class ScriptedSession:
    """One session of the agent: its options, its work tree, where it marks what it did
    once (a crash, a first failure), and how it runs `git handoff`."""

    args: argparse.Namespace
    root: Path
    number: int
    marks: Path
    handoff: Handoff
    done_count: int = 0

    def trace(self, event: str) -> None:
        if self.args.trace:
            with open(self.args.trace, "a") as fh:
                fh.write(f"session={self.number} pid={os.getpid()} {event}\n")

    def work(self) -> int:
        """Claim, do and complete tasks until claim says stop or the session handed off:
        the agent's exit code."""
        while True:
            code, out, err = self.handoff("claim", "--json")
            if code == 1:
                say(f"stop: {err.strip().removeprefix('error: ')}")
                break
            if code != 0:
                say(f"claim failed ({code}): {err.strip()}")
                self.trace("end")
                return code
            task = json.loads(out)
            task_id, title = task["id"], task["title"]
            say(f"claimed {task_id}: {title}")
            self.do(task_id, title)
            failed = self.complete(task_id)
            if failed is not None:
                return failed
            if self.args.slow:
                time.sleep(self.args.slow)
            if self.number and handed_off(self.number):
                say("the session has handed off: stopping")
                break
        self.trace("end")
        say(f"session over: {self.done_count} task(s) completed")
        return 0

    def do(self, task_id: str, title: str) -> None:
        """Write the task's file (wrong the first time with --fail-first), append to the
        shared files its title names, crash when asked to (once), checkpoint, commit."""
        content = f"done-{task_id}\n"
        fail_mark = self.marks / f"scripted-failed-{task_id}"
        if task_id in self.args.fail_first and not fail_mark.exists():
            fail_mark.write_text("")
            content = f"not yet {task_id}\n"
        (self.root / f"{task_id}.txt").write_text(content)
        shared = [word[len("append:"):] for word in title.split() if word.startswith("append:")]
        for name in shared:
            if name and "/" not in name and not name.startswith("."):
                with open(self.root / name, "a", encoding="utf-8") as shared_file:
                    shared_file.write(f"{task_id}\n")
                git(self.root, "add", name)
        crash_mark = self.marks / f"scripted-crashed-{task_id}"
        if task_id in self.args.crash_on and not crash_mark.exists():
            crash_mark.write_text("")
            say(f"crashing in the middle of {task_id}")
            self.trace("crash")
            os._exit(7)
        if self.args.checkpoints:
            self.handoff("checkpoint", task_id, f"wrote {task_id}.txt", "--step", "1", "--of", "2")
        git(self.root, "add", f"{task_id}.txt")
        git(self.root, "commit", "-q", "-m", f"{task_id}: {title}")

    def complete(self, task_id: str) -> int | None:
        """`done`: None to go on (completed, or failed its check), else the agent's exit code."""
        code, _, err = self.handoff("done", task_id)
        if code == 0:
            self.done_count += 1
            say(f"completed {task_id}")
        elif code == 1:
            say(f"{task_id} failed its check and was rolled back")
        else:
            say(f"done {task_id} failed ({code}): {err.strip()}")
            self.trace("end")
            return code
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    root = Path(git(Path.cwd(), "rev-parse", "--show-toplevel").stdout.strip() or ".")
    marks = Path(git(root, "rev-parse", "--git-common-dir").stdout.strip())
    if not marks.is_absolute():
        marks = root / marks
    session = ScriptedSession(args, root, int(os.environ.get("HANDOFF_SESSION") or 0), marks / "handoff",
                      Handoff(root, args.subprocess))
    session.trace("start")
    prompt_file = os.environ.get("HANDOFF_PROMPT_FILE")
    if prompt_file and Path(prompt_file).is_file():
        say(f"read the prompt ({Path(prompt_file).stat().st_size} bytes)")
    if args.never_ack:
        say("hanging without acknowledging")
        time.sleep(3600)
        return 1
    code, _, err = session.handoff("ack")
    if code != 0:
        say(f"ack failed: {err.strip()}")
        return 2
    say("acknowledged")
    return session.work()


if __name__ == "__main__":
    sys.exit(main())
