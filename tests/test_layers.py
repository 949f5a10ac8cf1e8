"""The package keeps its layers: docs/architecture.md's table, checked against the code.

The table in docs/architecture.md ("The layers") says which layer may import which; a
layer is a folder of the package or one of its top-level modules. These tests read that
table, so the page and the check cannot drift apart, and hold the package to it:

- every module belongs to a row, and every row to something in the package;
- the table lists each row after the rows it may import, so it has no cycle;
- every import, type-only and function-local ones included, follows the table;
- torch, rich, click and matplotlib load at module level only where the second table
  ("Where the heavy libraries load") says;
- no module is longer than 600 lines;
- a first call of the drop-in einsum, forward and backward, calls from no layer into
  one above it: the node and the plan cache call down into the analysis, never back.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from package_graph import PACKAGE, import_graph, module_files

ROOT = PACKAGE.parent
PAGE = ROOT / "docs" / "architecture.md"
BASE = frozenset({"errors", "_version"})  # every layer may import these
NAME = PACKAGE.name
MAX_LINES = 600


def _section_table(heading: str) -> list[list[str]]:
    """The first markdown table under ``heading``: its body rows, cells stripped."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    rows: list[list[str]] = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return [row for row in rows[1:] if not set(row[0]) <= set("-: ")]  # no header, rule


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def layer_table() -> list[tuple[tuple[str, ...], frozenset[str]]]:
    """The rows of "The layers", bottom first: (layer names, the layers they may import)."""
    return [(tuple(_names(row[0])), frozenset(_names(row[2])))
            for row in _section_table("## The layers")]


def layer_of(module: str) -> str:
    """``einsum_analyze.model.planning`` -> ``model``; ``einsum_analyze.torch`` -> ``torch``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def allowed() -> dict[str, frozenset[str]]:
    return {name: imports for names, imports in layer_table() for name in names}


def test_the_table_is_read_from_the_page():
    table = allowed()
    assert {"model", "strategies", "report", "cli", "training", "torch"} <= set(table)
    assert table["model"] == frozenset()
    assert "training" in table["torch"]


def test_every_module_belongs_to_a_row_and_every_row_exists():
    table = allowed()
    layers = {layer_of(name) for name in module_files(PACKAGE)} - {"__init__"}
    assert layers - set(table) == set(), "modules no row of docs/architecture.md covers"
    assert set(table) - layers == set(), "rows of docs/architecture.md with no module"


def test_each_row_imports_only_rows_listed_before_it():
    seen: set[str] = set()
    for names, imports in layer_table():
        assert imports <= seen | BASE, f"{names} may import {sorted(imports - seen)}, " \
            "which the table lists later (or not at all): a cycle, or a row out of order"
        seen.update(names)


def test_every_import_follows_the_table():
    table = allowed()
    files = module_files(PACKAGE)
    wrong = []
    for module, edges in import_graph(files).items():
        here = layer_of(module)
        for target, line in edges.items():
            there = layer_of(target)
            where = f"{files[module].relative_to(ROOT)}:{line} imports {target}"
            if target == NAME:
                wrong.append(f"{where}: nothing imports the package's own __init__")
            elif here != "__init__" and there != here and there not in table[here] | BASE:
                wrong.append(f"{where}: {here} may not import {there}")
    assert not wrong, "imports against docs/architecture.md:\n" + "\n".join(wrong)


def test_the_import_check_sees_a_wrong_import(tmp_path):
    # The check above must be able to fail: a model module importing the report does.
    package = tmp_path / NAME
    (package / "model").mkdir(parents=True)
    (package / "report").mkdir()
    for path in ("__init__.py", "model/__init__.py", "report/__init__.py", "report/report.py"):
        (package / path).write_text("")
    (package / "model" / "memory.py").write_text("def f():\n    from ..report import report\n")
    graph = import_graph(module_files(package))
    assert graph[f"{NAME}.model.memory"] == {f"{NAME}.report.report": 2}
    assert f"{NAME}.report.report" not in allowed()["model"]


def _heavy_table() -> dict[str, list[str]]:
    return {_names(row[0])[0]: _names(row[1]) for row in
            _section_table("### Where the heavy libraries load")}


def _covered(path: str, entries: list[str]) -> bool:
    return any(path == entry or (entry.endswith("/") and path.startswith(entry))
               for entry in entries)


def _module_level_imports(path: Path) -> set[str]:
    """Top-level packages imported by the module's own statements (not in functions, not
    under ``if TYPE_CHECKING:``)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_heavy_libraries_load_only_where_the_page_says():
    heavy = _heavy_table()
    assert set(heavy) == {"torch", "rich", "click", "matplotlib"}
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for library in _module_level_imports(path) & set(heavy):
            if not _covered(relative, heavy[library]):
                wrong.append(f"{relative} imports {library} at module level")
    assert not wrong, "\n".join(wrong)
    for library, entries in heavy.items():  # no entry names a module that is gone
        for entry in entries:
            assert (PACKAGE / entry).exists(), f"{library}: {entry} is not in the package"


