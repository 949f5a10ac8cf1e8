"""No test asserts a wall or CPU time: speed targets live in benchmarks/ (issue 21).

A test that reads a clock and asserts on it fails on a loaded machine and passes on a
fast one; it measures the machine, not the code. Every test file is parsed: an
``assert`` may not read ``time.perf_counter``, ``process_time``, ``monotonic`` or
``time`` (or their ``_ns`` forms), nor a name assigned from one in the same function,
nor hold a measured duration (an attribute ``seconds`` or ``*_s`` that is not a
prediction) under a constant bound, as ``found.seconds < 5.0`` did.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
CLOCKS = {"perf_counter", "process_time", "monotonic", "time", "thread_time"}


def _reads_clock(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.removesuffix("_ns") in CLOCKS and (
                    not isinstance(func, ast.Attribute)
                    or getattr(func.value, "id", "") == "time"):
                return True
    return False


def _bounds_a_duration(node: ast.AST) -> bool:
    """``x.seconds < 5`` or ``5 > x.wall_s``: a measured duration under a constant."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Compare) or len(sub.ops) != 1:
            continue
        [op], left, [right] = sub.ops, sub.left, sub.comparators
        if isinstance(op, ast.Gt | ast.GtE):
            left, right = right, left
        elif not isinstance(op, ast.Lt | ast.LtE):
            continue
        if (isinstance(left, ast.Attribute) and isinstance(right, ast.Constant)
                and isinstance(right.value, int | float)
                and (left.attr == "seconds" or left.attr.endswith("_s"))
                and "predicted" not in left.attr and "limit" not in left.attr):
            return True
    return False


def timed_asserts(source: str) -> list[int]:
    """Line numbers of the asserts in ``source`` that read a clock."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        timed: set[str] = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and _reads_clock(node.value):
                timed |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(function):
            if isinstance(node, ast.Assert) and (
                    _reads_clock(node.test) or _bounds_a_duration(node.test) or any(
                    isinstance(n, ast.Name) and n.id in timed for n in ast.walk(node.test))):
                found.append(node.lineno)
    return found


def test_the_checker_sees_a_timed_assert():
    assert timed_asserts("import time\ndef test():\n    start = time.perf_counter()\n"
                         "    work()\n    assert time.perf_counter() - start < 1\n") == [5]
    assert timed_asserts("import time\ndef test():\n    t0 = time.process_time()\n"
                         "    spent = time.process_time() - t0\n    assert spent < 5\n") == [5]
    assert timed_asserts("def test():\n    assert run().elapsed_s > 0\n") == []
    assert timed_asserts("def test():\n    found = calibrate()\n"
                         "    assert found.seconds < 5.0\n") == [3]
    assert timed_asserts("def test():\n    assert 2 > report.search.search_s\n") == [2]


def test_no_test_asserts_a_time():
    offenders = [f"{path.relative_to(TESTS)}:{line}"
                 for path in sorted(TESTS.rglob("*.py"))
                 for line in timed_asserts(path.read_text(encoding="utf-8"))]
    assert offenders == []
