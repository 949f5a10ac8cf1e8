"""Calibrate the host's costs around the kernels: our executor's steps, torch.einsum's calls.

The time model prices a step's kernels by their work; the Python around them costs the
same at every size (:mod:`einsum_analyze.roofline.host`). It is measured on chains of
``n`` tiny matrices (2 x 2, ``ab,bc,cd,...``), where the kernels cost next to nothing,
and the time model's own price of those kernels is taken away (on the cpu their seconds
on the device's calibrated kernel classes; on a GPU, whose host only queues them, their
dispatch at ``launch_s`` each, the price the model's host side of a phase charges), so
that the model charges each second once:

- our executor: the chain's steps, compiled (:func:`.torch_kernels.compile_schedule`)
  and run as a run runs them (:func:`.torch_backend.run_compiled`), at 2 and
  :data:`EXECUTOR_CHAIN` matrices: the difference per step is the cost per step, what
  is left at one step the cost per run; the longer chain again with six batch labels in
  every term (:data:`WIDE`: rank 8, each step moves them around its product), whose
  excess over the plain one is the cost per label of a step's terms; and a schedule of
  :data:`MIXED_KINDS` steps of as many kinds (:func:`mixed`), whose excess over as many
  chain steps (products all) is the cost per kind of step other than a product; the
  backward call's own cost, beyond its steps', comes from a real one (:func:`pair_reverse`,
  reverse mode on two matrices), timed as runs time theirs: after its forward's block;
- torch.einsum under autograd, as the ``torch-autograd`` baseline runs it (fresh leaves
  that require gradients, ``torch.einsum``, ``torch.autograd.grad``), at each length of
  :data:`TORCH_CHAINS`: the forward call's seconds at each number of operands
  (``torch_forward``: torch's path search grows with them), and the backward call's
  seconds at each number of gradient contractions (``torch_backward``, none above a
  later point's: :func:`_never_above_later`; a line through them too,
  ``torch_backward_s`` plus ``torch_node_s`` each, for a caller that prices one call by
  them).

Every call is timed as runs time theirs (:mod:`.timing`), all of them side by side in
:data:`HOST_ROUNDS` rounds (:func:`.timing.measure_interleaved`): a forward in blocks of
calls; a backward one call a block after its setup and one untimed call of its own:
our executor's backward steps, timed as the chain's steps one call a block, after
torch's forward block; torch's after that block, as a run's after its forward's block.
The median of each timer's blocks counts, on the calibration's clock.

torch is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import math
import statistics
import string
from collections.abc import Callable, Sequence
from typing import Any

from ..model.lowering import lower_events
from ..model.schedule import Event, Operation
from ..roofline.host import HostCosts
from ..roofline.profiles import DeviceProfile
from ..roofline.steps import step_costs
from ..roofline.time_model import host_kernel_seconds

__all__ = ["BLOCK_S", "EXECUTOR_CHAIN", "HOST_ROUNDS", "MIXED_KINDS", "TORCH_CHAINS", "WIDE",
           "chain", "host_costs", "mixed", "pair_reverse"]

EXECUTOR_CHAIN = 9
"""Matrices of the longer executor chain (8 steps; the shorter has 2 matrices, 1 step)."""

TORCH_CHAINS = (2, 3, 4, 6, 9, 17)
"""Chain lengths torch.einsum is timed at (opt_einsum's ``auto`` changes its path search
at 5, 7, 9 and 15 operands; on the 2-core cpu a call of 6 took twice one of 9)."""

HOST_ROUNDS = 5
"""Rounds of :func:`.timing.measure_interleaved` over every chain's timers (the median
of each timer's blocks counts)."""

BLOCK_S = 1e-2
"""A forward timer's block, in seconds (half the runs')."""

_SIDE = 2


