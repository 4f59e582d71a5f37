"""The dependency graph drawn as SVG (git_handoff.infra.graph_svg): the built-in layout,
graphviz's when it is installed, escaping; tests/dashboard/ serves it."""

from __future__ import annotations

import pytest

from git_handoff.core.model import Task
from git_handoff.infra import graph_svg as svg


def test_builtin_layout_puts_dependencies_left_and_nodes_apart() -> None:
    tasks = {t.id: t for t in [Task(id="a", title="a"), Task(id="b", title="b", depends_on=("a",)),
                               Task(id="c", title="c", depends_on=("a", "b")), Task(id="d", title="d"),
                               Task(id="x", title="x", depends_on=("y",)), Task(id="y", title="y", depends_on=("x",))]}
    pos = svg.builtin_layout(tasks)
    assert pos["a"][0] < pos["b"][0] < pos["c"][0]
    assert len(set(pos.values())) == len(tasks)  # no two boxes at one place, cycle included
    drawing = svg.render(tasks, set(), use_dot=False)
    assert 'data-layout="builtin"' in drawing
    assert drawing.count('<g class="node"') == 6 and drawing.count('<path class="edge"') == 5


@pytest.mark.needs("dot")
def test_dot_layout_when_graphviz_is_installed() -> None:
    tasks = {t.id: t for t in [Task(id="a", title="a"), Task(id="b", title="b", depends_on=("a",))]}
    drawing = svg.render(tasks, set())
    assert 'data-layout="dot"' in drawing and drawing.count('<g class="node"') == 2


def test_layers_put_each_task_after_what_it_depends_on() -> None:
    tasks = {t.id: t for t in [Task(id="a", title="a"), Task(id="b", title="b", depends_on=("a",)),
                               Task(id="c", title="c", depends_on=("b", "missing"))]}
    assert svg.layers(tasks) == {"a": 0, "b": 1, "c": 2}
    positions, engine = svg.layout(tasks, use_dot=False)
    assert engine == "builtin" and positions == svg.builtin_layout(tasks)


def test_escape_makes_text_safe_in_svg() -> None:
    assert svg.escape('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"
    assert "\n" not in svg.escape("two\nlines") and "\x1b" not in svg.escape("\x1b[31mred")
