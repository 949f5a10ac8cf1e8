"""A second fallback scoring starts only where the deadline leaves what the last one took.

The first fallback is always scored (the forward path's: the search then has a plan to
give); the next waits for more time unless the deadline leaves more than the last
scoring took. Without that, a sliced scoring started 0.29 s before a 1 s deadline on
``tucker`` ended 0.37 s past it. A fake clock here: each scoring takes 0.6 s.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest

from einsum_analyze import parse_equation, plan_contraction

recommend = importlib.import_module("einsum_analyze.search.recommend")


def _run(monkeypatch: pytest.MonkeyPatch, deadline_s: float | None) -> int:
    clock = [0.0]
    monkeypatch.setattr(recommend.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(recommend, "remaining_s",
                        lambda: None if deadline_s is None else max(deadline_s - clock[0], 0.0))

    def scoring(*args: Any, **kwargs: Any) -> str:
        clock[0] += 0.6
        return "scored"

    monkeypatch.setattr(recommend, "score_path", scoring)
    plan = plan_contraction(parse_equation("ab,bc,cd->ad", [(4, 5), (5, 6), (6, 7)]))
    other = plan_contraction(parse_equation("ab,bc,cd->ad", [(4, 5), (5, 6), (6, 7)]),
                             "greedy")
    plans = {plan.path: plan, ((1, 2), (0, 1)): other}
    scored = [SimpleNamespace(path=((1, 2), (0, 1)), peak_bytes=1)]  # the other path's score
    found = recommend._fallbacks(
        ["sliced"], scored, plans, dict.fromkeys(plans, "test"), plan.path, [0, 1, 2],
        4, 1000, {}, False, None, "float32")
    return len(found)


def test_the_second_scoring_waits_where_the_deadline_leaves_less_than_the_first_took(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(monkeypatch, 1.0) == 1  # 0.4 s left after a 0.6 s scoring
    assert _run(monkeypatch, 1.3) == 2  # 0.7 s left: the next one starts
    assert _run(monkeypatch, None) == 2  # no deadline: every path
    assert _run(monkeypatch, 0.0) == 1  # past it: the first one still