def test_no_module_is_longer_than_600_lines():
    long = {path.relative_to(ROOT).as_posix(): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


# --- the drop-in's calls, traced ---------------------------------------------------------

DROPIN_STACK = ("torch", "training.node", "training.plans", "training.choice")
"""The drop-in's own modules, from the top: each calls only those after it."""


def _stack_place(module: str) -> int | None:
    short = module.removeprefix(f"{NAME}.")
    return DROPIN_STACK.index(short) if short in DROPIN_STACK else None


def _handed_down(code: Any) -> bool:
    """A function the caller was given, not one it found by importing: a closure or a
    lambda (a memo's get-or-build), or a registered strategy's builder (the registry)."""
    from einsum_analyze.strategies import get_strategy, strategy_names

    if code.co_flags & inspect.CO_NESTED or code.co_name == "<lambda>":
        return True
    return any(get_strategy(name).build.__code__ is code for name in strategy_names())


@contextmanager
def traced_calls() -> Iterator[list[tuple[str, str, Any]]]:
    """(caller module, callee module, callee code) of every call between two of the
    package's modules; the caller is the nearest frame of the package (torch's autograd
    and opt_einsum in between are looked through)."""
    calls: list[tuple[str, str, Any]] = []

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith(NAME):
            return
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith(NAME):
            caller = caller.f_back
        if caller is not None and caller.f_globals["__name__"] != callee:
            calls.append((caller.f_globals["__name__"], callee, frame.f_code))

    previous: Callable[..., Any] | None = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(previous)


def _upward(calls: list[tuple[str, str, Any]]) -> list[str]:
    table = allowed()
    wrong = []
    for caller, callee, code in calls:
        here, there = layer_of(caller), layer_of(callee)
        place, target = _stack_place(caller), _stack_place(callee)
        if place is not None and target is not None:
            if target < place:
                wrong.append(f"{caller} calls back up into {callee}.{code.co_name}")
        elif here != there and there not in table.get(here, frozenset()) | BASE \
                and here != "__init__" and not _handed_down(code):
            wrong.append(f"{caller} ({here}) calls up into {callee}.{code.co_name} ({there})")
    return sorted(set(wrong))


@pytest.mark.parametrize(
    ("equation", "shapes", "options"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)], {}),
        ("bc,bd,cm,mdn->bn", [(16, 2), (16, 2), (2, 7), (7, 2, 7)], {}),
        ("bc,bd,cm,mdn->bn", [(16, 2), (16, 2), (2, 7), (7, 2, 7)], {"strategy": "sliced"}),
        ("bc,bd,cm,mdn->bn", [(16, 2), (16, 2), (2, 7), (7, 2, 7)],
         {"strategy": "checkpoint"}),
    ],
    ids=["pair", "four-operands", "sliced", "checkpoint"],
)
def test_a_first_dropin_call_goes_down_only(equation, shapes, options):
    torch = pytest.importorskip("torch")
    from einsum_analyze.torch import clear_cache, einsum

    clear_cache()  # a first call: it plans, compiles and runs
    operands = [torch.randn(shape, dtype=torch.float64, requires_grad=True) for shape in shapes]
    with traced_calls() as calls:
        einsum(equation, *operands, **options).sum().backward()
    layers = {layer_of(module) for call in calls for module in call[:2]}
    assert {"torch", "training", "analysis", "strategies", "model", "backends"} <= layers
    assert _upward(calls) == []
    assert all(t.grad is not None for t in operands)


def test_the_call_check_sees_a_call_back_up():
    # Fed a call from the plan cache back into the public module, or from the model into
    # the report, the check names it; a closure handed down is not a call back up.
    plans, public = f"{NAME}.training.plans", f"{NAME}.torch"
    model, report = f"{NAME}.model.memory", f"{NAME}.report.report"

    def helper() -> None:
        pass

    code = _a_module_level_function.__code__
    found = _upward([(plans, public, code), (model, report, code),
                     (model, report, helper.__code__)])
    assert found == [f"{model} (model) calls up into {report}._a_module_level_function "
                     "(report)",
                     f"{plans} calls back up into {public}._a_module_level_function"]


def _a_module_level_function() -> None:
    """Stands for a function a module found by importing (not handed down)."""
