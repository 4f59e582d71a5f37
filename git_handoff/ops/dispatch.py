"""Background dispatch: hand a prompt to an agent backend, keep its output, exit
status and result in the state (one blob per run, `dispatch/<run_id>.json`).

A backend is named in git config:

    handoff.backend.<name>.command   run through the shell; the prompt on stdin and
                                     in $HANDOFF_PROMPT_FILE
    handoff.backend.<name>.resume    optional; `{session_id}` is replaced by the
                                     backend session id an earlier run printed

A run's id is `<seq>-<slug>`: the sequence number is allocated inside a state
transaction (so two `dispatch new` never get the same one), the slug is one to
three lowercase words. Two clones working offline may both mint `004-fix-auth`, so a
run's record is keyed by its id and the clone that made it
(`dispatch/004-fix-auth@<clone>.json`, field `key`); a run id typed alone names this
clone's run, else the only one of that id, and `004-fix-auth@<clone prefix>` picks
one of several. Records from before fleet ids (`dispatch/<seq>-<slug>.json`) keep
working. Full output lives in the clone's private directory
(`<git common dir>/handoff/dispatch/<run_id>/`); the state keeps the exit status,
the result, the backend session id and the tail of the output.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from git_handoff.core import decoding, field_checks
from git_handoff.core.errors import Negative, Signalled, UsageError, interrupt_exit_code
from git_handoff.core.model import now_iso
from git_handoff.core.record_schemas import DispatchRun
from git_handoff.infra import procs
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import identity
from git_handoff.state.snapshot import StateReader
from git_handoff.state.store import StateStore, Tx

DISPATCH_DIR = "dispatch"
SLUG = re.compile(r"^[a-z]+(?:-[a-z]+){0,2}$")
RUN_ID = re.compile(r"^(?P<seq>[0-9]{3,})-(?P<slug>[a-z]+(?:-[a-z]+){0,2})(?:@(?P<clone>[0-9a-f]{4,16}))?$")
BACKEND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
OUTPUT_KEPT_IN_STATE = 64 * 1024  # the tail of stdout/stderr recorded in the state blob
FINISHED = ("succeeded", "failed")
POLL_SECONDS = 0.1


def check_slug(slug: str) -> str:
    if not isinstance(slug, str) or not SLUG.match(slug) or len(slug) > 60:
        raise UsageError(
            f"invalid slug {slug!r}: use one to three lowercase words joined by '-' "
            "(like fix-auth); dates, numbers and other characters are refused"
        )
    return slug


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise UsageError(f"invalid run id {run_id!r}: a run id looks like 001-fix-auth "
                         "(see `git handoff dispatch list`)")
    return run_id


def record_path(run_id: str) -> str:
    return f"{DISPATCH_DIR}/{run_id}.json"


def resolve(source: StateReader, repo: Repo, run_id: str) -> str:
    """The key of the run `run_id` names in `source` (a Snapshot or Tx): the exact key,
    else this clone's run of that id, else the only one; UsageError when none or several."""
    check_run_id(run_id)
    if source.read(record_path(run_id)) is not None:
        return run_id
    short, _, prefix = run_id.partition("@")
    mine = f"{short}@{identity.clone_id(repo)}"
    if not prefix and source.read(record_path(mine)) is not None:
        return mine
    found: list[str] = [name[:-5] for name in source.listdir(DISPATCH_DIR)
             if name.startswith(f"{short}@{prefix}") and name.endswith(".json")]
    if len(found) == 1:
        return found[0]
    if found:
        shown = ", ".join(f"{short}@{k.partition('@')[2][:8]}" for k in sorted(found))
        raise UsageError(f"run id {run_id!r} names {len(found)} runs that clones minted alike offline: "
                         f"name one of {shown}")
    raise UsageError(f"no dispatch run {run_id!r} (see `git handoff dispatch list`)")


def key_of(record: DispatchRun | Mapping[str, object]) -> str:
    """The key a run record is stored under (its run id, for records from before fleet ids)."""
    return str(record.get("key") or record["run_id"])


def conversation_of(record: DispatchRun | Mapping[str, object]) -> str:
    """The key of the run that started `record`'s conversation."""
    return str(record.get("conversation_key") or record.get("conversation") or key_of(record))


def run_dir(store: StateStore, run_id: str) -> Path:
    path = store.repo.handoff_dir / DISPATCH_DIR / run_id
    path.mkdir(parents=True, exist_ok=True)
    return path


