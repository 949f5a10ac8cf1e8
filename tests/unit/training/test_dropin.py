"""The drop-in einsum (einsum_analyze.torch): correctness against the float64 oracle,
dtypes, layouts, errors, the plan cache, patch(), the module wrapper, opcheck, compile."""

from __future__ import annotations

import functools
import threading

import pytest
import torch
from corpus import CASES, Case, small_cases

import einsum_analyze.torch as dropin
from einsum_analyze import parse_equation
from einsum_analyze.backends.relabel import torch_equation
from einsum_analyze.errors import EinsumAnalyzeError
from einsum_analyze.torch import DropinError, Einsum, einsum, patch
from einsum_analyze.training import node
from einsum_analyze.training.choice import NO_BUDGET
from einsum_analyze.training.plans import get_plan

CORPUS = [c for c in small_cases(20_000) if c.category != "bench"] + [
    c for c in CASES if c.name in ("diag-private", "bench-trace", "ellipsis-broadcast",
                                   "bench-implicit")
]


@pytest.fixture(params=["function", "custom-op"])
def eager_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run eager calls through the autograd.Function twin, then through the custom op."""
    monkeypatch.setattr(dropin, "EAGER_FAST_PATH", request.param == "function")
    return str(request.param)


def _oracle(equation: str, operands: list[torch.Tensor], upstream: torch.Tensor,
            grad: list[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """torch.autograd of torch.einsum in float64 (complex128)."""
    shapes = [tuple(t.shape) for t in operands]
    eq = parse_equation(equation, shapes)
    text = torch_equation(equation, eq.explicit)
    assert text is not None
    precise = torch.complex128 if operands[0].is_complex() else torch.float64
    leaves = [t.detach().to(precise).requires_grad_(k in grad) for k, t in enumerate(operands)]
    y = torch.einsum(text, *leaves)
    wanted = [leaves[k] for k in grad]
    grads = list(torch.autograd.grad(y, wanted, upstream.to(precise))) if wanted else []
    return y.detach(), grads


def _gap(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest difference over the largest magnitude (at least 1)."""
    if not want.numel():
        return 0.0
    scale = max(1.0, float(want.abs().max()))
    return float((got.detach().to(want.dtype) - want).abs().max()) / scale


def _check(equation: str, operands: list[torch.Tensor], grad: list[int], tol: float,
           **options: object) -> None:
    leaves = [t.detach().clone().requires_grad_(k in grad) for k, t in enumerate(operands)]
    y = einsum(equation, *leaves, **options)  # type: ignore[arg-type]
    generator = torch.Generator().manual_seed(1)
    upstream = torch.randn(y.shape, generator=generator, dtype=torch.float64).to(y.dtype)
    want_y, want_grads = _oracle(equation, operands, upstream, grad)
    assert y.shape == want_y.shape
    assert _gap(y, want_y) <= tol
    if not grad:
        assert not y.requires_grad
        return
    got = torch.autograd.grad(y, [leaves[k] for k in grad], upstream)
    for g, w in zip(got, want_grads, strict=True):
        assert g.shape == w.shape and g.dtype == leaves[0].dtype
        assert _gap(g, w) <= tol


def _operands(case: Case, dtype: torch.dtype = torch.float64, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=dtype) for shape in case.shapes]


@pytest.mark.parametrize("case", CORPUS, ids=str)
def test_corpus_matches_the_oracle(case: Case, eager_path: str) -> None:
    operands = _operands(case)
    n = len(operands)
    for grad in (list(range(n)), [0], [n - 1], []):
        _check(case.equation, operands, grad, 1e-10)


@pytest.mark.parametrize(
    ("dtype", "tol"),
    [(torch.float16, 2e-2), (torch.bfloat16, 8e-2), (torch.float32, 1e-5),
     (torch.float64, 1e-12), (torch.complex64, 1e-5), (torch.complex128, 1e-12)],
)
@pytest.mark.parametrize(
    ("equation", "shapes"),
    [("bc,bd,cm,mdn->bn", [(5, 2), (5, 3), (2, 4), (4, 3, 6)]),
     ("ijj,k->ik", [(3, 4, 4), (5,)]),
     ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 3, 4, 5)]),
     ("i,j,ij->", [(3,), (4,), (3, 4)])],
)
def test_dtypes(equation: str, shapes: list[tuple[int, ...]], dtype: torch.dtype,
                tol: float, eager_path: str) -> None:
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=dtype) for s in shapes]
    _check(equation, operands, list(range(len(shapes))), tol)


