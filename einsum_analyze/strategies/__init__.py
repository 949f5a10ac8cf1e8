"""Backward strategies as schedules, their FLOPs and their memory (docs/method.md section 5).

Every strategy is one list of :class:`~einsum_analyze.model.schedule.Event`: the forward pass,
then the backward pass. The same list is replayed for memory and run by the executor.
Strategies are registered by name (:mod:`.registry`); each lives in a module of its own:

- ``reverse`` (:mod:`.reverse`): reverse mode through the forward tree.
- ``independent`` (:mod:`.independent`): each operand's gradient as its own planned
  einsum (:mod:`.gradient_plans`); nothing is retained.
- ``torch-autograd`` (:mod:`.torch_autograd`): torch.einsum's own execution under
  autograd, as :mod:`einsum_analyze.torch_model` models it.
- ``checkpoint`` (:mod:`.checkpoint`): reverse mode keeping a chosen set of
  intermediates and recomputing the others during backward (not modelled by default).
- ``recompute`` (:mod:`.recompute`): reverse mode that remakes cheap one-step
  intermediates in backward, each step's gradients ordered around them (not modelled by
  default; the search scores it).
- ``sliced`` (:mod:`einsum_analyze.slicing.strategy`): the step cut into slices of a few
  indices, each run forward then backward with one of the strategies above, gathered into
  full-size buffers (not modelled by default). It composes the others, so it lives above
  them in :mod:`einsum_analyze.slicing`, which registers it when imported (importing
  :mod:`einsum_analyze` does).

This package may import :mod:`einsum_analyze.model` and :mod:`einsum_analyze.torch_model`,
nothing above them (docs/architecture.md).

Operands that need no gradient cost nothing: their gradients are never computed and
nothing is retained on their account. docs/strategies.md shows how to add a strategy:
one module plus one registration.
"""

from __future__ import annotations

from .checkpoint import SPEC as _CHECKPOINT
from .common import GradientPlan, ScheduleBuilder, StrategyInput, StrategyResult
from .gradient_plans import LARGE_NETWORK, SEARCH_LIMIT, SEARCHING_OPTIMIZERS, plan_gradients
from .independent import SPEC as _INDEPENDENT
from .recompute import SPEC as _RECOMPUTE
from .registry import (
    StrategyBuilder,
    StrategySpec,
    build_strategy,
    default_strategy_names,
    get_strategy,
    left_out_note,
    register_strategy,
    runs_on_our_executor,
    strategy_names,
    unregister_strategy,
)
from .reverse import SPEC as _REVERSE
from .torch_autograd import SPEC as _TORCH_AUTOGRAD

__all__ = [
    "LARGE_NETWORK",
    "SEARCHING_OPTIMIZERS",
    "SEARCH_LIMIT",
    "STRATEGIES",
    "GradientPlan",
    "ScheduleBuilder",
    "StrategyBuilder",
    "StrategyInput",
    "StrategyResult",
    "StrategySpec",
    "build_strategy",
    "default_strategy_names",
    "get_strategy",
    "left_out_note",
    "plan_gradients",
    "register_strategy",
    "runs_on_our_executor",
    "strategy_names",
    "unregister_strategy",
]

# The built-in strategies, in the order reports list them (``sliced`` comes next, from
# einsum_analyze.slicing). A new strategy is one module plus one line here.
for _spec in (_REVERSE, _INDEPENDENT, _TORCH_AUTOGRAD, _CHECKPOINT, _RECOMPUTE):
    register_strategy(_spec)

STRATEGIES: tuple[str, ...] = default_strategy_names()
"""The strategies modelled by default (the built-in ones, read from the registry at
import). :func:`strategy_names` also lists any registered later. Passed as it is (the
default of ``analyze``), it means the defaults for the equation's size:
:func:`default_strategy_names` of its operands."""
