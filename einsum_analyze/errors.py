"""The exceptions einsum-analyze raises for input a user can fix.

Anything else that escapes (TypeError, AssertionError, ...) is a bug and stays loud.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailableError",
    "BudgetError",
    "DropinError",
    "DropinValueError",
    "EinsumAnalyzeError",
    "EquationError",
    "InputFileError",
    "PlanningError",
    "ShapeError",
]


class EinsumAnalyzeError(Exception):
    """Base class: a problem with the user's input, options or environment."""


class EquationError(EinsumAnalyzeError):
    """The einsum equation text is malformed or inconsistent."""


class ShapeError(EinsumAnalyzeError):
    """Operand shapes or index sizes do not fit the equation."""


class PlanningError(EinsumAnalyzeError):
    """An optimizer, path, memory limit or strategy option is invalid."""


class BackendUnavailableError(EinsumAnalyzeError):
    """A requested device, backend or dtype is not available here."""


class BudgetError(EinsumAnalyzeError):
    """A budget is unreadable or cannot be checked against the report."""


class InputFileError(EinsumAnalyzeError):
    """A cases file or a saved report cannot be read, or is not of the expected form."""


class DropinError(EinsumAnalyzeError, RuntimeError):
    """Bad input to the drop-in einsum: a RuntimeError, as torch.einsum raises."""


class DropinValueError(DropinError, ValueError):
    """Bad input for which torch.einsum raises a ValueError (its opt_einsum path)."""
