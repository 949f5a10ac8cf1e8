"""The package's import graph, read from the source with :mod:`ast` (tests share it).

Every import counts wherever it is written: at module level, under ``if TYPE_CHECKING:``,
or inside a function. An edge ``a -> b`` means that module ``a`` imports module ``b`` or a
name defined in ``b`` (tests/test_import_cycles.py says how each form resolves).
"""

from __future__ import annotations

import ast
from pathlib import Path

import einsum_analyze

PACKAGE = Path(einsum_analyze.__file__).resolve().parent

# (importing module, line) -> imported module
Graph = dict[str, dict[str, int]]


def module_files(package: Path) -> dict[str, Path]:
    """Every module of ``package`` by dotted name (a package is its ``__init__``)."""
    root = package.parent
    found = {}
    for path in sorted(package.rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def import_graph(files: dict[str, Path]) -> Graph:
    """Edges between the modules, each with the first line that makes it."""
    graph: Graph = {name: {} for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    # The deepest module of the package the dotted name reaches.
                    known = [".".join(parts[:n]) for n in range(len(parts), 0, -1)
                             if ".".join(parts[:n]) in files]
                    targets += known[:1]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    if f"{source}.{alias.name}" in files:
                        targets.append(f"{source}.{alias.name}")
                    elif source in files:
                        targets.append(source)
            for target in targets:
                if target != name:
                    graph[name].setdefault(target, node.lineno)
    return graph


