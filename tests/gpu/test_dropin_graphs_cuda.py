"""The drop-in's CUDA graphs (``cuda_graphs=True``): gradients against the float64 oracle,
calls that must not share the graphs' memory, and the pool's measured bytes in use
against the prediction.

Skipped without CUDA (tests/conftest.py skips every test marked gpu). Each test is a
few calls on small operands.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CASES = {c["name"]: c for c in json.loads(
    (Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]}
GRAPHED = ["tn18-b512", "mps-layer", "chain3", "attention3", "tucker", "diag-private",
           "trace", "ellipsis-broadcast", "implicit", "outer-scalar"]
CHAIN = "ij,jk,kl->il"
CHAIN_SHAPES = [(64, 32), (32, 48), (48, 16)]
TOLERANCE = 1e-3
ROUNDING = 512


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    from einsum_analyze.torch import clear_cache

    clear_cache()
    yield
    clear_cache()  # the slots' graphs and pools go with their plans


def _operands(shapes: Any, seed: int, grad: bool = True) -> list[Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(tuple(s), generator=generator).cuda().requires_grad_(grad)
            for s in shapes]


def _oracle(equation: str, operands: list[Any], upstream: Any) -> tuple[Any, ...]:
    import torch

    precise = [o.detach().double().requires_grad_() for o in operands]
    return torch.autograd.grad(torch.einsum(equation, *precise), precise, upstream.double())


def _close(got: Any, want: Any) -> None:
    for g, w in zip(got, want, strict=True):
        g, w = g.detach(), w.detach()  # a double backward's gradients carry a graph
        scale = max(1.0, float(w.abs().max()))
        assert float((g.double() - w).abs().max()) <= TOLERANCE * scale


def _graphs_line(equation: str) -> str:
    from einsum_analyze.torch import cache_info

    return next(c.graphs for c in reversed(cache_info().choices) if c.equation == equation)


@pytest.mark.gpu
@pytest.mark.parametrize("name", GRAPHED)
def test_graphed_gradients_match_the_oracle_call_after_call(name: str) -> None:
    import torch

    from einsum_analyze.torch import einsum

    case = CASES[name]
    equation = case["equation"]
    for call in range(3):  # the capture, then two replays on new values
        operands = _operands(case["shapes"], seed=call)
        shape = torch.einsum(equation, *[o.detach() for o in operands]).shape
        upstream = torch.randn(shape, device="cuda")
        y = einsum(equation, *operands, cuda_graphs=True)
        got = torch.autograd.grad(y, operands, upstream)
        _close(got, _oracle(equation, operands, upstream))
        want = torch.einsum(equation, *[o.detach().double() for o in operands])
        assert float((y.detach().double() - want).abs().max()) <= TOLERANCE * max(
            1.0, float(want.abs().max()))
    line = _graphs_line(equation)
    assert line.startswith("replays CUDA graphs (cuda_graphs=True): 3 replays;"), line


@pytest.mark.gpu
def test_two_forwards_before_one_backward_keep_their_own_saved_tensors() -> None:
    import torch

    from einsum_analyze.torch import einsum

    first, second = _operands(CHAIN_SHAPES, 1), _operands(CHAIN_SHAPES, 2)
    u1, u2 = torch.randn(64, 16, device="cuda"), torch.randn(64, 16, device="cuda")
    y1 = einsum(CHAIN, *first, strategy="reverse", cuda_graphs=True)  # captures, holds
    y2 = einsum(CHAIN, *second, strategy="reverse", cuda_graphs=True)  # a second set
    assert "2 replays on 2 graph sets;" in _graphs_line(CHAIN)
    g2 = torch.autograd.grad(y2, second, u2)  # backward out of order
    g1 = torch.autograd.grad(y1, first, u1)
    _close(g1, _oracle(CHAIN, first, u1))
    _close(g2, _oracle(CHAIN, second, u2))
    third = _operands(CHAIN_SHAPES, 3)  # both sets free again
    g3 = torch.autograd.grad(einsum(CHAIN, *third, strategy="reverse", cuda_graphs=True),
                             third, u1)
    _close(g3, _oracle(CHAIN, third, u1))
    assert "3 replays on 2 graph sets;" in _graphs_line(CHAIN)


@pytest.mark.gpu
def test_past_the_last_graph_set_a_second_forward_runs_eagerly(monkeypatch: Any) -> None:
    import torch

    from einsum_analyze.torch import einsum
    from einsum_analyze.training import graphs

    monkeypatch.setattr(graphs, "MAX_INSTANCES", 1)
    first, second = _operands(CHAIN_SHAPES, 1), _operands(CHAIN_SHAPES, 2)
    u1, u2 = torch.randn(64, 16, device="cuda"), torch.randn(64, 16, device="cuda")
    y1 = einsum(CHAIN, *first, strategy="reverse", cuda_graphs=True)  # captures, holds
    y2 = einsum(CHAIN, *second, strategy="reverse", cuda_graphs=True)  # eager meanwhile
    assert "1 replay, 1 eager (last: every graph set is held" in _graphs_line(CHAIN)
    g2 = torch.autograd.grad(y2, second, u2)
    g1 = torch.autograd.grad(y1, first, u1)
    _close(g1, _oracle(CHAIN, first, u1))
    _close(g2, _oracle(CHAIN, second, u2))


@pytest.mark.gpu
def test_gradient_accumulation_over_two_forwards_sums_both() -> None:
    import torch

    from einsum_analyze.torch import einsum

    weights = _operands(CHAIN_SHAPES[1:], 4)
    batches = [_operands(CHAIN_SHAPES[:1], 5 + k, grad=False)[0] for k in range(2)]
    loss = sum((einsum(CHAIN, x, *weights, strategy="reverse", cuda_graphs=True) ** 2).sum()
               for x in batches)
    loss.backward()
    precise = [w.detach().double().requires_grad_() for w in weights]
    want = sum((torch.einsum(CHAIN, x.double(), *precise) ** 2).sum() for x in batches)
    expected = torch.autograd.grad(want, precise)
    _close([w.grad for w in weights], expected)


@pytest.mark.gpu
def test_a_forward_whose_graph_is_dropped_gives_the_slot_back() -> None:
    import torch

    from einsum_analyze.torch import einsum

    y = einsum(CHAIN, *_operands(CHAIN_SHAPES, 6), strategy="reverse", cuda_graphs=True)
    del y  # no backward: its node, and the token it held, are freed
    operands = _operands(CHAIN_SHAPES, 7)
    upstream = torch.randn(64, 16, device="cuda")
    got = torch.autograd.grad(einsum(CHAIN, *operands, strategy="reverse", cuda_graphs=True),
                              operands, upstream)
    _close(got, _oracle(CHAIN, operands, upstream))
    assert "2 replays;" in _graphs_line(CHAIN)


@pytest.mark.gpu
def test_calls_alternating_between_two_streams_follow_the_last_replay() -> None:
    # A replay on the last replay's stream compares raw handles and makes no stream
    # object; one on another stream waits for the last and becomes the last.
    import torch

    from einsum_analyze.torch import einsum
    from einsum_analyze.training.choice import NO_BUDGET
    from einsum_analyze.training.plans import get_plan, plan_key

    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    for call in range(5):
        operands = _operands(CHAIN_SHAPES, 40 + call)
        upstream = torch.randn(64, 16, device="cuda")
        stream = side if call % 2 else main
        stream.wait_stream(main)  # the operands were made on the main stream
        with torch.cuda.stream(stream):
            got = torch.autograd.grad(einsum(CHAIN, *operands, strategy="reverse",
                                             cuda_graphs=True), operands, upstream)
        main.wait_stream(stream)
        _close(got, _oracle(CHAIN, operands, upstream))
    plan = get_plan(*plan_key(operands, CHAIN, "reverse", "auto", NO_BUDGET, [True] * 3))
    assert plan.graphs is not None
    (instance,) = plan.graphs.instances
    assert instance.last_stream.cuda_stream == main.cuda_stream  # the fifth call's
    assert "5 replays;" in _graphs_line(CHAIN)


@pytest.mark.gpu
def test_results_and_gradients_do_not_alias_the_graphs_memory() -> None:
    import torch

    from einsum_analyze.torch import einsum

    a, b = _operands(CHAIN_SHAPES, 8, grad=False), _operands(CHAIN_SHAPES, 9, grad=False)
    y1 = einsum(CHAIN, *a, strategy="reverse", cuda_graphs=True)
    kept = y1.clone()
    y2 = einsum(CHAIN, *b, strategy="reverse", cuda_graphs=True)
    assert torch.equal(y1, kept) and not torch.equal(y1, y2)
    first, second = _operands(CHAIN_SHAPES, 10), _operands(CHAIN_SHAPES, 11)
    upstream = torch.randn(64, 16, device="cuda")
    g1 = torch.autograd.grad(einsum(CHAIN, *first, strategy="reverse", cuda_graphs=True),
                             first, upstream)
    copies = [g.clone() for g in g1]
    torch.autograd.grad(einsum(CHAIN, *second, strategy="reverse", cuda_graphs=True),
                        second, upstream)
    assert all(torch.equal(g, c) for g, c in zip(g1, copies, strict=True))
    _close(g1, _oracle(CHAIN, first, upstream))


@pytest.mark.gpu
def test_retain_graph_replays_backward_again_and_a_third_backward_refuses() -> None:
    import torch

    from einsum_analyze.torch import einsum

    operands = _operands(CHAIN_SHAPES, 12)
    y = einsum(CHAIN, *operands, strategy="reverse", cuda_graphs=True)
    u1, u2 = torch.randn(64, 16, device="cuda"), torch.randn(64, 16, device="cuda")
    _close(torch.autograd.grad(y, operands, u1, retain_graph=True), _oracle(CHAIN, operands, u1))
    _close(torch.autograd.grad(y, operands, u2), _oracle(CHAIN, operands, u2))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(y, operands, u1)


@pytest.mark.gpu
def test_double_backward_through_a_graphed_call() -> None:
    import torch

    from einsum_analyze.torch import einsum

    operands = _operands(CHAIN_SHAPES, 13)
    upstream = torch.randn(64, 16, device="cuda")
    (ga,) = torch.autograd.grad(einsum(CHAIN, *operands, strategy="reverse", cuda_graphs=True),
                                operands[0], upstream, create_graph=True)
    (gga,) = torch.autograd.grad(ga.square().sum(), operands[1])
    precise = [o.detach().double().requires_grad_() for o in operands]
    (wa,) = torch.autograd.grad(torch.einsum(CHAIN, *precise), precise[0], upstream.double(),
                                create_graph=True)
    (wga,) = torch.autograd.grad(wa.square().sum(), precise[1])
    _close([ga, gga], [wa, wga])


@pytest.mark.gpu
def test_inside_the_callers_capture_the_drop_in_runs_its_eager_events() -> None:
    import torch

    from einsum_analyze.torch import einsum

    operands = _operands(CHAIN_SHAPES, 14, grad=False)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        einsum(CHAIN, *operands, strategy="reverse", cuda_graphs=True)  # warm-up
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = einsum(CHAIN, *operands, strategy="reverse", cuda_graphs=True)
    fresh = _operands(CHAIN_SHAPES, 15, grad=False)
    for o, f in zip(operands, fresh, strict=True):
        o.copy_(f)
    graph.replay()
    want = torch.einsum(CHAIN, *[f.double() for f in fresh])
    assert float((y.double() - want).abs().max()) <= TOLERANCE * float(want.abs().max())
    assert "eager (last: the current stream is capturing)" in _graphs_line(CHAIN)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["tn18-b512", "mps-layer", "chain3", "trace"])
def test_the_pools_measured_bytes_in_use_are_the_prediction(name: str) -> None:
    import torch

    from einsum_analyze.torch import einsum
    from einsum_analyze.training.choice import NO_BUDGET
    from einsum_analyze.training.graphs import (
        blas_workspace_bytes,
        clear_blas_workspaces,
        pool_bytes,
    )
    from einsum_analyze.training.plans import get_plan, plan_key

    case = CASES[name]
    operands = _operands(case["shapes"], 16)
    einsum(case["equation"], *operands)  # the plan, cached
    plan = get_plan(*plan_key(operands, case["equation"], "auto", "auto", NO_BUDGET,
                              [True] * len(operands)))
    slot = plan.graphs
    assert slot is not None
    tensors = [o.detach() for o in operands]
    instance = slot.new_instance()
    instance.warm_up(plan, tensors, True)
    torch.cuda.synchronize()
    clear_blas_workspaces()  # as the capture does first: the workspaces before it go
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    instance.record(plan, True)
    torch.cuda.synchronize()
    measured = torch.cuda.max_memory_allocated() - base
    predicted = pool_bytes(plan, blas_workspace_bytes("cuda"))
    assert abs(measured - predicted) <= 0.02 * predicted + 4 * ROUNDING, (measured, predicted)
    reserved = instance.pool_reserved_bytes
    assert reserved is not None and reserved >= measured, (reserved, measured)
    print(f"{name}: pool in use measured {measured} B, predicted {predicted} B, reserved "
          f"{reserved} B (workspace {blas_workspace_bytes('cuda')} B); static copies "
          f"{sum(math.prod(t.shape) for t in tensors) * 4} B "
          "of operands")


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning")
@pytest.mark.filterwarnings("ignore:The CUDA Graph is empty:UserWarning")  # inductor's own
def test_replays_stay_right_after_compiled_cuda_graphs_clear_the_blas_workspaces() -> None:
    """torch.compile's CUDA graphs clear cuBLAS's per-stream workspaces when they capture.

    Our graphs must not have read one of those: each capture makes its own in its pool.
    Here the compiled graphs capture between our replays, the freed memory is handed
    back and written over, and our replays still match the oracle (before the fix this
    sequence in the drop-in benchmark ended in an illegal memory access).
    """
    import torch

    from einsum_analyze.torch import einsum

    case = CASES["chain3"]
    operands = _operands(case["shapes"], 21)
    upstream = torch.randn(8192, 256, device="cuda")
    want = _oracle(case["equation"], operands, upstream)
    for _ in range(2):
        out = einsum(case["equation"], *operands, cuda_graphs=True)
        _close(torch.autograd.grad(out, operands, upstream), want)
    assert _graphs_line(case["equation"]).startswith("replays CUDA graphs")
    torch._dynamo.reset()
    compiled = torch.compile(lambda *xs: torch.einsum(case["equation"], *xs),
                             mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        y = compiled(*operands)
        torch.autograd.grad(y, operands, upstream)
    del y
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    filler = [torch.full((1 << 20,), float("nan"), device="cuda") for _ in range(64)]
    for _ in range(3):
        out = einsum(case["equation"], *operands, cuda_graphs=True)
        _close(torch.autograd.grad(out, operands, upstream), want)
    torch.cuda.synchronize()
    del filler
    torch._dynamo.reset()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["trace", "tn18-b512", "chain3"])
def test_auto_decides_at_the_third_call_and_every_call_is_right(name: str) -> None:
    import torch

    from einsum_analyze.torch import einsum
    from einsum_analyze.training.graphs import AUTO_CAPTURE_CALLS

    case = CASES[name]
    equation = case["equation"]
    for call in range(AUTO_CAPTURE_CALLS + 1):
        operands = _operands(case["shapes"], seed=20 + call)
        shape = torch.einsum(equation, *[o.detach() for o in operands]).shape
        upstream = torch.randn(shape, device="cuda")
        got = torch.autograd.grad(einsum(equation, *operands, cuda_graphs="auto"), operands,
                                  upstream)
        _close(got, _oracle(equation, operands, upstream))
    line = _graphs_line(equation)
    print(f"{name}: {line}")
    assert line.startswith(("replays CUDA graphs (auto: measured faster): 2 replays;",
                            "eager: auto measured no gain; graphs measured",
                            "eager: auto predicts no gain; graphs predicted")), line


@pytest.mark.gpu
# forward AD's first use scripts torch's own decompositions, and torch.jit.script warns
# that it is deprecated: torch's advice to itself, not a fault here.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_transforms_and_forward_ad_never_replay_graphs() -> None:
    import torch
    import torch.autograd.forward_ad as fwad

    from einsum_analyze.torch import cache_info, einsum

    a, b, c = _operands(CHAIN_SHAPES, 30, grad=False)
    batched = torch.stack([a, 2 * a])
    got = torch.func.vmap(lambda x: einsum(CHAIN, x, b, c, cuda_graphs=True))(batched)
    assert torch.allclose(got, torch.einsum("nij,jk,kl->nil", batched, b, c), atol=1e-4)
    tangent = torch.randn_like(a)
    with fwad.dual_level():
        dual = einsum(CHAIN, fwad.make_dual(a, tangent), b, c, cuda_graphs=True)
        jvp = fwad.unpack_dual(dual).tangent
    assert torch.allclose(jvp, torch.einsum(CHAIN, tangent, b, c), atol=1e-4)
    assert not any(choice.graphs.startswith("replays") for choice in cache_info().choices)
