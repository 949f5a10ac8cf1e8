"""torch.einsum's own execution as a candidate of the drop-in's ``auto``.

Where no plan of ours is predicted to beat torch.einsum without a higher peak, eager
calls run torch.einsum itself; ``cache_info()`` says which ran and why. Values and
gradients are checked against torch.autograd of torch.einsum in float64.
"""

from __future__ import annotations

import logging

import pytest
import torch
from corpus import small_cases

import einsum_analyze.torch as dropin
from einsum_analyze import analyze
from einsum_analyze.torch import einsum, patch
from einsum_analyze.training.choice import NO_BUDGET, TIME_MARGIN, choose_dropin, predicted_s
from einsum_analyze.training.plans import PlanChoice

TN = ("ni,nj,nk,nl,aix,xjy,yku,ulv->nav",
      ((8, 4), (8, 4), (8, 4), (8, 4), (3, 4, 5), (5, 4, 5), (5, 4, 5), (5, 4, 6)))
"""A network whose path of ours does half torch.einsum's FLOPs (see the test below)."""


def _leaves(shapes: tuple[tuple[int, ...], ...], dtype: torch.dtype = torch.float64
            ) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=generator, dtype=dtype).requires_grad_()
            for s in shapes]


def _check_against_oracle(equation: str, leaves: list[torch.Tensor],
                          **options: object) -> None:
    y = einsum(equation, *leaves, **options)  # type: ignore[arg-type]
    upstream = torch.randn(y.shape, generator=torch.Generator().manual_seed(1),
                           dtype=torch.float64)
    grads = torch.autograd.grad(y, leaves, upstream.to(y.dtype))
    exact = [t.detach().double().requires_grad_() for t in leaves]
    want = torch.einsum(equation, *exact)
    torch.testing.assert_close(y.double(), want)
    for got, wanted in zip(grads, torch.autograd.grad(want, exact, upstream), strict=True):
        torch.testing.assert_close(got.double(), wanted)


def _last_choice() -> PlanChoice:
    return dropin.cache_info().choices[-1]


def test_a_pair_einsum_runs_torch_einsum_itself_and_says_why() -> None:
    dropin.clear_cache()
    leaves = _leaves(((16, 2, 4, 16), (32, 2, 4, 16)))
    _check_against_oracle("ibnd,jbnd->bnij", leaves)
    choice = _last_choice()
    assert (choice.equation, choice.runs, choice.grad) == ("ibnd,jbnd->bnij",
                                                           "torch.einsum", (0, 1))
    assert choice.reason.startswith("torch.einsum: ")
    # torch.einsum's own node, not ours
    y = einsum("ibnd,jbnd->bnij", *leaves)
    assert type(y.grad_fn).__name__ != "EagerContractBackward"
    assert dropin.cache_info().hits == 1


def test_a_pair_einsum_never_runs_a_plan_of_more_flops() -> None:
    # ``ijj,k->ik`` (benchmarks/cases.json's diag-private at 1/8): ``reverse`` does 14x
    # torch.einsum's FLOPs and is predicted faster by the per-kernel costs alone; it
    # measured 1.14x torch.einsum's time (2-core cpu, one thread).
    dropin.clear_cache()
    equation, shapes = "ijj,k->ik", ((8, 32, 32), (16,))
    choice = choose_dropin(equation, shapes, "float32", (0, 1), "auto", "auto", NO_BUDGET)
    (torch_model,) = analyze(equation, shapes, dtype="float32", grad=[0, 1],
                             strategies=["torch-autograd"]).strategies
    ours_flops = choice.result.forward_flops + choice.result.backward_flops
    assert ours_flops > torch_model.forward_flops + torch_model.backward_flops
    assert choice.runs_torch
    assert choice.reason.startswith("torch.einsum: no plan does as little arithmetic")
    leaves = _leaves(shapes)
    _check_against_oracle(equation, leaves)
    assert _last_choice().runs == "torch.einsum"


def test_a_plan_predicted_faster_runs_and_says_why() -> None:
    dropin.clear_cache()
    equation, shapes = TN
    choice = choose_dropin(equation, shapes, "float64", range(8), "auto", "auto", NO_BUDGET)
    torch_report = analyze(equation, shapes, dtype="float64", strategies=["torch-autograd"])
    (torch_model,) = torch_report.strategies
    sizes = torch_report.equation.size_dict
    ours = predicted_s(choice.result, sizes, "float64")
    assert ours <= TIME_MARGIN * predicted_s(torch_model, sizes, "float64")
    assert choice.result.memory.peak_bytes <= torch_model.memory.peak_bytes
    _check_against_oracle(equation, _leaves(shapes))
    assert _last_choice().runs == choice.result.name != "torch.einsum"
    assert "predicted faster" in _last_choice().reason


def test_a_named_strategy_always_runs_as_asked() -> None:
    dropin.clear_cache()
    _check_against_oracle("ij,jk->ik", _leaves(((3, 4), (4, 5))), strategy="reverse")
    assert _last_choice().runs == "reverse"
    assert _last_choice().reason == "strategy 'reverse' asked for"