def test_non_contiguous_and_expanded_inputs(eager_path: str) -> None:
    base = torch.randn(5, 1, dtype=torch.float64, requires_grad=True)
    wide = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    y = einsum("ij,jk->ik", base.expand(5, 4), wide[:, ::2])
    y.square().sum().backward()
    got = (base.grad.clone(), wide.grad.clone())
    base.grad = wide.grad = None
    torch.einsum("ij,jk->ik", base.expand(5, 4), wide[:, ::2]).square().sum().backward()
    torch.testing.assert_close(got, (base.grad, wide.grad))
    a = torch.randn(6, 5, dtype=torch.float64)
    torch.testing.assert_close(einsum("ij,jk->ik", a.T, wide.T), a.T @ wide.T)


def test_autocast_casts_as_torch_einsum_does(eager_path: str) -> None:
    a, b = torch.randn(4, 5, requires_grad=True), torch.randn(5, 6, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = einsum("ij,jk->ik", a, b)
        want = torch.einsum("ij,jk->ik", a, b)
    assert y.dtype == want.dtype == torch.bfloat16
    y.float().sum().backward()
    assert a.grad is not None and a.grad.dtype == torch.float32


def test_double_backward_and_retain_graph_match_torch_einsum(eager_path: str) -> None:
    generator = torch.Generator().manual_seed(3)
    a, b = (torch.randn(s, generator=generator, dtype=torch.float64, requires_grad=True)
            for s in ((3, 4), (4, 5)))

    def hessian_vector(fn: object) -> tuple[torch.Tensor, ...]:
        y = fn("ij,jk->ik", a, b).square().sum()  # type: ignore[operator]
        (ga,) = torch.autograd.grad(y, a, create_graph=True)
        return torch.autograd.grad(ga.sum(), (a, b))

    # A plan of ours (auto runs torch.einsum itself on a pair einsum).
    ours = functools.partial(einsum, strategy="reverse")
    torch.testing.assert_close(hessian_vector(ours), hessian_vector(torch.einsum))
    y = einsum("ij,jk->ik", a, b, strategy="reverse").sum()
    first = torch.autograd.grad(y, a, retain_graph=True)
    second = torch.autograd.grad(y, a)
    torch.testing.assert_close(first, second)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(y, a)


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [("ij,jk->ik", [(2, 3)]),  # too few operands
     ("ij,jk->ik", [(2, 3), (3, 4), (4, 4)]),  # too many
     ("ij,jk->ik", [(2, 3), (2, 4)]),  # j has two sizes
     ("ij,jk->iq", [(2, 3), (3, 4)]),  # output label nobody has
     ("i$,jk->ik", [(2, 3), (3, 4)]),  # bad character
     ("ijk,jk->ik", [(2, 3), (3, 4)])],  # rank does not match
)
def test_bad_input_raises_like_torch_einsum(equation: str,
                                            shapes: list[tuple[int, ...]]) -> None:
    operands = [torch.randn(s) for s in shapes]
    with pytest.raises((RuntimeError, ValueError)) as torch_error:
        torch.einsum(equation, *operands)
    with pytest.raises(type(torch_error.value)) as ours:
        einsum(equation, *operands)
    assert isinstance(ours.value, DropinError)
    assert "\n" not in str(ours.value)


def test_mixed_dtypes_and_devices_behave_as_torch_einsum() -> None:
    single, double = torch.randn(2, 3), torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError) as want:
        torch.einsum("ij,jk->ik", single, double)
    with pytest.raises(type(want.value)):
        einsum("ij,jk->ik", single, double)
    promoted = einsum("ij,kl->ijkl", single, double)  # nothing summed: torch promotes
    assert promoted.dtype == torch.einsum("ij,kl->ijkl", single, double).dtype
    elsewhere = torch.randn(3, 4, device="meta")  # torch.einsum's own rule decides
    assert (einsum("ij,jk->ik", single, elsewhere).device
            == torch.einsum("ij,jk->ik", single, elsewhere).device)


def test_budget_no_plan_meets_gives_the_smallest_peak() -> None:
    a, b = torch.randn(30, 40, requires_grad=True), torch.randn(40, 50, requires_grad=True)
    with pytest.raises(RuntimeError,
                       match=r"smallest reachable peak is [\d,]+ B \([\d.]+ KiB\), with"):
        einsum("ij,jk->ik", a, b, budget=100)
    plan = get_plan("ij,jk->ik", ((30, 40), (40, 50)), "float32", "cpu", (True, True),
                    "reverse", "auto", -1)
    y = einsum("ij,jk->ik", a, b, budget=plan.result.memory.peak_bytes)
    assert y.shape == (30, 50)


