"""On CUDA: a plan whose path has a step of three or more tensors measures its prediction.

Such a step runs pairwise with our kernels (docs/strategies.md, "Steps of three or more
tensors run pairwise"); the CPU side is tests/property/test_wide_steps_measured.py.
Skipped without CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import pytest

from einsum_analyze import analyze, execute

TOLERANCE = 0.02
ROUNDING = 512
CASES = {
    # issue 20's example: under 1,000 elements opt_einsum ends with ((0, 1, 2)).
    "budget-example": ("bc,bd,cm,mdn->bn", [(512, 2), (512, 2), (2, 7), (7, 2, 7)], 1000),
    "tucker-limited": ("abc,ai,bj,ck->ijk", [(64, 64, 64), (64, 32), (64, 32), (64, 32)],
                       64),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_wide_step_plans_measure_their_prediction(name: str) -> None:
    equation, shapes, limit = CASES[name]
    report = analyze(equation, shapes, memory_limit=limit, strategies=("reverse", "independent"),
                     max_search_s=None)
    assert report.plan.wide is not None, "the path has no wide step to test"
    ran = execute(report, devices=["cuda"], repeats=2, warmup=1)
    ours = [r for r in ran.runs if not r.is_baseline]
    assert ours
    for run in ours:
        assert run.skipped is None, (run.strategy, run.skipped)
        assert run.peak_bytes_measured is not None and run.peak_bytes_predicted is not None
        gap = abs(run.peak_bytes_measured - run.peak_bytes_predicted)
        assert gap <= TOLERANCE * run.peak_bytes_predicted + 4 * ROUNDING, (
            run.strategy, run.peak_bytes_measured, run.peak_bytes_predicted)
        assert run.max_grad_error is not None and run.max_grad_error < 1e-3, run.strategy