def backend_commands(store: StateStore, backend: str) -> tuple[str, str | None]:
    """(command, resume command or None) of a backend named in git config."""
    if not BACKEND_NAME.match(backend or ""):
        raise UsageError(f"invalid backend name {backend!r}")
    command = store.repo.config_get(f"handoff.backend.{backend}.command")
    if not command or not command.strip():
        raise UsageError(
            f"no backend {backend!r}: set `git config handoff.backend.{backend}.command 'CMD'` "
            "(run through the shell with the prompt on stdin)"
        )
    resume = store.repo.config_get(f"handoff.backend.{backend}.resume")
    return command, (resume if resume and resume.strip() else None)


# -- records ------------------------------------------------------------------------


def get(store: StateStore, run_id: str) -> DispatchRun:
    snap = store.snapshot()
    record = snap.read_json(record_path(resolve(snap, store.repo, run_id)))
    if not isinstance(record, dict):
        raise UsageError(f"no dispatch run {run_id!r} (see `git handoff dispatch list`)")
    return _with_liveness(cast(DispatchRun, record))


def list_runs(store: StateStore) -> list[DispatchRun]:
    snap = store.snapshot()
    out = []
    for name in snap.listdir(DISPATCH_DIR):
        if name.endswith(".json"):
            record = snap.read_json(f"{DISPATCH_DIR}/{name}")
            if isinstance(record, dict):
                out.append(_with_liveness(cast(DispatchRun, record)))
    out.sort(key=lambda r: (int(r.get("seq") or 0), r.get("run_id", ""), r.get("clone") or ""))
    return out


def _with_liveness(record: DispatchRun) -> DispatchRun:
    """A running record whose runner died on this host is reported as lost."""
    if record.get("status") == "running" and record.get("host") == socket.gethostname():
        pid = record.get("pid")
        if isinstance(pid, int) and not procs.alive(pid):
            record = {**record, "status": "failed", "lost": True,
                      "error": "the process running this dispatch died before recording a result"}
    return record


def _next_seq(tx: Tx) -> int:
    return next_seq(tx.listdir(DISPATCH_DIR))


def next_seq(names: list[str]) -> int:
    """One more than the highest sequence number among the run files `names`."""
    highest = 0
    for name in names:
        head = name.split("-", 1)[0]
        if head.isdigit():
            highest = max(highest, int(head))
    return highest + 1


def run_key(seq: int, slug: str, clone: str) -> str:
    """A run's key: its id and the clone that minted it (two clones may mint one id)."""
    return f"{seq:03d}-{slug}@{clone}"


def new(store: StateStore, *, backend: str, slug: str, prompt: str,
        resume_of: str | None = None) -> DispatchRun:
    """Record a new run (status `new`) and return it; the sequence number is allocated in the transaction."""
    check_slug(slug)
    backend_commands(store, backend)
    if not prompt.strip():
        raise UsageError("the prompt is empty: pass it on stdin")

    clone = identity.clone_id(store.repo)

    def apply(tx: Tx) -> DispatchRun:
        seq = _next_seq(tx)
        run_id = f"{seq:03d}-{slug}"
        key = run_key(seq, slug, clone)
        record: DispatchRun = {
            "run_id": run_id,
            "key": key,
            "clone": clone,
            "seq": seq,
            "slug": slug,
            "backend": backend,
            "prompt": prompt,
            "status": "new",
            "created_at": now_iso(),
            "updated_at": now_iso(),
            "created_by": store.repo.signature().name,
            # the run ids as shown, and the keys that name the runs whichever clone made them
            "conversation": (resume_of or key).partition("@")[0],
            "conversation_key": resume_of or key,
            "resume_of": resume_of.partition("@")[0] if resume_of else None,
            "resume_of_key": resume_of,
            "session_id": None,
            "exit_status": None,
            "result": None,
            "stdout_tail": None,
            "stderr_tail": None,
            "started_at": None,
            "finished_at": None,
            "host": None,
            "pid": None,
        }
        tx.put_json(record_path(key), record)
        return record

    record = store.transact(apply)
    (run_dir(store, key_of(record)) / "prompt.md").write_text(prompt)
    return record


def _conversation_session_id(store: StateStore, first: DispatchRun) -> str | None:
    """The newest backend session id of the conversation `first` started."""
    conversation = conversation_of(first)
    best: tuple[int, str] | None = None
    for record in list_runs(store):
        if conversation_of(record) != conversation:
            continue
        sid = record.get("session_id")
        if isinstance(sid, str) and sid and (best is None or int(record["seq"]) > best[0]):
            best = (int(record["seq"]), sid)
    return best[1] if best else None


