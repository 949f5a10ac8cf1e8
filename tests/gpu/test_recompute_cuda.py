"""The recompute strategy's two orders on the lent GPU: measured peak equals the prediction.

mps-layer (benchmarks/cases.json) and cp-reconstruction (benchmarks/model_einsums.json),
float32, every operand differentiated: recompute with step 2's gradients in reverse
mode's order and taken down their sub-trees at once (``depth_first``), and the no-budget
recommendation on the nominal H200 profile, which takes recompute on both. Skipped
without CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from einsum_analyze import analyze, execute
from einsum_analyze.roofline import NOMINAL

BENCH = Path(__file__).parents[2] / "benchmarks"
CASES = {c["name"]: c for c in json.loads((BENCH / "cases.json").read_text())["cases"]}
CASES.update({c["name"]: c for c in json.loads(
    (BENCH / "model_einsums.json").read_text())["cases"]})
NAMES = ("mps-layer", "cp-reconstruction")


def check_runs(report) -> None:
    ours = [run for run in report.runs if not run.is_baseline]
    assert ours and all(run.skipped is None for run in ours), [r.skipped for r in ours]
    for run in ours:
        assert run.peak_bytes_measured == run.peak_bytes_predicted, (
            run.strategy, run.peak_bytes_measured, run.peak_bytes_predicted)
        assert run.max_grad_error is not None and run.max_grad_error < 1e-3, run.strategy


@pytest.mark.gpu
@pytest.mark.parametrize("depth_first", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_cuda_recompute_orders_peak_equals_prediction(name: str, depth_first: bool) -> None:
    case = CASES[name]
    report = analyze(case["equation"], case["shapes"], strategies=("recompute",),
                     strategy_options={"recompute": {"depth_first": depth_first}})
    check_runs(execute(report, devices=["cuda"], repeats=1, warmup=0))


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_cuda_no_budget_recommendation_is_recompute_and_measures_its_peak(name: str) -> None:
    case = CASES[name]
    report = analyze(case["equation"], case["shapes"], objective="time", max_search_s=None,
                     profile=NOMINAL["h200"], strategies=("reverse", "torch-autograd"))
    assert report.recommended is not None and report.recommended.plan.strategy == "recompute"
    check_runs(execute(report, devices=["cuda"], repeats=1, warmup=0))
