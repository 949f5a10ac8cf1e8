"""The sliced strategy on the lent GPU: measured peak equals the prediction, exactly.

The prediction replays the sliced schedule with every allocation rounded up to 512 B
(CUDA's caching allocator); the measure is ``torch.cuda.max_memory_allocated``. Cases:
the shared benchmark cases sliced at half of reverse mode's training peak (the finder's
choice), mps-layer at the training-plans issue's midpoint budget, and given slicings of
output, summed and repeated indices, fused and unfused, float32 and complex64. Skipped
without CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from einsum_analyze import analyze, execute

CASES = json.loads((Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]
BY_NAME = {c["name"]: c for c in CASES}


def check(report, what: str) -> None:
    (run,) = [r for r in report.runs if r.strategy == "sliced"]
    assert run.skipped is None, (what, run.skipped)
    assert run.peak_bytes_measured == run.peak_bytes_predicted, (
        what, run.peak_bytes_measured, run.peak_bytes_predicted)
    assert run.max_grad_error is not None and run.max_grad_error < 1e-3, (what, run)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("fused", [True, False])
def test_cuda_sliced_at_half_the_reverse_peak(case: dict, fused: bool) -> None:
    reverse = analyze(case["equation"], case["shapes"], strategies=["reverse"]).strategies[0]
    budget = reverse.memory.peak_bytes // 2
    report = analyze(case["equation"], case["shapes"], strategies=["sliced"],
                     strategy_options={"sliced": {"budget_bytes": budget, "fused": fused}})
    check(execute(report, devices=["cuda"], repeats=2, warmup=1), f"budget {budget}")


@pytest.mark.gpu
def test_cuda_mps_layer_midpoint_budget_fits() -> None:
    case = BY_NAME["mps-layer"]
    budget = int(9.87 * 2**20)
    report = analyze(case["equation"], case["shapes"], budget=budget,
                     strategies=["reverse", "checkpoint", "sliced"])
    assert report.recommended is not None and report.recommended.fits
    ran = execute(report, devices=["cuda"], repeats=2, warmup=1)
    (run,) = [r for r in ran.runs if r.strategy == ran.recommended.label]
    assert run.peak_bytes_measured is not None and run.peak_bytes_measured <= budget
    assert run.peak_bytes_measured == run.peak_bytes_predicted


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "indices"), [
    ("tn18-b512", "b:100,z:3"),
    ("tn18-b512", "n:2"),
    ("diag-private", "j:5"),
    ("attention3", "q:256"),
    ("chain3", "k:1000"),
])
@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_cuda_given_slicings(name: str, indices: str, dtype: str) -> None:
    case = BY_NAME[name]
    for fused in (True, False):
        report = analyze(case["equation"], case["shapes"], dtype=dtype, strategies=["sliced"],
                         strategy_options={"sliced": {"indices": indices, "fused": fused}})
        check(execute(report, devices=["cuda"], repeats=2, warmup=1),
              f"{name} {indices} {dtype} fused={fused}")
