"""The strategy registry: each name maps to a builder, what it needs, and its options.

A strategy is one module that defines a builder and a :class:`StrategySpec`, plus one
:func:`register_strategy` call (``einsum_analyze/strategies/__init__.py`` registers the
built-in ones; code outside the package may register its own). :func:`analyze
<einsum_analyze.analyze>`, the search and the CLI's ``--strategy`` choices and help read
the names from here; tests keep the JSON schema's ``strategies[].name`` enum and
docs/strategies.md's list equal to them (docs/strategies.md shows how to add one).

:func:`build_strategy` drives any registered strategy: it hands the builder a
:class:`~einsum_analyze.strategies.common.StrategyInput`, lowers the events to kernels
where the strategy runs on our executor, and replays them for memory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..errors import PlanningError
from ..model.lowering import lower_events
from ..model.memory import simulate_memory
from ..model.planning import Plan, size_of
from .common import GradientPlan, ScheduleBuilder, StrategyInput, StrategyResult

__all__ = [
    "RESERVED_NAMES",
    "StrategyBuilder",
    "StrategySpec",
    "build_strategy",
    "default_strategy_names",
    "left_out_note",
    "get_strategy",
    "register_strategy",
    "runs_on_our_executor",
    "strategy_names",
    "unregister_strategy",
]

StrategyBuilder: TypeAlias = Callable[[StrategyInput], ScheduleBuilder]
"""Builds a strategy's schedule (forward then backward) from its input."""