def test_a_budget_under_torch_einsums_peak_runs_a_plan_that_fits() -> None:
    dropin.clear_cache()
    equation, shapes = "ir,jr,kr->ijk", ((12, 16), (12, 16), (12, 16))
    (torch_model,) = analyze(equation, shapes, dtype="float64",
                             strategies=["torch-autograd"]).strategies
    budget = torch_model.memory.peak_bytes - 1
    bounded = choose_dropin(equation, shapes, "float64", (0, 1, 2), "auto", "auto",
                            budget)
    assert not bounded.runs_torch
    assert bounded.result.memory.peak_bytes <= budget
    assert "over the budget" in bounded.reason
    _check_against_oracle(equation, _leaves(shapes), budget=budget)
    assert _last_choice().runs == bounded.result.name


def test_under_patch_the_fallback_calls_torch_einsum_not_itself() -> None:
    dropin.clear_cache()
    a, b = _leaves(((3, 4), (4, 5)))
    with patch():
        y = torch.einsum("ij,jk->ik", a, b)
    torch.testing.assert_close(y, a @ b)
    assert _last_choice().runs == "torch.einsum"


def test_the_fallback_copies_no_operand_and_keeps_torch_einsums_layout() -> None:
    dropin.clear_cache()
    a = torch.randn(3, 5, dtype=torch.float64).t().requires_grad_()  # not contiguous
    b = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    got, want = einsum("ij,kj->ik", b.t(), a), torch.einsum("ij,kj->ik", b.t(), a)
    assert _last_choice().runs == "torch.einsum"
    assert (got.shape, got.stride()) == (want.shape, want.stride())
    torch.testing.assert_close(got, want)


def test_every_miss_logs_its_choice(caplog: pytest.LogCaptureFixture) -> None:
    dropin.clear_cache()
    with caplog.at_level(logging.DEBUG, logger="einsum_analyze.torch"):
        einsum("ij,jk->ik", *_leaves(((3, 4), (4, 5))))
        einsum("ij,jk->ik", *_leaves(((3, 4), (4, 5))))  # a hit: nothing more
    (record,) = caplog.records
    assert "ij,jk->ik" in record.getMessage()
    assert "torch.einsum: no plan" in record.getMessage()


def test_auto_never_runs_a_plan_above_torch_einsums_peak_or_work() -> None:
    ran = {True: 0, False: 0}
    for case in [c for c in small_cases(20_000) if c.category != "bench"]:
        grad = tuple(range(len(case.shapes)))
        choice = choose_dropin(case.equation, case.shapes, "float64", grad, "auto", "auto",
                               NO_BUDGET)
        ran[choice.runs_torch] += 1
        torch_report = analyze(case.equation, case.shapes, dtype="float64", grad=list(grad),
                               strategies=["torch-autograd"])
        (torch_model,) = torch_report.strategies
        sizes = torch_report.equation.size_dict
        ours = predicted_s(choice.result, sizes, "float64")
        torch_s = predicted_s(torch_model, sizes, "float64")
        more_work = (len(case.shapes) <= 2 and
                     choice.result.forward_flops + choice.result.backward_flops
                     > torch_model.forward_flops + torch_model.backward_flops)
        beats = (choice.result.memory.peak_bytes <= torch_model.memory.peak_bytes
                 and ours <= TIME_MARGIN * torch_s and ours < torch_s and not more_work)
        assert choice.runs_torch == (not beats), (case.name, choice.reason)
    assert ran[True] and ran[False]  # both kinds of call are in the corpus


def test_the_fallback_runs_torch_einsums_own_path_bit_for_bit() -> None:
    # torch.einsum plans its path with opt_einsum on each call of three operands; the
    # plan keeps that path, so values and gradients are torch.einsum's to the bit. The
    # products are large enough that their kernels, the same either way, outweigh
    # torch.einsum's own planning on each call (on smaller ones our plan is faster).
    dropin.clear_cache()
    leaves = _leaves(((300, 400), (400, 300), (300, 400), (400, 300)), torch.float32)
    upstream = torch.randn(300, 300)
    got = einsum("ij,jk,kl,lm->im", *leaves)
    assert _last_choice().runs == "torch.einsum"
    want = torch.einsum("ij,jk,kl,lm->im", *leaves)
    assert torch.equal(got, want)
    for g, w in zip(torch.autograd.grad(got, leaves, upstream),
                    torch.autograd.grad(want, leaves, upstream), strict=True):
        assert torch.equal(g, w)


