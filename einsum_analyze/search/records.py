"""What the search, the budget and the limit sweep report: frozen records with JSON forms.

They sit below :mod:`einsum_analyze.report`, which holds them, and above the strategies,
whose results they carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..model.types import LinearPath
from ..roofline.time_model import PredictedTime
from ..strategies import StrategyResult

__all__ = [
    "DEFAULT_OBJECTIVE",
    "OBJECTIVES",
    "BudgetSummary",
    "LimitRow",
    "Objective",
    "PlanScore",
    "Recommendation",
    "SearchResult",
]

Objective = Literal["time", "flops", "memory", "balanced"]
OBJECTIVES: tuple[Objective, ...] = get_args(Objective)

DEFAULT_OBJECTIVE: Objective = "time"
"""The objective of a search when none is named: the fastest predicted plan."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanScore:
    """One plan (a path and a strategy) scored by our model.

    Attributes:
        path: opt_einsum linear path of the forward tree.
        source: Where the path came from (``dp``, ``reconfigured(dp, retained)``, ...).
        strategy: The registered strategy.
        forward_flops: FLOPs of the forward pass.
        training_flops: Forward, backward and recompute FLOPs of the training step,
            for the operands that need gradients.
        peak_bytes: Training peak, inputs included.
        retained_bytes: Bytes kept for backward at the end of forward.
        largest_intermediate_elements: Largest tensor of the forward path.
        result: The strategy's full result (its events run as they are).
        predicted: The time model's seconds on the search's device profile.
    """

    path: LinearPath
    source: str
    strategy: str
    forward_flops: int
    training_flops: int
    peak_bytes: int
    retained_bytes: int
    largest_intermediate_elements: int
    result: StrategyResult = field(repr=False, compare=False)
    predicted: PredictedTime | None = None

    @property
    def predicted_s(self) -> float:
        """Predicted forward plus backward seconds (infinite without a prediction)."""
        return self.predicted.total_s if self.predicted is not None else float("inf")

    def fits(self, budget: int | None) -> bool:
        """Whether the training peak is within ``budget`` (no budget: fits)."""
        return budget is None or self.peak_bytes <= budget

    def to_dict(self, itemsize: int) -> dict[str, Any]:
        """The plan's JSON form."""
        return {
            "path": [list(p) for p in self.path],
            "source": self.source,
            "strategy": self.strategy,
            "forward_flops": self.forward_flops,
            "training_flops": self.training_flops,
            "peak_bytes": self.peak_bytes,
            "retained_bytes": self.retained_bytes,
            "largest_intermediate_elements": self.largest_intermediate_elements,
            "predicted": self.predicted.to_dict() if self.predicted is not None else None,
            "strategy_result": self.result.to_dict(itemsize),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Recommendation:
    """The plan that minimises the objective within the budget.

    Attributes:
        plan: The plan; when no plan fits, the one with the smallest training peak.
        objective: The objective minimised.
        budget_bytes: The training budget, if any.
        fits: Whether the plan's training peak is within the budget.
        label: The name its run carries in ``runs[].strategy``.
        measured: After runs, per device: measured figures and ratios to torch autograd.
        unconstrained: With a budget, the plan recommended without one: what the budget
            costs is the ratio of the two predicted times.
    """

    plan: PlanScore
    objective: Objective
    budget_bytes: int | None
    fits: bool
    label: str
    measured: tuple[Mapping[str, Any], ...] = ()
    unconstrained: PlanScore | None = None

    @property
    def budget_cost(self) -> float | None:
        """Predicted time over the unconstrained plan's (None: no budget or no prediction)."""
        free = self.unconstrained
        if free is None or free.predicted is None or self.plan.predicted is None \
                or free.predicted_s <= 0:
            return None
        return self.plan.predicted_s / free.predicted_s

    def to_dict(self, itemsize: int) -> dict[str, Any]:
        """The report's ``recommended`` entry."""
        data = self.plan.to_dict(itemsize)
        data.update({
            "objective": self.objective,
            "budget_bytes": self.budget_bytes,
            "fits": self.fits,
            "run_label": self.label,
            "measured": [dict(m) for m in self.measured],
            "time_vs_unconstrained": self.budget_cost,
        })
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """The training-aware search on one equation.

    Attributes:
        objective: The objective.
        candidates: How many distinct paths were scored.
        sources: The candidate sources used.
        pareto: Non-dominated plans by training FLOPs and training peak, by FLOPs.
        forward_optimal: The plan of least forward FLOPs (ties: least training FLOPs).
        training_optimal: The plan that minimises the objective, budget aside.
        smallest_peak: The plan of least training peak.
        search_s: Wall seconds of the search.
    """

    objective: Objective
    candidates: int
    sources: tuple[str, ...]
    pareto: tuple[PlanScore, ...]
    forward_optimal: PlanScore
    training_optimal: PlanScore
    smallest_peak: PlanScore
    search_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetSummary:
    """A training budget against the report's strategies and the best reachable plan.

    Attributes:
        budget_bytes: The budget on the training peak, inputs included.
        floor_bytes: What no plan goes under: inputs, upstream gradient and the returned
            gradients.
        strategies: Each modelled strategy's name, training peak and whether it fits.
        smallest_peak_bytes: The least training peak the search reached.
        fits: Whether some plan fits.
    """

    budget_bytes: int
    floor_bytes: int
    strategies: tuple[tuple[str, int, bool], ...]
    smallest_peak_bytes: int | None
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        """The report's ``budget`` entry."""
        return {
            "budget_bytes": self.budget_bytes,
            "floor_bytes": self.floor_bytes,
            "fits": self.fits,
            "smallest_peak_bytes": self.smallest_peak_bytes,
            "strategies": [
                {"name": name, "peak_bytes": peak, "fits": fits}
                for name, peak, fits in self.strategies
            ],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitRow:
    """One memory limit of a sweep: its forward path, strategies and best plan.

    Attributes:
        limit: The limit as given (``"none"``, ``"1e6"``, ``"64KiB"``, ``"max_input"``).
        limit_elements: The limit in elements (None: no limit).
        optimizer: The optimizer of the forward path planned under it.
        path: That path.
        forward_flops: Its FLOPs.
        largest_intermediate_elements: Its largest tensor.
        inference_peak_bytes: Its inference peak, inputs included.
        strategies: Each strategy on that path.
        best: The recommended plan within the limit (None without a search).
        fits: Whether ``best`` fits the training budget (None without one).
        warnings: What the planner said about the limit.
    """

    limit: str
    limit_elements: int | None
    optimizer: str
    path: LinearPath
    forward_flops: int
    largest_intermediate_elements: int
    inference_peak_bytes: int
    strategies: tuple[StrategyResult, ...]
    best: PlanScore | None = None
    fits: bool | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self, itemsize: int, budget: int | None = None) -> dict[str, Any]:
        """One entry of the report's ``memory_limits``."""
        return {
            "limit": self.limit,
            "limit_elements": self.limit_elements,
            "optimizer": self.optimizer,
            "path": [list(p) for p in self.path],
            "forward_flops": self.forward_flops,
            "largest_intermediate_elements": self.largest_intermediate_elements,
            "inference_peak_bytes": self.inference_peak_bytes,
            "strategies": [
                {
                    "name": s.name,
                    "backward_flops": s.backward_flops,
                    "retained_bytes": s.memory.retained_bytes,
                    "peak_bytes": s.memory.peak_bytes,
                    **({"fits": s.memory.peak_bytes <= budget} if budget is not None else {}),
                }
                for s in self.strategies
            ],
            "best": self.best.to_dict(itemsize) if self.best is not None else None,
            "best_fits_budget": self.fits,
            "warnings": list(self.warnings),
        }
