"""Reading saved reports for a comparison: versions, upgrades, and figures that are numbers.

:func:`einsum_analyze.report.compare.compare_reports` reads both documents through this module
before it applies its rules: the document's kind (single or batch) and version
(:data:`READABLE_VERSIONS`; a version-1 report is mapped by :func:`upgrade_report`), and
every compared figure present is a number, else :class:`InputFileError`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, Literal

from ..errors import InputFileError
from .report import SCHEMA_VERSION

__all__ = [
    "FORWARD_FIGURES",
    "READABLE_VERSIONS",
    "RUN_FIGURES",
    "RUN_MEMORY",
    "STRATEGY_FIGURES",
    "DocumentKind",
    "Unit",
    "check_figures",
    "document_kind",
    "load_comparison_schema",
    "upgrade_report",
]

READABLE_VERSIONS: tuple[int, ...] = (1, SCHEMA_VERSION)
"""The ``schema_version`` values :func:`~.compare.compare_reports` reads (older ones are
upgraded)."""

Unit = Literal["flops", "bytes", "s", "ratio", ""]
DocumentKind = Literal["report", "batch"]

FORWARD_FIGURES: tuple[tuple[str, Unit], ...] = (("flops", "flops"), ("peak_bytes", "bytes"))
STRATEGY_FIGURES: tuple[tuple[str, Unit], ...] = (
    ("backward_flops", "flops"),
    ("retained_bytes", "bytes"),
    ("peak_bytes", "bytes"),
)
RUN_FIGURES = ("forward_s", "backward_s")
RUN_MEMORY: tuple[tuple[str, Unit], ...] = (
    ("peak_bytes_measured", "bytes"), ("retained_bytes_measured", "bytes"),
)


def load_comparison_schema() -> dict[str, Any]:
    """The JSON Schema of a comparison, ``schema/comparison.schema.json``.

    It describes :meth:`~.compare.Comparison.to_dict`.
    """
    import json
    from importlib.resources import files

    text = files("einsum_analyze").joinpath("schema/comparison.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def upgrade_report(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A report (single or batch) of an older readable version, in this version's keys.

    Version 1 to 2 (docs/schema.md, History):

    - ``forward.steps[].removed`` becomes ``summed``;
    - ``grad_operands``, absent without ``gradients``, is filled in from the strategies'
      ``operands`` lists (every strategy lists each differentiated operand), else ``[]``;
    - ``runs[].peak_bytes_measured`` and ``peak_bytes_predicted`` counted the bytes
      above the inputs: they become ``peak_bytes_measured_without_inputs`` and
      ``peak_bytes_predicted_without_inputs``, and the keys that count the inputs are
      absent.

    A report of this version comes back as it is; the input is never modified.

    Example:
        >>> old = {"schema_version": 1, "forward": {"steps": [{"removed": "b"}]}}
        >>> new = upgrade_report(old)
        >>> new["schema_version"], new["forward"]["steps"], new["grad_operands"]
        (2, [{'summed': 'b'}], [])
    """
    if data.get("schema_version") != 1:
        return data
    upgraded: dict[str, Any] = copy.deepcopy(dict(data))
    upgraded["schema_version"] = SCHEMA_VERSION
    cases = upgraded.get("cases")
    if isinstance(cases, list):
        for case in cases:
            if isinstance(case, dict) and isinstance(case.get("report"), Mapping):
                case["report"] = upgrade_report({**case["report"], "schema_version": 1})
        return upgraded
    forward = upgraded.get("forward")
    if isinstance(forward, dict):
        for step in forward.get("steps", ()):
            if isinstance(step, dict) and "removed" in step:
                step["summed"] = step.pop("removed")
    if "grad_operands" not in upgraded:
        strategies = upgraded.get("strategies")
        first = strategies[0] if isinstance(strategies, list) and strategies else {}
        upgraded["grad_operands"] = sorted(
            int(entry["operand"]) for entry in first.get("operands", ())
            if isinstance(entry, Mapping) and "operand" in entry
        )
    for run in upgraded.get("runs", ()):
        if not isinstance(run, dict):
            continue
        for key in ("peak_bytes_measured", "peak_bytes_predicted"):
            if key in run:
                run[f"{key}_without_inputs"] = run.pop(key)
    return upgraded


def document_kind(data: object, which: str) -> DocumentKind:
    """``"report"`` or ``"batch"``; :class:`InputFileError` for anything else (``which``)."""
    if not isinstance(data, Mapping) or "schema_version" not in data:
        raise InputFileError(f"{which} is not an einsum-analyze report (no schema_version)")
    version = data["schema_version"]
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise InputFileError(
            f"{which} has schema_version {version!r}; this einsum-analyze reads versions "
            f"{readable} (docs/schema.md)"
        )
    if isinstance(data.get("cases"), list):
        return "batch"
    if isinstance(data.get("forward"), Mapping):
        return "report"
    raise InputFileError(f"{which} has neither 'forward' (a report) nor 'cases' (a batch)")


def check_figures(data: Mapping[str, Any], which: str) -> None:
    """Raise :class:`InputFileError` for a compared figure present but not a number."""

    def check(value: object, where: str) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            raise InputFileError(f"{which} is corrupted: {where} is {value!r}, not a number")

    def report(doc: Mapping[str, Any], prefix: str) -> None:
        forward = doc.get("forward")
        if not isinstance(forward, Mapping):
            raise InputFileError(f"{which} is corrupted: {prefix}forward is not a table")
        for figure, _ in FORWARD_FIGURES:
            check(forward.get(figure), f"{prefix}forward.{figure}")
        for key in ("strategies", "runs", "budgets"):
            if doc.get(key) is not None and not isinstance(doc.get(key), list):
                raise InputFileError(f"{which} is corrupted: {prefix}{key} is not a list")
        for number, strategy in enumerate(doc.get("strategies") or ()):
            if not isinstance(strategy, Mapping):
                raise InputFileError(f"{which} is corrupted: {prefix}strategies[{number}]")
            for figure, _ in STRATEGY_FIGURES:
                check(strategy.get(figure), f"{prefix}strategies[{number}].{figure}")
        for number, run in enumerate(doc.get("runs") or ()):
            if not isinstance(run, Mapping):
                raise InputFileError(f"{which} is corrupted: {prefix}runs[{number}]")
            for figure in RUN_FIGURES:
                stats = run.get(figure)
                if stats is not None and not isinstance(stats, Mapping):
                    raise InputFileError(f"{which} is corrupted: {prefix}runs[{number}]."
                                         f"{figure} is {stats!r}")
                for key in ("median", "iqr"):
                    check(stats.get(key) if stats else None,
                          f"{prefix}runs[{number}].{figure}.{key}")
            for figure, _ in RUN_MEMORY:
                check(run.get(figure), f"{prefix}runs[{number}].{figure}")

    if isinstance(data.get("cases"), list):
        for number, case in enumerate(data["cases"]):
            if not isinstance(case, Mapping):
                raise InputFileError(f"{which} is corrupted: cases[{number}] is not a table")
            if isinstance(case.get("report"), Mapping):
                report(case["report"], f"cases[{number}].report.")
        return
    report(data, "")
