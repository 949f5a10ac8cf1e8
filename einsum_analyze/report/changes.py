"""One compared figure, before and after, and the small readers a comparison shares.

:mod:`.compare` applies the rules to whole reports; :mod:`.compare_times` judges the runs'
times. Both build :class:`Change` records from the helpers here, so a figure read as a
number, a run's identity and a bound reached up to float rounding mean one thing in each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .saved import Unit

__all__ = [
    "Change",
    "ChangeStatus",
    "Rule",
    "beyond",
    "notch_of",
    "median_of",
    "number_of",
    "presence",
    "runs_by_key",
    "union",
]

ChangeStatus = Literal["regressed", "improved", "unchanged", "added", "removed"]
Rule = Literal["exact", "ratio", "relative", "presence", "budget"]

_RUN_IDENTITY = ("strategy", "backend", "device")


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One figure, before and after.

    Attributes:
        case: The batch case's name; ``None`` for single reports.
        subject: ``"forward"``, ``"strategy reverse"``, ``"run reverse, torch, cpu"``,
            ``"budget max-peak on strategy reverse"``, or ``"case"`` for a batch case.
        figure: The report key compared, e.g. ``"backward_flops"``; ``""`` for a case.
        unit: ``"flops"``, ``"bytes"``, ``"s"``, ``"ratio"`` (a time over the torch
            baseline's in the same report), or ``""``.
        before: The figure before (``None``: absent).
        after: The figure after (``None``: absent).
        rule: ``"exact"``, ``"ratio"`` (times over the baseline's, the default),
            ``"relative"`` (times in seconds), ``"presence"`` or ``"budget"``.
        status: The verdict.
        detail: Free text, e.g. the error a case now raises.
        context: The figures behind the verdict, as ``(key, value)`` pairs: a ratio's
            ``seconds_before`` and ``seconds_after`` (the run's own medians), a budget's
            ``value_before``, ``limit_before``, ``value_after``, ``limit_after`` and
            ``budget_unit``.
    """

    case: str | None
    subject: str
    figure: str
    unit: Unit
    before: int | float | None
    after: int | float | None
    rule: Rule
    status: ChangeStatus
    detail: str = ""
    context: tuple[tuple[str, int | float | str | None], ...] = ()

    @property
    def relative(self) -> float | None:
        """``(after - before) / before``, when both exist and ``before`` is not 0."""
        if self.before is None or self.after is None or self.before == 0:
            return None
        return (self.after - self.before) / self.before

    def to_dict(self) -> dict[str, Any]:
        """One entry of the comparison's ``changes`` list."""
        return {
            "case": self.case,
            "subject": self.subject,
            "figure": self.figure,
            "unit": self.unit,
            "before": self.before,
            "after": self.after,
            "relative": self.relative,
            "rule": self.rule,
            "status": self.status,
            "detail": self.detail,
            "context": dict(self.context),
        }

    def fact(self, key: str) -> int | float | str | None:
        """One entry of :attr:`context`, ``None`` when absent."""
        return dict(self.context).get(key)


def presence(before: object, after: object) -> ChangeStatus | None:
    """``"added"``, ``"removed"`` or ``"unchanged"`` when a side is absent, else ``None``."""
    if before is None:
        return "unchanged" if after is None else "added"
    if after is None:
        return "removed"
    return None


def number_of(value: object) -> int | float | None:
    """``value`` when it is an int or float (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def median_of(stats: object) -> float | None:
    """The ``median`` of a run's timing statistics, or ``None``."""
    if isinstance(stats, Mapping):
        value = number_of(stats.get("median"))
        return None if value is None else float(value)
    return None


def notch_of(stats: object) -> float:
    """Half the width of the median's notch, ``1.57 * iqr / sqrt(blocks)``; 0 without an IQR.

    The notch of a box plot (McGill, Tukey and Larsen, 1978): two medians whose notches
    do not overlap differ at about the 95 % level. Without a recorded ``blocks`` count the
    whole IQR is taken, the widest notch.

    Example:
        >>> round(notch_of({"median": 1.0, "iqr": 0.2, "blocks": 16}), 4)
        0.0785
    """
    if not isinstance(stats, Mapping):
        return 0.0
    spread = number_of(stats.get("iqr"))
    if spread is None:
        return 0.0
    blocks = number_of(stats.get("blocks"))
    if blocks is None or blocks < 1:
        return float(spread)
    return min(float(spread), 1.57 * float(spread) / math.sqrt(blocks))


def beyond(larger: float, bound: float) -> bool:
    """``larger > bound``, where a bound reached up to float rounding is not beyond.

    With a 15 % tolerance, ``0.115`` after ``0.1`` is at the tolerance although
    ``0.1 * 1.15`` is ``0.11499999999999999`` in floats; likewise ``0.009`` after ``0.010``
    with 10 % (``0.010 * 0.9`` is ``0.009000000000000001``).

    Example:
        >>> beyond(0.115, 0.1 * 1.15), beyond(0.116, 0.1 * 1.15)
        (False, True)
    """
    return larger > bound and not math.isclose(larger, bound, rel_tol=1e-12, abs_tol=0.0)


def runs_by_key(items: object) -> dict[str, Mapping[str, Any]]:
    """A report's runs keyed ``"run STRATEGY, BACKEND, DEVICE[, baseline]"``, in order."""
    if not isinstance(items, list):
        return {}
    keyed: dict[str, Mapping[str, Any]] = {}
    for number, run in enumerate(items):
        if not isinstance(run, Mapping):
            continue
        identity = [str(run[k]) for k in _RUN_IDENTITY if run.get(k)]
        if run.get("baseline"):
            identity.append("baseline")
        key = "run " + (", ".join(identity) if identity else str(number))
        repeat = 2
        base = key
        while key in keyed:
            key = f"{base} #{repeat}"
            repeat += 1
        keyed[key] = run
    return keyed


def union(first: Mapping[str, Any], second: Mapping[str, Any]) -> Sequence[str]:
    """Keys of ``first`` in order, then those only ``second`` has."""
    return [*first, *(key for key in second if key not in first)]
