"""What replaying a drop-in plan as CUDA graphs costs: predicted, then measured.

:func:`predict_graphs` prices a graphed call with the time model
(:mod:`einsum_analyze.roofline`) on the call's device profile: every kernel's work, a
replay's per-node cost instead of an eager launch and the host's Python, plus the copies
in and out; against what the call runs otherwise (our plan's eager events, or
torch.einsum). Its memory: the static copies plus the pool, whose bytes in use at the
captures' peak are predicted by replaying the plan's events as the captures run them
(:func:`pool_bytes`).

The time model's host costs are nominal, and on calls of a few small kernels its
seconds were a factor of two off on the H200 (torch.einsum's call of ``diag-private``
predicted 1.05 ms, measured 0.53 ms), where the choice is closest. So under ``"auto"``
the prediction only decides where the graphs cannot pay (:attr:`GraphPrediction.plausible`);
elsewhere the entry's deciding call measures both sides on the device
(:class:`GraphTrial`, run by :mod:`.graphs`) and the measurement decides.

Analysis only: no torch (:mod:`.graphs` captures and replays).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..analysis import analyze
from ..model.equation import parse_equation
from ..model.memory import simulate_memory
from ..model.schedule import STEP_OPERATIONS
from ..model.types import DTYPE_ITEMSIZE
from ..model.units import format_exact_bytes, format_seconds
from ..roofline import HostCosts, kernel_seconds, predict_time, step_costs
from .choice import NO_BUDGET, TIME_MARGIN, call_profile, node_s

__all__ = ["GRAPH_NODE_S", "PLAUSIBLE", "REPLAY_S", "ROUNDING", "GraphPrediction",
           "GraphTrial", "launches_product", "pool_bytes", "predict_graphs", "rounded_bytes"]

ROUNDING = 512
"""Bytes the CUDA caching allocator rounds every block up to."""

GRAPH_NODE_S = 1.5e-6
"""Nominal seconds each kernel node of a replayed graph costs besides its work (an
eager launch costs the profile's ``launch_s``)."""

REPLAY_S = 8e-6
"""Nominal host seconds of one graph replay and its copies' calls, per pass."""

PLAUSIBLE = 2.0
"""Under ``"auto"``, the graphs are tried (captured, then measured against the other
side) where the predicted graphed call takes at most this multiple of the other side's
predicted time, and its device work alone at most :data:`.choice.TIME_MARGIN` of it: the
time model's error on small calls was up to a factor of two (the module's docstring);
beyond that, or where the kernels and copies alone take as long, the graphs cannot pay."""

def rounded_bytes(nbytes: int) -> int:
    """``nbytes`` as the CUDA caching allocator's block holds them (0 stays 0)."""
    return -(-nbytes // ROUNDING) * ROUNDING if nbytes else 0


def pool_bytes(plan: Any, workspace_bytes: int = 0) -> int:
    """Bytes in use in the graphs' pool at the captures' peak, as the allocator counts them.

    The plan's events replayed as the two captures run them: the operands and the
    upstream gradient are the slot's static copies (allocated before, outside the
    pool), and the tensors forward keeps for backward stay allocated through the
    backward capture (the slot holds them: the next replay writes them again), as do
    the result and the gradients. Every block rounded up to 512 bytes.

    ``workspace_bytes``: the matrix-product library's workspace, which the captures
    make in the pool at their first product (:mod:`.graphs` clears the per-stream
    workspaces before capturing) and hold to their end; counted from the first event
    that may launch one (:func:`launches_product`).

    Example:
        A plan keeping one 60-byte intermediate, with a 72-byte result and gradients of
        48, 80 and 120 bytes, holds them all at the end of the backward capture.
    """
    kept = set(plan.new_saved)
    outside: set[str] = set()  # the static upstream, and views over its storage
    events = []
    for event in plan.result.events:
        if event.kind == "free" and event.tensor in kept:
            continue
        consumed = [name for name, _ in event.consumes]
        if any(name in kept for name in consumed):
            kept.add(event.tensor)  # a view over a kept tensor's storage: held as well
        if event.kind == "alloc" and (event.op == "seed"
                                      or any(name in outside for name in consumed)):
            event = event._replace(elements=0)  # outside the pool
            outside.add(event.tensor)
        events.append(event)
    profile = simulate_memory(events, input_elements=0, output_elements=0,
                              itemsize=plan.result.memory.itemsize,
                              granularity=ROUNDING, cpu=False)
    first = next((k for k, event in enumerate(events) if launches_product(event)), None)
    if not workspace_bytes or first is None:
        return int(profile.peak_bytes)
    before = max(profile.high_bytes[:first], default=0)
    return int(max(before, max(profile.high_bytes[first:]) + rounded_bytes(workspace_bytes)))


def launches_product(event: Any) -> bool:
    """Whether ``event`` may launch a matrix product (a BLAS call, with its workspace).

    A lowered event does where its kernel is a batched product; an event no lowering
    has seen runs torch.einsum, which may where it has two inputs.
    """
    if event.kind != "alloc" or event.op not in STEP_OPERATIONS:
        return False
    kernel = event.kernel
    if kernel is None:
        return len(event.inputs) >= 2
    return bool(kernel.kind == "bmm")


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphPrediction:
    """What replaying a plan as CUDA graphs is predicted to cost, against not doing so.

    Attributes:
        graph_s: Forward + backward seconds of a graphed call (kernels, replay nodes,
            the copies in and out, the replays' host cost).
        device_s: Its device's side alone: the kernels at their work and the copies.
        other_s: Seconds of what the call runs otherwise (``other``).
        other: ``"the plan's eager events"`` or ``"torch.einsum"``.
        static_bytes: The slot's copies of the operands and the upstream gradient.
        pool_bytes: The pool's bytes in use at the captures' peak (:func:`pool_bytes`).
        peak_bytes: A graphed call's predicted peak, inputs counted: the caller's
            operands, the static copies, the pool, the result and gradients copied out
            and the caller's upstream gradient.
        plan_peak_bytes: The plan's own eager training peak, inputs counted.
        budget_bytes: The call's ``budget`` (None: none).
        faster: ``graph_s`` is at most :data:`.choice.TIME_MARGIN` of ``other_s``.
    """

    graph_s: float
    device_s: float
    other_s: float
    other: str
    static_bytes: int
    pool_bytes: int
    peak_bytes: int
    plan_peak_bytes: int
    budget_bytes: int | None
    faster: bool

    @property
    def fits(self) -> bool:
        """Whether the graphed peak is within the call's budget (True without one)."""
        return self.budget_bytes is None or self.peak_bytes <= self.budget_bytes

    @property
    def engages(self) -> bool:
        """Whether the graphs are predicted faster, and within the budget."""
        return self.faster and self.fits

    @property
    def plausible(self) -> bool:
        """Whether ``"auto"`` tries the graphs (:data:`PLAUSIBLE`).

        Within the budget, the graphed call within :data:`PLAUSIBLE` of the other
        side's predicted time, and its device work within :data:`.choice.TIME_MARGIN`.
        """
        return (self.fits and self.graph_s <= PLAUSIBLE * self.other_s
                and self.device_s <= TIME_MARGIN * self.other_s)

    def describe(self) -> str:
        """One line with the figures compared."""
        return (f"graphs predicted {format_seconds(self.graph_s)} against "
                f"{format_seconds(self.other_s)} for {self.other}; graph memory predicted "
                f"{format_exact_bytes(self.static_bytes + self.pool_bytes)} (static copies "
                f"{format_exact_bytes(self.static_bytes)}, pool in use "
                f"{format_exact_bytes(self.pool_bytes)}), graphed peak "
                f"{format_exact_bytes(self.peak_bytes)} against the plan's "
                f"{format_exact_bytes(self.plan_peak_bytes)}"
                + ("" if self.budget_bytes is None else
                   f" and the budget of {format_exact_bytes(self.budget_bytes)}"))


def predict_graphs(plan: Any, key: tuple[Any, ...], workspace_bytes: int = 0) -> GraphPrediction:
    """Price a graphed call of ``plan`` against what the call runs otherwise.

    On the profile of the call's device (:func:`.choice.call_profile`: its calibration
    in the process, else its kind's nominal profile): the plan's steps at their work,
    each kernel at :data:`GRAPH_NODE_S` instead of the profile's launch, no host Python
    but :data:`REPLAY_S` per pass, plus the copies in and out (operands and upstream
    in, result and gradients out, each read and written once at the profile's
    bandwidth, one launch each way per pass) and the autograd node around them; on an
    asynchronous device (the profile's ``is_async``) the larger of the device's seconds
    and the host's, as the time model takes a phase, else their sum. The other side:
    the plan's eager events as :func:`.choice.predicted_s` prices them, or
    torch.einsum's own execution (the ``torch-autograd`` model) where the plan runs
    torch.einsum.

    ``key`` is the plan cache's key (equation, shapes, dtype, ...); ``workspace_bytes``
    the device's matrix-product workspace, which the pool holds (:func:`pool_bytes`).
    """
    equation, shapes, dtype = key[0], key[1], key[2]
    itemsize = DTYPE_ITEMSIZE[dtype]
    profile = call_profile(key[3], dtype)
    size_dict = parse_equation(equation, shapes).size_dict
    sizes = plan.result.sizes(size_dict)
    replayed = replace(profile, launch_s=GRAPH_NODE_S, host=HostCosts())
    kernels = sum(kernel_seconds(step, replayed, dtype)
                  for step in step_costs(plan.result.events, sizes, itemsize))
    operand_bytes = [_elements(shape) * itemsize for shape in shapes]
    out_bytes = _elements(plan.forward_layouts[0][0]) * itemsize
    grad_bytes = [_elements(layout[0]) * itemsize for layout in plan.gradient_layouts]
    passes = 2 if plan.grad else 1
    moved = sum(operand_bytes) + out_bytes + (out_bytes + sum(grad_bytes) if plan.grad else 0)
    device_s = kernels + 2 * moved / profile.bandwidth_bytes_per_s
    host_s = passes * (REPLAY_S + 2 * profile.launch_s) + node_s(profile)
    # a GPU's host queues the replays while the device runs: the larger side, not the sum
    graph_s = max(device_s, host_s) if profile.is_async else device_s + host_s
    if plan.runs_torch:
        (torch_model,) = analyze(equation, shapes, dtype=dtype, grad=list(plan.grad),
                                 strategies=["torch-autograd"]).strategies
        other = "torch.einsum"
        other_s = predict_time(torch_model.events, torch_model.sizes(size_dict), itemsize,
                               profile, dtype).total_s
    else:
        other = "the plan's eager events"
        other_s = predict_time(plan.result.events, sizes, itemsize, profile,
                               dtype).total_s + node_s(profile)
    operands = sum(rounded_bytes(b) for b in operand_bytes)
    out = rounded_bytes(out_bytes)
    static = operands + (out if plan.grad else 0)
    pool = pool_bytes(plan, workspace_bytes)
    peak = (operands + static + pool + out
            + ((out + sum(rounded_bytes(b) for b in grad_bytes)) if plan.grad else 0))
    return GraphPrediction(graph_s=graph_s, device_s=device_s, other_s=other_s, other=other,
                           static_bytes=static, pool_bytes=pool, peak_bytes=peak,
                           plan_peak_bytes=int(plan.result.memory.peak_bytes),
                           budget_bytes=None if key[7] == NO_BUDGET else int(key[7]),
                           faster=graph_s <= TIME_MARGIN * other_s)


def _elements(shape: Any) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count




@dataclass(frozen=True, slots=True, kw_only=True)
class GraphTrial:
    """A graphed call and the call it replaces, measured on the device (``"auto"``).

    Attributes:
        graph_s: Seconds per forward + backward call through the graphs (the copies in
            and out, the replays, the autograd node), the fastest of the trial's blocks.
        other_s: The same for what the call runs otherwise (``other``).
        other: ``"the plan's eager events"`` or ``"torch.einsum"``.
        calls: Calls timed on each side.
    """

    graph_s: float
    other_s: float
    other: str
    calls: int

    @property
    def faster(self) -> bool:
        """The graphed call measured at most :data:`.choice.TIME_MARGIN` of the other."""
        return self.graph_s <= TIME_MARGIN * self.other_s

    def describe(self) -> str:
        """One line with the figures measured."""
        return (f"graphs measured {format_seconds(self.graph_s)} against "
                f"{format_seconds(self.other_s)} for {self.other} ({self.calls} calls each, "
                "the fastest block)")
