"""Budgets for CI: limits on a report's figures, and the checks that compare them.

A budget is a limit a user sets on one figure (``--max-flops``, ``--max-peak``, ...). The
checks read the report's JSON form (:meth:`Report.to_dict`), the documented contract, so
a saved report can be checked as well as a fresh one.

The rule (docs/ci.md):

- ``max-flops``: the forward FLOPs (``forward.flops``).
- ``max-backward-flops``, ``max-retained``, ``max-peak``: the backward FLOPs, the bytes
  retained for backward and the training peak of the *budget strategy*: the first
  modelled strategy (``reverse`` under the default ``--strategy``), the one named by
  ``--budget-strategy``, or every modelled strategy with ``--budget-strategy all`` (each
  is checked and reported). With no strategy modelled, ``max-peak`` checks the inference
  peak (``forward.peak_bytes``) and the other two are an error. Peaks count the inputs,
  as every peak of the report does; retained bytes do not.
- ``max-time``: every run's median forward plus median backward seconds
  (``runs[*].forward_s.median + runs[*].backward_s.median``). Without runs there is
  nothing to time: the check passes with ``value`` null.

- ``budget`` (``--budget``, a training budget on the peak, inputs included): set on the
  report by the analysis itself (:func:`einsum_analyze.analyze`), it is checked against
  the recommended plan, which fits when any plan the search found fits; when none does,
  the figure is the smallest training peak reached (the recommended plan's) and the
  check fails (exit 1), never an input error.

A figure equal to its limit passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import BudgetError
from ..model.parsing import parse_budget_strategy, parse_byte_budget, parse_count, parse_seconds
from ..strategies import strategy_names
from .report import BUDGET_NAMES, BudgetCheck, BudgetName, BudgetUnit, Report

__all__ = [
    "BUDGET_NAMES",
    "BudgetCheck",
    "BudgetName",
    "Budgets",
    "apply_budgets",
    "check_budget_strategy",
    "check_budgets",
]

_FIELD_OF: Mapping[str, str] = {
    "max-flops": "max_flops",
    "max-backward-flops": "max_backward_flops",
    "max-peak": "max_peak_bytes",
    "max-retained": "max_retained_bytes",
    "max-time": "max_time_s",
    "budget-strategy": "strategy",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Budgets:
    """The limits a user set; ``None`` means no limit on that figure.

    Attributes:
        max_flops: Forward FLOPs.
        max_backward_flops: Backward FLOPs of the budget strategy.
        max_peak_bytes: Training peak of the budget strategy, in bytes, inputs included
            (the inference peak when no strategy is modelled).
        max_retained_bytes: Bytes the budget strategy retains for backward.
        max_time_s: Median forward plus median backward seconds of every run.
        strategy: The budget strategy: a strategy name, ``"all"``, or ``None`` for the
            first modelled strategy.
    """

    max_flops: int | None = None
    max_backward_flops: int | None = None
    max_peak_bytes: int | None = None
    max_retained_bytes: int | None = None
    max_time_s: float | None = None
    strategy: str | None = None

    @property
    def is_empty(self) -> bool:
        """Whether no limit is set (the strategy choice alone is not a budget)."""
        return all(
            getattr(self, f.name) is None for f in fields(self) if f.name != "strategy"
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, object], *, where: str = "budgets") -> Budgets:
        """Read budgets from text or numbers keyed by budget name.

        Keys are the option names with or without ``--`` and with ``-`` or ``_``:
        ``max-flops``, ``max_backward_flops``, ``max-peak``, ``max-retained``,
        ``max-time``, ``budget-strategy``. ``None`` values are skipped.

        Args:
            data: e.g. ``{"max-peak": "512MiB", "max_flops": 1e9}``.
            where: What holds the budgets, for error messages.

        Raises:
            BudgetError: An unknown key or an unreadable value.

        Example:
            >>> Budgets.from_mapping({"max_peak": "1KiB"}).max_peak_bytes
            1024
        """
        values: dict[str, Any] = {}
        for key, value in data.items():
            name = str(key).strip().lstrip("-").replace("_", "-").lower()
            if name not in _FIELD_OF:
                raise BudgetError(
                    f"{where} has an unknown budget {key!r}; use: "
                    f"{', '.join((*BUDGET_NAMES, 'budget-strategy'))}"
                )
            if value is None:
                continue
            match name:
                case "max-flops" | "max-backward-flops":
                    values[_FIELD_OF[name]] = parse_count(value, name)
                case "max-peak" | "max-retained":
                    values[_FIELD_OF[name]] = parse_byte_budget(value, name)
                case "max-time":
                    values[_FIELD_OF[name]] = parse_seconds(value, name)
                case "budget-strategy":
                    values["strategy"] = parse_budget_strategy(value, strategy_names())
        return cls(**values)

    def merged(self, override: Budgets) -> Budgets:
        """These budgets with every limit ``override`` sets replacing this one's."""
        changes = {
            f.name: getattr(override, f.name)
            for f in fields(override)
            if getattr(override, f.name) is not None
        }
        return replace(self, **changes)