def new_resume(store: StateStore, first_run_id: str, *, prompt: str, slug: str | None = None) -> DispatchRun:
    """A follow-up run in the conversation `first_run_id` started (the stable handle)."""
    first = get(store, first_run_id)
    conversation = conversation_of(first)
    if conversation != key_of(first):
        first = get(store, conversation)
    _, resume = backend_commands(store, first["backend"])
    if resume is None:
        raise UsageError(
            f"backend {first['backend']!r} cannot resume: set `git config handoff.backend.{first['backend']}.resume "
            "'CMD {session_id}'`"
        )
    if _conversation_session_id(store, first) is None:
        raise UsageError(
            f"run {first['run_id']} has no backend session id yet (status {first['status']}): "
            "resume needs a finished run whose last output line was a JSON object with a session_id"
        )
    return new(store, backend=first["backend"], slug=slug or first["slug"], prompt=prompt, resume_of=key_of(first))


def _update(store: StateStore, run_id: str, changes: dict[str, Any], *,
            expect: tuple[str, ...] | None = None) -> DispatchRun:
    def apply(tx: Tx) -> DispatchRun:
        key = resolve(tx, store.repo, run_id)
        record = tx.read_json(record_path(key))
        if not isinstance(record, dict):
            raise UsageError(f"no dispatch run {run_id!r} (see `git handoff dispatch list`)")
        if expect is not None and record.get("status") not in expect:
            raise UsageError(
                f"run {run_id} is {record.get('status')}, not {' or '.join(expect)}: "
                "results are kept; start another with `git handoff dispatch new`"
            )
        record = dict(record, **changes, updated_at=now_iso())
        tx.put_json(record_path(key), record)
        return cast(DispatchRun, record)  # changes are fields of a run (this module's own)

    return store.transact(apply)


# -- running ------------------------------------------------------------------------


def _command_for(store: StateStore, record: DispatchRun) -> str:
    command, resume = backend_commands(store, record["backend"])
    resume_of = record.get("resume_of")
    if not resume_of:
        return command
    first = get(store, record.get("resume_of_key") or resume_of)
    session_id = _conversation_session_id(store, first)
    if resume is None or session_id is None:
        raise UsageError(f"run {record['run_id']} cannot resume {resume_of}: no resume command or session id")
    # the id goes into a command line the user's template may already quote
    # ('--resume {session_id}' or "--resume '{session_id}'"): only a safe word can go
    # in whole, whichever quoting surrounds it
    if not field_checks.SAFE_WORD.fullmatch(session_id):
        raise UsageError(f"run {record['run_id']}: the backend session id {session_id[:40]!r} holds characters "
                         "that are not safe in a command line (letters, digits and ._:@+=- only)")
    return resume.replace("{session_id}", shlex.quote(session_id))


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    if len(text) > OUTPUT_KEPT_IN_STATE:
        return "[...]" + text[-OUTPUT_KEPT_IN_STATE:]
    return text


def parse_output(stdout: str) -> tuple[str | None, str]:
    """(backend session id, result text) from a backend's standard output.

    A last non-empty line holding a JSON object is the backend's report: its
    `session_id` names the conversation, its `result` (when text) is the result.
    Otherwise the result is the whole output.
    """
    lines = [line for line in stdout.splitlines() if line.strip()]
    if lines:
        try:
            obj = decoding.load_json_text(lines[-1], "the backend's report")
        except UsageError:  # not a report (or one nested too deep): the whole output is the result
            obj = None
        if isinstance(obj, dict):
            sid = obj.get("session_id")
            result = obj.get("result")
            return (str(sid) if sid not in (None, "") else None,
                    result if isinstance(result, str) else stdout)
    return None, stdout


def start_background(store: StateStore, run_id: str) -> DispatchRun:
    """Mark the run running and leave it to a detached process; returns at once."""
    record = get(store, run_id)
    run_id = key_of(record)
    if record.get("status") != "new":
        raise UsageError(f"run {run_id} is {record.get('status')}, not new: results are kept; "
                         "start another with `git handoff dispatch new`")
    _command_for(store, record)  # refuse a bad run now, not in the detached process
    workdir = store.repo.root()
    out_dir = run_dir(store, run_id)
    log = open(out_dir / "runner.log", "ab")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "git_handoff", "dispatch", "run", run_id, "--detached-child"],
            cwd=workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
    finally:
        log.close()
    try:
        return _update(store, run_id, {"status": "running", "started_at": now_iso(), "host": socket.gethostname(),
                                       "pid": proc.pid}, expect=("new",))
    except BaseException:
        proc.kill()
        raise