def test_every_registered_strategy_runs() -> None:
    from einsum_analyze.strategies import strategy_names

    case = next(c for c in CASES if c.equation == "bc,bd,be,bf->bcdef") if any(
        c.equation == "bc,bd,be,bf->bcdef" for c in CASES) else None
    equation, shapes = ("ab,bc,cd->ad", [(3, 4), (4, 5), (5, 2)]) if case is None else (
        case.equation, list(case.shapes))
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64) for s in shapes]
    for name in strategy_names():
        _check(equation, operands, list(range(len(shapes))), 1e-10, strategy=name)
    with pytest.raises(RuntimeError, match="unknown strategy"):
        einsum(equation, *operands, strategy="nope")


def test_plans_are_cached_by_shape_dtype_and_grad_mask() -> None:
    dropin.clear_cache()
    a, b = torch.randn(2, 3), torch.randn(3, 4, requires_grad=True)
    einsum("ij,jk->ik", a, b)
    first = dropin.cache_info()
    einsum("ij,jk->ik", a, b)
    second = dropin.cache_info()
    assert second.misses == first.misses and second.hits > first.hits
    einsum("ij,jk->ik", a, b.detach())  # another grad mask
    einsum("ij,jk->ik", a.double(), b.double())  # another dtype
    assert dropin.cache_info().misses == first.misses + 2
    dropin.set_cache_size(2)
    try:
        for n in range(2, 6):
            einsum("ij,jk->ik", torch.randn(n, 3), b)
        assert dropin.cache_info().size == 2
    finally:
        dropin.set_cache_size(256)


def test_a_plan_dropped_from_the_cache_is_planned_again_on_the_eager_path() -> None:
    # Eager calls find their plan by a key of torch objects; a plan the bound dropped
    # must be a miss again, not served from that key.
    dropin.clear_cache()
    b = torch.randn(3, 4, requires_grad=True)
    x = torch.randn(2, 3)
    einsum("ij,jk->ik", x, b)
    einsum("ij,jk->ik", x, b)
    assert dropin.cache_info()[:2] == (1, 1)  # hits, misses
    dropin.set_cache_size(1)
    try:
        einsum("ij,jk->ik", torch.randn(5, 3), b)  # drops the first plan
        einsum("ij,jk->ik", x, b)
        assert dropin.cache_info()[:2] == (1, 3)
        y = einsum("ij,jk->ik", x, b)
        assert dropin.cache_info()[:2] == (2, 3)
        (grad,) = torch.autograd.grad(y.sum(), b)
        torch.testing.assert_close(grad, x.t() @ torch.ones(2, 4))
    finally:
        dropin.set_cache_size(256)
    dropin.clear_cache()
    einsum("ij,jk->ik", x, b)
    assert dropin.cache_info()[:2] == (0, 1)


def test_a_budget_given_two_ways_finds_one_plan_and_a_bad_one_still_raises() -> None:
    # A hit keys the budget as given (no parse per call); its bytes key the plan.
    dropin.clear_cache()
    a, b = torch.randn(6, 5, requires_grad=True), torch.randn(5, 4, requires_grad=True)
    want = einsum("ij,jk->ik", a, b, budget="1GiB")
    again = einsum("ij,jk->ik", a, b, budget=2**30)
    assert torch.equal(want, again)
    assert dropin.cache_info()[1:3] == (1, 1)  # misses, plans held
    einsum("ij,jk->ik", a, b, budget="1GiB")
    assert dropin.cache_info()[:2] == (2, 1)  # hits, misses
    for bad in ("abc", 0, -3):
        with pytest.raises(dropin.DropinValueError, match="budget"):
            einsum("ij,jk->ik", a, b, budget=bad)


@pytest.mark.parametrize("form", ["tensor", "list"])
def test_one_operand_calls_read_in_both_forms(form: str) -> None:
    x = torch.randn(4, 4, requires_grad=True)
    got = einsum("ii->i", x) if form == "tensor" else einsum("ii->i", [x])
    (grad,) = torch.autograd.grad(got.sum(), x)
    torch.testing.assert_close(got, torch.diagonal(x))
    torch.testing.assert_close(grad, torch.eye(4))