def chain(n: int, batch: str = "") -> tuple[str, list[str], tuple[Event, ...], dict[str, int]]:
    """A chain of ``n`` (at least 2) 2 x 2 matrices: equation, terms, steps, sizes.

    The steps are the forward contractions, each freeing the intermediate before it.
    With ``batch`` (upper-case labels), every term carries those labels between its two
    matrix labels, so that each step moves them around its product, as a step of a
    network does.

    Example:
        >>> equation, terms, events, sizes = chain(3)
        >>> equation, [e.equation for e in events if e.kind == "alloc"]
        ('ab,bc,cd->ad', ['ab,bc->ac', 'ac,cd->ad'])
        >>> chain(2, "XY")[0]
        'aXYb,bXYc->aXYc'
    """
    labels = string.ascii_lowercase[:n + 1]
    terms = [labels[k] + batch + labels[k + 1] for k in range(n)]
    sizes = dict.fromkeys(labels + batch, _SIDE)
    events: list[Event] = []
    elements = _SIDE ** (2 + len(batch))
    last, last_term = "in0", terms[0]
    for k in range(1, n):
        out = labels[0] + batch + labels[k + 1]
        name = f"x{n + k}"
        events.append(Event("alloc", name, elements, "forward", op="contract",
                            inputs=(last, f"in{k}"), equation=f"{last_term},{terms[k]}->{out}",
                            flops=2 * _SIDE * elements))
        if k > 1:
            events.append(Event("free", last, elements, "forward"))
        last, last_term = name, out
    return f"{','.join(terms)}->{labels[0]}{batch}{labels[n]}", terms, tuple(events), sizes


WIDE = "ABCDEF"
"""The batch labels of the wide chain (:func:`chain` of :data:`EXECUTOR_CHAIN` matrices
of rank 8): its steps' excess over the plain chain's is the cost per label."""


MIXED_KINDS = 5
"""Steps of :func:`mixed`, each of its own kind."""


def mixed() -> tuple[list[str], tuple[Event, ...], dict[str, int]]:
    """Five steps of five kinds on 2 x 2 matrices: terms, steps, sizes.

    A product, a broadcast product, a sum, an unreduce and a transposing copy.

    Example:
        >>> [e.equation for e in mixed()[1] if e.kind == "alloc"]
        ['ab,bc->ac', 'ac,ab->acb', 'acb->a', 'a->ab', 'ab->ba']
    """
    sizes = dict.fromkeys("abc", _SIDE)
    steps: tuple[tuple[str, tuple[str, ...], str, Operation], ...] = (
             ("x2", ("in0", "in1"), "ab,bc->ac", "contract"),
             ("x3", ("x2", "in0"), "ac,ab->acb", "contract"),
             ("x4", ("x3",), "acb->a", "contract"),
             ("x5", ("x4",), "a->ab", "unreduce"),
             ("x6", ("x5",), "ab->ba", "contract"))
    events: list[Event] = []
    elements: dict[str, int] = {}
    for name, inputs, equation, op in steps:
        elements[name] = _SIDE ** len(equation.partition("->")[2])
        events.append(Event("alloc", name, elements[name], "forward", op=op, inputs=inputs,
                            equation=equation))
        events += [Event("free", x, elements[x], "forward") for x in inputs if x in elements]
    return ["ab", "bc"], tuple(events), sizes


def pair_reverse() -> tuple[list[str], tuple[Event, ...], dict[str, int]]:
    """Reverse mode on ``ab,bc->ac`` (2 x 2), both gradients: terms, events, sizes.

    The schedule the ``reverse`` strategy makes for it: one forward product, the seed,
    each operand's gradient product.

    Example:
        >>> [(e.phase, e.op, e.equation) for e in pair_reverse()[1] if e.kind == "alloc"]
        ... # doctest: +NORMALIZE_WHITESPACE
        [('forward', 'contract', 'ab,bc->ac'), ('backward', 'seed', '->ac'),
         ('backward', 'contract', 'ac,bc->ab'), ('backward', 'contract', 'ab,ac->bc')]
    """
    elements = _SIDE * _SIDE
    flops = 2 * _SIDE * elements
    events = (Event("alloc", "x2", elements, "forward", op="contract", inputs=("in0", "in1"),
                    equation="ab,bc->ac", flops=flops),
              Event("alloc", "g2", elements, "backward", op="seed", equation="->ac"),
              Event("alloc", "d0", elements, "backward", op="contract", inputs=("g2", "in1"),
                    equation="ac,bc->ab", flops=flops),
              Event("alloc", "d1", elements, "backward", op="contract", inputs=("in0", "g2"),
                    equation="ab,ac->bc", flops=flops),
              Event("free", "g2", elements, "backward"))
    return ["ab", "bc"], events, dict.fromkeys("abc", _SIDE)


