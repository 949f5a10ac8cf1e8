"""Training-aware path search: candidates, scoring by our model, Pareto front, recommendation.

- :mod:`.tree`: contraction trees re-contracted for reverse mode's training FLOPs or a
  memory proxy (exact over sub-trees).
- :mod:`.candidates`: candidate paths (opt_einsum, random-greedy, cotengra where
  installed, re-contracted trees).
- :mod:`.recommend`: every candidate scored with every strategy our executor runs; the
  Pareto front by training FLOPs and training peak; the plan recommended within a budget.
- :mod:`.records`: the records the report holds.

Labels and sizes only: nothing here imports torch, click or rich. It may import
:mod:`einsum_analyze.model`, :mod:`einsum_analyze.strategies` and
:mod:`einsum_analyze.roofline` (the time model), nothing above them
(docs/architecture.md); the report holds its records.
"""

from __future__ import annotations

from .candidates import candidate_paths, cotengra_available
from .recommend import (
    DEFAULT_PROFILE,
    RECOMMENDED_LABEL,
    TORCH_SOURCE,
    check_objective,
    floor_bytes,
    objective_key,
    pareto_front,
    recommend,
    score_path,
    search_plans,
    sweep_limits,
    torch_model,
)
from .records import (
    DEFAULT_OBJECTIVE,
    OBJECTIVES,
    BudgetSummary,
    LimitRow,
    Objective,
    PlanScore,
    Recommendation,
    SearchResult,
)

__all__ = [
    "DEFAULT_OBJECTIVE",
    "DEFAULT_PROFILE",
    "OBJECTIVES",
    "RECOMMENDED_LABEL",
    "TORCH_SOURCE",
    "BudgetSummary",
    "LimitRow",
    "Objective",
    "PlanScore",
    "Recommendation",
    "SearchResult",
    "candidate_paths",
    "check_objective",
    "cotengra_available",
    "floor_bytes",
    "objective_key",
    "pareto_front",
    "recommend",
    "score_path",
    "search_plans",
    "sweep_limits",
    "torch_model",
]
