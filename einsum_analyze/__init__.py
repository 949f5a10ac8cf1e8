"""einsum-analyze: what does the backward pass of this einsum really cost?

Example:
    >>> from einsum_analyze import analyze
    >>> report = analyze("ab,bc->ac", [(2, 3), (3, 4)])
    >>> report.plan.flops
    48

For training, ``einsum_analyze.torch.einsum`` is a drop-in ``torch.einsum`` that runs the
planned forward and backward (importing it imports torch; importing this package does
not), and :func:`capture` records a model's torch.einsum calls for analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .analysis import analyze
from .errors import (
    BackendUnavailableError,
    EinsumAnalyzeError,
    EquationError,
    PlanningError,
    ShapeError,
)
from .model.equation import Equation, parse_equation
from .model.memory import MemoryProfile, simulate_memory
from .model.planning import Plan, Step, plan_contraction
from .report.report import SCHEMA_VERSION, Report
from .slicing import strategy as _sliced  # noqa: F401 - registers the sliced strategy

if TYPE_CHECKING:
    from .execution import execute
    from .training.capture import capture

__all__ = [
    "SCHEMA_VERSION",
    "BackendUnavailableError",
    "EinsumAnalyzeError",
    "Equation",
    "EquationError",
    "MemoryProfile",
    "Plan",
    "PlanningError",
    "Report",
    "ShapeError",
    "Step",
    "__version__",
    "analyze",
    "capture",
    "execute",
    "parse_equation",
    "plan_contraction",
    "simulate_memory",
]


_LAZY = {"execute": "execution", "capture": "training.capture"}
"""Entry points imported when first used: running on devices and recording a model's calls
load the executors and the drop-in's modules, which the analysis never needs (the
analysis-only command line starts faster without them)."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
