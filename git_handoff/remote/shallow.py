"""Joining a fleet without its whole history: a clone with no state of its own can fetch
the remote's state refs one commit deep (`git config handoff.join shallow`), adopt and
merge them, and claim at once; the history below comes later, only when something asks
for it (docs/joining.md).

Two rules keep such a clone's merges identical to a full clone's:

- Merge bases must be exact. In a shallow repository a commit at the cut (listed in
  `<git dir>/shallow`) shows no parents, so a merge base below the cut would be missed
  and a 3-way merge would become a 2-way one. `exact` holds when every cut commit the
  heads reach is an ancestor of a common ancestor M of all of them: then whatever is
  hidden lies below M, no hidden commit can be a better base than M, and every
  ancestry question about the commits above M has the answer the whole history gives.
  Until it holds, the fetch deepens the state refs (doubling each time), which ends at
  the whole history at worst.
- The audit trail (`log`, where a command came from for `trust`) asks for the history
  below the cut: `ensure_history` fetches it whole the first time a walk from our
  state reaches the cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from git_handoff.core.errors import GitFailure
from git_handoff.infra.gitrepo import Repo

FIRST_DEEPEN = 32
JOIN_KEY = "handoff.join"


def wants_shallow_join(repo: Repo, has_state: bool) -> bool:
    """A first fetch one commit deep: only for a clone with no state of its own yet (a
    state with history of its own needs its merge bases) and `handoff.join = shallow`."""
    return not has_state and (repo.config_get(JOIN_KEY) or "full").strip().lower() == "shallow"


def cut(repo: Repo) -> set[str]:
    """The commits at the cut of this shallow repository (none when it is complete)."""
    try:
        text = (repo.common_dir / "shallow").read_text()
    except OSError:
        return set()
    return {line.strip() for line in text.splitlines() if line.strip()}


def exact(repo: Repo, heads: Iterable[str]) -> bool:
    """Whether merge bases among `heads` (and every ancestry question above them) are the
    ones the whole history gives (see the module's note): always in a complete repository."""
    boundary = cut(repo)
    todo = list(dict.fromkeys(h for h in heads if h))
    if not boundary or not todo:
        return True
    base: str | None = todo[0]
    for head in todo[1:]:
        if base is None:
            break
        base = repo.merge_base(base, head)
    if base is None:
        return False  # no common ancestor above the cut: it may lie below
    for head in todo:
        if head != base and any(commit in boundary for commit in repo.commits_between(base, head, limit=1 << 30)):
            return False
    return True


def settle(repo: Repo, heads: Callable[[], list[str]], deepen: Callable[[list[str]], None]) -> int:
    """Deepen (`deepen(git fetch options)`) until `exact(heads())`: by FIRST_DEEPEN
    commits, then twice as many each time; when a deepening moved nothing, the whole
    history at once. How many fetches it took."""
    depth = FIRST_DEEPEN
    fetches = 0
    while cut(repo) and not exact(repo, heads()):
        before = cut(repo)
        deepen([f"--deepen={depth}"])
        fetches += 1
        depth *= 2
        if cut(repo) == before:
            deepen(["--unshallow"])
            fetches += 1
            if cut(repo) == before:
                raise GitFailure("the remote sent no history below this clone's shallow cut "
                                 "(`git fetch --unshallow` makes the clone complete)")
    return fetches


def history_cut(repo: Repo, start: str | None) -> bool:
    """Whether the history of `start` reaches the cut (a walk, newest first)."""
    boundary = cut(repo)
    if not boundary or start is None:
        return False
    return any(commit in boundary for commit in repo.walk(start))
