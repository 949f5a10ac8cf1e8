"""The checkpoint strategy on the lent GPU: measured peak equals the prediction, as for reverse.

For every shared benchmark case, checkpoint runs at the midpoint budget between the floor
(inputs, upstream gradient, gradients) and reverse mode's peak, and with nothing kept
(every intermediate a gradient reads is recomputed). Skipped without CUDA (tests/conftest.py
skips every test marked gpu).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from einsum_analyze import analyze, execute

CASES = json.loads((Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]
TOLERANCE = 0.02
ROUNDING = 512


def midpoint(case: dict, dtype: str) -> int:
    report = analyze(case["equation"], case["shapes"], dtype=dtype, strategies=("reverse",))
    itemsize = report.itemsize
    sizes = [math.prod(shape) for shape in case["shapes"]]
    output = math.prod(report.equation.size_dict[c] for c in report.equation.output)
    floor = itemsize * (2 * sum(sizes) + output)
    return floor + (report.strategies[0].memory.peak_bytes - floor) // 2


def check_runs(report, what: str) -> None:
    ours = [run for run in report.runs if not run.is_baseline]
    assert ours and all(run.skipped is None for run in ours), [r.skipped for r in ours]
    for run in ours:
        assert run.peak_bytes_measured is not None and run.peak_bytes_predicted is not None
        gap = abs(run.peak_bytes_measured - run.peak_bytes_predicted)
        assert gap <= TOLERANCE * run.peak_bytes_predicted + 4 * ROUNDING, (
            what, run.strategy, run.peak_bytes_measured, run.peak_bytes_predicted)
        assert run.max_grad_error is not None and run.max_grad_error < 1e-3, (what, run)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_cuda_checkpoint_peak_matches_prediction(case: dict) -> None:
    budget = midpoint(case, "float32")
    report = analyze(case["equation"], case["shapes"], strategies=("reverse", "checkpoint"),
                     strategy_options={"checkpoint": {"budget_bytes": budget}})
    check_runs(execute(report, devices=["cuda"], repeats=2, warmup=1), f"midpoint {budget}")
    nothing = analyze(case["equation"], case["shapes"], strategies=("checkpoint",),
                      strategy_options={"checkpoint": {"keep": []}})
    check_runs(execute(nothing, devices=["cuda"], repeats=2, warmup=1), "keep none")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["tn18-b512", "chain3", "mps-layer"])
def test_cuda_checkpoint_complex64(name: str) -> None:
    case = next(c for c in CASES if c["name"] == name)
    report = analyze(case["equation"], case["shapes"], dtype="complex64",
                     strategies=("checkpoint",), strategy_options={"checkpoint": {"keep": []}})
    check_runs(execute(report, devices=["cuda"], repeats=2, warmup=1), "complex64 keep none")


@pytest.mark.gpu
def test_cuda_checkpoint_lowers_the_measured_peak_on_tn18_dp() -> None:
    case = next(c for c in CASES if c["name"] == "tn18-b512")
    report = analyze(case["equation"], case["shapes"], optimize="dp",
                     strategies=("reverse", "checkpoint"))
    reverse, checkpoint = report.strategies
    assert checkpoint.memory.peak_bytes < reverse.memory.peak_bytes
    runs = {run.strategy: run for run in execute(report, devices=["cuda"], repeats=2,
                                                 warmup=1).runs if not run.is_baseline}
    assert runs["checkpoint"].peak_bytes_measured < runs["reverse"].peak_bytes_measured
