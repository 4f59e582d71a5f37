"""The dependency graph as SVG: one `<g class="node">` per task, one `<path class="edge">`
per dependency, whatever computed the positions.

Positions come from Graphviz (`dot -Tplain`) where it is installed and the graph is
small enough for it to answer quickly, and from a built-in layered layout otherwise
(longest-path layers, a few barycenter sweeps to untangle them). Either way the
markup is ours, so the page, its styling and its tests do not depend on which ran.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from collections.abc import Callable, Mapping

from git_handoff.core import display
from git_handoff.core.model import Task
from git_handoff.core.selection import shown_status


def escape(text: str) -> str:
    """A task's id or title (another clone's, perhaps) as SVG text: display.line, then
    HTML-escaped."""
    return html.escape(display.line(text))

NODE_W = 190
NODE_H = 38
GAP_X = 60
GAP_Y = 14
MARGIN = 10
DOT_MAX_NODES = 1500  # beyond this `dot` takes seconds; the built-in layout takes milliseconds
DOT_TIMEOUT = 10.0

STATUS_COLORS = {
    "completed": "#2e7d32",
    "in_progress": "#1565c0",
    "pending": "#757575",
    "failed": "#c62828",
    "blocked": "#ef6c00",
}

Positions = dict[str, tuple[float, float]]


def layers(tasks: Mapping[str, Task]) -> dict[str, int]:
    """Each task's layer: 0 for a task without known dependencies, else one more than
    its deepest dependency. Tasks on a dependency cycle stay where the cycle is entered."""
    rank: dict[str, int] = {}
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    for start in tasks:
        if start in state:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        state[start] = 1
        while stack:
            tid, i = stack[-1]
            deps = [d for d in tasks[tid].depends_on if d in tasks]
            if i < len(deps):
                stack[-1] = (tid, i + 1)
                dep = deps[i]
                if dep not in state:
                    state[dep] = 1
                    stack.append((dep, 0))
                continue
            stack.pop()
            state[tid] = 2
            rank[tid] = 1 + max((rank[d] for d in deps if state.get(d) == 2 and d in rank), default=-1)
    return rank


def builtin_layout(tasks: Mapping[str, Task]) -> Positions:
    """Left-to-right layers; within a layer, tasks ordered by the mean position of their
    dependencies (two sweeps), creation order breaking ties."""
    rank = layers(tasks)
    columns: dict[int, list[str]] = {}
    for tid in tasks:  # creation order
        columns.setdefault(rank[tid], []).append(tid)
    index: dict[str, float] = {}
    for r in sorted(columns):
        for n, tid in enumerate(columns[r]):
            index[tid] = n
    for _sweep in range(2):
        for r in sorted(columns)[1:]:
            col = columns[r]

            def centre(tid: str, col_index: dict[str, float] = index, layer: int = r) -> float:
                deps = [col_index[d] for d in tasks[tid].depends_on if d in col_index and rank.get(d, layer) < layer]
                return sum(deps) / len(deps) if deps else col_index[tid]

            col.sort(key=centre)
            for n, tid in enumerate(col):
                index[tid] = n
    return {
        tid: (MARGIN + rank[tid] * (NODE_W + GAP_X), MARGIN + index[tid] * (NODE_H + GAP_Y))
        for tid in tasks
    }


def dot_layout(tasks: Mapping[str, Task], dot: str) -> Positions | None:
    """Positions from Graphviz, or None when it fails or is too slow (the caller falls back)."""
    names = {tid: f"n{n}" for n, tid in enumerate(tasks)}
    back = {v: k for k, v in names.items()}
    lines = [
        "digraph g {",
        "rankdir=LR; nodesep=0.2; ranksep=0.8;",
        f'node [shape=box, fixedsize=true, width={NODE_W / 72:.3f}, height={NODE_H / 72:.3f}, label=""];',
    ]
    lines += [f"{names[tid]};" for tid in tasks]
    lines += [f"{names[d]} -> {names[t.id]};" for t in tasks.values() for d in t.depends_on if d in names]
    lines.append("}")
    try:
        proc = subprocess.run([dot, "-Tplain"], input="\n".join(lines).encode(), capture_output=True,
                              timeout=DOT_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    height = 0.0
    centres: dict[str, tuple[float, float]] = {}
    for line in proc.stdout.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "graph":
            height = float(parts[3])
        elif len(parts) >= 4 and parts[0] == "node" and parts[1] in back:
            centres[back[parts[1]]] = (float(parts[2]), float(parts[3]))
    if len(centres) != len(tasks):
        return None
    # plain output is in inches, y growing upwards, positions at node centres
    return {tid: (MARGIN + x * 72 - NODE_W / 2, MARGIN + (height - y) * 72 - NODE_H / 2)
            for tid, (x, y) in centres.items()}


def layout(tasks: Mapping[str, Task], use_dot: bool | None = None) -> tuple[Positions, str]:
    """Positions of every task and the name of what computed them (`dot` or `builtin`)."""
    dot = shutil.which("dot") if use_dot is not False else None
    if dot and len(tasks) <= DOT_MAX_NODES:
        found = dot_layout(tasks, dot)
        if found is not None:
            return found, "dot"
    return builtin_layout(tasks), "builtin"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(
    tasks: Mapping[str, Task],
    blocked: set[str],
    *,
    link: Callable[[str], str] | None = None,
    use_dot: bool | None = None,
) -> str:
    """The whole graph as one standalone `<svg>` element (also valid inline in HTML)."""
    pos, engine = layout(tasks, use_dot)
    width = max((x for x, _ in pos.values()), default=0) + NODE_W + MARGIN
    height = max((y for _, y in pos.values()), default=0) + NODE_H + MARGIN
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" data-layout="{engine}" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        'font-family="sans-serif" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#999"/></marker></defs>',
    ]
    for t in tasks.values():
        for dep in t.depends_on:
            if dep not in pos:
                continue
            x1, y1 = pos[dep][0] + NODE_W, pos[dep][1] + NODE_H / 2
            x2, y2 = pos[t.id][0], pos[t.id][1] + NODE_H / 2
            if x2 <= x1:  # same or earlier layer (a cycle): go round below
                x1, x2 = pos[dep][0] + NODE_W / 2, pos[t.id][0] + NODE_W / 2
                y1, y2 = pos[dep][1] + NODE_H, pos[t.id][1] + NODE_H
                mid = max(y1, y2) + GAP_Y * 2
                d = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}"
            else:
                mx = (x1 + x2) / 2
                d = f"M{x1:.1f},{y1:.1f} C{mx:.1f},{y1:.1f} {mx:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
            out.append(f'<path class="edge" data-from="{escape(dep)}" data-to="{escape(t.id)}" d="{d}" '
                       'fill="none" stroke="#999" marker-end="url(#arrow)"/>')
    for t in tasks.values():
        x, y = pos[t.id]
        state = shown_status(t.id, t.status, blocked)
        color = STATUS_COLORS.get(state, "#757575")
        body = (
            f"<title>{escape(t.id)}: {escape(t.title)} [{state}]</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="5" fill="#fff" '
            f'stroke="{color}" stroke-width="2"/>'
            f'<text x="{x + 8:.1f}" y="{y + 15:.1f}" font-weight="bold" '
            f'fill="{color}">{escape(_short(t.id, 28))}</text>'
            f'<text x="{x + 8:.1f}" y="{y + 30:.1f}" fill="#333">{escape(_short(t.title, 30))}</text>'
        )
        if link is not None:
            body = f'<a href="{escape(link(t.id))}">{body}</a>'
        out.append(f'<g class="node" data-id="{escape(t.id)}" data-status="{state}">{body}</g>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
