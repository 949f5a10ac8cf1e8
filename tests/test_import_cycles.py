"""The package has no import cycles: type-only and function-local imports included.

The graph is read from the source with :mod:`ast`, so every import counts wherever it is
written: at module level, under ``if TYPE_CHECKING:``, or inside a function. An edge
``a -> b`` means that module ``a`` imports module ``b`` or a name defined in ``b``:

- ``import p.q.r`` is an edge to ``p.q.r``;
- ``from p.q import n`` is an edge to ``p.q.n`` when that is a module, else to ``p.q``
  (the name is defined there: in ``p/q.py``, or in ``p/q/__init__.py`` for a package);
- relative imports are resolved against the importing module's package.

A package's ``__init__`` runs before any of its submodules, but that alone is not an
edge: only what a module names is.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from package_graph import PACKAGE, Graph, import_graph, module_files


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's components of more than one module, each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def shortest_cycle(graph: Graph, component: list[str], start: str) -> list[str]:
    """A shortest cycle through ``start`` inside the component, as a list of modules."""
    inside = set(component)
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node]):
            if nxt not in inside:
                continue
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start}")  # a component always has one


def describe(graph: Graph, files: dict[str, Path], cycle: list[str]) -> str:
    root = PACKAGE.parent
    hops = [
        f"    {files[a].relative_to(root)}:{graph[a][b]} imports {b}"
        for a, b in zip(cycle, cycle[1:], strict=False)
    ]
    return "  " + " -> ".join(cycle) + "\n" + "\n".join(hops)


def cycles_of(graph: Graph, component: list[str]) -> list[list[str]]:
    """Every pair that imports each other, then a shortest cycle through each module."""
    found: dict[tuple[str, ...], list[str]] = {}
    for a in component:
        for b in graph[a]:
            if a < b and a in graph[b]:
                found[(a, b)] = [a, b, a]
    for start in component:
        cycle = shortest_cycle(graph, component, start)[:-1]
        turn = cycle.index(min(cycle))
        key = tuple(cycle[turn:] + cycle[:turn])
        found.setdefault(key, [*key, key[0]])
    return [found[key] for key in sorted(found, key=lambda key: (len(key), key))]


def test_the_graph_sees_every_kind_of_import(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import f\n__version__ = '1'\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from .b import B\n"
        "def f():\n"
        "    from . import __version__\n"
        "    return __version__\n"
    )
    (package / "b.py").write_text("import pkg.sub.c\nfrom .sub import d\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from .. import a\n")
    (package / "sub" / "d.py").write_text("from ..b import x\n")
    files = module_files(package)
    graph = import_graph(files)
    assert {name: sorted(edges) for name, edges in graph.items()} == {
        "pkg": ["pkg.a"],
        "pkg.a": ["pkg", "pkg.b"],  # function-local, type-only
        "pkg.b": ["pkg.sub.c", "pkg.sub.d"],
        "pkg.sub": [],
        "pkg.sub.c": ["pkg.a"],
        "pkg.sub.d": ["pkg.b"],
    }
    components = strongly_connected(graph)
    assert components == [["pkg", "pkg.a", "pkg.b", "pkg.sub.c", "pkg.sub.d"]]
    assert cycles_of(graph, components[0]) == [
        ["pkg", "pkg.a", "pkg"],
        ["pkg.b", "pkg.sub.d", "pkg.b"],
        ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"],
    ]


def test_no_import_cycles():
    files = module_files(PACKAGE)
    graph = import_graph(files)
    assert "einsum_analyze.model.equation" in graph["einsum_analyze"]  # the graph is not empty
    components = strongly_connected(graph)
    report = [
        f"modules {', '.join(component)} import each other:\n"
        + "\n".join(describe(graph, files, cycle) for cycle in cycles_of(graph, component))
        for component in components
    ]
    assert not components, "import cycles:\n" + "\n".join(report)
