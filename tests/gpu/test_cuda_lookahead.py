"""CUDA checks of the executor's layout lookahead and of --precision tf32.

Skipped without CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from einsum_analyze import analyze, execute
from einsum_analyze.backends.precision import precision_context

CASES = {c["name"]: c for c in json.loads(
    (Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]}


def _swapped(report) -> int:
    """Products the lowering computes transposed (output written batch, right, left)."""
    return sum(
        1 for s in report.strategies for e in s.events
        if e.kernel is not None and e.kernel.kind == "bmm"
        and tuple(e.kernel.out_order) != e.kernel.batch + e.kernel.left + e.kernel.right
    )


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["tn18-b512", "tucker", "mps-layer", "tn18-b65536-bond64"])
def test_lookahead_layouts_keep_the_peak_exact(name: str) -> None:
    case = CASES[name]
    report = analyze(case["equation"], case["shapes"], strategies=("reverse",))
    assert _swapped(report) > 0  # the transposed product runs here
    report = execute(report, devices=["cuda"], repeats=2, warmup=1)
    (run,) = [r for r in report.runs if r.strategy == "reverse"]
    assert run.skipped is None
    assert run.peak_bytes_measured == run.peak_bytes_predicted
    assert run.retained_bytes_measured == run.retained_bytes_predicted
    assert run.max_grad_error is not None and run.max_grad_error < 1e-3


@pytest.mark.gpu
def test_tn18_forward_within_10_percent_of_torch_einsum() -> None:
    case = CASES["tn18-b65536-bond64"]
    report = analyze(case["equation"], case["shapes"], strategies=("reverse", "torch-autograd"))
    report = execute(report, devices=["cuda"], repeats=20, warmup=3)
    runs = {r.strategy: r for r in report.runs}
    ours, torch_run = runs["reverse"], runs["torch-autograd"]
    assert ours.forward is not None and torch_run.forward is not None
    assert ours.forward.median_s <= 1.1 * torch_run.forward.median_s, (
        ours.forward.median_s, torch_run.forward.median_s)


@pytest.mark.gpu
def test_tf32_engages_and_keeps_memory() -> None:
    case = CASES["chain3"]
    reports = {}
    for mode in ("highest", "tf32"):
        report = analyze(case["equation"], case["shapes"], strategies=("reverse",))
        with precision_context(mode):
            reports[mode] = execute(report, devices=["cuda"], repeats=2, warmup=1)
    full, tf32 = ([r for r in reports[m].runs if r.strategy == "reverse"][0]
                  for m in ("highest", "tf32"))
    assert full.max_grad_error is not None and tf32.max_grad_error is not None
    assert full.max_grad_error < 1e-5 < tf32.max_grad_error < 1e-2
    assert tf32.peak_bytes_measured == full.peak_bytes_measured == full.peak_bytes_predicted
