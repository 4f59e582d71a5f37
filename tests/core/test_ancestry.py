"""The ancestry decisions of a fold, on plain graphs (git_handoff.core.ancestry)."""

from __future__ import annotations

from git_handoff.core import ancestry

# ours = O (outside the graph); a and b each add one commit on O; c adds two on b;
# d sits on an older commit X of ours; m merges a and d.
GRAPH = {"a": ("O",), "b": ("O",), "c1": ("b",), "c": ("c1",), "d": ("X",), "m": ("a", "d")}


def test_new_heads_are_those_in_the_graph_once_in_order() -> None:
    assert ancestry.new_heads(GRAPH, ["c", "O", "a", "c", "X"]) == ["c", "a"]


def test_closure_and_boundary() -> None:
    assert ancestry.closure(GRAPH, "c") == {"c", "c1", "b"}
    assert ancestry.closure(GRAPH, "O") == set()
    assert ancestry.boundary(GRAPH, ancestry.closure(GRAPH, "m")) == {"O", "X"}


def test_holds_ours_and_a_head() -> None:
    holds_ours = ancestry.Holds(GRAPH, "O")
    assert [h for h in ("a", "b", "c", "d", "m") if holds_ours(h)] == ["a", "b", "c", "m"]
    holds_b = ancestry.Holds(GRAPH, "b")
    assert holds_b("c") and holds_b("b") and not holds_b("a") and not holds_b("m")


def test_start_stays_on_ours_when_no_head_holds_it() -> None:
    assert ancestry.start({"d": ("X",), "e": ("X",)}, "O", ["d", "e"]) == ("O", ["d", "e"])


def test_start_fast_forwards_to_the_head_furthest_along() -> None:
    # b holds ours, c holds b: c is where the merge starts, b drops out, a remains
    assert ancestry.start(GRAPH, "O", ["b", "c", "a"]) == ("c", ["a"])


def test_start_without_ours_takes_a_head() -> None:
    graph = {"O": (), "a": ("O",), "b": ("O",)}
    assert ancestry.start(graph, None, ["O", "a", "b"]) == ("a", ["b"])