def _executor_backward(device: str, torch_dtype: Any) -> tuple[
        Callable[[], Any], Callable[[], Any], Callable[[Any], Any], tuple[Event, ...],
        dict[str, int]]:
    """Our executor's forward, a backward's setup and the backward call of :func:`pair_reverse`.

    As runs run them (:mod:`.runners`): the setup runs the forward and hands a fresh
    upstream gradient over; its lowered events and sizes come too.
    """
    import torch

    from .torch_backend import run_compiled
    from .torch_kernels import compile_schedule

    terms, events, sizes = pair_reverse()
    lowered = lower_events(events, terms, sizes, cache={})
    compiled = compile_schedule(lowered, sizes)
    operands = [torch.ones([sizes[c] for c in term], dtype=torch_dtype, device=device)
                for term in terms]
    upstream = torch.ones(_SIDE, _SIDE, dtype=torch_dtype, device=device)

    def forward() -> Any:
        return run_compiled(compiled.forward, {f"in{k}": t for k, t in enumerate(operands)})

    def setup() -> Any:
        state = forward()
        state["upstream"] = upstream.clone()
        return state

    def backward(state: Any) -> Any:
        return run_compiled(compiled.backward, state)

    return forward, setup, backward, lowered, sizes


def _kernels_s(events: Sequence[Event], sizes: dict[str, int], itemsize: int,
               profile: DeviceProfile, dtype: str) -> float:
    """The time model's price of the events' kernels on the host's side of a phase.

    Their seconds on the cpu, their dispatch on a GPU
    (:func:`~einsum_analyze.roofline.time_model.host_kernel_seconds`): a chain of tiny
    steps is bound by the host there, and what is left is what the model charges beside
    that price.
    """
    return sum(host_kernel_seconds(step, profile, dtype)
               for step in step_costs(events, sizes, itemsize))


def _executor_run(device: str, torch_dtype: Any, terms: Sequence[str],
                  events: Sequence[Event], sizes: dict[str, int],
                  ) -> tuple[Callable[[], Any], tuple[Event, ...], dict[str, int]]:
    """A schedule's run by our executor, its lowered events and sizes."""
    import torch

    from .torch_backend import run_compiled
    from .torch_kernels import compile_schedule

    lowered = lower_events(events, terms, sizes, cache={})
    compiled = compile_schedule(lowered, sizes)

    operands = [torch.ones([sizes[c] for c in term], dtype=torch_dtype, device=device)
                for term in terms]

    def run() -> Any:
        return run_compiled(compiled.forward, {f"in{k}": t for k, t in enumerate(operands)})

    return run, lowered, sizes


def _torch_calls(device: str, torch_dtype: Any, n: int) -> tuple[
        Callable[[], Any], Callable[[], Any], Callable[[Any], Any]]:
    """torch.einsum's forward call, a backward's setup and the backward call.

    As the ``torch-autograd`` baseline runs them (:mod:`.baselines`).
    """
    import torch

    equation, terms, _, _ = chain(n)
    operands = [torch.ones(_SIDE, _SIDE, dtype=torch_dtype, device=device) for _ in terms]
    upstream = torch.ones(_SIDE, _SIDE, dtype=torch_dtype, device=device)

    def forward() -> Any:
        with torch.enable_grad():
            return torch.einsum(equation, *[t.detach().requires_grad_(True) for t in operands])

    def setup() -> tuple[Any, list[Any]]:
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) for t in operands]
            return torch.einsum(equation, *leaves), leaves

    def backward(state: tuple[Any, list[Any]]) -> Any:
        result, leaves = state
        return torch.autograd.grad(result, leaves, upstream)

    return forward, setup, backward