def test_the_cache_is_thread_safe() -> None:
    dropin.clear_cache()
    errors: list[BaseException] = []
    w = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)

    def work(n: int) -> None:
        try:
            for size in range(1, 6):
                x = torch.randn(size + n % 2, 3, dtype=torch.float64)
                y = einsum("bi,ij->bj", x, w)
                torch.testing.assert_close(y, x @ w)
                torch.autograd.grad(y.sum(), w)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert dropin.cache_info().size == 6  # 6 distinct shapes, whatever the interleaving


def test_patch_routes_torch_einsum_in_a_scope_and_restores_it(eager_path: str) -> None:
    original = torch.einsum
    dropin.clear_cache()
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    with patch(strategy="reverse"):
        assert torch.einsum is not original
        y = torch.einsum("ij,jk->ik", a, b)
        with patch():
            torch.einsum("ij,jk->ik", [a, b])
        assert torch.einsum is not original
    assert torch.einsum is original
    assert dropin.cache_info().misses == 2
    torch.testing.assert_close(y, a @ b)

    @patch()
    def inside() -> bool:
        return torch.einsum is not original

    assert inside() and torch.einsum is original


def test_module_wrapper() -> None:
    layer = Einsum("bi,ij->bj", strategy="reverse")
    x, w = torch.randn(2, 3), torch.randn(3, 4, requires_grad=True)
    layer(x, w).sum().backward()
    torch.testing.assert_close(w.grad, x.sum(0)[:, None].expand(3, 4))
    assert "bi,ij->bj" in repr(layer)


def test_saves_exactly_the_planned_tensors(eager_path: str) -> None:
    equation, shapes = "bc,bd,cm,mdn->bn", ((64, 2), (64, 3), (2, 4), (4, 3, 6))
    operands = [torch.randn(s, requires_grad=True) for s in shapes]
    plan = get_plan(equation, shapes, "float32", "cpu", (True,) * 4, "reverse", "auto", -1)
    y = einsum(equation, *operands, strategy="reverse")
    held = y.grad_fn.held[0]
    kept = [t for t in held if not any(t is o for o in operands)]
    assert sum(t.untyped_storage().nbytes() for t in kept) == plan.result.memory.retained_bytes


@pytest.mark.parametrize(
    ("equation", "shapes", "mask"),
    [("bc,bd,cm,mdn->bn", [(5, 2), (5, 3), (2, 4), (4, 3, 6)], [True, False, True, True]),
     ("ijj,k->ik", [(3, 4, 4), (5,)], [True, True]),
     ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 3, 4, 5)], [False, True]),
     ("ij->ij", [(3, 4)], [True]),
     ("ij,jk->ik", [(3, 4), (4, 5)], [False, False])],
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_opcheck(equation: str, shapes: list[tuple[int, ...]], mask: list[bool],
                 dtype: torch.dtype) -> None:
    operands = [torch.randn(s, dtype=dtype, requires_grad=m)
                for s, m in zip(shapes, mask, strict=True)]
    torch.library.opcheck(node.contract, (operands, equation, "auto", "auto", -1, mask))


class _Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.core = torch.nn.Parameter(torch.randn(4, 3, 6, dtype=torch.float64))

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        # a plan of ours (auto runs torch.einsum itself on this small network)
        return einsum("bc,bd,cm,mdn->bn", a, b, c, self.core, strategy="reverse").sin().sum()


@pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd:UserWarning")
def test_a_module_compiles_with_fullgraph_keeping_both_ops() -> None:
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    torch._dynamo.reset()
    layer = _Layer()
    inputs = [torch.randn(5, 2, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64),
              torch.randn(2, 4, dtype=torch.float64)]
    backend = AotEagerAndRecordGraphs()
    compiled = torch.compile(layer, fullgraph=True, dynamic=False, backend=backend)
    compiled(*inputs).backward()
    got = layer.core.grad.clone()
    layer.core.grad = None
    layer(*inputs).backward()
    torch.testing.assert_close(got, layer.core.grad)

    def targets(graphs: list[torch.fx.GraphModule]) -> list[str]:
        return [str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"]

    # The plan is kept as it is: one opaque node forward, one backward, no einsum inside.
    assert targets(backend.fw_graphs).count("einsum_analyze.contract.default") == 1
    assert targets(backend.bw_graphs).count("einsum_analyze.contract_backward.default") == 1
    traced = targets(backend.fw_graphs + backend.bw_graphs)
    assert not [t for t in traced if t.startswith(("aten.bmm", "aten.einsum", "aten.mm"))]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_a_module_compiles_with_inductor() -> None:
    import torch._functorch.config
    import torch._inductor.config

    torch._dynamo.reset()
    layer = _Layer()
    inputs = [torch.randn(5, 2, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64),
              torch.randn(2, 4, dtype=torch.float64)]
    compiled = torch.compile(layer, fullgraph=True, dynamic=False)
    # The on-disk graph caches key on the graph, not on the plans its custom op runs:
    # a graph compiled by another checkout would carry that checkout's layouts.
    with (torch._inductor.config.patch(fx_graph_cache=False),
          torch._functorch.config.patch(enable_autograd_cache=False)):
        compiled(*inputs).backward()
    got = layer.core.grad.clone()
    layer.core.grad = None
    layer(*inputs).backward()
    torch.testing.assert_close(got, layer.core.grad)


@pytest.mark.slow
def test_the_training_example_runs_with_the_same_loss_curve() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).parents[3]
    result = subprocess.run(
        [sys.executable, str(root / "examples" / "train_mps.py"), "--steps", "30", "--batch", "64"],
        capture_output=True, text=True, check=False, cwd=root,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "largest relative gap" in result.stdout


def test_auto_runs_the_search_recommendation() -> None:
    # strategy="auto" runs the training-aware search's recommended plan (path and
    # strategy), within the budget, and its gradients match the oracle.
    from einsum_analyze import analyze

    dropin.clear_cache()
    shapes = ((3, 4), (4, 5), (5, 2))
    plan = get_plan("ab,bc,cd->ad", shapes, "float64", "cpu", (True, False, True), "auto",
                    "auto", 4096)
    report = analyze("ab,bc,cd->ad", shapes, dtype="float64", grad=[0, 2],
                     strategies=["reverse"], objective="flops", budget=4096)
    assert report.recommended is not None and report.recommended.fits
    assert plan.strategy == report.recommended.plan.strategy
    generator = torch.Generator().manual_seed(0)
    operands = [torch.randn(s, generator=generator, dtype=torch.float64) for s in shapes]
    _check("ab,bc,cd->ad", operands, [0, 2], 1e-10)
    dropin.clear_cache()


def test_auto_with_a_budget_below_the_floor_names_the_smallest_peak() -> None:
    dropin.clear_cache()
    shapes = ((3, 4), (4, 5), (5, 2))
    with pytest.raises(EinsumAnalyzeError,
                       match=r"smallest reachable peak is [\d,]+ B( \([\d.]+ [KMG]iB\))?, with"):
        get_plan("ab,bc,cd->ad", shapes, "float64", "cpu", (True, True, True), "auto",
                 "auto", 64)
    dropin.clear_cache()


def test_budget_passes_to_strategies_that_take_one() -> None:
    from einsum_analyze.strategies import (
        StrategyInput,
        StrategySpec,
        register_strategy,
        unregister_strategy,
    )
    from einsum_analyze.strategies.reverse import build_reverse

    seen: list[object] = []

    def build(given: StrategyInput):  # type: ignore[no-untyped-def]
        seen.append(given.options["budget_bytes"])
        return build_reverse(given)

    register_strategy(StrategySpec(name="budgeted", build=build, description="test only",
                                   default=False, options={"budget_bytes": None}))
    try:
        a = torch.randn(3, 4, requires_grad=True)
        einsum("ij,jk->ik", a, torch.randn(4, 5), strategy="budgeted", budget="1KiB")
        einsum("ij,jk->ik", a, torch.randn(4, 5), strategy="reverse", budget="1KiB")
    finally:
        unregister_strategy("budgeted")
        dropin.clear_cache()
    assert seen == [1024]


def test_labels_torch_refuses_are_refused() -> None:
    operands = [torch.randn(3, 4), torch.randn(4, 5, 5)]
    for equation in ("αβ,βγγ->αγ", "i1,1j->ij"):
        with pytest.raises(RuntimeError) as want:
            torch.einsum(equation, *operands)
        with pytest.raises(type(want.value)) as ours:
            einsum(equation, *operands)
        assert "subscript" in str(ours.value) and "\n" not in str(ours.value)


def test_auto_never_plans_above_torch_einsums_own_peak() -> None:
    from einsum_analyze import analyze
    from einsum_analyze.training.choice import choose_plan  # noqa: PLC0415

    for case in [c for c in CORPUS if len(c.shapes) >= 3][:12]:
        grad = tuple(range(len(case.shapes)))
        chosen = choose_plan(case.equation, case.shapes, "float32", grad, "auto", "auto",
                             NO_BUDGET)
        (torch_model,) = analyze(case.equation, case.shapes, strategies=["torch-autograd"]
                                 ).strategies
        assert chosen.memory.peak_bytes <= torch_model.memory.peak_bytes, case.name
