"""The drop-in's ``cuda_graphs`` option where no GPU is needed: its checks, CPU tensors
(which never replay graphs), and the figures the graphs are chosen by.

The graphs themselves run in tests/gpu/test_dropin_graphs_cuda.py. Plans keyed for a
CUDA device are built here too: a plan is compiled on the ``meta`` device, so no CUDA
call is made until a call replays it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from einsum_analyze.errors import DropinValueError
from einsum_analyze.torch import Einsum, cache_info, clear_cache, einsum, patch
from einsum_analyze.training.choice import NO_BUDGET
from einsum_analyze.training.graph_model import launches_product
from einsum_analyze.training.graphs import (
    AUTO_CAPTURE_CALLS,
    GraphSlot,
    pool_bytes,
    predict_graphs,
)
from einsum_analyze.training.plans import get_plan

CHAIN = "ij,jk,kl->il"
SMALL = ((3, 4), (4, 5), (5, 6))


def _key(shapes: Any, budget: int = NO_BUDGET, strategy: str = "reverse",
         device: str = "cuda:0") -> tuple[Any, ...]:
    return (CHAIN, shapes, "float32", device, (True, True, True), strategy, "auto", budget)


@pytest.mark.parametrize("bad", ["yes", "Auto", None, 1, 0, [True]])
def test_a_bad_cuda_graphs_value_is_one_line_naming_it(bad: Any) -> None:
    a, b = torch.ones(2, 3), torch.ones(3, 4)
    for make in (lambda: einsum("ij,jk->ik", a, b, cuda_graphs=bad),
                 lambda: patch(cuda_graphs=bad),
                 lambda: Einsum("ij,jk->ik", cuda_graphs=bad)):
        with pytest.raises(DropinValueError) as caught:
            make()
        message = str(caught.value)
        assert "\n" not in message
        assert f"cuda_graphs={bad!r}" in message and "True, False or 'auto'" in message


class _Text(str):
    """A str subclass, as the other options accept (a config's string type)."""


def test_a_str_subclass_auto_is_auto_as_for_the_other_options() -> None:
    a, b = torch.ones(2, 3), torch.ones(3, 4)
    want = torch.full((2, 4), 3.0)
    assert torch.equal(einsum("ij,jk->ik", a, b, strategy=_Text("reverse"),
                              cuda_graphs=_Text("auto")), want)
    with patch(cuda_graphs=_Text("auto")):
        assert torch.equal(torch.einsum("ij,jk->ik", a, b), want)
    assert torch.equal(Einsum("ij,jk->ik", cuda_graphs=_Text("auto"))(a, b), want)


@pytest.mark.parametrize("choice", [True, False, "auto"])
def test_cpu_tensors_never_replay_graphs(choice: Any) -> None:
    clear_cache()
    generator = torch.Generator().manual_seed(0)
    shapes = [(3, 4), (4, 5), (5, 6)]
    for _ in range(AUTO_CAPTURE_CALLS + 1):  # past the call where "auto" would capture
        operands = [torch.randn(s, generator=generator, requires_grad=True) for s in shapes]
        upstream = torch.randn(3, 6, generator=generator)
        got = torch.autograd.grad(einsum(CHAIN, *operands, strategy="reverse",
                                         cuda_graphs=choice), operands, upstream)
        precise = [o.detach().double().requires_grad_() for o in operands]
        want = torch.autograd.grad(torch.einsum(CHAIN, *precise), precise, upstream.double())
        for g, w in zip(got, want, strict=True):
            assert torch.allclose(g.double(), w, rtol=1e-5, atol=1e-6)
    (choice_info,) = cache_info().choices
    assert choice_info.graphs == ""  # no CUDA device: nothing to say, nothing captured
    assert get_plan(*_key(tuple(shapes), device="cpu")).graphs is None


def test_patch_and_module_pass_the_option_on() -> None:
    clear_cache()
    a, b = torch.ones(2, 3, requires_grad=True), torch.ones(3, 4)
    with patch(strategy="reverse", cuda_graphs="auto"):
        torch.einsum("ij,jk->ik", a, b).sum().backward()
    assert a.grad is not None and float(a.grad[0, 0]) == 4.0
    layer = Einsum("ij,jk->ik", strategy="reverse", cuda_graphs=True)
    assert layer.cuda_graphs is True
    assert torch.equal(layer(a, b), torch.full((2, 4), 3.0))


def test_the_pool_holds_what_the_captures_keep_hand_counted() -> None:
    # reverse on ij,jk,kl->il (3x4, 4x5, 5x6), float32, every tensor one 512-byte block:
    # forward makes x3 (kept for backward), x4 and its copy into torch's layout (the
    # result), then frees x4; backward reads the static upstream (outside the pool), makes
    # g3 and d2, d0, d1 and frees g3, while x3 and the result stay held: x3, the result,
    # g3, d2, d0 and d1 are live together at d1, six blocks.
    plan = get_plan(*_key(SMALL))
    assert [e.tensor for e in plan.result.events if e.kind == "alloc"] == [
        "x3", "x4", "x4.torch", "g4", "g3", "d2", "d0", "d1"]
    assert plan.new_saved == ("x3",)
    assert pool_bytes(plan) == 6 * 512


def test_the_blas_workspace_joins_the_pool_at_the_first_product() -> None:
    # the chain's first event is a product: the workspace is held with every block after
    plan = get_plan(*_key(SMALL))
    first = next(e for e in plan.result.events if e.kind == "alloc")
    assert launches_product(first)
    assert pool_bytes(plan, 8 << 20) == 6 * 512 + (8 << 20)
    assert pool_bytes(plan, 1000) == 6 * 512 + 1024  # one block, rounded as the others
    # a trace sums: no product, no workspace
    trace = ("ii->", ((5, 5),), "float32", "cuda:0", (True,), "reverse", "auto", NO_BUDGET)
    summed = get_plan(*trace)
    assert not any(launches_product(e) for e in summed.result.events)
    assert pool_bytes(summed, 8 << 20) == pool_bytes(summed) > 0
    assert predict_graphs(plan, _key(SMALL), 8 << 20).pool_bytes == 6 * 512 + (8 << 20)


def test_a_graphed_call_is_predicted_faster_where_launches_dominate() -> None:
    small = predict_graphs(get_plan(*_key(SMALL)), _key(SMALL))
    assert small.faster and small.engages
    assert small.graph_s < small.other_s and small.other == "the plan's eager events"
    # static copies: three operands and the upstream gradient, a block each
    assert small.static_bytes == 4 * 512 and small.pool_bytes == 6 * 512
    # the graphed peak: the caller's three operands, the copies, the pool, the result
    # copied out, the caller's upstream gradient and the three gradients copied out
    assert small.peak_bytes == (3 + 4 + 6 + 1 + 1 + 3) * 512
    big_shapes = ((4096, 4096),) * 3
    big = predict_graphs(get_plan(*_key(big_shapes)), _key(big_shapes))
    assert not big.faster and not big.engages  # the products' work dominates both


def test_a_budget_binds_the_graphed_peak() -> None:
    plan = get_plan(*_key(SMALL, budget=4096))
    prediction = predict_graphs(plan, _key(SMALL, budget=4096))
    assert plan.result.memory.peak_bytes <= 4096 < prediction.peak_bytes
    assert prediction.faster and not prediction.fits and not prediction.engages
    assert "over the budget" in _described(plan, _key(SMALL, budget=4096), True)


def _described(plan: Any, key: tuple[Any, ...], mode: Any) -> str:
    slot = GraphSlot(key)
    slot.wanted(plan, mode)
    return slot.describe()


def test_auto_decides_at_its_third_call_and_says_so() -> None:
    key = _key(SMALL)
    plan = get_plan(*key)
    slot = GraphSlot(key)
    assert slot.describe() == "eager: cuda_graphs=False"
    answers = [slot.wanted(plan, "auto") for _ in range(AUTO_CAPTURE_CALLS)]
    assert answers == [False] * (AUTO_CAPTURE_CALLS - 1) + [True]  # captures, then tries
    assert slot.prediction is not None and slot.prediction.plausible
    assert slot.needs_trial("auto") and not slot.needs_trial(True)
    big_shapes = ((4096, 4096),) * 3
    big = GraphSlot(_key(big_shapes))
    for _ in range(AUTO_CAPTURE_CALLS):
        assert not big.wanted(get_plan(*_key(big_shapes)), "auto")
    assert big.describe().startswith("eager: auto predicts no gain; graphs predicted")
