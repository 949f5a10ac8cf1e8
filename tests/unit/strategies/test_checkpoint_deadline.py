"""The checkpoint keep-set search stops at the training search's deadline.

The search is anytime: it returns the best keep-set found when the deadline passes,
and says so. Without a deadline nothing changes (the other checkpoint tests).
"""

from __future__ import annotations

import pytest

from einsum_analyze import parse_equation, plan_contraction
from einsum_analyze.model.deadline import search_deadline
from einsum_analyze.strategies import checkpoint
from einsum_analyze.strategies.checkpoint import _warnings, choose_keep

CHAIN = "ab,bc,cd,de,ef,fg,gh,hi->ai"
SHAPES = [(16, 32), (32, 64), (64, 128), (128, 64), (64, 32), (32, 64), (64, 16), (16, 8)]


@pytest.mark.parametrize("method", ["exact", "greedy", "largest-first"])
def test_a_passed_deadline_returns_the_best_found_and_says_so(method: str) -> None:
    plan = plan_contraction(parse_equation(CHAIN, SHAPES))
    grad = range(len(SHAPES))
    full = choose_keep(plan, grad, 8, search=method)
    assert not full.timed_out
    with search_deadline(0.0):
        cut = choose_keep(plan, grad, 8, search=method)
    assert cut.timed_out and cut.evaluated <= full.evaluated
    assert cut.evaluated >= 1  # reverse mode, replayed before any search
    if method == "exact":
        assert not cut.complete
    assert cut.peak_bytes >= full.peak_bytes  # the best found, no better than the search's
    (note,) = [n for n in _warnings(cut, None) if "deadline" in n]
    assert note.startswith(f"checkpoint: the search's deadline stopped the {method} search")


def test_a_deadline_passing_mid_search_keeps_what_it_found(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_contraction(parse_equation(CHAIN, SHAPES))
    grad = range(len(SHAPES))
    full = choose_keep(plan, grad, 8, search="exact")
    asked = 0

    def passes_on_the_second() -> bool:
        nonlocal asked
        asked += 1
        return asked >= 2

    monkeypatch.setattr(checkpoint, "past_deadline", passes_on_the_second)
    cut = choose_keep(plan, grad, 8, search="exact")
    assert cut.timed_out and cut.evaluated < full.evaluated
    assert full.peak_bytes <= cut.peak_bytes
