"""The schedule of a checkpoint keep-set, its recompute FLOPs and its replay.

:mod:`.checkpoint` chooses which intermediates to keep; this module says what a choice
means. Reverse mode (:mod:`.reverse`) keeps, after the forward pass, every intermediate
that a gradient step reads; a keep-set keeps its own intermediates instead. An
intermediate a gradient step reads that is not kept is recomputed from the tensors below
it in the contraction tree (kept intermediates and the operands, always available) just
before that gradient step, and freed right after it: its sub-tree is run again, bottom
up, down to the kept tensors, each recomputed input freed as soon as the step above it
has run.

Each recomputation is a ``contract`` event of the backward phase with
``recompute=True``, under the tensor's forward name, so that the executors run it as
the forward pass does. The peak of a keep-set is the replay of its lowered schedule,
exactly what :func:`build_strategy <einsum_analyze.strategies.build_strategy>` reports.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from ..model.lowering import Layout, lower_events
from ..model.memory import input_elements, simulate_memory, tensor_name
from ..model.planning import Plan
from ..model.schedule import Event, Kernel
from .common import ScheduleBuilder, needs_grad
from .reverse import _step_gradients

__all__ = [
    "KeepSchedules",
    "checkpoint_candidates",
    "checkpoint_events",
    "count_recompute_flops",
    "evaluate_keep",
    "read_in_backward",
    "recompute_counts",
]


def read_in_backward(plan: Plan, grad: Collection[int]) -> frozenset[int]:
    """Intermediates a gradient step reads: those reverse mode keeps.

    In a step, an input is read by the gradient of another input that needs one.

    Example:
        >>> from einsum_analyze import parse_equation, Plan
        >>> plan = Plan.from_path(parse_equation("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),
        ...                       [(0, 1), (0, 1)])
        >>> sorted(read_in_backward(plan, [2])), sorted(read_in_backward(plan, [0]))
        ([3], [])
    """
    needs = needs_grad(plan, frozenset(grad))
    num_ops = plan.equation.num_operands
    return frozenset(
        i
        for step in plan.steps
        for i in step.inputs
        if i >= num_ops and any(needs[j] for j in step.inputs if j != i)
    )


def checkpoint_candidates(plan: Plan, grad: Collection[int]) -> tuple[int, ...]:
    """The intermediates worth deciding on: those a gradient step reads, and those below.

    An intermediate below one that a gradient reads shortens its recomputation when kept;
    any other intermediate is never needed after forward, and keeping it only costs memory.
    """
    num_ops = plan.equation.num_operands
    producer = {step.output: step for step in plan.steps}
    found: set[int] = set()
    stack = list(read_in_backward(plan, grad))
    while stack:
        i = stack.pop()
        if i in found:
            continue
        found.add(i)
        stack.extend(j for j in producer[i].inputs if j >= num_ops)
    return tuple(sorted(found))


def recompute_counts(
    plan: Plan, grad: Collection[int], keep: Collection[int]
) -> dict[int, int]:
    """How many times backward recomputes each intermediate, for a keep-set.

    Every intermediate a gradient step reads and that is not kept is recomputed once, for
    that step, and with it every intermediate below it down to the kept ones.

    Example:
        >>> from einsum_analyze import parse_equation, Plan
        >>> plan = Plan.from_path(
        ...     parse_equation("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 6)]),
        ...     [(0, 1), (0, 2), (0, 1)])
        >>> recompute_counts(plan, [0, 1, 2, 3], keep=[])  # ca (4) twice, ad (5) once
        {4: 2, 5: 1}
    """
    num_ops = plan.equation.num_operands
    producer = {step.output: step for step in plan.steps}
    kept = frozenset(keep)
    counts: dict[int, int] = {}
    stack = sorted((i for i in read_in_backward(plan, grad) if i not in kept), reverse=True)
    while stack:
        i = stack.pop()
        counts[i] = counts.get(i, 0) + 1
        stack.extend(j for j in producer[i].inputs if j >= num_ops and j not in kept)
    return counts


def count_recompute_flops(plan: Plan, grad: Collection[int], keep: Collection[int]) -> int:
    """FLOPs of the forward steps backward runs again, for a keep-set.

    Example:
        >>> from einsum_analyze import parse_equation, Plan
        >>> plan = Plan.from_path(
        ...     parse_equation("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 6)]),
        ...     [(0, 1), (0, 2), (0, 1)])
        >>> count_recompute_flops(plan, [0, 1, 2, 3], keep=[])  # 2 x 48 + 80
        176
    """
    flops = {step.output: step.flops for step in plan.steps}
    return sum(flops[i] * times for i, times in recompute_counts(plan, grad, keep).items())


class KeepSchedules:
    """The events of every checkpoint schedule of one plan and grad set, made once.

    A keep-set only decides which of these events appear and in what order: the
    forward steps, their frees, the seed, each step's gradient events (those of
    reverse mode) and each intermediate's recomputation.
    """

    def __init__(self, plan: Plan, grad: frozenset[int], upstream_copy: bool = False) -> None:
        equation = plan.equation
        num_ops = equation.num_operands
        self.plan = plan
        self.grad = grad
        self.upstream_copy = upstream_copy  # the seed copies the upstream (complex)
        self.num_ops = num_ops
        self.producer = {step.output: step for step in plan.steps}
        self.needs = needs_grad(plan, grad)
        self.read = read_in_backward(plan, grad)
        self.kernels: dict[tuple[tuple[Layout, ...], str], Kernel] = {}
        self.made: dict[int, Event] = {}
        self.remade: dict[int, Event] = {}
        self.freed_forward: dict[int, Event] = {}
        self.freed_backward: dict[int, Event] = {}
        for step in plan.steps:
            name = tensor_name(step.output, num_ops)
            made = Event(
                kind="alloc", tensor=name, elements=step.output_elements, phase="forward",
                op="contract", inputs=tuple(tensor_name(i, num_ops) for i in step.inputs),
                equation=step.equation, flops=step.flops,
            )
            self.made[step.output] = made
            self.remade[step.output] = made._replace(phase="backward", recompute=True)
            self.freed_forward[step.output] = Event(
                kind="free", tensor=name, elements=step.output_elements, phase="forward")
            self.freed_backward[step.output] = self.freed_forward[step.output]._replace(
                phase="backward")
        scratch = ScheduleBuilder(equation.size_dict)
        self.gradients: dict[int, tuple[Event, ...]] = {}
        self.seed: Event | None = None
        if grad:
            final = plan.steps[-1]
            scratch.alloc(f"g{final.output}", final.output_term, op="seed",
                          equation=f"->{final.output_term}")
            self.seed = scratch.events[0]
            for step in reversed(plan.steps):
                if self.needs[step.output]:
                    start = len(scratch.events)
                    _step_gradients(scratch, step, self.needs, num_ops)
                    self.gradients[step.output] = tuple(scratch.events[start:])
        self.operand_flops = dict(scratch.operand_flops)
        self.shared_flops = scratch.shared_flops

    def events(self, keep: frozenset[int], full: Collection[int] | None = None
               ) -> list[Event]:
        """The schedule that keeps ``keep`` after forward.

        Args:
            keep: Intermediates kept after forward (ignored without gradients).
            full: The tensors whose recomputation runs their sub-tree; the others are
                only allocated, as if made at no cost (for :meth:`floor`). None: all.
        """
        num_ops = self.num_ops
        kept = keep if self.grad else frozenset()
        events: list[Event] = []
        for step in self.plan.steps:
            events.append(self.made[step.output])
            events.extend(self.freed_forward[i] for i in step.inputs
                          if i >= num_ops and i not in kept)
        if self.seed is None:
            return events
        events.append(self.seed)
        for step in reversed(self.plan.steps):
            made: list[int] = []
            if self.needs[step.output]:
                for i in step.inputs:
                    if i in self.read and i not in kept:
                        if full is None or i in full:
                            self._recompute(events, i, kept)
                        else:
                            events.append(self.remade[i])
                        made.append(i)
                events.extend(self.gradients[step.output])
            events.extend(self.freed_backward[i] for i in step.inputs
                          if i >= num_ops and (i in kept or i in made))
        return events

    def _recompute(self, events: list[Event], target: int, kept: frozenset[int]) -> None:
        """Append the recomputation of ``target``: its sub-tree down to kept tensors.

        Each step's missing inputs are recomputed first (in input order) and freed as
        soon as the step has run. Iterative, so that a chain of thousands of steps is
        fine.
        """
        producer = self.producer
        # A post-order walk of the sub-tree: (tensor, its inputs already made).
        stack: list[tuple[int, bool]] = [(target, False)]
        while stack:
            i, ready = stack.pop()
            missing = [j for j in producer[i].inputs if j in producer and j not in kept]
            if not ready:
                stack.append((i, True))
                stack.extend((j, False) for j in reversed(missing))
                continue
            events.append(self.remade[i])
            events.extend(self.freed_backward[j] for j in missing)

    def builder(self, keep: frozenset[int]) -> ScheduleBuilder:
        """The schedule of ``keep`` in a builder, with reverse mode's FLOP attribution."""
        builder = ScheduleBuilder(self.plan.equation.size_dict)
        builder.events = self.events(keep)
        builder.operand_flops = dict(self.operand_flops)
        builder.shared_flops = self.shared_flops
        return builder

    def peak(self, keep: frozenset[int], itemsize: int) -> int:
        """Training peak of ``keep``'s lowered schedule, inputs included."""
        equation = self.plan.equation
        events = lower_events(self.events(keep), equation.terms, equation.size_dict,
                              cache=self.kernels)
        return self._replay(events, itemsize)

    def floor(self, keep: frozenset[int], decided: Collection[int], itemsize: int) -> int:
        """A lower bound of the lowered peak of the keep-sets that extend ``keep``.

        Bounds every S with ``keep`` <= S that agrees with ``keep`` on ``decided``
        (which holds, with each of its tensors, every tensor below it). The replay
        of ``keep``'s schedule, unlowered (no layout copies), in which the tensors not
        decided are, when not kept, only allocated where a gradient reads
        them (no sub-tree, no temporaries). Event by event, the schedule of S holds
        every tensor this one holds: S keeps more; a decided tensor not kept is
        recomputed the same way; and a tensor not decided is live there, kept or just
        recomputed. The gradient events are the same.
        """
        return self._replay(self.events(keep, full=decided), itemsize)

    def _replay(self, events: Sequence[Event], itemsize: int) -> int:
        plan = self.plan
        return simulate_memory(
            events,
            input_elements=input_elements(plan),
            output_elements=plan.steps[-1].output_elements,
            itemsize=itemsize,
            upstream_copy=self.upstream_copy,
        ).peak_bytes


def checkpoint_events(
    plan: Plan, grad: Collection[int], keep: Iterable[int]
) -> ScheduleBuilder:
    """Forward keeping ``keep``, then reverse mode that recomputes what was not kept.

    Args:
        plan: The forward plan.
        grad: Operands that need a gradient.
        keep: Single-use ids of the intermediates to keep after forward (the final output
            is always kept: the caller receives it).

    Returns:
        The builder with the schedule. Each recomputation is a ``contract`` event of the
        backward phase with ``recompute=True``, under the tensor's forward name.

    Example:
        >>> from einsum_analyze import parse_equation, Plan
        >>> plan = Plan.from_path(parse_equation("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]),
        ...                       [(0, 1), (0, 1)])
        >>> events = checkpoint_events(plan, [0, 1, 2], keep=[]).events
        >>> [(e.tensor, e.phase) for e in events if e.recompute]
        [('x3', 'backward')]
    """
    return KeepSchedules(plan, frozenset(grad)).builder(frozenset(keep))


def evaluate_keep(
    plan: Plan, grad: Collection[int], keep: Iterable[int], itemsize: int,
    upstream_copy: bool = False,
) -> tuple[int, int]:
    """Training peak (bytes, inputs included) and recompute FLOPs of one keep-set.

    The peak is the replay of the lowered schedule, as :func:`build_strategy
    <einsum_analyze.strategies.build_strategy>` reports it (``upstream_copy``: the
    seed copies the upstream gradient, as for complex dtypes).
    """
    kept = frozenset(keep)
    template = KeepSchedules(plan, frozenset(grad), upstream_copy)
    return template.peak(kept, itemsize), count_recompute_flops(plan, grad, kept)
