"""The drop-in's budget: 0 is a budget no plan meets, not "no budget"; bad values one line."""

from __future__ import annotations

import pytest
import torch

from einsum_analyze.torch import DropinError, DropinValueError, Einsum, einsum, patch


@pytest.mark.parametrize("strategy", ["auto", "reverse", "sliced"])
@pytest.mark.parametrize(("budget", "culprit"), [
    (0, "budget 0 must be a size above 0 B"),
    ("0B", "budget '0B' must be a size above 0 B"),
    (-3, "budget is -3"),
    (True, "budget is True"),
    ("1e400", "'1e400' is too large"),
])
def test_bad_budgets_are_one_line(strategy: str, budget: object, culprit: str) -> None:
    a = torch.randn(4, 5, requires_grad=True)
    b = torch.randn(5, 6, requires_grad=True)
    with pytest.raises(DropinError) as caught:
        einsum("ij,jk->ik", a, b, strategy=strategy, budget=budget)  # type: ignore[arg-type]
    assert culprit in str(caught.value) and "\n" not in str(caught.value)


BAD_BUDGETS = [(-3, "budget is -3"), ("abc", "'abc' is not a byte size"), (0, "budget 0")]


@pytest.mark.parametrize(("budget", "culprit"), BAD_BUDGETS)
def test_a_bad_budget_is_refused_before_anything_runs(budget: object, culprit: str) -> None:
    """By ``patch()`` and ``Einsum`` when made, and on calls torch.einsum runs itself."""
    counts = torch.ones(2, 3, dtype=torch.int64)  # integer operands: torch.einsum runs
    calls = {
        "patch": lambda: patch(budget=budget),  # type: ignore[arg-type]
        "Einsum": lambda: Einsum("ij->", budget=budget),  # type: ignore[arg-type]
        "einsum of integers": lambda: einsum("ij->", counts, budget=budget),  # type: ignore[arg-type]
    }
    for name, call in calls.items():
        with pytest.raises(DropinValueError) as caught:
            call()
        assert culprit in str(caught.value) and "\n" not in str(caught.value), name
