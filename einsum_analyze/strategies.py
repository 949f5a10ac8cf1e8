"""Backward strategies as schedules, their FLOPs and their memory (docs/method.md section 5).

Every strategy is one list of :class:`~einsum_analyze.memory.Event`: the forward pass,
then the backward pass. The same list is replayed for memory and run by the executor.

- ``reverse``: reverse mode through the forward tree. The gradient of each step input is
  one contraction of the step's output gradient with the step's other inputs; a step
  input is retained exactly when another input of the same step needs a gradient.
- ``independent``: each operand's gradient as its own planned einsum
  (:mod:`einsum_analyze.gradients`); nothing is retained.
- ``torch-autograd``: a model of torch autograd on the same path. torch.einsum first
  sums away the indices private to one operand of a step, and its matrix product keeps
  that reduced copy for backward; the model adds those reductions as steps of their
  own, then differentiates like ``reverse``. The permuted copies torch.einsum may make
  before a matrix product are not modelled.

Operands that need no gradient cost nothing: their gradients are never computed and
nothing is retained on their account.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._types import Strategy, Term
from .equation import Equation
from .gradients import GradientSpec, derive_gradients, unreduce_kind
from .lowering import lower_events
from .memory import Event, MemoryProfile, forward_schedule, simulate_memory, tensor_name
from .planning import Plan, Step, count_flops, plan_contraction, size_of

__all__ = [
    "STRATEGIES",
    "GradientPlan",
    "StrategyResult",
    "build_strategy",
    "plan_gradients",
]

STRATEGIES: tuple[Strategy, ...] = ("reverse", "independent", "torch-autograd")

LARGE_NETWORK = 64
"""Above this many operands the independent strategy follows the re-rooted forward tree."""

SEARCHING_OPTIMIZERS = frozenset({"optimal", "dp", "dynamic-programming", "branch-all",
                                  "auto-hq"})
"""Optimizers whose search time grows steeply: planning one core per operand with them
can take minutes (``dp`` on each of the 18 cores of ``tn18-b512``: about 4 s each)."""

SEARCH_LIMIT = 8
"""Above this many operands, the independent strategy does not search once per operand
with one of :data:`SEARCHING_OPTIMIZERS`: its cores follow the re-rooted forward tree."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientPlan:
    """Every differentiated operand's gradient, each core planned as its own einsum.

    Attributes:
        operands: Positions of the differentiated operands.
        specs: One :class:`GradientSpec` per operand.
        plans: The planned core contraction of each.
        optimizer: The optimizer used for the cores.
        planning_s: Wall seconds spent deriving and planning.
    """

    operands: tuple[int, ...]
    specs: tuple[GradientSpec, ...]
    plans: tuple[Plan, ...]
    optimizer: str
    planning_s: float

    def to_dicts(self, itemsize: int) -> list[dict[str, Any]]:
        """The ``gradients`` section of the JSON report."""
        return [
            {
                "operand": spec.operand,
                "term": spec.term,
                "equation": spec.core_equation,
                "optimizer": self.optimizer,
                "path": [list(p) for p in plan.path],
                "flops": plan.flops,
                "largest_intermediate_elements": plan.largest_intermediate_elements,
                "core_elements": spec.core_elements,
                "core_bytes": spec.core_elements * itemsize,
                "broadcast": spec.broadcast,
                "has_diagonal": spec.has_diagonal,
                "unreduce": spec.unreduce,
                "gradient_elements": spec.elements,
                "gradient_bytes": spec.elements * itemsize,
            }
            for spec, plan in zip(self.specs, self.plans, strict=True)
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyResult:
    """One backward strategy, modelled.

    Attributes:
        name: The strategy.
        events: Its schedule, forward then backward.
        forward_flops: FLOPs of the forward events.
        backward_flops: FLOPs of the backward events.
        memory: Replay of the schedule.
        operand_flops: Backward FLOPs of the contraction that produces each operand's
            gradient, by operand (shared work on intermediates is in ``shared_flops``).
        shared_flops: Backward FLOPs spent on gradients of intermediates.
        planning_s: Wall seconds spent building the strategy.
        optimizer: Optimizer of any contraction the strategy plans itself.
    """

    name: str
    events: tuple[Event, ...]
    forward_flops: int
    backward_flops: int
    memory: MemoryProfile
    operand_flops: Mapping[int, int]
    shared_flops: int
    planning_s: float
    optimizer: str

    def __repr__(self) -> str:
        return (
            f"StrategyResult({self.name!r}, backward_flops={self.backward_flops}, "
            f"peak_bytes={self.memory.peak_bytes})"
        )

    def to_dict(self, itemsize: int) -> dict[str, Any]:
        """One entry of the ``strategies`` section of the JSON report."""
        mem = self.memory
        return {
            "name": self.name,
            "forward_flops": self.forward_flops,
            "backward_flops": self.backward_flops,
            "total_flops": self.forward_flops + self.backward_flops,
            "backward_forward_ratio": self.backward_flops / max(self.forward_flops, 1),
            "retained_bytes": mem.retained_bytes,
            "peak_bytes": mem.peak_bytes,
            "peak_bytes_without_inputs": mem.peak_bytes_without_inputs,
            "forward_peak_bytes": mem.forward_peak_bytes,
            "optimizer": self.optimizer,
            "planning_s": self.planning_s,
            "shared_flops": self.shared_flops,
            "operands": [
                {"operand": k, "backward_flops": flops}
                for k, flops in sorted(self.operand_flops.items())
            ],
        }


def plan_gradients(
    equation: Equation,
    operands: Sequence[int],
    optimize: str = "auto",
    forward: Plan | None = None,
) -> GradientPlan:
    """Derive and plan the core contraction of every operand in ``operands``.

    Each core is planned with ``optimize``, except where that would search too long:
    above :data:`LARGE_NETWORK` operands, or above :data:`SEARCH_LIMIT` operands with a
    searching optimizer (:data:`SEARCHING_OPTIMIZERS`), each core follows the forward
    tree re-rooted at its operand (``"forward-tree"``: no search, one pass per operand;
    ``greedy`` when no forward plan is given).
    """
    start = time.perf_counter()
    specs = derive_gradients(equation, operands)
    n = equation.num_operands
    searching = n > SEARCH_LIMIT and optimize in SEARCHING_OPTIMIZERS
    if forward is not None and (n > LARGE_NETWORK or searching):
        optimizer = "forward-tree"
        plans = tuple(
            Plan.from_path(spec.core(equation), _rerooted_path(forward, spec.operand),
                           optimizer=optimizer)
            for spec in specs
        )
    else:
        optimizer = "greedy" if searching else optimize
        plans = tuple(plan_contraction(spec.core(equation), optimizer) for spec in specs)
    return GradientPlan(
        operands=tuple(operands),
        specs=specs,
        plans=plans,
        optimizer=optimizer,
        planning_s=time.perf_counter() - start,
    )


def _rerooted_path(forward: Plan, operand: int) -> list[tuple[int, ...]]:
    """A linear path for operand ``operand``'s core, from the forward tree re-rooted.

    The core's inputs are the upstream gradient (position 0) and the other operands in
    order. Every forward step away from the operand is replayed as it was; then the
    upstream gradient meets, from the root down, the sibling results along the
    operand's path to the root. That is reverse mode for one operand alone.
    """
    from opt_einsum.paths import ssa_to_linear

    num_ops = forward.equation.num_operands
    holds = {k: k == operand for k in range(num_ops)}
    for step in forward.steps:
        holds[step.output] = any(holds[i] for i in step.inputs)
    ids = {j: (j + 1 if j < operand else j) for j in range(num_ops) if j != operand}
    next_id = num_ops
    ssa: list[tuple[int, ...]] = []
    for step in forward.steps:
        if not holds[step.output]:
            ssa.append(tuple(ids[i] for i in step.inputs))
            ids[step.output] = next_id
            next_id += 1
    accumulated = 0
    for step in reversed(forward.steps):
        if holds[step.output]:
            siblings = tuple(ids[i] for i in step.inputs if not holds[i])
            ssa.append((accumulated, *siblings))
            accumulated = next_id
            next_id += 1
    return [tuple(int(p) for p in contraction) for contraction in ssa_to_linear(ssa)]


class _Builder:
    """Accumulates a schedule and the FLOPs attributed to each operand."""

    def __init__(self, size_dict: Mapping[str, int]) -> None:
        self.size_dict = size_dict
        self.events: list[Event] = []
        self.operand_flops: dict[int, int] = {}
        self.shared_flops = 0

    def alloc(self, tensor: str, term: Term, **fields: Any) -> None:
        self.events.append(
            Event(kind="alloc", tensor=tensor, elements=size_of(term, self.size_dict),
                  phase="backward", **fields)
        )

    def free(self, tensor: str, term: Term) -> None:
        self.events.append(
            Event(kind="free", tensor=tensor, elements=size_of(term, self.size_dict),
                  phase="backward")
        )

    def gradient(
        self,
        *,
        steps: Sequence[Step],
        num_sources: int,
        sources: Sequence[str],
        target: str,
        target_term: Term,
        operand: int | None,
        prefix: str,
        can_consume: bool,
    ) -> bool:
        """Emit the events that compute one gradient from its core contraction.

        Args:
            steps: The core's steps (single-use ids: ``0..num_sources-1`` are sources).
            num_sources: How many tensors the core consumes.
            sources: Names of the core's input tensors.
            target: Name of the gradient tensor to produce.
            target_term: The differentiated tensor's term (may repeat labels).
            operand: The operand the FLOPs are attributed to; None for an intermediate.
            prefix: Name prefix for the core's own intermediates.
            can_consume: Whether the single source may be taken over by a view.

        Returns:
            Whether the first source was consumed (taken over by a view).
        """
        core_output = steps[-1].output_term
        kind = unreduce_kind(core_output, target_term)
        first = steps[0]
        if (
            num_sources == 1
            and len(steps) == 1
            and set(first.input_terms[0]) == set(core_output)
            and len(set(first.input_terms[0])) == len(first.input_terms[0])
        ):
            # The core only permutes its input: no contraction, just a view or a copy.
            source_term = first.input_terms[0]
            equation = f"{source_term}->{target_term}"
            if kind != "embed" and can_consume:
                elements = size_of(source_term, self.size_dict)
                self.events.append(
                    Event(kind="alloc", tensor=target, elements=elements, phase="backward",
                          op="view", inputs=(sources[0],), equation=equation,
                          consumes=((sources[0], elements),))
                )
                return True
            self.alloc(target, target_term, op="unreduce", inputs=(sources[0],),
                       equation=equation)
            return False
        names: dict[int, str] = {i: sources[i] for i in range(num_sources)}
        terms: dict[int, Term] = {}
        flops = 0
        last = steps[-1]
        for step in steps:
            is_last = step is last
            if is_last and kind == "embed":
                out_name = f"{prefix}c"
            elif is_last:
                out_name = target
            else:
                out_name = f"{prefix}{step.output}"
            names[step.output] = out_name
            terms[step.output] = step.output_term
            view = target_term if is_last and kind == "view" else ""
            self.alloc(out_name, step.output_term, op="contract",
                       inputs=tuple(names[i] for i in step.inputs), equation=step.equation,
                       view=view, flops=step.flops)
            flops += step.flops
            for i in step.inputs:
                if i >= num_sources:
                    self.free(names[i], terms[i])
        if kind == "embed":
            self.alloc(target, target_term, op="unreduce", inputs=(f"{prefix}c",),
                       equation=f"{core_output}->{target_term}")
            self.free(f"{prefix}c", core_output)
        if operand is None:
            self.shared_flops += flops
        else:
            self.operand_flops[operand] = self.operand_flops.get(operand, 0) + flops
        return False


def _needs_grad(plan: Plan, grad: frozenset[int]) -> dict[int, bool]:
    needs = {k: k in grad for k in range(plan.equation.num_operands)}
    for step in plan.steps:
        needs[step.output] = any(needs[i] for i in step.inputs)
    return needs


def _single_step_core(step: Step, position: int, size_dict: Mapping[str, int]) -> Step:
    """The gradient of one step input as one contraction: ``out, others -> input``."""
    others = [q for q in range(len(step.inputs)) if q != position]
    core_terms = (step.output_term, *(step.input_terms[q] for q in others))
    joint = "".join(dict.fromkeys("".join(core_terms)))
    target = step.input_terms[position]
    core_output = "".join(char for char in dict.fromkeys(target) if char in joint)
    removed = "".join(char for char in joint if char not in core_output)
    return Step(
        index=0,
        operands=tuple(range(len(core_terms))),
        inputs=tuple(range(len(core_terms))),
        output=len(core_terms),
        input_terms=core_terms,
        output_term=core_output,
        removed=removed,
        flops=count_flops(joint, bool(removed), len(core_terms), size_dict),
        output_elements=size_of(core_output, size_dict),
    )


def _reverse_events(plan: Plan, grad: frozenset[int]) -> _Builder:
    """Forward with retention, then reverse mode through the tree."""
    equation = plan.equation
    num_ops = equation.num_operands
    size_dict = equation.size_dict
    needs = _needs_grad(plan, grad)
    retain = set()
    for step in plan.steps:
        for i in step.inputs:
            if any(needs[j] for j in step.inputs if j != i):
                retain.add(i)
    builder = _Builder(size_dict)
    builder.events.extend(forward_schedule(plan, retain))
    if not grad:
        return builder
    final = plan.steps[-1]
    builder.alloc(f"g{final.output}", final.output_term, op="seed",
                  equation=f"->{final.output_term}")
    for step in reversed(plan.steps):
        if not needs[step.output]:
            continue
        upstream = f"g{step.output}"
        consumed = False
        # Smallest gradient first: its workspace comes and goes before the large one
        # is allocated.
        wanted = sorted(
            (pos for pos, i in enumerate(step.inputs) if needs[i]),
            key=lambda pos: size_of(step.input_terms[pos], size_dict),
        )
        for pos in wanted:
            i = step.inputs[pos]
            sources = [upstream] + [
                tensor_name(step.inputs[q], num_ops) for q in range(len(step.inputs)) if q != pos
            ]
            consumed = builder.gradient(
                steps=(_single_step_core(step, pos, size_dict),),
                num_sources=len(step.inputs),
                sources=sources,
                target=f"d{i}" if i < num_ops else f"g{i}",
                target_term=step.input_terms[pos],
                operand=i if i < num_ops else None,
                prefix=f"c{i}.",
                can_consume=pos == wanted[-1],
            )
        if not consumed:
            builder.free(upstream, step.output_term)
        for i, term in zip(step.inputs, step.input_terms, strict=True):
            if i >= num_ops and i in retain:
                builder.free(tensor_name(i, num_ops), term)
    return builder


def _independent_events(plan: Plan, gradients: GradientPlan) -> _Builder:
    """Inference forward, then every gradient's core contraction planned on its own."""
    size_dict = plan.equation.size_dict
    num_ops = plan.equation.num_operands
    builder = _Builder(size_dict)
    builder.events.extend(forward_schedule(plan))
    if not gradients.specs:
        return builder
    output = plan.equation.output
    builder.alloc("G", output, op="seed", equation=f"->{output}")
    last = len(gradients.specs) - 1
    consumed = False
    for number, (spec, core) in enumerate(zip(gradients.specs, gradients.plans, strict=True)):
        sources = ["G" if src < 0 else tensor_name(src, num_ops) for src in spec.core_sources]
        consumed = builder.gradient(
            steps=core.steps,
            num_sources=core.equation.num_operands,
            sources=sources,
            target=f"d{spec.operand}",
            target_term=spec.term,
            operand=spec.operand,
            prefix=f"c{spec.operand}.",
            can_consume=number == last,
        )
    if not consumed:
        builder.free("G", output)
    return builder


def _with_private_reductions(plan: Plan) -> Plan:
    """The plan as torch.einsum runs it: operands' step-private indices summed first.

    An operand whose step sums an index of size above 1 that no other input of the step
    has gets a one-input step of its own before it; FLOPs are counted on the reduced
    steps, so this model's forward FLOPs can differ from opt_einsum's figure for the path.
    """
    equation = plan.equation
    num_ops = equation.num_operands
    if len(plan.steps) == 1 and num_ops == 1:
        return plan
    size_dict = equation.size_dict
    next_id = num_ops + len(plan.steps)
    steps: list[Step] = []
    for step in plan.steps:
        inputs = []
        terms = []
        for pos, (i, term) in enumerate(zip(step.inputs, step.input_terms, strict=True)):
            others = set(step.output_term)
            for q, other in enumerate(step.input_terms):
                if q != pos:
                    others.update(other)
            private = [char for char in dict.fromkeys(term) if char not in others]
            # A size-1 private index is a broadcast dimension: torch squeezes it, no copy.
            if i < num_ops and len(step.inputs) > 1 and any(size_dict[c] > 1 for c in private):
                reduced = "".join(char for char in dict.fromkeys(term) if char in others)
                steps.append(
                    Step(
                        index=len(steps),
                        operands=(pos,),
                        inputs=(i,),
                        output=next_id,
                        input_terms=(term,),
                        output_term=reduced,
                        removed="".join(private),
                        flops=count_flops("".join(dict.fromkeys(term)), True, 1, size_dict),
                        output_elements=size_of(reduced, size_dict),
                    )
                )
                inputs.append(next_id)
                terms.append(reduced)
                next_id += 1
            else:
                inputs.append(i)
                terms.append(term)
        joint = "".join(dict.fromkeys("".join(terms)))
        removed = "".join(char for char in joint if char not in step.output_term)
        steps.append(
            Step(
                index=len(steps),
                operands=step.operands,
                inputs=tuple(inputs),
                output=step.output,
                input_terms=tuple(terms),
                output_term=step.output_term,
                removed=removed,
                flops=count_flops(joint, bool(removed), len(terms), size_dict),
                output_elements=step.output_elements,
            )
        )
    return Plan(
        equation=equation,
        optimizer=plan.optimizer,
        path=plan.path,
        steps=tuple(steps),
        flops=plan.flops,
        naive_flops=plan.naive_flops,
        largest_intermediate_elements=plan.largest_intermediate_elements,
    )


def build_strategy(
    name: Strategy,
    plan: Plan,
    grad: Sequence[int],
    *,
    itemsize: int,
    gradients: GradientPlan | None = None,
) -> StrategyResult:
    """Model one backward strategy on a forward plan.

    Args:
        name: ``"reverse"``, ``"independent"`` or ``"torch-autograd"``.
        plan: The forward plan.
        grad: Positions of the operands that need a gradient.
        itemsize: Bytes per element.
        gradients: The planned gradient cores (required for ``"independent"``).

    Returns:
        The :class:`StrategyResult`.
    """
    start = time.perf_counter()
    wanted = frozenset(grad)
    optimizer = plan.optimizer
    match name:
        case "reverse":
            builder = _reverse_events(plan, wanted)
        case "torch-autograd":
            builder = _reverse_events(_with_private_reductions(plan), wanted)
        case "independent":
            if gradients is None:
                raise ValueError("the independent strategy needs the planned gradients")
            builder = _independent_events(plan, gradients)
            optimizer = gradients.optimizer
        case _:
            raise ValueError(f"unknown strategy {name!r}")
    events = tuple(builder.events)
    if name != "torch-autograd":
        events = lower_events(events, plan.equation.terms, plan.equation.size_dict)
    memory = simulate_memory(
        events,
        input_elements=sum(size_of(t, plan.equation.size_dict) for t in plan.equation.terms),
        output_elements=plan.steps[-1].output_elements,
        itemsize=itemsize,
    )
    elapsed = time.perf_counter() - start
    if name == "independent" and gradients is not None:
        elapsed += gradients.planning_s
    return StrategyResult(
        name=name,
        events=events,
        forward_flops=sum(e.flops for e in events if e.phase == "forward"),
        backward_flops=sum(e.flops for e in events if e.phase == "backward"),
        memory=memory,
        operand_flops={k: builder.operand_flops.get(k, 0) for k in sorted(wanted)},
        shared_flops=builder.shared_flops,
        planning_s=elapsed,
        optimizer=optimizer,
    )
