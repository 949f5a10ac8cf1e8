"""The slice finder leaves room for the chosen plan's final build (issue 20, item 3).

The final build of a sliced plan (every slice's events, lowered, replayed, its time
predicted) is linear in its events; the finder scores one slice of each set of lengths.
Measured on the 2-core CPU before this rule: ``mps-layer`` at 50 KiB with a 1 s deadline
ended at 1.18 s, ``tn18-b512`` with 2 s at 2.9 s. Here a fake clock (the deadline's own,
:func:`~einsum_analyze.model.deadline.search_deadline`'s ``clock``) moves
:data:`PER_EVENT_S` for each event a scoring builds, and the final build as the finder's
model says (``BUILD_PER_EVENT`` times that an event of the whole schedule): the finder's
prediction is then exact, and the whole fallback must end before its deadline.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from einsum_analyze import parse_equation, plan_contraction
from einsum_analyze.model.deadline import remaining_s, search_deadline
from einsum_analyze.search import floor_bytes
from einsum_analyze.slicing import SlicePlan, find_slices, score_slices, sliced_schedule
from einsum_analyze.strategies import build_strategy

finder = importlib.import_module("einsum_analyze.slicing.finder")
strategy = importlib.import_module("einsum_analyze.slicing.strategy")

PER_EVENT_S = 1e-4
"""Fake seconds per event a scoring builds."""

GRAD = (0, 1, 2, 3)
PLAN = plan_contraction(parse_equation("bc,bd,cm,mdn->bn",
                                       [(512, 2), (512, 2), (2, 7), (7, 2, 7)]))
BUDGET = floor_bytes(PLAN.equation, GRAD, 4) // 2  # below any plan: the finder goes deep
MAX_SLICES = 256


class _Clock:
    """The fake clock: scorings move it by the events they build."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 0.0
        self.scorings = 0
        real = finder._score

        def timed(*args: Any, **kwargs: Any) -> Any:
            found, built = real(*args, **kwargs)
            self.now += built * PER_EVENT_S
            self.scorings += 1
            return found, built

        monkeypatch.setattr(finder, "_score", timed)

    def __call__(self) -> float:
        return self.now


def _find(monkeypatch: pytest.MonkeyPatch, deadline_s: float | None) -> tuple[Any, float | None,
                                                                              _Clock]:
    clock = _Clock(monkeypatch)
    with search_deadline(deadline_s, clock=clock):
        choice = find_slices(PLAN, GRAD, itemsize=4, budget_bytes=BUDGET,
                             max_slices=MAX_SLICES)
        left = remaining_s()
    return choice, left, clock


def _build_s(events: int) -> float:
    return finder.BUILD_PER_EVENT * PER_EVENT_S * events


@pytest.mark.parametrize("slices", [
    SlicePlan.none(),
    SlicePlan(("b",), (512,), (64,)),
    SlicePlan(("d", "b", "n"), (2, 512, 7), (1, 8, 4)),  # n: chunks of 4 and 3
    SlicePlan(("n", "m"), (7, 7), (3, 2)),  # two uneven indices: four sets of lengths
])
def test_a_score_counts_the_events_of_every_slice(slices: SlicePlan) -> None:
    score = score_slices(PLAN, slices, GRAD, itemsize=4)
    assert score.events == len(sliced_schedule(PLAN, slices, GRAD, itemsize=4).events)


def test_the_finder_takes_fewer_slices_where_the_best_one_s_build_would_not_fit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    free, _, clock = _find(monkeypatch, None)
    searched_s = clock.now  # the whole search's fake seconds, no deadline
    best = free.best
    assert best.slices.count > 16 and not free.fits
    # Room for the scorings, not for the best plan's build: a plan of fewer slices.
    choice, left, _ = _find(monkeypatch, searched_s + 0.5 * _build_s(best.events))
    assert left is not None and _build_s(choice.best.events) <= left
    assert choice.best.slices.count < best.slices.count
    assert choice.best == score_slices(PLAN, choice.best.slices, GRAD, itemsize=4)
    assert choice.fits is False and choice.smallest == choice.best
    assert choice.best.peak_bytes >= best.peak_bytes
    # Room for both: the same plan as without a deadline.
    roomy, left, _ = _find(monkeypatch, searched_s + 2 * _build_s(best.events))
    assert roomy.best == best


@pytest.mark.parametrize("deadline_s", [0.05, 0.2, 0.5, 1.0, 3.0])
def test_the_whole_fallback_ends_before_its_deadline_in_the_model_s_terms(
        monkeypatch: pytest.MonkeyPatch, deadline_s: float) -> None:
    clock = _Clock(monkeypatch)
    real = strategy.sliced_schedule

    def built(*args: Any, **kwargs: Any) -> Any:  # the final build, as the model says
        schedule = real(*args, **kwargs)
        clock.now += _build_s(len(schedule.events))
        return schedule

    monkeypatch.setattr(strategy, "sliced_schedule", built)
    with search_deadline(deadline_s, clock=clock):
        result = build_strategy("sliced", PLAN, GRAD, itemsize=4,
                                options={"budget_bytes": BUDGET})
        left = remaining_s()
    assert left is not None and left > 0.0
    section = result.details["slicing"]
    assert section["count"] > 1 and section["fits_budget"] is False
    assert result.memory.peak_bytes == section["peak_bytes_with_accumulators"]
    chosen = SlicePlan.from_dict(section)
    assert result.memory.peak_bytes == score_slices(PLAN, chosen, GRAD, itemsize=4).peak_bytes


def test_a_budget_met_under_the_deadline_is_met() -> None:
    reverse = build_strategy("reverse", PLAN, GRAD, itemsize=4)
    budget = (floor_bytes(PLAN.equation, GRAD, 4) + reverse.memory.peak_bytes) // 2 + 8192
    for deadline_s in (0.0, 0.01, None):
        with search_deadline(deadline_s):
            choice = find_slices(PLAN, GRAD, itemsize=4, budget_bytes=budget)
        assert choice.fits is (choice.best.peak_bytes <= budget)
        assert choice.best == score_slices(PLAN, choice.best.slices, GRAD, itemsize=4)