@pytest.mark.parametrize(("equation", "shapes", "strategy", "runs_torch"), [
    ("ibnd,jbnd->bnij", ((16, 2, 4, 16), (32, 2, 4, 16)), "auto", True),
    # eagerly a plan of ours runs here; compiled, auto holds torch.einsum, which the
    # compiler lowers and fuses (the plan's op is opaque to it)
    (TN[0], TN[1], "auto", True),
    (TN[0], TN[1], "reverse", False),  # a strategy asked for is kept, compiled too
])
def test_a_compiled_call_holds_torch_einsum_under_auto(
        equation: str, shapes: tuple[tuple[int, ...], ...], strategy: str,
        runs_torch: bool) -> None:
    graphs: list[str] = []

    def recording(gm: torch.fx.GraphModule, example: object) -> object:
        graphs.append(gm.code)
        return gm.forward

    torch._dynamo.reset()
    dropin.clear_cache()
    leaves = _leaves(shapes)
    compiled = torch.compile(dropin.Einsum(equation, strategy=strategy), fullgraph=True,
                             dynamic=False, backend=recording)
    y = compiled(*leaves)
    grads = torch.autograd.grad(y, leaves, torch.ones_like(y))
    exact = [t.detach().requires_grad_() for t in leaves]
    want = torch.einsum(equation, *exact)
    torch.testing.assert_close(y, want)
    for got, wanted in zip(grads, torch.autograd.grad(want, exact, torch.ones_like(want)),
                           strict=True):
        torch.testing.assert_close(got, wanted)
    (graph,) = graphs
    assert ("einsum_analyze" not in graph) == runs_torch
    assert ("torch.functional.einsum" in graph or "torch.einsum" in graph) == runs_torch
    choice = _last_choice()
    assert choice.compiled == ("torch.einsum" if runs_torch else strategy)
    if strategy == "auto" and choice.runs != "torch.einsum":
        assert "under torch.compile: torch.einsum" in choice.reason


def test_eager_calls_of_the_network_run_a_plan_of_ours() -> None:
    # the second case above: what eager calls run there, so that compiling changes it
    dropin.clear_cache()
    einsum(TN[0], *_leaves(TN[1]))
    assert _last_choice().runs != "torch.einsum"


@pytest.mark.parametrize("value", [0, -1, float("nan"), "1s", True])
def test_a_planning_time_that_is_not_positive_seconds_is_refused(value: object) -> None:
    from einsum_analyze.errors import DropinValueError

    with pytest.raises(DropinValueError, match="max_plan_s"):
        einsum("ij,jk->ik", *_leaves(((3, 4), (4, 5))), max_plan_s=value)  # type: ignore[arg-type]
    with pytest.raises(DropinValueError, match="max_plan_s"):
        patch(max_plan_s=value)  # type: ignore[arg-type]


def test_the_planning_time_reaches_every_analysis_of_a_first_call(monkeypatch) -> None:
    # A first call's analyses share its planning time: each is given what is left of it.
    import einsum_analyze.training.choice as choice

    seen: list[float] = []
    original = choice.analyze

    def recording(*args, **kwargs):
        seen.append(kwargs["max_search_s"])
        return original(*args, **kwargs)

    monkeypatch.setattr(choice, "analyze", recording)
    dropin.clear_cache()
    equation, shapes = TN
    _check_against_oracle(equation, _leaves(shapes), max_plan_s=0.25)
    assert seen and all(0 < s <= 0.25 for s in seen)
    seen.clear()
    dropin.clear_cache()
    with patch(max_plan_s=0.3):
        leaves = _leaves(shapes)
        torch.einsum(equation, *leaves)
    assert seen and all(0 < s <= 0.3 for s in seen)
    seen.clear()
    dropin.clear_cache()
    einsum(equation, *_leaves(shapes))
    assert seen and all(0 < s <= choice.DEFAULT_PLAN_S for s in seen)


def test_where_no_plan_of_ours_is_within_torchs_peak_the_reason_compares_ours() -> None:
    # ibnd,jbnd->bnij at 16x2x4x8: torch.einsum's own execution wins the search and no
    # plan of ours peaks as low (36,864 B against 32,768 B). The choice keeps our plan of
    # least peak, not the torch-autograd model (its events are not a plan of ours), so
    # that the reason compares two executions, and a graphed call has a plan to replay.
    from einsum_analyze.roofline import NOMINAL
    from einsum_analyze.training.choice import _choose_dropin

    shapes = ((16, 2, 4, 8), (16, 2, 4, 8))
    choice = _choose_dropin("ibnd,jbnd->bnij", shapes, "float32", [0, 1], "auto", "auto",
                            NO_BUDGET, NOMINAL["cpu"])
    assert choice.runs_torch
    assert choice.result.name != "torch-autograd"
    assert choice.reason.startswith("torch.einsum: no plan peaks lower ('reverse' ")
    torch_peak = analyze("ibnd,jbnd->bnij", list(shapes),
                         strategies=("torch-autograd",)).strategies[0].memory.peak_bytes
    assert choice.result.memory.peak_bytes > torch_peak
    # Under a budget that torch.einsum meets and no plan of ours does, torch.einsum runs.
    within = _choose_dropin("ibnd,jbnd->bnij", shapes, "float32", [0, 1], "auto", "auto",
                            torch_peak, NOMINAL["cpu"])
    assert within.runs_torch and within.result.name != "torch-autograd"
    torch_peak64 = analyze("ibnd,jbnd->bnij", list(shapes), dtype="float64",
                           strategies=("torch-autograd",)).strategies[0].memory.peak_bytes
    _check_against_oracle("ibnd,jbnd->bnij", _leaves(shapes), budget=torch_peak64)
    assert _last_choice().runs == "torch.einsum"
