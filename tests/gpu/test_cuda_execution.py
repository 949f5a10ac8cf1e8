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


ZERO_AND_DIGITS = [
    ("ij,jk->ik", [[2, 0], [0, 4]]),
    ("ij,jk,kl->il", [[0, 3], [3, 4], [4, 5]]),
    ("ii->i", [[0, 0]]),
    ("a0,0b,b1->a1", [[8, 16], [16, 32], [32, 4]]),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("equation", "shapes"), ZERO_AND_DIGITS,
                         ids=[case[0] for case in ZERO_AND_DIGITS])
def test_cuda_zero_sizes_and_digit_labels_run(equation: str, shapes: list[list[int]]) -> None:
    # Issue 10 item 6 on CUDA: empty tensors and digit labels run, gradients check, and
    # every run (baselines included) completes.
    report = execute(analyze(equation, shapes, dtype="float64"), devices=["cuda"], repeats=2,
                     warmup=1)
    assert report.runs
    for run in report.runs:
        assert run.skipped is None, (run.strategy, run.skipped)
        assert run.max_grad_error is None or run.max_grad_error < 1e-10
    for run in report.runs:
        if not run.is_baseline:
            assert run.peak_bytes_measured is not None and run.peak_bytes_predicted is not None
            gap = abs(run.peak_bytes_measured - run.peak_bytes_predicted)
            assert gap <= 4 * ROUNDING, (run.strategy, run.peak_bytes_measured,
                                         run.peak_bytes_predicted)


def _corpus_small() -> list:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from corpus import small_cases

    return small_cases(50_000)


COMPLEX_CASES = [(c["name"], c["equation"], c["shapes"]) for c in CASES] + [
    (case.name, case.equation, case.shapes) for case in _corpus_small()]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "equation", "shapes"), COMPLEX_CASES,
                         ids=[name for name, _, _ in COMPLEX_CASES])
def test_cuda_complex64_peak_equals_prediction(name: str, equation: str, shapes: list) -> None:
    # Lazily conjugated inputs used to make bmm/sum/mul copy on CUDA (tn18-b512 +20%):
    # the backward now runs in conjugated space and allocates exactly what is modelled.
    report = analyze(equation, shapes, dtype="complex64", strategies=("reverse", "independent"))
    report = execute(report, devices=["cuda"], repeats=1, warmup=0)
    ours = [run for run in report.runs if not run.is_baseline]
    assert ours and all(run.skipped is None for run in ours), [r.skipped for r in ours]
    for run in ours:
        assert run.peak_bytes_measured == run.peak_bytes_predicted, (
            run.strategy, run.peak_bytes_measured, run.peak_bytes_predicted)
        assert run.retained_bytes_measured == run.retained_bytes_predicted, run.strategy
        assert run.max_grad_error is not None and run.max_grad_error < 1e-3


@pytest.mark.gpu
def test_cuda_non_ascii_and_53_labels_run() -> None:
    labels = [chr(0x3B1 + k) for k in range(25)] + list("abcdefghijklmnopqrstuvwxyzAB")
    chain = ",".join(a + b for a, b in zip(labels, labels[1:], strict=False))
    for equation, shapes in (("αβ,βγ->αγ", [(3, 4), (4, 5)]),
                             (chain + "->" + labels[0] + labels[-1], [(2, 2)] * 52)):
        report = execute(analyze(equation, shapes), devices=["cuda"], repeats=1, warmup=0)
        assert report.runs and all(run.skipped is None for run in report.runs), [
            (r.strategy, r.skipped) for r in report.runs]
        assert all(run.max_grad_error is not None and run.max_grad_error < 1e-3
                   for run in report.runs)
