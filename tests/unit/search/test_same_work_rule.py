"""The no-budget rule for plans of the same work and a lower peak (search/recommend.py).

A plan whose training FLOPs are within ``SAME_WORK`` of the fastest plan's and whose
peak is at least ``SAME_WORK_SAVING`` lower is recommended while predicted within
``MODEL_ERROR`` of the fastest's time; a plan doing more work, or saving less, is held to
the sliding price (``PEAK_PRICE``, at most ``TIME_SLACK``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from einsum_analyze import analyze
from einsum_analyze.roofline import NOMINAL
from einsum_analyze.roofline.time_model import PredictedTime
from einsum_analyze.search import recommend
from einsum_analyze.search.recommend import (
    MODEL_ERROR,
    PEAK_PRICE,
    SAME_WORK,
    SAME_WORK_SAVING,
    TIME_SLACK,
)
from einsum_analyze.search.records import SearchResult

CP = ("ir,jr,kr->ijk", [(128, 64)] * 3)


def timed(plan, seconds: float):
    return replace(plan, predicted=PredictedTime(forward_s=seconds, backward_s=0.0,
                                                 launches=1, profile="x", source="test"))


def searched(*plans) -> SearchResult:
    return SearchResult(objective="time", candidates=1, sources=("auto",), pareto=plans,
                        forward_optimal=plans[0], training_optimal=plans[0],
                        smallest_peak=min(plans, key=lambda p: p.peak_bytes), search_s=0.0)


@pytest.fixture(scope="module")
def base():
    report = analyze(*CP, strategies=["reverse"], objective="time", max_search_s=None)
    assert report.search is not None
    return next(p for p in report.search.pareto if p.strategy == "reverse")


def lower(base, saving: float, flops_share: float, slower: float):
    plan = replace(base, strategy="other", peak_bytes=int(base.peak_bytes * (1 - saving)),
                   training_flops=int(base.training_flops * (1 + flops_share)))
    return timed(plan, slower)


@pytest.mark.parametrize(("saving", "flops_share", "slower", "taken"), [
    (0.16, 0.001, 1.29, True),                 # cp-reconstruction's recompute, predicted
    (0.16, 0.001, MODEL_ERROR + 0.01, False),  # beyond the model's error
    (SAME_WORK_SAVING / 2, 0.0, 1.2, False),   # too small a saving: the sliding price
    (0.16, 2 * SAME_WORK, 1.2, False),         # more arithmetic: the sliding price
    (0.16, 2 * SAME_WORK, 1 + PEAK_PRICE * 0.16 - 0.01, True),  # ... which it meets
    (0.5, 2 * SAME_WORK, 1 + TIME_SLACK + 0.01, False),         # ... at most TIME_SLACK
])
def test_the_lower_peak_is_taken_exactly_within_the_rule(base, saving, flops_share, slower,
                                                         taken):
    fastest = timed(base, 1.0)
    other = lower(base, saving, flops_share, slower)
    chosen = recommend(searched(fastest, other), None).plan
    assert (chosen.strategy == "other") is taken


def test_cp_reconstruction_recommends_recompute_on_the_nominal_h200():
    # No search deadline: which plan is found must not depend on the machine's load.
    report = analyze(*CP, objective="time", profile=NOMINAL["h200"], max_search_s=None,
                     strategies=["reverse", "recompute", "torch-autograd"])
    by_name = {s.name: s for s in report.strategies}
    plan = report.recommended.plan
    assert plan.strategy == "recompute"
    assert plan.peak_bytes < by_name["reverse"].memory.peak_bytes
    fastest = min(report.search.pareto, key=lambda p: p.predicted_s)
    assert fastest.strategy == "reverse"  # the time model still says reverse is faster
    assert plan.predicted_s <= MODEL_ERROR * fastest.predicted_s
