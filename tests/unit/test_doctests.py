"""The worked examples in the modules' docstrings run as written, in every module."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

import einsum_analyze

# Importing ``einsum_analyze.__main__`` runs the command line (it has no docstring examples).
NOT_IMPORTED = {"einsum_analyze.__main__"}


def discover() -> list[str]:
    """Every module of the package, found by walking it (not listed by hand)."""
    names = [einsum_analyze.__name__]
    for info in pkgutil.walk_packages(einsum_analyze.__path__, prefix="einsum_analyze."):
        names.append(info.name)
    return sorted(set(names) - NOT_IMPORTED)


MODULES = discover()


def source_examples(name: str) -> int:
    """The ``>>>`` prompts in the module's source: the examples a reader sees."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    text = Path(spec.origin).read_text(encoding="utf-8")
    return sum(line.lstrip().startswith(">>>") for line in text.splitlines())


def test_discovery_finds_every_module_file():
    root = Path(einsum_analyze.__file__).parent
    files = {
        ".".join(("einsum_analyze", *path.relative_to(root).with_suffix("").parts))
        .removesuffix(".__init__")
        for path in root.rglob("*.py")
    }
    assert set(MODULES) == files - NOT_IMPORTED
    assert {"einsum_analyze.report.budgets", "einsum_analyze.report.cases",
            "einsum_analyze.report.compare"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    # Every example written in the source was found and run (none hidden from the finder).
    assert result.attempted == source_examples(name), name
