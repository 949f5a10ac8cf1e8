"""The search's recommended plan runs on our executor on CPU, exactly as predicted.

Regression for the crash in ``run_mul`` (``permute``: the dims of a tensor made by a
step of three operands were unknown to the lowering) and for plans whose step of three
operands ran through ``torch.einsum`` with intermediates the model did not count. Every
case of benchmarks/cases.json, dims of 64 and above divided by 8.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from einsum_analyze import analyze, execute, execution

pytest.importorskip("torch")

CASES = json.loads((Path(__file__).parents[3] / "benchmarks" / "cases.json").read_text())["cases"]


def _scaled(case: dict[str, Any]) -> list[list[int]]:
    return [[max(1, d // 8) if d >= 64 else d for d in shape] for shape in case["shapes"]]


def _recommended_run(report: Any) -> Any:
    assert report.recommended is not None
    [run] = [r for r in report.runs
             if r.strategy == report.recommended.label and not r.is_baseline]
    return run


def _run_recommended(report: Any, monkeypatch: pytest.MonkeyPatch, *baselines: str,
                     **options: Any) -> Any:
    """The report executed on the cpu with the runs the test reads and no others.

    The recommended plan runs alone (its strategies left out, it runs as ``recommended``,
    the same events), beside only the ``baselines`` named: each run is measured on its
    own, so the ones no assertion reads (tn18-b65536-bond64's reverse run and
    opt_einsum-torch need 202 MiB each) are not made.
    """
    monkeypatch.setattr(execution, "BASELINES", baselines)
    alone = dataclasses.replace(report, strategies=())
    return execute(alone, devices=["cpu"], repeats=1, warmup=0, **options)


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["flops", "memory", "time"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_recommended_plan_runs_as_predicted_on_cpu(case: dict[str, Any], objective: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    report = analyze(case["equation"], _scaled(case), strategies=("reverse",),
                     objective=objective, optimize="greedy")
    report = _run_recommended(report, monkeypatch)
    run = _recommended_run(report)
    assert run.skipped is None, run.skipped
    assert run.max_grad_error is not None and run.max_grad_error < 1e-4
    assert run.peak_bytes_measured == run.peak_bytes_predicted, (
        report.recommended.label, report.recommended.plan.path)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_without_a_budget_the_recommended_peak_is_not_above_eager_torch(
        case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 20 item 5, eager half, on every case above 1 MiB: measured, side by side.
    # No search deadline: the plan found must not depend on the machine's load.
    report = analyze(case["equation"], _scaled(case), strategies=("reverse",),
                     objective="time", max_search_s=None)
    report = _run_recommended(report, monkeypatch, "torch-autograd")
    run = _recommended_run(report)
    [eager] = [r for r in report.runs if r.strategy == "torch-autograd"]
    assert eager.peak_bytes_measured is not None
    if eager.peak_bytes_measured <= 2**20:
        pytest.skip(f"eager peak {eager.peak_bytes_measured:,} B is under 1 MiB")
    assert run.peak_bytes_measured == run.peak_bytes_predicted
    assert run.peak_bytes_measured <= eager.peak_bytes_measured, (
        report.recommended.plan.strategy, run.peak_bytes_measured, eager.peak_bytes_measured)


SMALL = [c for c in CASES if c["name"] in ("ellipsis-broadcast", "diag-private", "implicit")]


@pytest.mark.parametrize("case", SMALL, ids=[c["name"] for c in SMALL])
def test_recommended_peak_is_never_above_autograd_on_small_cases(case: dict[str, Any]) -> None:
    # The bound: never above torch autograd's measured peak by more than 4 KiB.
    # Both runs make the upstream gradient between the phases and hold it to the end;
    # our seed reads it in place. (benchmarks/bench_training.py now counts it for
    # torch.einsum too: it left it out, and our seed's copy of it put
    # ellipsis-broadcast 60 KiB above autograd on the H200.)
    report = analyze(case["equation"], case["shapes"], strategies=("reverse",),
                     objective="flops")
    report = execute(report, devices=["cpu"], repeats=1, warmup=0)
    run = _recommended_run(report)
    [autograd] = [r for r in report.runs if r.strategy == "torch-autograd"]
    assert run.peak_bytes_measured == run.peak_bytes_predicted
    assert autograd.peak_bytes_measured is not None
    assert run.peak_bytes_measured <= autograd.peak_bytes_measured + 4096, (
        run.peak_bytes_measured, autograd.peak_bytes_measured)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES[:3], ids=[c["name"] for c in CASES[:3]])
def test_a_plan_within_a_budget_measures_within_it_on_cpu(case: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    # No search deadline: under load a 1 s search may stop before it scores the paths of
    # least peak, and this test is about the run keeping to the budget, not the deadline.
    shapes = _scaled(case)
    free = analyze(case["equation"], shapes, strategies=("reverse",), objective="memory",
                   max_search_s=None)
    assert free.search is not None
    budget = free.search.smallest_peak.peak_bytes
    report = analyze(case["equation"], shapes, strategies=("reverse",), budget=budget,
                     max_search_s=None)
    assert report.recommended is not None and report.recommended.fits
    run = _recommended_run(_run_recommended(report, monkeypatch))
    assert run.skipped is None, run.skipped
    assert run.peak_bytes_measured is not None and run.peak_bytes_measured <= budget


def test_every_candidate_path_is_pairwise() -> None:
    # mps-layer under its tightest limit: opt_einsum's greedy ends with one step of three.
    case = {c["name"]: c for c in CASES}["mps-layer"]
    report = analyze(case["equation"], _scaled(case), strategies=("reverse",),
                     objective="memory", optimize="greedy")
    assert report.search is not None
    for plan in report.search.pareto:
        assert all(len(step) == 2 for step in plan.path), plan
