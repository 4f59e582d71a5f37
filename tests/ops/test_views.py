"""ops/views.py: the graph's drawings, called with plain tasks (no repository); the
commands' output through the CLI is in tests/ops/test_tasks.py."""

from __future__ import annotations

from git_handoff.core.model import Task
from git_handoff.ops import views


def _tasks(*specs: tuple[str, list[str]]) -> dict[str, Task]:
    return {tid: Task(id=tid, title=f"title {tid}", depends_on=tuple(deps), order=n)
            for n, (tid, deps) in enumerate(specs)}


def _state(t: Task) -> str:
    return t.status


def test_text_draws_tasks_only_reachable_through_a_cycle() -> None:
    tasks = _tasks(("x", ["y"]), ("y", ["x"]))  # no root: each depends on the other
    assert views._graph_text(tasks, _state).splitlines() == [
        "[pending] x: title x",
        "└── [pending] y: title y",
        "    └── [pending] x: title x (see above)",
    ]


def test_text_indentation_stops_at_the_depth_limit() -> None:
    n = views.GRAPH_DEPTH + 5
    tasks = _tasks(*[(f"c{k:02d}", [f"c{k - 1:02d}"] if k else []) for k in range(n)])
    lines = views._graph_text(tasks, _state).splitlines()
    assert len(lines) == n and lines[0] == "[pending] c00: title c00"
    widest, deep = "    " * views.GRAPH_DEPTH + "└── ", views.GRAPH_DEPTH + 1
    assert lines[deep - 1] == f"{widest[4:]}[pending] c{deep - 1}: title c{deep - 1}"  # the last level indented
    assert lines[deep] == f"{widest}({deep} deep) [pending] c{deep}: title c{deep}"
    assert lines[-1] == f"{widest}({n - 1} deep) [pending] c{n - 1}: title c{n - 1}"
    assert lines[1] == "└── [pending] c01: title c01" and lines[2] == "    └── [pending] c02: title c02"


def test_mermaid_and_dot_draw_edges_to_present_tasks_only_in_mermaid() -> None:
    tasks = _tasks(("a", []), ("b", ["a", "gone"]))
    assert views._graph_mermaid(tasks, _state) == (
        'graph TD\n  n0["a: title a [pending]"]\n  n1["b: title b [pending]"]\n  n0 --> n1\n')
    assert '  "gone" -> "b";' in views._graph_dot(tasks, _state)
