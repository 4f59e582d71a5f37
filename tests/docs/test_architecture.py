"""The package's shape: a one-way import order with no cycles, use cases of bounded size.

The layers themselves are the import-linter contracts in pyproject.toml (run by
`lint-imports` in the README test command); these tests pin what the contracts do
not say: no cycle anywhere in the package, function-level imports included, that
the contracts really refuse a back-edge, and that docs/architecture.md draws the
packages the contract names, in its order, with the modules they hold.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
OPS_MAX_LINES = 450


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(adj):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(adj[node]):
                work.append((node, i + 1))
                nxt = adj[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def test_no_import_cycle_in_the_package() -> None:
    graph = grimp.build_graph("git_handoff")
    assert len(graph.modules) > 30
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.build_graph("git_handoff")
    graph.add_import(importer="git_handoff.state.store", imported="git_handoff.ops.work")
    assert any("git_handoff.state.store" in c and "git_handoff.ops.work" in c for c in _cycles(graph))


def test_ops_modules_stay_small() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "git_handoff" / "ops").glob("*.py")}
    assert sizes and all(n <= OPS_MAX_LINES for n in sizes.values()), sizes


@pytest.mark.parametrize("package", ["infra", "state", "remote"])
def test_lower_modules_stay_small(package: str) -> None:
    """The packages under the use cases keep the same bound: a module that grows past it is
    split by what it answers."""
    sizes = {p.name: len(p.read_text().splitlines()) for p in (ROOT / "git_handoff" / package).glob("*.py")}
    assert sizes and all(n <= OPS_MAX_LINES for n in sizes.values()), sizes


@pytest.mark.parametrize(
    ("importer", "imported", "contract"),
    [
        ("git_handoff/state/store.py", "git_handoff.ops.tasks", "layers: adapters"),
        ("git_handoff/ops/sessions.py", "git_handoff.ops.session_start", "use cases:"),
        ("git_handoff/core/model.py", "subprocess", "pure core:"),
        ("git_handoff/state/this_clone.py", "git_handoff.state.store", "state inside:"),
    ],
)
def test_contracts_refuse_a_back_edge(tmp_path: Path, importer: str, imported: str, contract: str) -> None:
    """The same contracts, run on a copy of the package with one back-edge added inside a
    function (a lazy import is an edge too)."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "git_handoff", copy / "git_handoff")
    target = copy / importer
    target.write_text(target.read_text() + f"\n\ndef _back_edge() -> None:\n    import {imported}  # noqa\n")
    config = tmp_path / "pyproject.toml"
    text = (ROOT / "pyproject.toml").read_text()
    config.write_text(text[text.index("[tool.importlinter]"):text.index("[tool.mypy]")])
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint), "--config", str(config), "--no-cache"], cwd=copy, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(copy)})
    assert proc.returncode != 0, proc.stdout
    assert contract in proc.stdout and "BROKEN" in proc.stdout, proc.stdout
    assert imported in proc.stdout


def _contract_layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    top = next(c for c in config["contracts"] if c["name"].startswith("layers: adapters"))
    return [{p.strip().removeprefix("git_handoff.") for p in layer.split("|")} for layer in top["layers"]]


def _map_layers(doc: str) -> list[set[str]]:
    block = doc.split("## The map", 1)[1].split("```", 2)[1]
    return [set(found) for line in block.splitlines() if (found := re.findall(r"([a-z_]+)/", line))]


def _doc_modules(doc: str) -> dict[str, set[str]]:
    sections = re.split(r"^### ([a-z_]+)/$", doc, flags=re.M)[1:]
    return {name: set(re.findall(r"`([a-z_]+)\.py`", body))
            for name, body in zip(sections[::2], sections[1::2], strict=True)}


def test_architecture_map_matches_the_contract() -> None:
    """docs/architecture.md's map has the contract's packages, layer by layer, in its order."""
    layers = _contract_layers()
    assert len(layers) >= 8 and {"core", "ops", "cli"} <= set().union(*layers)
    assert _map_layers((ROOT / "docs" / "architecture.md").read_text()) == layers


def test_architecture_map_check_sees_a_difference() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert _map_layers(doc.replace("remote/ | agent_cli/", "agent_cli/")) != _contract_layers()
    swapped = doc.replace("state/   ", "@@").replace("infra/   ", "state/   ").replace("@@", "infra/   ")
    assert _map_layers(swapped) != _contract_layers()


def test_architecture_names_every_module() -> None:
    """Every package of the contract has a section, and the section names exactly its modules."""
    named = _doc_modules((ROOT / "docs" / "architecture.md").read_text())
    packages = set().union(*_contract_layers())
    code = {d.name for d in (ROOT / "git_handoff").iterdir() if any(f.stem != "__init__" for f in d.glob("*.py"))}
    assert code == packages
    assert set(named) == packages
    for package in packages:
        files = {p.stem for p in (ROOT / "git_handoff" / package).glob("*.py")}
        assert named[package] - {"__init__"} <= files, package
        assert files - {"__init__"} <= named[package], package
