"""The CUDA graphs' bookkeeping on the CPU: copies in and out, one call in flight, the node.

A CUDA graph writes the same memory on every replay. This CPU machine has no CUDA, so a
stand-in slot keeps exactly that property: its "capture" runs the plan's events once on
the slot's static copies and keeps the tensors they made, and its "replay" runs the
events again and writes their results into those same tensors. Everything around the
replay is the real code (:func:`einsum_analyze.training.node.run_graphed`, the slot's
claim and release, :class:`~einsum_analyze.training.node.GraphedContract`), so a result
that aliased graph memory, or a second forward that overwrote the tensors a first call's
backward reads, would give wrong values here against the float64 oracle. The real
capture and replay run in tests/gpu/test_dropin_graphs_cuda.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from einsum_analyze.training import graphs
from einsum_analyze.training.choice import NO_BUDGET
from einsum_analyze.training.graphs import GraphInstance, GraphSlot
from einsum_analyze.training.node import run_graphed
from einsum_analyze.training.plans import get_plan

CHAIN = "ij,jk,kl->il"
SHAPES = ((6, 4), (4, 5), (5, 3))


class _Rerun:
    """A replay that runs ``call`` again."""

    def __init__(self, call: Any) -> None:
        self.call = call

    def replay(self) -> None:
        self.call()


class _CpuSlot(GraphSlot):
    """A slot of instances whose graphs re-run the events (:class:`_CpuGraphs`)."""

    def usable(self, needs_grad: bool) -> str | None:
        return None  # no stream to capture, no hooks in these tests

    def workspace_bytes(self) -> int | None:
        return 0  # no BLAS library to make one

    def new_instance(self) -> GraphInstance:
        return _CpuGraphs(self.copies_by_tensor)


class _CpuGraphs(GraphInstance):
    """An instance whose graphs re-run the events into the tensors the capture made."""

    def follow_stream(self) -> None:
        pass

    def warm_up(self, plan: Any, tensors: Any, needs_grad: bool) -> None:
        self.static_inputs = [t.clone() for t in tensors]
        self.static_upstream = (torch.zeros(plan.forward_layouts[0][0], dtype=tensors[0].dtype)
                                if needs_grad else None)

    def record(self, plan: Any, needs_grad: bool) -> None:
        statics = self.static_inputs
        live = plan.run_forward(statics)
        output = live[plan.output]
        saved = [live[name] for name in plan.saved_names]

        def forward() -> None:
            again = plan.run_forward(statics)
            output.copy_(again[plan.output])
            for tensor, name in zip(saved, plan.saved_names, strict=True):
                if again[name] is not tensor:  # the static operands are read, not made
                    tensor.copy_(again[name])

        self.forward_graph = _Rerun(forward)
        self.static_output, self.static_saved = output, saved
        if needs_grad:
            upstream = self.static_upstream
            gradients = plan.run_backward(list(saved), upstream)

            def backward() -> None:
                for tensor, made in zip(gradients, plan.run_backward(list(saved), upstream),
                                        strict=True):
                    tensor.copy_(made)

            self.backward_graph = _Rerun(backward)
            self.static_gradients = gradients


def _plan(mask: tuple[bool, ...] = (True, True, True)) -> Any:
    key = (CHAIN, SHAPES, "float64", "cpu", mask, "reverse", "auto", NO_BUDGET)
    return dataclasses.replace(get_plan(*key), graphs=_CpuSlot(key))


def _operands(seed: int, grad: bool = True) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=generator, dtype=torch.float64, requires_grad=grad)
            for s in SHAPES]


def _call(plan: Any, operands: list[torch.Tensor]) -> torch.Tensor:
    needs_grad = any(t.requires_grad for t in operands)
    result = run_graphed(plan, True, tuple(operands), operands, needs_grad)
    assert result is not None
    return result


def _oracle(operands: list[torch.Tensor], upstream: torch.Tensor) -> tuple[torch.Tensor, ...]:
    precise = [t.detach().clone().requires_grad_() for t in operands]
    return torch.autograd.grad(torch.einsum(CHAIN, *precise), precise, upstream)


def _assert_close(got: Any, want: Any) -> None:
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g, w, rtol=1e-12, atol=1e-12)


def test_each_call_gets_its_own_result_and_gradients() -> None:
    plan = _plan()
    upstream = torch.randn(6, 3, dtype=torch.float64)
    results, gradients, copies = [], [], []
    for seed in range(3):  # the capture, then two replays over the same memory
        operands = _operands(seed)
        y = _call(plan, operands)
        results.append((y, y.detach().clone(), operands))
        grads = torch.autograd.grad(y, operands, upstream)
        gradients.append((grads, operands))
        copies.append([g.clone() for g in grads])
    for (y, kept, operands), (grads, _), saved in zip(results, gradients, copies, strict=True):
        assert torch.equal(y, kept)  # a later replay did not reach an earlier result
        assert torch.allclose(y, torch.einsum(CHAIN, *[t.detach() for t in operands]))
        assert all(torch.equal(g, c) for g, c in zip(grads, saved, strict=True))
        _assert_close(grads, _oracle(operands, upstream))
    assert plan.graphs.replays == 3 and plan.graphs.fallbacks == 0
    assert len(plan.graphs.instances) == 1  # each backward gave the set back


def test_forwards_before_their_backwards_replay_graph_sets_of_their_own() -> None:
    plan = _plan()
    u1, u2 = torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    calls = [_operands(seed) for seed in (1, 2, 3)]
    results = [_call(plan, operands) for operands in calls]  # three sets, none free
    assert len(plan.graphs.instances) == 3
    for y, operands in reversed(list(zip(results, calls, strict=True))):  # out of order
        _assert_close(torch.autograd.grad(y, operands, u1), _oracle(operands, u1))
    again = _operands(4)  # every set free again: the first is reused
    _assert_close(torch.autograd.grad(_call(plan, again), again, u2), _oracle(again, u2))
    assert len(plan.graphs.instances) == 3 and plan.graphs.replays == 4
    assert "4 replays on 3 graph sets" in plan.graphs.describe()


def test_past_the_last_graph_set_a_forward_runs_eagerly(monkeypatch: Any) -> None:
    monkeypatch.setattr(graphs, "MAX_INSTANCES", 1)
    plan = _plan()
    first, second, third = _operands(1), _operands(2), _operands(3)
    u1, u2 = torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    y1 = _call(plan, first)
    assert run_graphed(plan, True, tuple(second), second, True) is None  # held: eager
    assert plan.graphs.fallbacks == 1
    assert plan.graphs.last_fallback.startswith("every graph set is held")
    _assert_close(torch.autograd.grad(y1, first, u1), _oracle(first, u1))
    y3 = _call(plan, third)  # the first backward gave the set back
    _assert_close(torch.autograd.grad(y3, third, u2), _oracle(third, u2))
    assert plan.graphs.replays == 2


def test_retain_graph_keeps_the_set_until_the_node_is_freed(monkeypatch: Any) -> None:
    monkeypatch.setattr(graphs, "MAX_INSTANCES", 1)
    plan = _plan()
    operands = _operands(4)
    u1, u2 = torch.randn(6, 3, dtype=torch.float64), torch.randn(6, 3, dtype=torch.float64)
    y = _call(plan, operands)
    _assert_close(torch.autograd.grad(y, operands, u1, retain_graph=True), _oracle(operands, u1))
    assert run_graphed(plan, True, tuple(operands), operands, True) is None  # still held
    _assert_close(torch.autograd.grad(y, operands, u2), _oracle(operands, u2))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(y, operands, u1)
    del y  # its node, and the token it held, go
    again = _operands(5)
    _assert_close(torch.autograd.grad(_call(plan, again), again, u1), _oracle(again, u1))


def test_a_result_dropped_without_backward_gives_the_slot_back() -> None:
    plan = _plan()
    y = _call(plan, _operands(6))
    del y
    operands = _operands(7)
    upstream = torch.randn(6, 3, dtype=torch.float64)
    _assert_close(torch.autograd.grad(_call(plan, operands), operands, upstream),
                  _oracle(operands, upstream))
    assert plan.graphs.fallbacks == 0 and len(plan.graphs.instances) == 1


def test_double_backward_through_a_graphed_call() -> None:
    plan = _plan()
    operands = _operands(8)
    upstream = torch.randn(6, 3, dtype=torch.float64)
    (ga,) = torch.autograd.grad(_call(plan, operands), operands[0], upstream, create_graph=True)
    (gga,) = torch.autograd.grad(ga.square().sum(), operands[1])
    precise = [t.detach().clone().requires_grad_() for t in operands]
    (wa,) = torch.autograd.grad(torch.einsum(CHAIN, *precise), precise[0], upstream,
                                create_graph=True)
    (wga,) = torch.autograd.grad(wa.square().sum(), precise[1])
    _assert_close([ga, gga], [wa, wga])


def test_only_the_operands_that_need_gradients_get_them() -> None:
    plan = _plan((False, True, False))
    operands = _operands(9, grad=False)
    operands[1].requires_grad_()
    upstream = torch.randn(6, 3, dtype=torch.float64)
    y = run_graphed(plan, True, tuple(operands), operands, True)
    assert y is not None
    (got,) = torch.autograd.grad(y, [operands[1]], upstream)
    want = _oracle(operands, upstream)[1]
    _assert_close([got], [want])


def test_forward_only_calls_copy_their_result_out() -> None:
    plan = _plan((False, False, False))
    a, b = _operands(10, grad=False), _operands(11, grad=False)
    ya = _call(plan, a)
    kept = ya.clone()
    yb = _call(plan, b)
    assert torch.equal(ya, kept) and not torch.equal(ya, yb)
    assert torch.allclose(yb, torch.einsum(CHAIN, *b))
    (instance,) = plan.graphs.instances
    assert instance.owner is None  # released at once: no backward reads it


def test_complex_operands_and_a_conjugate_view_are_copied_as_values() -> None:
    key = (CHAIN, SHAPES, "complex128", "cpu", (True, True, True), "reverse", "auto",
           NO_BUDGET)
    plan = dataclasses.replace(get_plan(*key), graphs=_CpuSlot(key))
    generator = torch.Generator().manual_seed(12)
    upstream = torch.randn(6, 3, dtype=torch.complex128, generator=generator)
    for _ in range(2):
        leaves = [torch.randn(s, dtype=torch.complex128, generator=generator,
                              requires_grad=True) for s in SHAPES]
        operands = [leaves[0].conj(), *leaves[1:]]  # a conjugate view: its bit, not values
        y = _call(plan, operands)
        assert torch.allclose(y, torch.einsum(CHAIN, *[t.detach() for t in operands]))
        got = torch.autograd.grad(y, leaves, upstream)
        precise = [t.detach().clone().requires_grad_() for t in leaves]
        want = torch.autograd.grad(torch.einsum(CHAIN, precise[0].conj(), *precise[1:]),
                                   precise, upstream)
        _assert_close(got, want)


class _ScriptedSlot(_CpuSlot):
    """A stand-in slot whose trial blocks run their calls and take scripted seconds."""

    def __init__(self, key: tuple[Any, ...], seconds: dict[str, float]) -> None:
        super().__init__(key)
        self.seconds = seconds
        self.blocks: list[str] = []

    def block_s(self, side: str, call: Any) -> float:
        call()
        self.blocks.append(side)
        return self.seconds[side]


PAIR = "ij,jk->ik"
PAIR_SHAPES = ((6, 4), (4, 3))


@pytest.mark.parametrize("case", ["ours", "torch.einsum"])
@pytest.mark.parametrize(("graphs_s", "faster"), [(1e-4, True), (1.9e-4, False)])
def test_auto_measures_both_sides_at_its_deciding_call_and_keeps_the_faster(
        case: str, graphs_s: float, faster: bool) -> None:
    equation, shapes, strategy = ((CHAIN, SHAPES, "reverse") if case == "ours"
                                  else (PAIR, PAIR_SHAPES, "auto"))
    key = (equation, shapes, "float64", "cpu", (True,) * len(shapes), strategy, "auto",
           NO_BUDGET)
    slot = _ScriptedSlot(key, {"graphs": graphs_s, "other": 2e-4})
    plan = dataclasses.replace(get_plan(*key), graphs=slot)
    assert plan.runs_torch is (case == "torch.einsum")
    generator = torch.Generator().manual_seed(13)
    for call in range(graphs.AUTO_CAPTURE_CALLS + 2):
        operands = [torch.randn(s, dtype=torch.float64, generator=generator,
                                requires_grad=True) for s in shapes]
        y = run_graphed(plan, "auto", tuple(operands), operands, True)
        graphed = faster and call + 1 >= graphs.AUTO_CAPTURE_CALLS
        assert (y is not None) is graphed, call
        if y is not None:
            upstream = torch.randn(y.shape, dtype=torch.float64, generator=generator)
            precise = [t.detach().clone().requires_grad_() for t in operands]
            _assert_close(torch.autograd.grad(y, operands, upstream),
                          torch.autograd.grad(torch.einsum(equation, *precise), precise,
                                              upstream))
    # one trial, at the deciding call: the sides' blocks interleaved, each first as often
    assert slot.blocks == ["other", "graphs", "graphs", "other", "other", "graphs"]
    other = "torch.einsum" if case == "torch.einsum" else "the plan's eager events"
    tried = (f"graphs measured {graphs_s * 1e6:.0f} us against 200 us for {other} "
             "(9 calls each, the fastest block)")
    line = slot.describe()
    if faster:
        assert line.startswith("replays CUDA graphs (auto: measured faster): 3 replays;")
        assert f"; {tried}; graphs predicted" in line
    else:  # the margin: 0.95 of the other side's time is no gain; the graphs are dropped
        assert line.startswith(f"eager: auto measured no gain; {tried}; graphs predicted")
        assert slot.instances == [] and slot.replays == 0


class _Counting(torch.utils._python_dispatch.TorchDispatchMode):
    """The aten ops a call runs outside the stand-in's replays (which count as one each)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.paused = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        if not self.paused:
            self.ops.append(func.__name__)
        return func(*args, **(kwargs or {}))


def test_a_graphed_call_copies_four_times_around_its_two_replays(monkeypatch: Any) -> None:
    plan = _plan()
    _call(plan, _operands(14))  # the capture
    instance = plan.graphs.instances[0]
    counting = _Counting()
    for name in ("forward_graph", "backward_graph"):
        graph = getattr(instance, name)

        def replay(graph: Any = graph, name: str = name) -> None:
            counting.ops.append(f"replay {name}")
            counting.paused = True
            try:
                graph.call()
            finally:
                counting.paused = False

        monkeypatch.setattr(graph, "replay", replay)
    operands = _operands(15)
    upstream = torch.randn(6, 3, dtype=torch.float64)
    with counting:
        torch.autograd.grad(_call(plan, operands), operands, upstream)
    kernels = [op for op in counting.ops
               if not op.startswith(("empty", "detach", "alias", "view"))]
    # in: the operands (one foreach copy); out: the result; in: the upstream; out: the
    # gradients (one foreach copy): four copy launches, whatever the plan's kernels
    assert kernels == ["_foreach_copy_.default", "replay forward_graph", "clone.default",
                       "copy_.default", "replay backward_graph", "_foreach_copy_.default"], (
        counting.ops)
