"""The cpu allocator's peak equals the predicted peak on every dtype and strategy.

Hypothesis draws small equations (repeated, private and size-1 broadcast labels), a
dtype, a strategy and the operands differentiated; ``execute`` runs the strategy on the
cpu and reads the allocator's peak (torch.profiler). The fixed cases are the ones that
measured above the model: half-precision sums torch makes through float32 on the cpu,
and a forward-only run that made an upstream gradient it never read.
"""

from __future__ import annotations

import pytest
from budgets import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import einsum_problems, grad_subsets

from einsum_analyze import analyze, execute
from einsum_analyze.model.kernels import Layout, lower_contraction

DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
STRATEGIES = ("reverse", "independent", "checkpoint", "sliced")


def measured_and_predicted(equation, shapes, dtype, strategy, grad="all"):
    report = analyze(equation, shapes, dtype=dtype, grad=grad, strategies=[strategy])
    ran = execute(report, devices=["cpu"], repeats=1, warmup=0)
    (run,) = [r for r in ran.runs if r.strategy == strategy]
    assert run.skipped is None, run.skipped
    return run.peak_bytes_measured, run.peak_bytes_predicted


@pytest.mark.parametrize(("equation", "shapes", "dtype", "strategy", "grad", "peak"), [
    ("lhf,p->hp", [(4, 4, 5), (5,)], "float16", "reverse", "all", 594),
    ("khh,->", [(6, 6, 6), ()], "bfloat16", "independent", "all", 1020),
    ("bf...gg->...f", [(7, 1, 5, 5)], "complex128", "reverse", "none", 2816),
])
def test_the_cases_that_measured_above_the_model(equation, shapes, dtype, strategy, grad, peak):
    measured, predicted = measured_and_predicted(equation, shapes, dtype, strategy, grad)
    assert measured == predicted == peak


@given(problem=einsum_problems(max_operands=3, max_rank=3, max_size=4),
       dtype=st.sampled_from(DTYPES), strategy=st.sampled_from(STRATEGIES), data=st.data())
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_measured_peak_equals_the_prediction_on_every_dtype(problem, dtype, strategy, data):
    grad = data.draw(grad_subsets(len(problem.shapes))) or "none"
    measured, predicted = measured_and_predicted(problem.equation, problem.shapes, dtype,
                                                 strategy, grad)
    assert measured == predicted, (problem.equation, problem.shapes, dtype, strategy, grad)


def test_a_sum_over_separate_runs_of_memory_notes_its_float32_temporaries():
    sizes = {"l": 4, "h": 4, "f": 5}
    apart = lower_contraction([Layout.contiguous("lhf", sizes)], "h", sizes)
    # the output's 4 elements, then a float32 output and a float32 copy of the input
    assert apart.upcast == ((4, 4 + 80),)
    together = lower_contraction([Layout.contiguous("lhf", sizes)], "l", sizes)
    assert together.upcast == ()
