"""The package's import graph, read from its source: no cycle, and each subpackage imports only the layers below it
(the analysis never its presentation; the prober nothing of the package: it runs alone, copied)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "inferlab"

# What each part of the package may import of the rest: a subpackage or a top-level module by its first name under
# `inferlab`. Parts not listed here (cli, api: the entry points) may import any part.
MAY_IMPORT = {
    "exit_codes": set(),
    "paths": set(),
    "prober": set(),
    "system": set(),
    "record": {"system", "paths", "exit_codes"},
    "run": {"system", "record", "paths", "exit_codes"},
    "analysis": {"system", "record", "paths"},
    "plots": {"record", "analysis"},
    "report": {"system", "record", "analysis", "plots"},
    "lab": set(),  # the lab runs from an installed package: it knows no checkout or collection root
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, modules: set[str]) -> set[str]:
    """The package's modules this source imports, at its top or inside a function: `from inferlab.x import y` is
    module `inferlab.x.y` where that is a module, else `inferlab.x`."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
    return {name for name in found if name in modules}


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    graph = {name: imported(ast.parse(path.read_text(), str(path)), modules) for name, path in paths.items()}
    return {name: deps - {name, "inferlab"} for name, deps in graph.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as the modules along it, or None."""
    done, path = set(), []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return None
        path.append(name)
        for dep in sorted(graph[name]):
            if cycle := visit(dep):
                return cycle
        path.pop()
        done.add(name)
        return None

    for name in sorted(graph):
        if cycle := visit(name):
            return cycle
    return None


def part(module: str) -> str:
    return module.split(".")[1]


def test_the_graph_is_read_from_the_source():
    graph = import_graph()
    assert "inferlab.analysis.compare" in graph["inferlab.cli"]
    assert "inferlab.plots.plots" in graph["inferlab.report.report"]


def test_the_package_has_no_import_cycle():
    assert find_cycle(import_graph()) is None, " -> ".join(find_cycle(import_graph()))


@pytest.mark.parametrize(("graph", "cycle"), [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": set(), "c": {"a", "b"}}, None),
])
def test_a_cycle_is_found(graph, cycle):
    assert find_cycle(graph) == cycle


def test_each_part_imports_only_the_layers_below_it():
    wrong = [f"{name} imports {dep}" for name, deps in import_graph().items() if name.count(".") >= 1
             and part(name) in MAY_IMPORT for dep in sorted(deps)
             if part(dep) != part(name) and part(dep) not in MAY_IMPORT[part(name)]]
    assert wrong == []


def test_the_prober_imports_nothing_of_the_package():
    assert import_graph()["inferlab.prober"] == set()