def check_budgets(report: Mapping[str, Any], budgets: Budgets) -> tuple[BudgetCheck, ...]:
    """Check every budget set against a report's JSON form.

    Args:
        report: A single report as :meth:`Report.to_dict` gives it (or as read back).
        budgets: The limits.

    Returns:
        One check per budget and subject, in the order of :data:`BUDGET_NAMES`.

    Raises:
        BudgetError: The budget strategy was not modelled, or a backward budget was set
            on a report without backward strategies.

    Example:
        >>> from einsum_analyze import analyze
        >>> data = analyze("ab,bc->ac", [(2, 3), (3, 4)]).to_dict()
        >>> [c.passed for c in check_budgets(data, Budgets(max_flops=40))]
        [False]
    """
    checks: list[BudgetCheck] = []
    forward = report["forward"]
    if budgets.max_flops is not None:
        checks.append(BudgetCheck(name="max-flops", subject="forward", limit=budgets.max_flops,
                                  value=int(forward["flops"]), unit="flops"))
    strategy_budgets: tuple[tuple[BudgetName, int | None, str, BudgetUnit], ...] = (
        ("max-backward-flops", budgets.max_backward_flops, "backward_flops", "flops"),
        ("max-peak", budgets.max_peak_bytes, "peak_bytes", "bytes"),
        ("max-retained", budgets.max_retained_bytes, "retained_bytes", "bytes"),
    )
    if any(limit is not None for _, limit, _, _ in strategy_budgets):
        chosen = _budget_strategies(report.get("strategies", ()), budgets.strategy)
        for name, limit, key, unit in strategy_budgets:
            if limit is None:
                continue
            if not chosen:
                if name != "max-peak":
                    raise BudgetError(
                        f"--{name} needs a backward strategy, but none was modelled "
                        "(--strategy none); model one or drop the budget"
                    )
                checks.append(BudgetCheck(name=name, subject="forward", limit=limit,
                                          value=int(forward["peak_bytes"]), unit=unit))
                continue
            for strategy in chosen:
                checks.append(BudgetCheck(name=name, subject=f"strategy {strategy['name']}",
                                          limit=limit, value=int(strategy[key]), unit=unit))
    training = report.get("budget")
    if isinstance(training, Mapping):
        checks.append(_training_budget_check(training, report.get("recommended")))
    if budgets.max_time_s is not None:
        runs: Sequence[Mapping[str, Any]] = report.get("runs", ())
        if not runs:
            checks.append(BudgetCheck(name="max-time", subject="runs (none measured)",
                                      limit=budgets.max_time_s, value=None, unit="s"))
        for number, run in enumerate(runs):
            checks.append(BudgetCheck(name="max-time", subject=_run_subject(number, run),
                                      limit=budgets.max_time_s, value=_run_seconds(run),
                                      unit="s"))
    return tuple(checks)


