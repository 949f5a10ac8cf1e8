"""The drop-in's autograd features and safety, each against torch.einsum in float64.

gradcheck and gradgradcheck on PyTorch's einsum OpInfo samples; torch.func transforms
and forward-mode AD (the drop-in runs torch.einsum under them); saved tensors modified
in place; plans for every grad mask; ``patch()`` across threads; dtypes and autocast
torch.einsum handles itself; the options' one-line errors; nothing cached for a call
that fails.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest
import torch
from budgets import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch_einsum_cases import OPINFO, TorchCase

import einsum_analyze.torch as dropin
from einsum_analyze.errors import DropinValueError
from einsum_analyze.torch import einsum, patch
from einsum_analyze.training.calls import TORCH_EINSUM
from einsum_analyze.training.choice import NO_BUDGET
from einsum_analyze.training.plans import get_plan

STRATEGIES = ["reverse", "independent", "checkpoint", "sliced"]

TORCH_JVP_WARNING = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")
"""torch's forward AD loads its jvp decompositions through torch.jit.script on first use."""


@pytest.fixture(params=["function", "custom-op"])
def eager_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run eager calls through the autograd.Function twin, then through the custom op."""
    monkeypatch.setattr(dropin, "EAGER_FAST_PATH", request.param == "function")
    return str(request.param)


def _sample(case: TorchCase) -> tuple[str, list[torch.Tensor]]:
    equation, *operands = case.build()
    return equation, [t.requires_grad_() for t in operands]


@pytest.mark.parametrize("case", OPINFO, ids=str)
def test_gradcheck_and_gradgradcheck_pass_on_the_opinfo_samples(case: TorchCase,
                                                                eager_path: str) -> None:
    equation, operands = _sample(case)

    def ours(*tensors: torch.Tensor) -> torch.Tensor:
        return einsum(equation, *tensors, strategy="reverse")

    assert torch.autograd.gradcheck(ours, operands)
    assert torch.autograd.gradgradcheck(ours, operands)


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    return (torch.randn(3, 4, generator=generator, dtype=torch.float64),
            torch.randn(4, 5, generator=generator, dtype=torch.float64))


def _both(fn: Any) -> tuple[Any, Any]:
    """``fn`` run with the drop-in (a plan of ours) and with torch.einsum."""
    return (fn(lambda *a: einsum(*a, strategy="reverse")), fn(TORCH_EINSUM))


@TORCH_JVP_WARNING
@pytest.mark.parametrize("transform", ["grad", "vjp", "jacrev", "jacfwd", "jvp", "vmap",
                                       "vmap-outer"])
def test_torch_func_transforms_give_torch_einsums_results(transform: str) -> None:
    a, b = _pair()
    tangent = torch.ones_like(a)

    def run(op: Any) -> Any:
        def f(x: torch.Tensor) -> torch.Tensor:
            return op("ij,jk->ik", x, b)

        match transform:
            case "grad":
                return torch.func.grad(lambda x: f(x).sin().sum())(a)
            case "vjp":
                out, pull = torch.func.vjp(f, a)
                return out, pull(torch.ones_like(out))
            case "jacrev":
                return torch.func.jacrev(f)(a)
            case "jacfwd":
                return torch.func.jacfwd(f)(a)
            case "jvp":
                return torch.func.jvp(f, (a,), (tangent,))
            case "vmap":
                return torch.func.vmap(lambda row: op("j,jk->k", row, b))(a)
            case _:
                return torch.func.vmap(lambda row: op("i,j->ij", row, row))(a)

    ours, torch_result = _both(run)
    torch.testing.assert_close(ours, torch_result)


@TORCH_JVP_WARNING
def test_forward_mode_ad_gives_torch_einsums_tangent() -> None:
    import torch.autograd.forward_ad as fwad

    a, b = _pair()
    tangent = torch.randn_like(a)

    def run(op: Any) -> tuple[torch.Tensor, torch.Tensor]:
        with fwad.dual_level():
            out = op("ij,jk->ik", fwad.make_dual(a, tangent), b)
            primal, derivative = fwad.unpack_dual(out)
            return primal.clone(), derivative.clone()

    ours, torch_result = _both(run)
    torch.testing.assert_close(ours, torch_result)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_operand_modified_in_place_before_backward_raises(strategy: str,
                                                             eager_path: str) -> None:
    a, b = (t.requires_grad_() for t in _pair())
    y = einsum("ij,jk->ik", a, b, strategy=strategy)
    with torch.no_grad():
        a.mul_(10)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_retain_graph_runs_backward_twice(strategy: str, eager_path: str) -> None:
    generator = torch.Generator().manual_seed(2)
    a, b, c = (torch.randn(s, generator=generator, dtype=torch.float64, requires_grad=True)
               for s in ((3, 4), (4, 5), (5, 2)))
    y = einsum("ij,jk,kl->il", a, b, c, strategy=strategy).square().sum()
    first = torch.autograd.grad(y, (a, b, c), retain_graph=True)
    second = torch.autograd.grad(y, (a, b, c))
    want = torch.autograd.grad(TORCH_EINSUM("ij,jk,kl->il", a, b, c).square().sum(),
                               (a, b, c))
    torch.testing.assert_close(first, want)
    torch.testing.assert_close(second, want)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from([("ij,jk,kl->il", ((4, 5), (5, 6), (6, 3))),
                          ("c->", ((6,),)),
                          ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
                          ("ab,bc,ca->", ((3, 4), (4, 5), (5, 3)))]),
    strategy=st.sampled_from(["auto", *STRATEGIES]),
    budget=st.sampled_from([None, "2KiB", "100KiB"]),
    data=st.data(),
)
def test_every_plan_builds_for_every_grad_mask(case: tuple[str, Any], strategy: str,
                                              budget: str | None, data: Any) -> None:
    equation, shapes = case
    mask = data.draw(st.lists(st.booleans(), min_size=len(shapes), max_size=len(shapes)))
    assume(any(mask))
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64).requires_grad_(m)
                for s, m in zip(shapes, mask, strict=True)]
    wanted = [t for t in operands if t.requires_grad]
    want = torch.autograd.grad(TORCH_EINSUM(equation, *operands).sum(), wanted)
    try:
        y = einsum(equation, *operands, strategy=strategy, budget=budget)
    except RuntimeError as err:  # a budget no plan meets: said in one line, nothing else
        assert "budget" in str(err) and "\n" not in str(err)
    else:
        torch.testing.assert_close(torch.autograd.grad(y.sum(), wanted), want)


def test_patch_restores_torch_einsum_across_threads_in_any_order() -> None:
    original = torch.einsum
    entered = [threading.Event() for _ in range(2)]
    leave = [threading.Event() for _ in range(2)]
    routed: list[bool] = [False, False]

    def scope(k: int) -> None:
        with patch(strategy="reverse"):
            entered[k].set()
            leave[k].wait(5)
            routed[k] = torch.einsum is not original

    threads = [threading.Thread(target=scope, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for event in entered:
        assert event.wait(5)
    leave[0].set()  # the first scope closes first: the second is still open
    threads[0].join(5)
    assert torch.einsum is not original
    leave[1].set()
    threads[1].join(5)
    assert routed == [True, True]
    assert torch.einsum is original and torch.functional.einsum is original


def test_patch_runs_its_own_options_and_the_defaults_without_them() -> None:
    a, b, c = (torch.ones(2, 3, requires_grad=True), torch.ones(3, 4, requires_grad=True),
               torch.ones(4, 5, requires_grad=True))
    dropin.clear_cache()
    with dropin.patch(strategy="checkpoint"):
        torch.einsum("ij,jk,kl->il", a, b, c).sum().backward()
    with dropin.patch():
        torch.einsum("ij,jk,kl->il", a, b, c).sum().backward()
    first, second = dropin.cache_info().choices
    assert (first.runs, first.reason) == ("checkpoint", "strategy 'checkpoint' asked for")
    assert "asked for" not in second.reason  # auto: chosen, not asked for
    assert a.grad is not None and float(a.grad[0, 0]) == 2 * 20.0  # two calls, 4 * 5 each


def test_integer_and_bool_operands_run_torch_einsum() -> None:
    a = torch.arange(6).reshape(2, 3)
    b = torch.arange(12).reshape(3, 4)
    for equation, x, y in (("ij,jk->ik", a, b), ("i,j->ij", a[0] > 0, b[0] > 5)):
        got, want = einsum(equation, x, y), TORCH_EINSUM(equation, x, y)
        assert got.dtype == want.dtype and torch.equal(got, want)
    with patch():
        assert torch.equal(torch.einsum("ij,jk->ik", a, b), TORCH_EINSUM("ij,jk->ik", a, b))


def test_autocast_with_float32_and_float64_behaves_as_torch_einsum() -> None:
    a = torch.randn(4, 5)
    b = torch.randn(5, 6, dtype=torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError) as want:
            TORCH_EINSUM("ij,jk->ik", a, b)
        with pytest.raises(type(want.value)):
            einsum("ij,jk->ik", a, b)
        same = einsum("ij,jk->ik", a, b.float(), strategy="reverse")
        assert same.dtype == TORCH_EINSUM("ij,jk->ik", a, b.float()).dtype


@pytest.mark.parametrize(("options", "culprit"), [
    ({"optimize": None}, "optimize=None"),
    ({"optimize": "fastest"}, "optimize='fastest'"),
    ({"strategy": "nope"}, "nope"),
    ({"strategy": 3}, "strategy=3"),
    ({"budget": 1.5}, "budget=1.5"),
])
def test_bad_options_are_one_line(options: dict[str, Any], culprit: str) -> None:
    a, b = _pair()
    with pytest.raises(DropinValueError) as caught:
        einsum("ij,jk->ik", a, b, **options)
    assert culprit in str(caught.value) and "\n" not in str(caught.value)


def test_a_failing_call_caches_nothing() -> None:
    dropin.clear_cache()
    a, b = _pair()
    for bad in (("ij,jq->iq", a, torch.randn(5, 5, dtype=torch.float64)), ("i1,1k", a, b)):
        with pytest.raises(RuntimeError):
            einsum(*bad, strategy="reverse")
    assert dropin.cache_info().size == 0


def test_torch_layout_is_written_directly_or_copied_and_counted() -> None:
    from einsum_analyze import analyze
    from einsum_analyze.roofline import NOMINAL
    from einsum_analyze.roofline.time_model import predict_time

    # a product of two operands: the last kernel writes torch's layout, no copy
    pair = get_plan("ij,jk->ik", ((3, 4), (4, 5)), "float64", "cpu", (True, True),
                    "reverse", "auto", NO_BUDGET)
    assert pair.relayout is None and pair.forward_layouts[0] == ((3, 5), (5, 1))
    assert not [e for e in pair.result.events if e.op == "slice_copy"]
    a, b = _pair()
    assert einsum("ij,jk->ik", a, b, strategy="reverse").view(-1).shape == (15,)
    # the last product reads an intermediate: the result is copied into torch's layout
    equation, shapes = "ij,jk,kl->il", ((3, 4), (4, 5), (5, 6))
    chain = get_plan(equation, shapes, "float64", "cpu", (True,) * 3, "reverse", "auto",
                     NO_BUDGET)
    want = TORCH_EINSUM(equation, *(torch.empty(s, device="meta") for s in shapes))
    assert chain.relayout == ((3, 6), want.stride())
    assert [e.elements for e in chain.result.events if e.op == "slice_copy"] == [18]
    (plain,) = analyze(equation, list(shapes), dtype="float64", grad=[0, 1, 2],
                       strategies=["reverse"]).strategies
    sizes = {"i": 3, "j": 4, "k": 5, "l": 6}
    timed = [predict_time(r.events, sizes, 8, NOMINAL["cpu"], "float64")
             for r in (plain, chain.result)]
    assert timed[1].forward_s > timed[0].forward_s  # the copy is counted in time
    assert chain.result.memory.forward_peak_bytes == (plain.memory.forward_peak_bytes
                                                      + 18 * 8)


def test_plans_whose_backward_does_not_read_operand_0_build() -> None:
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(6, generator=generator, dtype=torch.float64, requires_grad=True)
    (got,) = torch.autograd.grad(einsum("c->", x, strategy="sliced"), x)
    torch.testing.assert_close(got, torch.ones_like(x))
    a, b, c = (torch.randn(s, generator=generator, dtype=torch.float64)
               for s in ((20, 20), (20, 20), (20, 20)))
    a.requires_grad_()
    y = einsum("ij,jk,kl->il", a, b, c, strategy="auto", budget="100KiB")
    (got,) = torch.autograd.grad(y.sum(), a)
    (want,) = torch.autograd.grad(TORCH_EINSUM("ij,jk,kl->il", a, b, c).sum(), a)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_result_may_be_modified_in_place_as_torch_einsums(strategy: str,
                                                             eager_path: str) -> None:
    def run(op: Any) -> tuple[torch.Tensor, ...]:
        a, b = (t.requires_grad_() for t in _pair())
        y = op("ij,jk->ik", a, b)
        y.mul_(2).add_(1)  # what models do to attention scores (Funnel's, for one)
        return (y.detach(), *torch.autograd.grad(y.square().sum(), (a, b)))

    ours = run(lambda *args: einsum(*args, strategy=strategy))
    torch.testing.assert_close(ours, run(TORCH_EINSUM))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_inference_tensors_are_refused_where_backward_reads_them(strategy: str,
                                                                eager_path: str) -> None:
    with torch.inference_mode():
        frozen = torch.randn(3, 4, dtype=torch.float64)
    a = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved") as torch_err:
        TORCH_EINSUM("ij,jk->ik", a, frozen)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved") as ours:
        einsum("ij,jk->ik", a, frozen, strategy=strategy)
    assert "\n" not in str(ours.value) and torch_err.type is RuntimeError


@pytest.mark.parametrize("strategy", ["reverse", "checkpoint"])
def test_inference_operands_backward_does_not_read_are_accepted(strategy: str,
                                                                eager_path: str) -> None:
    with torch.inference_mode():
        a, b = torch.randn(2, 3, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    c = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    # Both contract (a, b) first and keep only their product for c's gradient.
    want = torch.autograd.grad(TORCH_EINSUM("ij,jk,kl->il", a, b, c).sum(), c)[0]
    got = torch.autograd.grad(einsum("ij,jk,kl->il", a, b, c, strategy=strategy).sum(), c)[0]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_saved_tensors_hooks_see_what_the_plan_saves(strategy: str, eager_path: str) -> None:
    """saved_tensors_hooks (non-reentrant checkpoint, save_on_cpu) see the saved tensors."""
    packed: list[torch.Tensor] = []
    a, b = (t.requires_grad_() for t in _pair())
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t,
                                                  lambda t: t):
        y = einsum("ij,jk->ik", a, b, strategy=strategy)
    assert packed, "the hooks saw none of the tensors the backward reads"
    got = torch.autograd.grad(y.sum(), [a, b])
    want = torch.autograd.grad(TORCH_EINSUM("ij,jk->ik", a, b).sum(), [a, b])
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_non_reentrant_checkpoint_gives_torch_einsums_gradients(strategy: str,
                                                                eager_path: str) -> None:
    def block(op: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return op("ij,jk->ik", x.sin(), y).cos()  # type: ignore[no-any-return]

    grads = []
    for op in (TORCH_EINSUM, functools.partial(einsum, strategy=strategy)):
        a, b = (t.requires_grad_() for t in _pair())
        out = torch.utils.checkpoint.checkpoint(block, op, a, b, use_reentrant=False)
        grads.append(torch.autograd.grad(out.sum(), [a, b]))
    for g, w in zip(*grads, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
