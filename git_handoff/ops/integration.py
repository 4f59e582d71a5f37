"""`integrate`: the one queue every finished task's work goes through to land on the target
branch, which then always passes every landed task's check (SPEC §10).

One round (`integrate`): with a remote, sync first (the state and everyone's published
work, refs/harness/work/...) and fetch the target; then, task by task in the queue's
order (core/landing.py: dependencies first, then priority, then completion time):

1. work already on the target (its commit an ancestor of the tip): recorded, nothing run;
2. otherwise the work is merged onto the tip where nobody works (infra/merge_tree.py; a
   fast-forward when the tip is below it), **the task's check runs on that exact tree** in
   a scratch worktree, and only if it passes does the target move, by a push naming the tip
   it was built on (remote/landing.py: a lost race fetches and builds again);
3. a conflict, or a check that fails on the merged tree, sends the task back as a new
   attempt (pending, or failed for good once its attempts are spent): the attempt is saved
   under refs/harness/attempts/ (`restore` brings its files back), and the error names the
   target commit and the conflicting files or the failing output;
4. work built on work the queue refused (a dependency's sent-back attempt:
   ops/work_refs.py) goes back too, without spending an attempt: landing it would put the
   refused work on the target unchecked by its own task's check.

A task waits, and says why, while its work is not here (not published or not fetched), its
writer is not approved (handoff.allowedSigners), its check is not approved here (`git
handoff trust`), or a dependency has not landed. One `integrate` at a time per repository
(a lock); clones race only on the target's push, which compare-and-swap settles.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TypedDict, cast

from git_handoff.core import landing as queue_order
from git_handoff.core.errors import Contention
from git_handoff.core.model import Task, now_iso
from git_handoff.infra import merge_tree, task_commands
from git_handoff.infra.file_lock import StateLock
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import work_refs
from git_handoff.ops.attempt_save import attempt_ref, attempt_refs
from git_handoff.remote import landing
from git_handoff.state import claim_index, redaction, trust, writers
from git_handoff.state import target as targets
from git_handoff.state.claim_checks import short
from git_handoff.state.store import StateStore, Tx

MOVE_TRIES = 5  # builds of one task's landing when the target keeps moving under it
LOCK_SECONDS = 5.0  # how long an integrate waits for another one in this repository
OUTPUT_SHOWN = 600  # characters of a failing check's output kept in the error


class Landed(TypedDict):
    task: str
    commit: str  # where the work is on the target now
    how: str  # "already" (it was there), "fast-forward" or "merged"


class Returned(TypedDict):
    task: str
    category: str  # CONFLICT or the check's (TEST_FAIL, TIMEOUT, ENV_SETUP)
    reason: str
    attempt_ref: str
    status: str  # pending (tried again) or failed (attempts spent)


class Waiting(TypedDict):
    task: str
    why: str


class IntegrateReport(TypedDict):
    target: str  # origin/main, or main
    tip: str | None  # the target's tip when the round ended
    landed: list[Landed]
    returned: list[Returned]
    waiting: list[Waiting]


def integrate(store: StateStore, *, remote: str | None = None,
              say: Callable[[str], None] | None = None) -> IntegrateReport:
    """Land every finished task's work that can land, one at a time (the module's docstring)."""
    repo = store.repo
    target = targets.resolve(repo, remote)
    tell = say or (lambda _text: None)
    try:
        with StateLock(repo.handoff_dir / "integrate.lock", LOCK_SECONDS):
            return _round(store, target, tell)
    except Contention as exc:
        if "integrate.lock" in exc.message:
            raise Contention("another `git handoff integrate` runs in this repository; try again when it ends") \
                from None
        raise


def _round(store: StateStore, target: targets.Target, say: Callable[[str], None]) -> IntegrateReport:
    repo = store.repo
    if target.remote is not None:
        from git_handoff.ops import sync  # noqa: PLC0415  (sync imports this module's callers)

        say(f"syncing with {target.remote}")
        sync.sync(store, target.remote)
        say(f"fetching {target.name}")
    tip = landing.bring(repo, target)
    report: IntegrateReport = {"target": target.name, "tip": tip, "landed": [], "returned": [], "waiting": []}
    snap = store.snapshot()
    tasks = snap.tasks()
    hidden = writers.unapproved(repo, store.head())
    carried = _carried(repo, tasks, tip)
    order = queue_order.queue(tasks, carried)
    refused = work_refs.refused(repo, tasks, tip) if order.order or order.waiting else {}
    held: set[str] = set()  # tasks of this round that did not land: their dependents wait
    for tid, behind in order.waiting:
        if (back := _if_stale(store, target, tasks[tid], refused)) is not None:
            report["returned"].append(back)
        else:
            report["waiting"].append({"task": tid, "why": behind})
    for task in order.order:
        if (back := _if_stale(store, target, task, refused)) is not None:  # before it waits on refused work
            report["returned"].append(back)
            held.add(task.id)
            continue
        why = _not_ready(repo, task, hidden, held, carried.get(task.id, frozenset()))
        if why is not None:
            report["waiting"].append({"task": task.id, "why": why})
            held.add(task.id)
            continue
        say(f"landing {task.id} on {target.name}")
        try:
            outcome = _land(store, target, task)
        except _CannotCheck as exc:  # this clone's environment, not the work: nothing spent
            report["waiting"].append({"task": task.id, "why": str(exc)})
            held.add(task.id)
            continue
        if "how" in outcome:
            report["landed"].append(cast(Landed, outcome))
        else:
            report["returned"].append(outcome)
            held.add(task.id)
            refused[str(task.get("completed_commit"))] = str(task.get("work_ref"))  # refused from now on
    if target.remote is not None and (report["landed"] or report["returned"]):
        from git_handoff.ops import sync  # noqa: PLC0415

        sync.sync(store, target.remote)
    report["tip"] = targets.tip(repo, target)
    return report


def _carried(repo: Repo, tasks: dict[str, Task], tip: str | None) -> dict[str, frozenset[str]]:
    """{task to land: the other finished tasks, not on the target, whose work its work holds}:
    work done one after the other in one worktree (core/landing.py lands those first)."""
    def unlanded(task: Task) -> str | None:
        commit = task.get("completed_commit")
        if task.status != "completed" or queue_order.landed(task) or not isinstance(commit, str) \
                or not repo.has_object(commit):  # another clone's work not fetched yet: it waits for that
            return None
        return None if tip is not None and (commit == tip or repo.is_ancestor(commit, tip)) else commit

    open_work = {t.id: c for t in tasks.values() if (c := unlanded(t)) is not None}
    out: dict[str, frozenset[str]] = {}
    for tid, commit in open_work.items():
        if not queue_order.to_land(tasks[tid]):
            continue
        held = frozenset(other for other, theirs in open_work.items()
                         if other != tid and theirs != commit and repo.is_ancestor(theirs, commit))
        if held:
            out[tid] = held
    return out


_UNSPENT = "no attempt spent"


class _CannotCheck(Exception):
    """A check that could not start in the scratch worktree (ENV_SETUP): the task waits."""


def _if_stale(store: StateStore, target: targets.Target, task: Task, refused: dict[str, str]) -> Returned | None:
    """Send `task` back when its work was built on refused work (module docstring, 4)."""
    commit = str(task.get("completed_commit"))
    stale = work_refs.built_on(store.repo, commit, refused) if store.repo.has_object(commit) else None
    if stale is None:
        return None
    # the first time unspent; again (a worktree that could not leave the refused work: not
    # clean, or its commits kept by no ref) it spends one, so that it ends
    again = any(_UNSPENT in entry for entry in task.error_log)
    return _send_back(store, task, "CONFLICT", f"its work ({task.get('work_ref')}) was built on {stale}, work the "
                      f"queue refused: claim it again from a clean worktree (the claim starts from {target.name}); "
                      + ("built on refused work again: an attempt spent" if again else _UNSPENT), spend=again)


def _not_ready(repo: Repo, task: Task, hidden: dict[str, str], held: set[str], carried: frozenset[str]) -> str | None:
    """Why `task` cannot land in this round, or None (`carried`: the tasks whose work its work holds)."""
    blocker = next((dep for dep in (*task.depends_on, *sorted(carried)) if dep in held), None)
    if blocker is not None:
        what = "dependency" if blocker in task.depends_on else "work holds the work of"
        return f"its {what} {blocker}, which did not land in this round"
    if task.id in hidden:
        return f"written by {hidden[task.id]}, a writer handoff.allowedSigners does not approve: never integrated"
    commit, ref = str(task.get("completed_commit")), str(task.get("work_ref"))
    if repo.ref_target(ref) != commit:
        return (f"its work {ref} is not here as its record names it (commit {commit[:7]}): "
                "not published or not fetched yet (`git handoff sync` on the clone that did it)")
    if not task.check:
        return "it has no check to run on the merged tree"
    if not trust.is_trusted(repo, task.check, trust.place(task.id, "validation")):
        return f"its check is not approved on this clone (`git handoff trust {task.id}`)"
    return None


def _land(store: StateStore, target: targets.Target, task: Task) -> Landed | Returned:
    """Build, check and move the target for one task; the outcome recorded in the state."""
    repo = store.repo
    work = str(task.get("completed_commit"))
    for _ in range(MOVE_TRIES):
        tip = targets.tip(repo, target)
        if tip is not None and (tip == work or repo.is_ancestor(work, tip)):
            return _record_landed(store, task, _landing_commit(repo, work, tip), "already")
        if tip is None or repo.is_ancestor(tip, work):
            candidate, how = work, "fast-forward"
        else:
            merged = merge_tree.merge(repo, tip, work)
            if merged.tree is None:
                shown = ", ".join(merged.conflicts[:10]) + (" …" if len(merged.conflicts) > 10 else "")
                return _send_back(store, task, "CONFLICT",
                                  f"its work ({task.get('work_ref')}) does not merge onto {target.name} at "
                                  f"{short(tip)}: conflicts in {shown}. Claim it again (the claim starts from "
                                  f"{target.name}), bring the work back with `git handoff restore {task.id} N` "
                                  "(N: the attempt this saves), resolve, commit, done")
            candidate = repo.create_commit(merged.tree, [tip, work],
                                           f"handoff: integrate {task.id}: "
                                           f"{redaction.redact_text(repo, task.title)[0]}\n\n"
                                           f"Task: {task.id}\nWork: {task.get('work_ref')}\n")
            how = "merged"
        path = merge_tree.Scratch(repo).at(candidate)
        result = redaction.redact_run(repo, task_commands.run_command(
            str(task.check), path, task.timeout_seconds,
            env={"HANDOFF_TASK": task.id, "HANDOFF_INTEGRATING": target.name}))  # its output is published
        if not result.ok and result.category == "ENV_SETUP":
            raise _CannotCheck(f"its check could not run in the scratch worktree here ({result.summary()[:200]}): "
                               "this clone lacks what the check needs (a tool, an ignored file such as a virtual "
                               "environment); integrate where it can run")
        if not result.ok:
            if landing.bring(repo, target) != tip:
                continue  # the target moved while it ran: check on the new tip
            output = " ".join(result.summary().split())[:OUTPUT_SHOWN]
            return _send_back(store, task, result.category or "TEST_FAIL",
                              f"its check fails on its work ({task.get('work_ref')}) merged onto {target.name} at "
                              f"{short(tip)} "
                              f"(it passed on the task's own commit {short(work)}): {output}")
        also = [f"{work}:{task.get('work_ref')}"] if target.remote is not None else []
        try:
            moved = landing.move(repo, target, candidate, tip, also=also)
        except landing.TargetMoved:
            landing.bring(repo, target)
            continue
        # not moved: another clone pushed this very commit first (the same merge, same second)
        return _record_landed(store, task, candidate, how if moved else "already")
    raise Contention(f"{target.name} kept moving while {task.id} was being landed ({MOVE_TRIES} tries); "
                     "nothing was lost, run `git handoff integrate` again")


def _landing_commit(repo: Repo, work: str, tip: str) -> str:
    """The commit of the target's first-parent line where `work` arrived: `work` itself when
    the target was fast-forwarded to it, else the merge that brought it (the same answer on
    every clone, so records written by two clones agree)."""
    proc = repo.git("rev-list", "--first-parent", "--ancestry-path", f"{work}..{tip}", check=False)
    lines = proc.stdout.decode().split()
    if not lines:
        return work
    oldest = lines[-1]
    return work if repo.commit_parents(oldest)[:1] == [work] else oldest


def _still(tx: Tx, task: Task) -> Task | None:
    """The task as `tx` has it, when it is still the completion this round read."""
    now = tx.task(task.id)
    if (now is None or now.status != "completed" or now.get("completed_commit") != task.get("completed_commit")
            or queue_order.landed(now)):
        return None
    return now


def _record_landed(store: StateStore, task: Task, commit: str, how: str) -> Landed:
    def apply(tx: Tx) -> None:
        now = _still(tx, task)
        if now is None:
            return
        tx.put_task(now.with_extra(integrated_commit=commit))
        said = {"already": "was on the target already", "fast-forward": "fast-forwarded the target",
                "merged": "merged onto the target"}[how]
        tx.log("INTEGRATE", f"{said} at {short(commit)} (work {short(str(task.get('completed_commit')))})",
               task=task.id)

    store.transact(apply)
    return {"task": task.id, "commit": commit, "how": how}


def _save_attempt(repo: Repo, task: Task, category: str, reason: str, session: int) -> str:
    """The returned work as a saved attempt (its tree, on top of the work commit), so that
    `attempts` lists it and `restore` brings its files back onto a new claim."""
    work = str(task.get("completed_commit"))
    base = task.started_at_commit if isinstance(task.started_at_commit, str) else None
    n = max(task.attempts + 1, max(attempt_refs(repo, task.id), default=0) + 1)
    files = ([{"status": "M", "path": p} for p in repo.tree_diff(repo.commit_tree(base), repo.commit_tree(work))]
             if base and repo.has_object(base) else [])
    for _ in range(50):
        record = {"task": task.id, "attempt": n, "time": now_iso(), "category": category, "reason": reason,
                  "base": base, "head": work, "branch": None, "worker": task.get("claimed_by"), "session": session,
                  "files": files, "index": None, "claim_snapshot": None}
        message = f"handoff attempt {task.id} #{n}: [{category}] {reason[:200]}\n\n{json.dumps(record, indent=2)}\n"
        commit = repo.create_commit(repo.commit_tree(work), [work], message)
        ref = attempt_ref(task.id, n)
        if repo.ref_target(attempt_ref(task.id, n, local=True)) is None \
                and repo.cas_ref(ref, commit, None, f"handoff: attempt {n} of {task.id} (integration)"):
            return ref
        n += 1
    raise Contention(f"could not name a new attempt ref for {task.id}; retry")


def _send_back(store: StateStore, task: Task, category: str, reason: str, *, spend: bool = True) -> Returned:
    """The task back to work as a new attempt (module docstring, 3; 4 with `spend` False:
    the attempt is saved but not counted)."""
    ref = _save_attempt(store.repo, task, category, reason, store.session)
    n = ref.rpartition("/")[2]
    reason = reason.replace(f"restore {task.id} N` (N: the attempt this saves)", f"restore {task.id} {n}`")
    status = {"status": "pending"}

    def apply(tx: Tx) -> None:
        now = _still(tx, task)
        if now is None:
            return
        attempts = now.attempts + (1 if spend else 0)
        spent = spend and attempts >= now.max_attempts
        new = dataclasses.replace(now, status="failed" if spent else "pending", attempts=attempts,
                                  completed_at=None, error_log=(*now.error_log, f"[{category}] {reason}"))
        new = new.with_extra(completed_commit=None, completed_session=None, uncommitted_at_completion=None,
                             work_ref=None, failed_at=now_iso(), last_attempt_ref=ref)
        new = tx.put_task(new)
        claim_index.carry(tx, [new], clean=not new.failed_for_good)
        status["status"] = new.status
        tx.log("ERROR", reason, task=task.id, category=category)
        tx.log("ROLLBACK", f"integration refused the work; attempt saved as {ref}", task=task.id)

    store.transact(apply)
    return {"task": task.id, "category": category, "reason": reason, "attempt_ref": ref, "status": status["status"]}


def exit_code(report: IntegrateReport) -> int:
    """0: everything landed or nothing to do; 1: something went back to work (SPEC §10)."""
    return 1 if report["returned"] else 0