RESERVED_NAMES = frozenset({"none", "all"})
"""Words the command line gives a meaning of its own (``--strategy none``,
``--budget-strategy all``): no strategy may take them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategySpec:
    """One registered backward strategy.

    Attributes:
        name: The name users type (``--strategy NAME``) and the report shows.
        build: Its builder.
        description: One line for the CLI's help and the docs.
        needs_gradient_plans: The builder reads every differentiated operand's gradient
            core, planned on its own (:func:`~einsum_analyze.strategies.plan_gradients`,
            under the report's memory limit); the report then has a ``gradients``
            section.
        lowered: The schedule runs on our executor: its contractions are lowered to
            kernels (:mod:`einsum_analyze.model.lowering`), whose copies count in its memory.
            False for a model of someone else's executor (``torch-autograd``).
        default: Modelled when the caller names no strategies.
        default_max_operands: Modelled by default only for equations of at most this
            many operands (None: any); naming the strategy models it at any size
            (``independent``: its schedule grows as the square of the operands).
        own_path: The strategy plans its own contraction path (``torch-autograd``:
            torch.einsum's), so the forward plan's path does not change its result.
        fallback: The search (:mod:`einsum_analyze.search`) scores it only when a budget
            is given and no other plan fits it (``sliced``: it trades FLOPs for memory
            beyond what the others reach).
        searched: The search scores it on every path whether or not the caller named
            it (``recompute``: it lowers the peak of reverse mode's plans at a small
            cost in time, so the recommendation may weigh it without being asked to).
        options: The strategy's options and their default values; callers may override
            them by name (``analyze(..., strategy_options={NAME: {...}})``).
        dropin_options: Options the drop-in einsum (:mod:`einsum_analyze.torch`) gives
            it: autograd hands the upstream gradient over only after forward has
            returned the output (``sliced``: ``{"fused": False}``).
    """

    name: str
    build: StrategyBuilder
    description: str
    needs_gradient_plans: bool = False
    lowered: bool = True
    default: bool = True
    default_max_operands: int | None = None
    own_path: bool = False
    fallback: bool = False
    searched: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    dropin_options: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"StrategySpec({self.name!r})"


_REGISTRY: dict[str, StrategySpec] = {}


def register_strategy(spec: StrategySpec, *, replace: bool = False) -> StrategySpec:
    """Add a strategy to the registry (after those already there).

    Args:
        spec: The strategy.
        replace: Allow replacing a strategy of the same name (keeping its place).

    Returns:
        ``spec``, so that a module may write ``SPEC = register_strategy(StrategySpec(...))``.

    Raises:
        ValueError: The name is taken (and ``replace`` is false), reserved, empty, or
            holds a comma or a space.
    """
    name = spec.name
    if not name or name != name.strip() or any(c in name for c in ", ") or name != name.lower():
        raise ValueError(f"strategy name {name!r} must be lower case, without commas or spaces")
    if name in RESERVED_NAMES:
        raise ValueError(f"strategy name {name!r} is reserved by the command line")
    if name in _REGISTRY and not replace:
        raise ValueError(f"a strategy named {name!r} is already registered")
    _REGISTRY[name] = spec
    return spec


def unregister_strategy(name: str) -> StrategySpec:
    """Remove a strategy from the registry and return it (tests restore with this)."""
    return _REGISTRY.pop(get_strategy(name).name)


def get_strategy(name: str) -> StrategySpec:
    """The registered strategy called ``name``.

    Raises:
        PlanningError: No such strategy; the message lists the valid names.

    Example:
        >>> get_strategy("reverse").needs_gradient_plans
        False
    """
    spec = _REGISTRY.get(name)
    if spec is None:
        raise PlanningError(
            f"unknown strategy {name!r}; choose from: {', '.join(strategy_names())}"
        )
    return spec


def runs_on_our_executor(name: str) -> bool:
    """Whether a strategy result of this name is a schedule our executor runs.

    A registered model of someone else's executor (``lowered=False``: ``torch-autograd``)
    is not; any other result is, the report's renamed ``recommended`` plan included.
    """
    spec = _REGISTRY.get(name)
    return spec is None or spec.lowered


def strategy_names() -> tuple[str, ...]:
    """Every registered strategy, in registration order.

    Example:
        >>> strategy_names()[:3]
        ('reverse', 'independent', 'torch-autograd')
    """
    return tuple(_REGISTRY)


def default_strategy_names(num_operands: int | None = None) -> tuple[str, ...]:
    """The strategies modelled when the caller names none, in registration order.

    Args:
        num_operands: The equation's operands: a strategy whose
            ``default_max_operands`` is below it is left out (None: none is).
    """
    return tuple(
        name for name, spec in _REGISTRY.items()
        if spec.default and (num_operands is None or spec.default_max_operands is None
                             or num_operands <= spec.default_max_operands)
    )


def left_out_note(num_operands: int) -> str | None:
    """One line naming the default strategies left out at this size, and how to add them.

    Example:
        >>> left_out_note(10) is None
        True
    """
    every = default_strategy_names()
    kept = default_strategy_names(num_operands)
    dropped = [name for name in every if name not in kept]
    if not dropped:
        return None
    largest = min(_REGISTRY[name].default_max_operands or 0 for name in dropped)
    return (f"{', '.join(dropped)} left out of the default strategies above {largest:,} "
            f"operands (this equation has {num_operands:,}); --strategy "
            f"{','.join(every)} adds it back")


def build_strategy(
    name: str,
    plan: Plan,
    grad: Sequence[int],
    *,
    itemsize: int,
    gradients: GradientPlan | None = None,
    options: Mapping[str, Any] | None = None,
    upstream_copy: bool = False,
) -> StrategyResult:
    """Model one registered backward strategy on a forward plan.

    Args:
        name: A registered strategy (:func:`strategy_names`).
        plan: The forward plan.
        grad: Positions of the operands that need a gradient.
        itemsize: Bytes per element.
        gradients: The planned gradient cores (required by a strategy registered with
            ``needs_gradient_plans``; ignored by the others).
        options: Values for the strategy's registered options.
        upstream_copy: Our executor copies the upstream gradient into its seed (complex
            dtypes: backward conjugates the seed in place); otherwise the seed is the
            caller's tensor (:func:`~einsum_analyze.model.memory.simulate_memory`). The
            ``torch-autograd`` model never copies it.

    Returns:
        The :class:`StrategyResult`.

    Raises:
        PlanningError: An unknown strategy or option.
        ValueError: The strategy needs gradient plans and none were given.
    """
    start = time.perf_counter()
    spec = get_strategy(name)
    chosen = dict(spec.options)
    for key, value in (options or {}).items():
        if key not in spec.options:
            valid = ", ".join(spec.options) or "none"
            raise PlanningError(
                f"strategy {name!r} has no option {key!r}; its options: {valid}"
            )
        chosen[key] = value
    if spec.needs_gradient_plans and gradients is None:
        raise ValueError(f"the {name} strategy needs the planned gradients")
    wanted = frozenset(grad)
    builder = spec.build(
        StrategyInput(
            plan=plan,
            grad=wanted,
            gradients=gradients if spec.needs_gradient_plans else None,
            options=chosen,
            itemsize=itemsize,
            upstream_copy=upstream_copy and spec.lowered,
        )
    )
    equation = plan.equation
    events = tuple(builder.events)
    sizes = ({**equation.size_dict, **builder.labels} if builder.labels
             else equation.size_dict)
    if spec.lowered:
        events = lower_events(events, equation.terms, sizes)
    memory = simulate_memory(
        events,
        input_elements=sum(size_of(t, equation.size_dict) for t in equation.terms),
        output_elements=(plan.steps[-1].output_elements if builder.output_elements is None
                         else builder.output_elements),
        itemsize=itemsize,
        upstream_copy=upstream_copy and spec.lowered,
    )
    elapsed = time.perf_counter() - start
    if spec.needs_gradient_plans and gradients is not None:
        elapsed += gradients.planning_s
    all_flops = sum(e.flops for e in events)
    forward_flops = (sum(e.flops for e in events if e.phase == "forward")
                     if builder.forward_flops is None else builder.forward_flops)
    return StrategyResult(
        name=spec.name,
        events=events,
        forward_flops=forward_flops,
        backward_flops=all_flops - forward_flops,
        memory=memory,
        operand_flops={k: builder.operand_flops.get(k, 0) for k in sorted(wanted)},
        shared_flops=builder.shared_flops,
        planning_s=elapsed,
        optimizer=builder.optimizer or plan.optimizer,
        warnings=tuple(builder.warnings),
        details=dict(builder.details),
        labels=dict(builder.labels),
    )
