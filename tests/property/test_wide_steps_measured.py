"""Plans whose path has a step of three or more tensors: measured = predicted on the cpu.

opt_einsum's optimizers under a memory limit end with one step over every tensor left
when no pair fits. Such a step runs pairwise (docs/strategies.md, "Steps of three or more
tensors run pairwise"), so the cpu allocator's peak (torch.profiler) equals the model's
for every strategy, and every gradient matches the float64 oracle (torch.autograd of
torch.einsum), whose largest relative error the executor reports. The cases: the
example of issue 20 (``bc,bd,cm,mdn->bn`` under a limit of 1,000 elements, which before
measured 52.66 KiB for a plan said to fit 45 KiB), opt_einsum's memory-limited test
pairs (``tests/opt_einsum_pairs.py``), the help's example at smaller sizes, and
hypothesis equations under limits small enough to force wide steps.
"""

from __future__ import annotations

import pytest
from budgets import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from opt_einsum_pairs import MEMORY_LIMITED
from strategies import einsum_problems, grad_subsets

from einsum_analyze import analyze, execute
from einsum_analyze.strategies.registry import strategy_names

BUDGET_EXAMPLE = ("bc,bd,cm,mdn->bn", [(512, 2), (512, 2), (2, 7), (7, 2, 7)])

# float64 gradients against the float64 oracle; float32 ones against it too, looser.
TOLERANCE = {"float64": 1e-9, "float32": 1e-4}


def _runs(report, strategy_list):
    ran = execute(report, devices=["cpu"], repeats=1, warmup=0)
    runs = {r.strategy: r for r in ran.runs}
    assert set(strategy_list) <= set(runs), sorted(runs)
    return ran, runs


def _check_measured(report, strategy_list, dtype):
    ran, runs = _runs(report, strategy_list)
    for name, run in runs.items():
        if run.strategy == "opt_einsum-torch":
            continue  # opt_einsum's own contract: a baseline the model predicts to a margin
        assert run.skipped is None, (name, run.skipped)
        assert run.peak_bytes_measured == run.peak_bytes_predicted, name
        assert run.max_grad_error is not None and run.max_grad_error < TOLERANCE[dtype], name
    return ran, runs


def _wide(report) -> bool:
    return report.plan.wide is not None


def test_the_budget_example_is_measured_as_predicted_and_fits_nothing():
    report = analyze(*BUDGET_EXAMPLE, memory_limit=1000, budget="45KiB", max_search_s=None,
                     strategies=strategy_names())
    assert _wide(report)
    assert report.plan.as_planned.path == ((2, 3), (0, 1, 2))
    assert all(len(step.inputs) == 2 for step in report.plan.steps)
    ran, runs = _check_measured(report, strategy_names(), "float32")
    # 45 KiB is below every plan's measured peak: nothing fits, and nothing claims to.
    assert ran.recommended is not None and not ran.recommended.fits
    budget = 45 * 1024
    for name, run in runs.items():
        fits = [s.memory.peak_bytes <= budget for s in report.strategies if s.name == name]
        assert fits in ([], [run.peak_bytes_measured <= budget]), name
    # The recommendation (the least peak: sliced, here the sliced strategy's own plan).
    best = ran.recommended.plan
    run = runs.get("recommended", runs[best.strategy])
    assert run.peak_bytes_measured == best.peak_bytes > budget


@pytest.mark.parametrize("pair", [p for p in MEMORY_LIMITED if p.memory_limit != 6912],
                         ids=str)
def test_opt_einsums_memory_limited_pairs_are_measured_as_predicted(pair):
    names = ("reverse", "independent", "checkpoint", "recompute", "torch-autograd")
    report = analyze(pair.equation, pair.shapes, optimize="greedy", dtype="float64",
                     memory_limit=pair.memory_limit, strategies=names, max_search_s=None)
    assert _wide(report)
    _check_measured(report, names, "float64")


def test_the_help_example_at_smaller_sizes():
    sizes = {"a": 8, "b": 8, "c": 8, "i": 4, "j": 4, "k": 4}
    # 64 elements: no pair of operands contracts under it, so the path is one wide step.
    report = analyze("abc,ai,bj,ck->ijk", sizes=sizes, memory_limit=64, dtype="float64",
                     strategies=strategy_names(), max_search_s=None)
    assert _wide(report)
    _check_measured(report, strategy_names(), "float64")


# Our strategies: torch-autograd's run is torch.einsum's own, whatever the plan.
OURS = tuple(name for name in strategy_names() if name != "torch-autograd")


@given(problem=einsum_problems(min_operands=3, max_operands=4, max_rank=3, max_size=4),
       limit=st.integers(1, 2), strategy=st.sampled_from(OURS), data=st.data())
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_wide_steps_are_measured_as_predicted(problem, limit, strategy, data):
    grad = data.draw(grad_subsets(len(problem.shapes))) or "none"
    report = analyze(problem.equation, problem.shapes, optimize="greedy", dtype="float64",
                     memory_limit=limit, grad=grad, strategies=[strategy], max_search_s=None)
    assume(_wide(report))
    _, runs = _runs(report, [strategy])
    run = runs[strategy]
    assert run.skipped is None, run.skipped
    assert run.peak_bytes_measured == run.peak_bytes_predicted
    if grad != "none":
        assert run.max_grad_error is not None and run.max_grad_error < TOLERANCE["float64"]
