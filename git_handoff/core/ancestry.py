"""The ancestry a fold of many clone heads asks (git_handoff.state.fold_heads), decided on
plain data: the commits the heads hold that ours does not, each with its parents
(`Graph`), read in one walk. Asking libgit2 each question of each head (is it in ours,
does it hold ours, what does it bring, how far behind is it) cost a walk apiece, ~2 s of
a sync adopting one task from each of 10,000 heads.

Every commit outside the graph is in ours (the walk hid ours and what it holds), which
is what the answers rest on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Graph = Mapping[str, tuple[str, ...]]  # commit -> its parents: the commits ours lacks


def new_heads(graph: Graph, heads: Iterable[str]) -> list[str]:
    """The heads ours does not hold yet (those in the graph), each once, in order."""
    return [h for h in dict.fromkeys(heads) if h in graph]


def closure(graph: Graph, head: str) -> set[str]:
    """The commits of the graph `head` holds (itself included when it is one)."""
    seen: set[str] = set()
    todo = [head] if head in graph else []
    while todo:
        commit = todo.pop()
        if commit in seen:
            continue
        seen.add(commit)
        todo.extend(p for p in graph[commit] if p in graph and p not in seen)
    return seen


def boundary(graph: Graph, commits: Iterable[str]) -> frozenset[str]:
    """The parents outside the graph of `commits` (commits of the graph): where their
    history meets ours. What a head holds of ours is exactly what these hold."""
    return frozenset(p for c in commits for p in graph[c] if p not in graph)


class Holds:
    """Whether a commit of the graph holds `target` (a commit of the graph, or ours when it
    is outside it), each commit's answer computed once."""

    def __init__(self, graph: Graph, target: str) -> None:
        self.graph = graph
        self.target = target
        self.known: dict[str, bool] = {}

    def __call__(self, commit: str) -> bool:
        if commit == self.target:
            return True
        if commit not in self.graph:
            return False  # a commit of ours holds no commit ours lacks, nor ours itself (no cycles)
        todo = [commit]
        while todo:
            c = todo[-1]
            if c in self.known:
                todo.pop()
                continue
            pending = [p for p in self.graph[c] if p in self.graph and p != self.target and p not in self.known]
            if pending:
                todo.extend(pending)
                continue
            todo.pop()
            self.known[c] = any(p == self.target or self.known.get(p, False) for p in self.graph[c])
        return self.known[commit]


def start(graph: Graph, ours: str | None, new: list[str]) -> tuple[str, list[str]]:
    """Where a merge of the `new` heads (each in the graph) starts, and what remains to
    merge onto it: ours, unless a head holds it (or there is no ours): then the head
    furthest along one line of history from ours, a fast-forward, and the heads that
    head holds drop out."""
    first = ours
    holds = Holds(graph, first) if first is not None else None
    for h in new:
        if holds is None or holds(h):
            first = h
            holds = Holds(graph, h)
    assert first is not None  # `new` is never empty
    if first == ours:
        return first, new
    inside = closure(graph, first)
    return first, [h for h in new if h != first and h not in inside]
