"""The report: one frozen object per analysis, its JSON form, and the one JSON writer."""

from __future__ import annotations

import functools
import json
import math
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Literal, get_args

from ..model.equation import Equation
from ..model.memory import MemoryProfile
from ..model.planning import Plan, Step
from ..model.timeline import forward_tree, strategy_fates, strategy_timeline

if TYPE_CHECKING:
    from ..backends.base import Run
    from ..roofline import Roofline
    from ..search import BudgetSummary, LimitRow, Recommendation, SearchResult
    from ..strategies import GradientPlan, StrategyResult

__all__ = [
    "BUDGET_NAMES",
    "SCHEMA_VERSION",
    "BudgetCheck",
    "BudgetName",
    "BudgetUnit",
    "Report",
    "dump_json",
    "environment",
    "load_schema",
]

SCHEMA_VERSION = 2
"""Bumped on any change that breaks a reader of earlier reports (docs/schema.md)."""

BudgetName = Literal[
    "max-flops", "max-backward-flops", "max-peak", "max-retained", "max-time", "budget"
]
BudgetUnit = Literal["flops", "bytes", "s"]
BUDGET_NAMES: tuple[BudgetName, ...] = get_args(BudgetName)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetCheck:
    """One budget checked against one figure: an entry of the report's ``budgets``.

    It lives here, below :mod:`einsum_analyze.report.budgets`, because the report holds the
    checks and the budgets module reads reports.

    Attributes:
        name: The budget, e.g. ``"max-peak"``.
        subject: What was measured: ``"forward"``, ``"strategy reverse"``, ``"run 0"``.
        limit: The limit, in ``unit``.
        value: The figure, in ``unit``; ``None`` when there was nothing to check.
        unit: ``"flops"``, ``"bytes"`` or ``"s"``.

    Example:
        >>> BudgetCheck(name="max-flops", subject="forward", limit=40, value=48,
        ...             unit="flops").passed
        False
    """

    name: BudgetName
    subject: str
    limit: int | float
    value: int | float | None
    unit: BudgetUnit

    @property
    def passed(self) -> bool:
        """Whether the figure is within the limit (equal passes; nothing to check passes)."""
        return self.value is None or self.value <= self.limit

    def to_dict(self) -> dict[str, Any]:
        """One entry of the report's ``budgets`` section."""
        return {
            "name": self.name,
            "subject": self.subject,
            "limit": self.limit,
            "value": self.value,
            "unit": self.unit,
            "passed": self.passed,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """Everything one analysis found, as data. Renderers read it; they compute nothing.

    Attributes:
        equation: The normalised equation.
        dtype: Element type the byte figures use.
        itemsize: Bytes per element of ``dtype``.
        plan: The forward plan.
        forward_memory: Replay of the forward (inference) schedule.
        memory_limit_elements: The planner's limit on intermediates, if any.
        analysis_s: Wall seconds the analysis took.
        grad_operands: Positions of the operands whose gradient was modelled: the parsed
            ``grad`` when a strategy was modelled, else empty.
        gradients: Derived gradient contractions, if the independent strategy was modelled.
        strategies: Backward strategies, if analysed.
        inference_memory: Replay of the inference forward pass as the executor runs it
            (layout copies included), when strategies were analysed: the basis that
            their training peaks compare with.
        runs: Measured runs of strategies and baselines, if executed.
        warnings: Things the user should know (approximations, fallbacks).
        environment: Versions and platform.
        budgets: The budgets checked against this report (:mod:`einsum_analyze.report.budgets`).
        memory_limits: One row per memory limit of a sweep (empty for a single limit).
        search: The training-aware search, if one ran.
        recommended: The recommended plan, if a search ran.
        budget: The training budget against the strategies and the search, if set.
        roofline: Every strategy's steps against a device profile, if one was given
            (``--roofline``) or calibrated by a run.
    """

    equation: Equation
    dtype: str
    itemsize: int
    plan: Plan
    forward_memory: MemoryProfile
    memory_limit_elements: int | None
    analysis_s: float
    grad_operands: tuple[int, ...] = ()
    gradients: GradientPlan | None = None
    strategies: tuple[StrategyResult, ...] = ()
    inference_memory: MemoryProfile | None = None
    runs: tuple[Run, ...] = ()
    warnings: tuple[str, ...] = ()
    environment: Mapping[str, Any] = field(default_factory=dict)
    budgets: tuple[BudgetCheck, ...] = ()
    memory_limits: tuple[LimitRow, ...] = ()
    search: SearchResult | None = None
    recommended: Recommendation | None = None
    budget: BudgetSummary | None = None
    roofline: Roofline | None = None

    def __repr__(self) -> str:
        return f"Report({self.equation.explicit!r}, flops={self.plan.flops})"

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (schema ``schema/report.schema.json``)."""
        from .._version import __version__

        eq = self.equation
        itemsize = self.itemsize
        plan = self.plan.as_planned  # the path's figures as opt_einsum gives them
        mem = self.forward_memory
        out_elements = plan.steps[-1].output_elements
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "einsum-analyze", "version": __version__},
            "input": {"equation": eq.text, "shapes": [list(s) for s in eq.shapes],
                      "dtype": self.dtype},
            "equation": eq.explicit,
            "shapes": [list(s) for s in eq.shapes],
            "dtype": self.dtype,
            "itemsize": itemsize,
            "size_dict": dict(eq.size_dict),
            "forward": {
                "optimizer": plan.optimizer,
                "memory_limit_elements": self.memory_limit_elements,
                "path": [list(p) for p in plan.path],
                "flops": self.plan.user_flops,
                "log10_flops": _log10(self.plan.user_flops),
                **(
                    {"flops_after_normalisation": plan.flops}
                    if self.plan.user_flops != plan.flops
                    else {}
                ),
                "naive_flops": plan.naive_flops,
                "speedup": plan.speedup,
                "log10_speedup": plan.log10_speedup,
                "largest_intermediate_elements": plan.largest_intermediate_elements,
                "largest_intermediate_bytes": plan.largest_intermediate_elements * itemsize,
                "input_bytes": mem.input_bytes,
                "output_bytes": out_elements * itemsize,
                "peak_bytes": mem.peak_bytes,
                "peak_bytes_without_inputs": mem.peak_bytes_without_inputs,
                **(
                    {"executor_peak_bytes": self.inference_memory.peak_bytes}
                    if self.inference_memory is not None
                    else {}
                ),
                "steps": [_step_dict(step, itemsize) for step in plan.steps],
                **_pairwise_run(self.plan, itemsize),
                "tree": forward_tree(self.plan, itemsize),
            },
            "grad_operands": list(self.grad_operands),
            "timing": {"analysis_s": self.analysis_s},
            "environment": dict(self.environment),
            "warnings": list(self.warnings),
        }
        if self.gradients is not None:
            data["gradients"] = self.gradients.to_dicts(itemsize)
        if self.strategies:
            data["strategies"] = [self._strategy_dict(s) for s in self.strategies]
            if self.budget is not None:
                for entry in data["strategies"]:
                    entry["fits_budget"] = entry["peak_bytes"] <= self.budget.budget_bytes
        if self.runs:
            data["runs"] = [run.to_dict() for run in self.runs]
        if self.budgets:
            data["budgets"] = [check.to_dict() for check in self.budgets]
        if self.roofline is not None:
            data["roofline"] = self.roofline.to_dict()
        data.update(self._training_sections())
        return data

    def _strategy_dict(self, strategy: StrategyResult) -> dict[str, Any]:
        """One top-level ``strategies`` entry, with what the pictures draw."""
        entry = strategy.to_dict(self.itemsize)
        mem = strategy.memory
        entry["timeline"] = strategy_timeline(strategy.events, mem.live_bytes,
                                              mem.high_bytes, mem.peak_event)
        entry["fates"] = list(strategy_fates(self.plan, strategy.events))
        return entry

    def _training_sections(self) -> dict[str, Any]:
        """``memory_limits``, ``budget``, ``search``, ``pareto`` and ``recommended``."""
        data: dict[str, Any] = {}
        itemsize = self.itemsize
        budget = self.budget.budget_bytes if self.budget is not None else None
        if self.memory_limits:
            data["memory_limits"] = [row.to_dict(itemsize, budget) for row in self.memory_limits]
        if self.budget is not None:
            data["budget"] = self.budget.to_dict()
        if self.search is not None:
            found = self.search
            data["search"] = {
                "objective": found.objective,
                "candidates": found.candidates,
                "sources": list(found.sources),
                "search_s": found.search_s,
                "forward_optimal": found.forward_optimal.to_dict(itemsize),
                "training_optimal": found.training_optimal.to_dict(itemsize),
            }
            data["pareto"] = [plan.to_dict(itemsize) for plan in found.pareto]
        if self.recommended is not None:
            data["recommended"] = self.recommended.to_dict(itemsize)
            plan = self.recommended.plan.result
            # Its own memory timeline, for the pictures (its path may not be the report's).
            data["recommended"]["timeline"] = strategy_timeline(
                plan.events, plan.memory.live_bytes, plan.memory.high_bytes,
                plan.memory.peak_event)
        return data


def _log10(value: int) -> float:
    return math.log10(value) if value > 0 else 0.0


def _step_dict(step: Step, itemsize: int) -> dict[str, Any]:
    """One step of a path, as the JSON ``step`` definition has it."""
    return {
        "index": step.index,
        "operands": list(step.operands),
        "inputs": list(step.inputs),
        "output": step.output,
        "equation": step.equation,
        "summed": step.summed,
        "flops": step.flops,
        "output_elements": step.output_elements,
        "output_bytes": step.output_elements * itemsize,
    }


def _pairwise_run(plan: Plan, itemsize: int) -> dict[str, Any]:
    """``forward.pairwise``: the path that runs where the path as planned has a wide step."""
    if plan.wide is None:
        return {}
    largest = plan.largest_intermediate_elements
    return {"pairwise": {
        "path": [list(p) for p in plan.path],
        "flops": plan.flops,
        "largest_intermediate_elements": largest,
        "largest_intermediate_bytes": largest * itemsize,
        "steps": [_step_dict(step, itemsize) for step in plan.steps],
    }}


def environment() -> dict[str, Any]:
    """Versions and platform of this process (no torch import)."""
    return dict(_environment())


@functools.cache
def _environment() -> tuple[tuple[str, str], ...]:
    import opt_einsum

    return (
        ("python", platform.python_version()),
        ("platform", platform_name()),
        ("opt_einsum", opt_einsum.__version__),
    )


def platform_name() -> str:
    """``platform.platform()``'s name of this machine, without its subprocess on Linux.

    On Linux ``platform.platform()`` runs ``uname -p`` in a subprocess (about 9 ms, a
    thirtieth of the analysis-only command's cold start) for a processor name it then
    leaves out wherever it is unknown or the machine's; the same name is built here from
    ``os.uname()`` and the C library's own version string. Elsewhere, and where the C
    library does not say, ``platform.platform()`` itself.

    Example:
        ``Linux-6.18.44-fc-v1045-x86_64-with-glibc2.36``, as ``platform.platform()`` gives.
    """
    import os

    confstr = getattr(os, "confstr", None)
    if not hasattr(os, "uname"):
        return platform.platform()
    try:
        libc = confstr("CS_GNU_LIBC_VERSION") if confstr is not None else None
    except (OSError, ValueError):
        libc = None
    system, _, release, _, machine = os.uname()
    if system != "Linux" or not libc or len(libc.split()) != 2:
        return platform.platform()
    name, version = libc.split()
    return f"{system}-{release}-{machine}-with-{name}{version}"


def dump_json(data: Mapping[str, Any] | Sequence[Mapping[str, Any]], stream: IO[str]) -> None:
    """The one JSON writer: sorted keys, indent 2, trailing newline; NaN is refused.

    Counts stay exact however long: a 5,000-tensor network's naive FLOPs have thousands
    of digits, beyond Python's default limit on int-to-text conversion, lifted here.
    """
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        json.dump(data, stream, indent=2, sort_keys=True, allow_nan=False)
    finally:
        sys.set_int_max_str_digits(limit)
    stream.write("\n")


def load_schema() -> dict[str, Any]:
    """The JSON Schema every report validates against."""
    from importlib.resources import files

    text = files("einsum_analyze").joinpath("schema/report.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema

