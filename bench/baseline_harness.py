"""Baseline for the claim benchmark: what the harness skill does to claim a task.

One `.harness/tasks.json` (version 2) holds every task; a claim takes a `mkdir`
lock in /tmp, reads the whole file, runs dependency validation and selection,
copies the file to `.bak`, writes the whole file to `.tmp` and renames it into
place, appends a `Starting` line to `.harness/progress.txt`, and drops the lock.

    python baseline_harness.py setup ROOT N     # a project with N pending tasks
    python baseline_harness.py claim ROOT WORKER
    python baseline_harness.py release ROOT ID  # back to pending (not timed)
    python baseline_harness.py done ROOT ID     # run the task's validation, then mark it completed
    python baseline_harness.py next ROOT -      # read-only selection: the id claim would take
    python baseline_harness.py stop ROOT -      # a Stop hook: payload on stdin, block while work remains
    python baseline_harness.py session-start ROOT -  # a SessionStart hook: progress tail + task summary

`next`, `stop` and `session-start` are what the harness's own read-only selection and
hook scripts do, reduced to their work: read the whole tasks.json, validate, select,
print (stop: a block decision while eligible or in-progress work remains; session-start:
the last lines of progress.txt and the counts as additional context). Nothing is written.

`done` is the skill's completion step: the validation command runs (sh -c, at the
project root, under its timeout); on success the task is marked completed under the
lock (whole file rewritten as above) and a `Completed` line appended; on failure the
attempt is counted with the error in `error_log` and the exit status is 1.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# a task of the old harness's tasks.json, as JSON: the baseline reads and writes it by key
TaskRecord = dict[str, Any]

PRIORITY = {"P0": 0, "P1": 1, "P2": 2}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_task(n: int) -> dict[str, object]:
    return {
        "id": f"task-{n:05d}",
        "title": f"Implement part {n} of the system",
        "status": "pending",
        "priority": ("P0", "P1", "P2")[n % 3],
        "depends_on": [f"task-{n - 7:05d}"] if n % 10 == 9 and n >= 7 else [],
        "attempts": 0,
        "max_attempts": 3,
        "started_at_commit": None,
        "validation": {"command": f"pytest -q tests/test_part_{n}.py", "timeout_seconds": 300},
        "on_failure": {"cleanup": None},
        "error_log": [],
        "checkpoints": [],
        "completed_at": None,
    }


def setup(root: Path, count: int) -> None:
    state = root / ".harness"
    state.mkdir(parents=True, exist_ok=True)
    data = {
        "version": 2,
        "created": now(),
        "session_config": {"concurrency_mode": "concurrent", "max_tasks_per_session": 20, "max_sessions": 50},
        "tasks": [make_task(n) for n in range(count)],
        "session_count": 1,
        "last_session": None,
    }
    (state / "tasks.json").write_text(json.dumps(data, indent=2) + "\n")
    (state / "progress.txt").write_text(f"[{now()}] [SESSION-1] INIT Harness initialized\n")


def lock_dir(root: Path) -> Path:
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return Path(f"/tmp/harness-{digest}.lock")


class Lock:
    def __init__(self, root: Path) -> None:
        self.path = lock_dir(root)

    def __enter__(self) -> Lock:
        try:
            self.path.mkdir()
        except FileExistsError:
            pid_file = self.path / "pid"
            try:
                pid = int(pid_file.read_text())
                os.kill(pid, 0)
                raise SystemExit(f"ERROR: Another harness session is active (pid={pid})") from None
            except (OSError, ValueError):
                stale = self.path.with_name(self.path.name + f".stale.{os.getpid()}")
                os.rename(self.path, stale)
                shutil.rmtree(stale, ignore_errors=True)
                self.path.mkdir()
        (self.path / "pid").write_text(str(os.getpid()))
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def validate(tasks: list[TaskRecord]) -> None:
    """Cycle detection, then blocked propagation (the harness's selection preamble)."""
    by_id = {t["id"]: t for t in tasks}
    for t in tasks:
        if t["status"] == "completed":
            continue
        stack, seen = list(t["depends_on"]), set()
        while stack:
            dep = stack.pop()
            if dep == t["id"]:
                t["status"] = "failed"
                t["error_log"].append(f"[DEPENDENCY] Circular dependency detected: {t['id']}")
                break
            if dep in seen or dep not in by_id:
                continue
            seen.add(dep)
            stack.extend(by_id[dep]["depends_on"])
    changed = True
    while changed:
        changed = False
        for t in tasks:
            if t["status"] not in ("pending", "failed"):
                continue
            for dep in t["depends_on"]:
                d = by_id.get(dep)
                if d and d["status"] == "failed" and (
                    d["attempts"] >= d["max_attempts"] or any("[DEPENDENCY]" in e for e in d["error_log"])
                ) and not any("[DEPENDENCY]" in e for e in t["error_log"]):
                    t["status"] = "failed"
                    t["error_log"].append(f"[DEPENDENCY] Blocked by failed {dep}")
                    changed = True


def write(state: Path, data: dict[str, Any]) -> None:
    path = state / "tasks.json"
    shutil.copyfile(path, state / "tasks.json.bak")
    tmp = state / "tasks.json.tmp"
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def claim(root: Path, worker: str) -> int:
    state = root / ".harness"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    with Lock(root):
        data = json.loads((state / "tasks.json").read_text())
        tasks = data["tasks"]
        validate(tasks)
        by_id = {t["id"]: t for t in tasks}
        stamp = datetime.now(UTC)

        def ready(t: TaskRecord) -> bool:
            return all(by_id.get(d, {}).get("status") == "completed" for d in t["depends_on"])

        def expired(t: TaskRecord) -> bool:
            lease: str | None = t.get("lease_expires_at")
            if not lease:
                return False
            return datetime.fromisoformat(lease.replace("Z", "+00:00")) <= stamp

        fresh = sorted((t for t in tasks if t["status"] == "pending" and ready(t)),
                       key=lambda t: (PRIORITY[t["priority"]], t["id"]))
        retry = [t for t in tasks if t["status"] == "failed" and t["attempts"] < t["max_attempts"] and ready(t)]
        stale = [t for t in tasks if t["status"] == "in_progress" and expired(t)]
        chosen = (fresh or retry or stale or [None])[0]
        if chosen is None:
            print("nothing eligible", file=sys.stderr)
            return 1
        chosen.update(
            status="in_progress",
            started_at_commit=head,
            claimed_by=worker,
            lease_expires_at=(stamp + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        write(state, data)
        with open(state / "progress.txt", "a") as fh:
            fh.write(f"[{now()}] [SESSION-1] Starting [{chosen['id']}] {chosen['title']} (base={head[:7]})\n")
    print(chosen["id"])
    return 0


def release(root: Path, task_id: str) -> int:
    state = root / ".harness"
    with Lock(root):
        data = json.loads((state / "tasks.json").read_text())
        for t in data["tasks"]:
            if t["id"] == task_id:
                t.update(status="pending", claimed_by=None, lease_expires_at=None, started_at_commit=None)
        write(state, data)
    return 0


def done(root: Path, task_id: str) -> int:
    state = root / ".harness"
    data = json.loads((state / "tasks.json").read_text())
    task = next((t for t in data["tasks"] if t["id"] == task_id), None)
    if task is None or task["status"] != "in_progress":
        print(f"ERROR: {task_id} is not in progress", file=sys.stderr)
        return 2
    validation = task["validation"]
    try:
        check = subprocess.run(["sh", "-c", validation["command"]], cwd=root, capture_output=True,
                               timeout=validation.get("timeout_seconds") or 300)
        ok, tail = check.returncode == 0, check.stdout.decode(errors="replace")[-200:]
    except subprocess.TimeoutExpired:
        ok, tail = False, "timed out"
    with Lock(root):
        data = json.loads((state / "tasks.json").read_text())
        task = next(t for t in data["tasks"] if t["id"] == task_id)
        if ok:
            task.update(status="completed", completed_at=now(), claimed_by=None, lease_expires_at=None)
            line = f"Completed [{task_id}] {task['title']}"
        else:
            task.update(status="failed", attempts=task["attempts"] + 1, claimed_by=None, lease_expires_at=None)
            task["error_log"].append(f"[TEST_FAIL] {tail.strip()}")
            line = f"ERROR [{task_id}] [TEST_FAIL] validation failed"
        write(state, data)
        with open(state / "progress.txt", "a") as fh:
            fh.write(f"[{now()}] [SESSION-1] {line}\n")
    print(task_id)
    return 0 if ok else 1


def _select(tasks: list[TaskRecord]) -> TaskRecord | None:
    validate(tasks)
    by_id = {t["id"]: t for t in tasks}

    def ready(t: TaskRecord) -> bool:
        return all(by_id.get(d, {}).get("status") == "completed" for d in t["depends_on"])

    fresh = sorted((t for t in tasks if t["status"] == "pending" and ready(t)),
                   key=lambda t: (PRIORITY[t["priority"]], t["id"]))
    retry = [t for t in tasks if t["status"] == "failed" and t["attempts"] < t["max_attempts"] and ready(t)]
    return next(iter(fresh or retry), None)


def next_task(root: Path) -> int:
    data = json.loads((root / ".harness" / "tasks.json").read_text())
    chosen = _select(data["tasks"])
    if chosen is None:
        return 1
    print(json.dumps(chosen))
    return 0


def stop(root: Path) -> int:
    payload = json.loads(sys.stdin.read() or "{}")
    if payload.get("stop_hook_active"):
        return 0
    data = json.loads((root / ".harness" / "tasks.json").read_text())
    mine = [t for t in data["tasks"] if t["status"] == "in_progress"]
    chosen = mine[0] if mine else _select(data["tasks"])
    if chosen is not None:
        print(json.dumps({"decision": "block", "reason": f"Work remains: [{chosen['id']}] {chosen['title']}"}))
    return 0


def session_start(root: Path) -> int:
    json.loads(sys.stdin.read() or "{}")
    state = root / ".harness"
    data = json.loads((state / "tasks.json").read_text())
    tasks = data["tasks"]
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    chosen = _select(tasks)
    tail = (state / "progress.txt").read_text().splitlines()[-20:]
    context = "\n".join([f"Tasks: {len(tasks)} " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())),
                         f"Next: {chosen['id'] if chosen else 'none'}", *tail])
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] in ("next", "stop", "session-start"):
        root = Path(argv[1]).resolve()
        return {"next": next_task, "stop": stop, "session-start": session_start}[argv[0]](root)
    if len(argv) != 3 or argv[0] not in ("setup", "claim", "release", "done"):
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    if argv[0] == "setup":
        setup(root, int(argv[2]))
        return 0
    if argv[0] == "claim":
        return claim(root, argv[2])
    if argv[0] == "done":
        return done(root, argv[2])
    return release(root, argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
