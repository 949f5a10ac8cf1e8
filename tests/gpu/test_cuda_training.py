"""The recommended plan on CUDA: it runs, its measured peak is its prediction, it fits.

Skipped without CUDA (tests/conftest.py skips every test marked gpu). For the lead's H200
batch: the recommended plan (possibly on another path than the report's, run under the
label ``recommended``) must measure what it predicts, like every strategy, and a plan
recommended within a budget must measure within it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from einsum_analyze import analyze, execute

CASES = json.loads((Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]
TOLERANCE = 0.02
ROUNDING = 512


@pytest.mark.gpu
@pytest.mark.parametrize("objective", ["flops", "memory"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_cuda_recommended_plan_measures_its_prediction(case: dict, objective: str) -> None:
    report = analyze(case["equation"], case["shapes"], strategies=("reverse",),
                     objective=objective, optimize="greedy")
    report = execute(report, devices=["cuda"], repeats=2, warmup=1)
    assert report.recommended is not None
    label = report.recommended.label
    [run] = [r for r in report.runs if r.strategy == label and not r.is_baseline]
    assert run.skipped is None, run.skipped
    assert run.peak_bytes_measured is not None and run.peak_bytes_predicted is not None
    gap = abs(run.peak_bytes_measured - run.peak_bytes_predicted)
    assert gap <= TOLERANCE * run.peak_bytes_predicted + 4 * ROUNDING, (
        label, run.peak_bytes_measured, run.peak_bytes_predicted)
    assert run.max_grad_error is not None and run.max_grad_error < 1e-3
    measured = report.recommended.measured
    assert measured and "time_vs_torch" in measured[0] and "peak_vs_torch" in measured[0]


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES[:3], ids=[c["name"] for c in CASES[:3]])
def test_cuda_a_plan_within_a_budget_measures_within_it(case: dict) -> None:
    free = analyze(case["equation"], case["shapes"], strategies=("reverse",),
                   objective="memory")
    assert free.search is not None
    budget = free.search.smallest_peak.peak_bytes + 4 * ROUNDING * len(free.plan.steps)
    report = analyze(case["equation"], case["shapes"], strategies=("reverse",),
                     budget=budget)
    assert report.recommended is not None and report.recommended.fits
    report = execute(report, devices=["cuda"], repeats=2, warmup=1)
    [run] = [r for r in report.runs
             if r.strategy == report.recommended.label and not r.is_baseline]
    assert run.peak_bytes_measured is not None
    # runs[].peak_bytes_measured counts the inputs (schema 2), or is above them where
    # the executor still measures that way: either way it must be within the budget.
    plan = report.recommended.plan
    assert run.peak_bytes_measured <= budget, (
        run.peak_bytes_measured, run.peak_bytes_predicted, budget, plan.strategy, plan.source,
        plan.path)