def _never_above_later(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Ascending ``(count, seconds)`` points, each at most every later point's seconds.

    A backward call of fewer gradient contractions does less than one of more, so it
    costs no more; where it measured more, its call met a cold cache (the untimed call
    before it warms the host for its code, not for everything), and the later point's
    figure stands in.

    Example:
        >>> _never_above_later([(2, 9e-4), (4, 4e-4), (6, 5e-4)])
        [(2, 0.0004), (4, 0.0004), (6, 0.0005)]
    """
    out: list[tuple[float, float]] = []
    for count, seconds in reversed(points):
        out.append((count, min(seconds, out[-1][1]) if out else seconds))
    return out[::-1]


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares intercept and slope through ``(x, y)`` points, both at least 0."""
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in points) / spread)
    return max(0.0, mean_y - slope * mean_x), slope


def host_costs(device: str, dtype: str, fence: Callable[[], None],
               clock: Callable[[], float], profile: DeviceProfile) -> HostCosts:
    """The host's costs on ``device`` beyond ``profile``'s kernels (see the module).

    Args:
        device: ``cpu`` or ``cuda:N``.
        dtype: A torch dtype name.
        fence: Waits for the device.
        clock: Seconds since an arbitrary origin.
        profile: The device's calibrated kernel classes and cost per kernel, no host
            costs yet: what the time model charges the chains' kernels.
    """
    import torch

    from .timing import Timer, measure_interleaved, prepare

    torch_dtype = getattr(torch, dtype)
    itemsize = torch.empty((), dtype=torch_dtype).element_size()

    def timer(call: Callable[[], Any], setup: Callable[[], Any] | None = None,
              then: Callable[[Any], Any] | None = None) -> Timer:
        def timed(_: Any) -> Any:
            return call()

        run = timed if then is None else then
        made = prepare(run, setup=setup, warmup=3, fence=fence, clock=clock,
                       max_calls_per_block=1)
        if setup is None:  # a block of about BLOCK_S: calls as the warm-up took
            start = clock()
            for _ in range(3):
                run(None)
            fence()
            made.calls_per_block = max(1, math.ceil(BLOCK_S * 3 / max(clock() - start, 1e-9)))
        return made

    schedules = {"short": chain(2)[1:], "long": chain(EXECUTOR_CHAIN)[1:],
                 "wide": chain(EXECUTOR_CHAIN, WIDE)[1:], "mixed": mixed()}
    executor = {key: _executor_run(device, torch_dtype, *given)
                for key, given in schedules.items()}
    executor_kernels = {key: _kernels_s(events, sizes, itemsize, profile, dtype)
                        for key, (_, events, sizes) in executor.items()}
    executor_steps = {key: step_costs(events, sizes, itemsize)
                      for key, (_, events, sizes) in executor.items()}
    order = ("short", "long", "wide", "mixed")
    # Each timer follows the one before it in every round. Every timer with a setup (a
    # backward call, our executor's "backward": a chain's steps run once) makes one
    # untimed call of its own before its timed one, as a run's backward does
    # (.timing._one_block), so these are the costs of a call that finds the host warm.
    # Our executor's "backward" still follows another code's forward block, torch's, and
    # torch's backward call its own forward's block; before the untimed call, the order
    # had moved the cost per label up to three times on the 2-core cpu.
    pair_forward, pair_setup, pair_backward, pair_events, pair_sizes = \
        _executor_backward(device, torch_dtype)
    pair_steps = [step for step in step_costs(pair_events, pair_sizes, itemsize)
                  if step.phase == "backward"]
    timers: list[Timer] = [timer(pair_forward),
                           timer(pair_forward, setup=pair_setup, then=pair_backward)]
    roles: list[tuple[str, str, float]] = [  # what each timer times, its kernels' seconds
        ("executor forward", "pair", 0.0),
        ("executor backward call", "pair",
         sum(host_kernel_seconds(step, profile, dtype) for step in pair_steps))]
    for k, n in enumerate(TORCH_CHAINS):
        _, _, events, sizes = chain(n)
        # The chain's steps, not lowered: the time model prices them as torch.einsum's.
        step_kernel = _kernels_s(events, sizes, itemsize, profile, dtype) / (n - 1)
        forward, setup, backward = _torch_calls(device, torch_dtype, n)
        cold, warm = order[k % len(order)], order[(k + 1) % len(order)]
        timers += [timer(executor[warm][0]), timer(forward),
                   timer(executor[cold][0], setup=lambda: None),
                   timer(forward, setup=setup, then=backward)]
        # Every matrix's gradient: two gradient contractions per pairwise step.
        roles += [("executor forward", warm, executor_kernels[warm]),
                  ("torch forward", str(n), (n - 1) * step_kernel),
                  ("executor backward", cold, executor_kernels[cold]),
                  ("torch backward", str(n), 2 * (n - 1) * step_kernel)]
    measured = measure_interleaved(timers, repeats=HOST_ROUNDS)
    pooled: dict[tuple[str, str], list[float]] = {}
    for m, (role, key, kernel_s) in zip(measured, roles, strict=True):
        pooled.setdefault((role, key), []).extend(t - kernel_s for t in m.per_call_s)
    left = {key: statistics.median(values) for key, values in pooled.items()}

    def executor_costs(phase: str) -> tuple[float, float, float, float]:
        """Per step, per label, per run and per kind of step other than a product."""
        found = {key: left[(f"executor {phase}", key)] for key in order}
        steps = {key: len(costs) for key, costs in executor_steps.items()}
        labels = {key: sum(step.labels for step in costs)
                  for key, costs in executor_steps.items()}
        # The wide chain has the long chain's steps, with more labels each.
        label = max(0.0, (found["wide"] - found["long"]) / (labels["wide"] - labels["long"]))
        step = max(0.0, (found["long"] - found["short"]
                         - (labels["long"] - labels["short"]) * label)
                   / (steps["long"] - steps["short"]))
        run = max(0.0, found["short"] - steps["short"] * step - labels["short"] * label)
        # The mixed schedule: MIXED_KINDS steps, each of its own kind.
        kind = (found["mixed"] - run - steps["mixed"] * step - labels["mixed"] * label) \
            / (MIXED_KINDS - 1)
        return step, label, run, max(0.0, kind)

    forward_step_s, forward_label_s, forward_run_s, forward_kind_s = executor_costs("forward")
    backward_step_s, backward_label_s, _, backward_kind_s = executor_costs("backward")
    # The backward call's own cost: the pair's real backward call (its seed, its two
    # products, the free) beyond its steps' own costs.
    backward_run_s = max(0.0, left[("executor backward call", "pair")] - sum(
        backward_step_s + step.labels * backward_label_s for step in pair_steps))
    forward_points = [(float(n), max(1e-9, left[("torch forward", str(n))]))
                      for n in TORCH_CHAINS]
    backward_points = _never_above_later([(2.0 * (n - 1),
                                           max(1e-9, left[("torch backward", str(n))]))
                                          for n in TORCH_CHAINS])
    backward_call_s, node_s = _line(backward_points)
    return HostCosts(forward_step_s=forward_step_s, backward_step_s=backward_step_s,
                     forward_run_s=forward_run_s, backward_run_s=backward_run_s,
                     forward_kind_s=forward_kind_s, backward_kind_s=backward_kind_s,
                     forward_label_s=forward_label_s, backward_label_s=backward_label_s,
                     torch_forward=tuple(forward_points), torch_node_s=node_s,
                     torch_backward_s=backward_call_s, torch_backward=tuple(backward_points))
