"""Real-device checks, run on the lent GPU: measured memory equals the prediction.

Skipped without CUDA (tests/conftest.py skips every test marked gpu).
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
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_cuda_peak_matches_prediction(case: dict) -> None:
    report = analyze(case["equation"], case["shapes"], strategies=("reverse", "independent"))
    report = execute(report, devices=["cuda"], repeats=2, warmup=1)
    ours = [run for run in report.runs if not run.is_baseline]
    assert ours and all(run.skipped is None for run in ours), [r.skipped for r in ours]
    for run in ours:
        assert run.peak_bytes_measured is not None and run.peak_bytes_predicted is not None
        gap = abs(run.peak_bytes_measured - run.peak_bytes_predicted)
        assert gap <= TOLERANCE * run.peak_bytes_predicted + 4 * ROUNDING, (
            run.strategy, run.peak_bytes_measured, run.peak_bytes_predicted)
        assert run.max_grad_error is not None and run.max_grad_error < 1e-3
        assert run.forward is not None and run.forward.median_s > 0
        assert run.backward is not None and run.backward.median_s > 0


@pytest.mark.gpu
def test_cuda_baselines_run_and_agree() -> None:
    case = CASES[0]
    report = execute(analyze(case["equation"], case["shapes"]), devices=["cuda"], repeats=2,
                     warmup=1)
    baselines = {run.strategy: run for run in report.runs if run.is_baseline}
    assert set(baselines) == {"torch-autograd", "opt_einsum-torch"}
    for run in baselines.values():
        assert run.skipped is None
        assert run.peak_bytes_measured is not None and run.peak_bytes_measured > 0
        assert run.max_grad_error is not None and run.max_grad_error < 1e-3
