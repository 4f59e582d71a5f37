"""The baselines bench/ measures against still run against today's code: a baseline
that stands in for a function of the package (monkeypatched over it) takes that
function's parameters and does the work it is the baseline of. (The pre-edge check of
bench_trust fell out of step with `incoming.check_state` once and the scenario failed
with a TypeError in `bench/run.py`, not in the suite.)"""

from __future__ import annotations

import inspect
from pathlib import Path

from bench.bench_trust import _old_check
from git_handoff.core.model import Task, now_iso
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import tasks as ops
from git_handoff.remote import incoming
from git_handoff.state.store import StateStore

N = 40


def _tree(store: StateStore) -> str:
    head = store.head()
    assert head is not None
    return store.repo.commit_tree(head)


def test_the_pre_edge_check_takes_check_states_parameters() -> None:
    assert list(inspect.signature(_old_check).parameters) == list(inspect.signature(incoming.check_state).parameters)


def test_the_pre_edge_check_parses_every_changed_task_file(repo: Path) -> None:
    store = StateStore(Repo.discover(repo))
    ops.init(store, mode="concurrent")
    stamp = now_iso()
    store.transact(lambda tx: [tx.put_task(Task(id=f"t{n:03d}", title=f"task {n}", created_at=stamp, order=n + 1))
                               for n in range(N)])
    first = _tree(store)
    store.transact(lambda tx: tx.put_task(Task(id="t999", title="one more", created_at=stamp, order=N + 1)))
    second = _tree(store)
    assert _old_check(store.repo, first) == N  # a clone adopting: every task file
    assert _old_check(store.repo, second, [None, first]) == 1  # from where the histories meet
    assert _old_check(store.repo, second, [second]) == 0
