"""Narrow products run as multiply-adds (einsum_analyze.model.narrow): exact, same memory.

A batched matrix-vector product that sums 2 to 4 elements runs as that many broadcast
multiply-adds into its output. Every strategy's run through such steps is checked here
against the oracle (torch.autograd of torch.einsum in float64), its peak against the
model's, and the drop-in's result and gradients too; the size threshold is lowered so
that small operands take the path, as large ones do.
"""

from __future__ import annotations

import pytest
import torch

from einsum_analyze import analyze, execute
from einsum_analyze.model import narrow
from einsum_analyze.model.narrow import narrow_terms
from einsum_analyze.roofline import step_costs

NARROW = [
    ("bdm,bd->bm", [(6, 2, 5), (6, 2)]),
    ("bdm,bd->mb", [(4, 3, 7), (4, 3)]),
    ("md,d->m", [(9, 4)] + [(4,)]),
    ("bd,bdm->bm", [(5, 2), (5, 2, 3)]),
    ("abd,bd,dc->ac", [(3, 4, 2), (4, 2), (2, 5)]),
    ("dij,d->ji", [(3, 4, 5), (3,)]),
]


@pytest.fixture()
def small_narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(narrow, "NARROW_ELEMENTS", 1)


def _narrow_steps(report, itemsize: int) -> int:
    sizes = report.equation.size_dict
    return sum(1 for s in report.strategies for e in s.events
               if e.kernel is not None and narrow_terms(e.kernel, s.sizes(sizes), itemsize))


@pytest.mark.usefixtures("small_narrow")
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize(("equation", "shapes"), NARROW)
def test_every_strategy_through_narrow_steps_matches_the_oracle_and_its_peak(
        equation: str, shapes: list[tuple[int, ...]], dtype: str) -> None:
    report = analyze(equation, shapes, dtype=dtype,
                     strategies=("reverse", "independent", "checkpoint", "recompute"))
    assert _narrow_steps(report, 8 if dtype != "float32" else 4) > 0
    runs = [r for r in execute(report, devices=["cpu"], repeats=1, warmup=0).runs
            if not r.is_baseline]
    assert runs
    for run in runs:
        assert run.skipped is None, run.strategy
        assert run.max_grad_error is not None and run.max_grad_error < 1e-5, run.strategy
        assert run.peak_bytes_measured == run.peak_bytes_predicted, run.strategy


@pytest.mark.usefixtures("small_narrow")
@pytest.mark.parametrize(("equation", "shapes"), NARROW)
def test_the_drop_in_through_narrow_steps_matches_the_oracle(
        equation: str, shapes: list[tuple[int, ...]]) -> None:
    from einsum_analyze.torch import clear_cache, einsum

    clear_cache()
    generator = torch.Generator().manual_seed(3)
    operands = [torch.randn(s, generator=generator, dtype=torch.float32).requires_grad_()
                for s in shapes]
    out = einsum(equation, *operands, strategy="reverse")
    upstream = torch.randn(out.shape, generator=generator)
    got = torch.autograd.grad(out, operands, upstream)
    precise = [o.detach().double().requires_grad_() for o in operands]
    want_out = torch.einsum(equation, *precise)
    want = torch.autograd.grad(want_out, precise, upstream.double())
    assert torch.allclose(out.double(), want_out, atol=1e-5)
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g.double(), w, atol=1e-5)
    clear_cache()


def test_half_precision_and_small_products_stay_one_product() -> None:
    report = analyze("bdm,bd->bm", [(6, 2, 5), (6, 2)], dtype="float16",
                     strategies=("reverse",))
    assert _narrow_steps(report, 2) == 0  # float16: the product accumulates in float32
    report = analyze("bdm,bd->bm", [(6, 2, 5), (6, 2)], strategies=("reverse",))
    assert _narrow_steps(report, 4) == 0  # 30 outputs: under NARROW_ELEMENTS
    wide = analyze("bdm,bd->bm", [(32768, 8, 32), (32768, 8)], strategies=("reverse",))
    assert _narrow_steps(wide, 4) == 0  # sums 8: over NARROW_SUMMED


def test_a_narrow_step_is_priced_as_its_multiply_adds() -> None:
    # bdm,bd->bm at b=32768, d=2, m=32: the inputs read once (2,097,152 + 65,536
    # elements), the 1,048,576 outputs written twice and read once, in two kernels
    report = analyze("bdm,bd->bm", [(32768, 2, 32), (32768, 2)], strategies=("reverse",))
    (strategy,) = report.strategies
    steps = step_costs(strategy.events, strategy.sizes(report.equation.size_dict), 4)
    (forward,) = [s for s in steps if s.phase == "forward"]
    assert forward.kernel == "narrow" and forward.launches == 2
    assert forward.bytes == (32768 * 2 * 32 + 32768 * 2 + 3 * 32768 * 32) * 4
