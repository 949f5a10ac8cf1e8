"""What every strategy shares: its input, the schedule builder, and the result records.

A strategy's builder takes a :class:`StrategyInput` (the forward plan, the operands that
need a gradient, the planned gradient cores where it asks for them, its options) and
returns a :class:`ScheduleBuilder` holding its events, the FLOPs it attributes to each
operand and any warnings. :func:`einsum_analyze.strategies.build_strategy` turns that
into a :class:`StrategyResult`: it lowers the events where the strategy asks for it
and replays them for memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import filterfalse
from typing import Any

from ..model.gradients import GradientSpec, unreduce_kind
from ..model.memory import MemoryProfile
from ..model.planning import Plan, Step, count_flops, size_of
from ..model.schedule import Event
from ..model.types import Term

__all__ = [
    "GradientPlan",
    "ScheduleBuilder",
    "StrategyInput",
    "StrategyResult",
    "needs_grad",
    "single_step_core",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientPlan:
    """Every differentiated operand's gradient, each core planned as its own einsum.

    Attributes:
        operands: Positions of the differentiated operands.
        specs: One :class:`GradientSpec` per operand.
        plans: The planned core contraction of each.
        optimizer: The optimizer used for the cores.
        planning_s: Wall seconds spent deriving and planning.
        warnings: Why the cores were not planned as asked (searching too long, a
            memory limit the optimizer broke), for the strategies that use them.
    """

    operands: tuple[int, ...]
    specs: tuple[GradientSpec, ...]
    plans: tuple[Plan, ...]
    optimizer: str
    planning_s: float
    warnings: tuple[str, ...] = ()

    def to_dicts(self, itemsize: int) -> list[dict[str, Any]]:
        """The ``gradients`` section of the JSON report."""
        return [
            {
                "operand": spec.operand,
                "term": spec.term,
                "equation": spec.core_equation,
                "optimizer": plan.optimizer,
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
        warnings: What the user should know about this strategy's figures; ``analyze``
            adds them to the report's warnings.
        details: Sections of the strategy's own, by JSON key, added to its JSON entry
            as they are (plain JSON values; e.g. ``checkpoint``: what the checkpoint
            strategy keeps and recomputes).
        labels: Sizes of the labels its events use beyond the equation's (a sliced
            schedule's chunk labels; :meth:`sizes` merges them).
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
    warnings: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    labels: Mapping[str, int] = field(default_factory=dict)

    def sizes(self, size_dict: Mapping[str, int]) -> Mapping[str, int]:
        """The size of every label its events use: the equation's ``size_dict`` and its own."""
        return {**size_dict, **self.labels} if self.labels else size_dict

    def __repr__(self) -> str:
        return (
            f"StrategyResult({self.name!r}, backward_flops={self.backward_flops}, "
            f"peak_bytes={self.memory.peak_bytes})"
        )

    def to_dict(self, itemsize: int) -> dict[str, Any]:
        """One entry of the ``strategies`` section of the JSON report."""
        mem = self.memory
        data: dict[str, Any] = {
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
        for key, value in self.details.items():
            assert key not in data, f"strategy detail {key!r} would replace a figure"
            data[key] = value
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyInput:
    """What a strategy's builder is given.

    Attributes:
        plan: The forward plan.
        grad: Positions of the operands that need a gradient.
        gradients: The planned gradient cores; set exactly when the strategy's
            registration says it needs them.
        options: The strategy's options: its registered defaults, updated with the
            caller's values.
        itemsize: Bytes per element (for options in bytes, such as a budget).
        upstream_copy: The executor copies the upstream gradient into its seed (complex
            dtypes), for builders that score memory themselves (a budget search).
    """

    plan: Plan
    grad: frozenset[int]
    itemsize: int
    gradients: GradientPlan | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    upstream_copy: bool = False


class ScheduleBuilder:
    """Accumulates a schedule and the FLOPs attributed to each operand.

    Attributes:
        size_dict: Size of every label.
        events: The schedule so far.
        operand_flops: Backward FLOPs of each operand's own gradient contraction.
        shared_flops: Backward FLOPs spent on gradients of intermediates.
        optimizer: Optimizer of the contractions the strategy planned itself; None: the
            forward plan's.
        warnings: What the user should know about the strategy's figures.
        details: The strategy's own sections for :attr:`StrategyResult.details`.
        output_elements: Elements of the forward output's own storage; None: the forward
            plan's output (0 where the executor returns a view of an operand).
        labels: Sizes of labels the schedule's events use beyond the equation's (a
            sliced schedule's chunk labels); the lowering and the executors read them.
        forward_flops: FLOPs of the forward work where the events' phases do not say it
            (a fused step runs each slice's forward in the backward call); None: the
            FLOPs of the forward events.
    """

    def __init__(self, size_dict: Mapping[str, int]) -> None:
        self.size_dict = size_dict
        self.events: list[Event] = []
        self.operand_flops: dict[int, int] = {}
        self.shared_flops = 0
        self.optimizer: str | None = None
        self.warnings: list[str] = []
        self.details: dict[str, Any] = {}
        self.output_elements: int | None = None
        self.labels: dict[str, int] = {}
        self.forward_flops: int | None = None

    def alloc(self, tensor: str, term: Term, **fields: Any) -> None:
        """Allocate a backward tensor with labels ``term``."""
        self.events.append(
            Event(kind="alloc", tensor=tensor, elements=size_of(term, self.size_dict),
                  phase="backward", **fields)
        )

    def free(self, tensor: str, term: Term) -> None:
        """Free a tensor with labels ``term`` during backward."""
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


def needs_grad(plan: Plan, grad: frozenset[int]) -> dict[int, bool]:
    """Whether each tensor of the plan (by single-use id) leads to a wanted gradient."""
    needs = {k: k in grad for k in range(plan.equation.num_operands)}
    for step in plan.steps:
        needs[step.output] = any(needs[i] for i in step.inputs)
    return needs


def single_step_core(step: Step, position: int, size_dict: Mapping[str, int]) -> Step:
    """The gradient of one step input as one contraction: ``out, others -> input``."""
    others = [q for q in range(len(step.inputs)) if q != position]
    core_terms = (step.output_term, *(step.input_terms[q] for q in others))
    joint = "".join(dict.fromkeys("".join(core_terms)))
    target = step.input_terms[position]
    # Membership in sets, the loops in C: a large network's terms hold hundreds of labels.
    core_output = "".join(filter(set(joint).__contains__, dict.fromkeys(target)))
    summed = "".join(filterfalse(set(core_output).__contains__, joint))
    return Step(
        index=0,
        operands=tuple(range(len(core_terms))),
        inputs=tuple(range(len(core_terms))),
        output=len(core_terms),
        input_terms=core_terms,
        output_term=core_output,
        summed=summed,
        flops=count_flops(joint, bool(summed), len(core_terms), size_dict),
        output_elements=size_of(core_output, size_dict),
    )