def check_budget_strategy(budgets: Budgets, strategies: Sequence[str]) -> None:
    """Before any analysis: the errors :func:`check_budgets` would raise, from names alone.

    The budget strategy must be one of ``strategies`` (the ones to be modelled), and the
    backward budgets need a strategy; the CLI calls this before anything prints.

    Raises:
        BudgetError: As :func:`check_budgets`.

    Example:
        >>> check_budget_strategy(Budgets(max_peak_bytes=64, strategy="checkpoint"),
        ...                       ("reverse",))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        einsum_analyze.errors.BudgetError: budget strategy 'checkpoint' was not modelled; ...
    """
    if all(limit is None for limit in (budgets.max_backward_flops, budgets.max_peak_bytes,
                                       budgets.max_retained_bytes)):
        return
    chosen = _budget_strategies([{"name": name} for name in strategies], budgets.strategy)
    if not chosen:
        for name, limit in (("max-backward-flops", budgets.max_backward_flops),
                            ("max-retained", budgets.max_retained_bytes)):
            if limit is not None:
                raise BudgetError(
                    f"--{name} needs a backward strategy, but none was modelled "
                    "(--strategy none); model one or drop the budget"
                )


def apply_budgets(report: Report, budgets: Budgets) -> Report:
    """The report with its ``budgets`` checked against ``budgets`` (unchanged if none set).

    Call it last, once every section the budgets read (strategies, runs) is in place.
    """
    if budgets.is_empty and report.budget is None:
        return report
    return replace(report, budgets=check_budgets(report.to_dict(), budgets))


def _training_budget_check(
    budget: Mapping[str, Any], recommended: Mapping[str, Any] | None
) -> BudgetCheck:
    """The training budget against the recommended plan (or the modelled strategies)."""
    limit = int(budget["budget_bytes"])
    if isinstance(recommended, Mapping):
        subject = (f"recommended plan ({recommended['strategy']} on the "
                   f"{recommended['source']} path)")
        if not recommended.get("fits", True):
            subject = "smallest reachable training peak, " + subject[len("recommended "):]
        return BudgetCheck(name="budget", subject=subject, limit=limit,
                           value=int(recommended["peak_bytes"]), unit="bytes")
    peaks = [(int(s["peak_bytes"]), str(s["name"])) for s in budget.get("strategies", ())]
    if not peaks:
        return BudgetCheck(name="budget", subject="nothing modelled", limit=limit,
                           value=None, unit="bytes")
    peak, name = min(peaks)
    return BudgetCheck(name="budget", subject=f"strategy {name} (least training peak)",
                       limit=limit, value=peak, unit="bytes")


def _budget_strategies(
    strategies: Sequence[Mapping[str, Any]], chosen: str | None
) -> tuple[Mapping[str, Any], ...]:
    if not strategies:
        if chosen not in (None, "all"):
            raise BudgetError(
                f"budget strategy {chosen!r} was not modelled (--strategy none); "
                "model it or drop the budget"
            )
        return ()
    if chosen is None:
        return (strategies[0],)
    if chosen == "all":
        return tuple(strategies)
    found = tuple(s for s in strategies if s["name"] == chosen)
    if not found:
        names = ", ".join(str(s["name"]) for s in strategies)
        raise BudgetError(
            f"budget strategy {chosen!r} was not modelled; the report has: {names}"
        )
    return found


def _run_subject(number: int, run: Mapping[str, Any]) -> str:
    identity = [str(run[key]) for key in ("strategy", "backend", "device") if run.get(key)]
    if run.get("baseline"):
        identity.append("baseline")
    if run.get("skipped"):
        identity.append("skipped")
    return f"run {number}" + (f" ({', '.join(identity)})" if identity else "")


def _median(stats: object) -> float | None:
    if isinstance(stats, Mapping):
        value = stats.get("median")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def _run_seconds(run: Mapping[str, Any]) -> float | None:
    forward = _median(run.get("forward_s"))
    backward = _median(run.get("backward_s"))
    if forward is None and backward is None:
        return None
    return (forward or 0.0) + (backward or 0.0)
