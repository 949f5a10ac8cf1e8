"""The worked examples in the modules' docstrings run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "einsum_analyze",
    "einsum_analyze.equation",
    "einsum_analyze.parsing",
    "einsum_analyze.planning",
    "einsum_analyze.memory",
    "einsum_analyze.analysis",
    "einsum_analyze.report",
    "einsum_analyze.gradients",
    "einsum_analyze.lowering",
    "einsum_analyze.timing",
    "einsum_analyze.memory",
    "einsum_analyze.backends.torch_backend",
    "einsum_analyze.search.recommend",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