def execute(store: StateStore, run_id: str, *, detached_child: bool = False) -> DispatchRun:
    """Run the backend in this process and record its outcome; returns the final record."""
    record = get(store, run_id)
    run_id = key_of(record)
    if detached_child:
        # the parent marks the run as ours right after starting us
        deadline = time.monotonic() + 30
        while record.get("status") == "new" and time.monotonic() < deadline:
            time.sleep(0.02)
            record = get(store, run_id)
        if record.get("status") != "running" or record.get("pid") != os.getpid():
            return record
    else:
        record = _update(store, run_id, {"status": "running", "started_at": now_iso(), "host": socket.gethostname(),
                                         "pid": os.getpid()}, expect=("new",))
    try:
        command = _command_for(store, record)
    except UsageError as exc:
        return _update(store, run_id, {"status": "failed", "finished_at": now_iso(), "error": exc.message})
    out_dir = run_dir(store, run_id)
    prompt_file = out_dir / "prompt.md"
    prompt_file.write_text(record["prompt"])
    token = f"dispatch-{os.getpid()}-{secrets.token_hex(6)}"  # tags whatever the backend leaves running
    env = dict(os.environ, HANDOFF_PROMPT_FILE=str(prompt_file), HANDOFF_RUN_ID=record["run_id"],
               HANDOFF_AGENT_TOKEN=token)
    # Its own session: a terminal's Ctrl-C reaches this process only, which ends the
    # backend's whole tree and records the run; later signals wait for that to finish.
    # Deferred: a signal is raised by procs.wait, never inside Popen (a backend started
    # but not yet known) nor inside subprocess's own wait.
    with procs.signals_as_interrupt(deferred=True) as interrupts, open(out_dir / "out.txt", "wb") as out, \
            open(out_dir / "err.txt", "wb") as err, open(prompt_file, "rb") as stdin:
        proc = subprocess.Popen(["/bin/sh", "-c", command], cwd=store.repo.root(), stdin=stdin, stdout=out,
                                stderr=err, env=env, start_new_session=True)
        try:
            code = procs.wait(proc, interrupts)
        except KeyboardInterrupt as exc:
            procs.kill_tree(proc.pid, token)
            proc.wait()
            _update(store, run_id,
                    {"status": "failed", "finished_at": now_iso(), "exit_status": interrupt_exit_code(exc),
                                    "error": "interrupted" + (f" by {signal.Signals(exc.signum).name}"
                                                              if isinstance(exc, Signalled) else "")})
            raise
    stdout = (out_dir / "out.txt").read_bytes()
    stderr = (out_dir / "err.txt").read_bytes()
    session_id, result = parse_output(stdout.decode("utf-8", errors="replace"))
    (out_dir / "result.md").write_text(result)
    exit_status = code if code >= 0 else 128 - code
    return _update(store, run_id, {
        "status": "succeeded" if code == 0 else "failed",
        "exit_status": exit_status,
        "finished_at": now_iso(),
        "session_id": session_id,
        "result": result if len(result) <= OUTPUT_KEPT_IN_STATE else _tail(result.encode()),
        "stdout_tail": _tail(stdout),
        "stderr_tail": _tail(stderr),
        "output": _tail(stdout + stderr),  # both streams, stdout first (each in full in out.txt, err.txt)
        "command": command,
    })


def wait(store: StateStore, run_ids: list[str], *, timeout: float | None = None) -> list[DispatchRun]:
    """Block until every run has finished; Negative when one did not succeed (or time ran out)."""
    if not run_ids:
        raise UsageError("name at least one RUN_ID to wait for")
    for run_id in run_ids:
        record = get(store, run_id)
        if record.get("status") == "new":
            raise UsageError(f"run {run_id} was never started: `git handoff dispatch run {run_id} --background`")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        records = [get(store, r) for r in run_ids]
        if all(r.get("status") in FINISHED for r in records):
            break
        if deadline is not None and time.monotonic() >= deadline:
            waiting = [r["run_id"] for r in records if r.get("status") not in FINISHED]
            raise Negative(f"timed out waiting for {', '.join(waiting)}", payload=records)
        time.sleep(POLL_SECONDS)
    failed = [r for r in records if r.get("status") != "succeeded"]
    if failed:
        names = ", ".join(f"{r['run_id']} (exit {r.get('exit_status')})" for r in failed)
        raise Negative(f"run(s) failed: {names}", payload=records)
    return records


def result(store: StateStore, run_id: str) -> DispatchRun:
    record = get(store, run_id)
    if record.get("status") not in FINISHED:
        raise Negative(f"run {run_id} has not finished (status {record.get('status')})", payload=record)
    return record

