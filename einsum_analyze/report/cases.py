"""Batch mode: many cases read from one JSON or TOML file, analysed into one document.

A cases file (docs/ci.md) holds an optional ``defaults`` table and a list ``cases``
(TOML ``[[cases]]``; in JSON a bare list is accepted too); other top-level keys are
notes and are ignored. Each case has a ``name``, an
``equation``, ``shapes`` or ``sizes``, and optionally ``dtype``, ``optimize``,
``memory_limit`` (one limit, or a list of limits to sweep: ``["none", "1e6",
"max_input"]`` or ``"none,1e6"``), ``grad``, ``strategy``, ``budget`` (a training budget,
e.g. ``"40GiB"``), ``objective`` (``flops``, ``memory`` or ``balanced``), ``budgets`` and
the run options ``device``, ``repeats`` and ``warmup``; ``kind`` and ``description`` are
free text. An unknown key, in a case or in ``defaults``, is an error that names it. Values
come from the case, else the file's ``defaults``, else the command line.

A case that cannot be read becomes an error entry and the others are still read:
problems of the file itself (unparsable, no list of cases) raise :class:`InputFileError`.
This module catches :class:`EinsumAnalyzeError` per case, and only that, because
recording it in the document is the feature; bugs still propagate. Analysing the cases
is the analysis' work (:func:`einsum_analyze.analysis.run_cases`, which records a case
that cannot be analysed the same way); this module holds the records of a batch.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import EinsumAnalyzeError, InputFileError
from ..model.parsing import parse_strategy_names, shapes_from_value, sizes_from_value
from ..model.planning import DEFAULT_MAX_SEARCH_S
from ..model.types import Shape
from ..strategies import STRATEGIES
from .budgets import Budgets
from .report import SCHEMA_VERSION, Report

__all__ = [
    "BatchReport",
    "Case",
    "CaseDefaults",
    "CaseEntry",
    "CaseOutcome",
    "CasesFormat",
    "cases_format",
    "parse_cases",
]

CasesFormat = Literal["json", "toml"]
CaseStatus = Literal["ok", "budget-exceeded", "error"]

_OPTION_KEYS = ("dtype", "optimize", "memory_limit", "grad", "strategy", "budgets", "budget",
                "objective", "device", "repeats", "warmup")
_CASE_KEYS = frozenset(
    ("name", "equation", "shapes", "sizes", "kind", "description", *_OPTION_KEYS)
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseDefaults:
    """Options every case starts from (the command line's values).

    Attributes:
        dtype: Element type of byte figures.
        optimize: opt_einsum optimizer name.
        memory_limit: The planner's limit (elements, ``"max_input"`` or bytes text), or
            a list of limits to sweep (``None`` or ``"none"``: no limit).
        grad: Operands that need a gradient (``"all"``, ``"0,3"``, or positions).
        strategies: Backward strategies to model.
        budgets: Budgets every case is checked against; a case's own override them.
        budget: Training budget on the peak (bytes or text such as ``"40GiB"``).
        objective: The search's objective (None: search only with a budget or a sweep).
        devices: Where the case runs (``("cpu",)``, ``("none",)``); None: the command line's.
        repeats: Timed blocks per phase; None: the command line's.
        warmup: Untimed calls first; None: the command line's.
        max_search_s: Seconds a path search may take (``--max-search-time``; the
            command line's for every case, not a case key).
    """

    dtype: str = "float32"
    optimize: str = "auto"
    memory_limit: int | str | tuple[int | str | None, ...] | None = None
    grad: str | tuple[int, ...] = "all"
    strategies: tuple[str, ...] = STRATEGIES
    budgets: Budgets = field(default_factory=Budgets)
    budget: int | str | None = None
    objective: str | None = None
    devices: tuple[str, ...] | None = None
    repeats: int | None = None
    warmup: int | None = None
    max_search_s: float | None = DEFAULT_MAX_SEARCH_S


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One equation to analyse, with its options resolved.

    Attributes:
        name: Unique within the file; batch comparison matches cases by it.
        equation: The einsum.
        shapes: Operand shapes, or None when ``sizes`` is given.
        sizes: Index sizes, or None when ``shapes`` is given.
        options: Everything else, defaults applied.
    """

    name: str
    equation: str
    shapes: tuple[Shape, ...] | None
    sizes: Mapping[str, int] | None
    options: CaseDefaults


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseEntry:
    """One entry of a cases file: a case ready to run, or why it cannot run."""

    name: str
    case: Case | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseOutcome:
    """What one case produced: a report (its budgets checked) or an error message."""

    name: str
    report: Report | None = None
    error: str | None = None

    @property
    def status(self) -> CaseStatus:
        """``"error"``, ``"budget-exceeded"`` or ``"ok"``."""
        if self.report is None:
            return "error"
        if any(not check.passed for check in self.report.budgets):
            return "budget-exceeded"
        return "ok"

    def to_dict(self) -> dict[str, Any]:
        """One entry of the batch document's ``cases`` list."""
        data: dict[str, Any] = {"name": self.name, "status": self.status}
        if self.report is not None:
            data["report"] = self.report.to_dict()
        else:
            data["error"] = self.error
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchReport:
    """Every case of a cases file, in file order.

    Attributes:
        cases: One outcome per case.
    """

    cases: tuple[CaseOutcome, ...]

    def __repr__(self) -> str:
        return f"BatchReport({len(self.cases)} cases)"

    @property
    def has_errors(self) -> bool:
        """Whether any case could not be analysed."""
        return any(case.status == "error" for case in self.cases)

    @property
    def has_budget_failures(self) -> bool:
        """Whether any analysed case exceeded a budget."""
        return any(case.status == "budget-exceeded" for case in self.cases)

    def to_dict(self) -> dict[str, Any]:
        """The batch document (schema ``$defs/batch`` of ``report.schema.json``)."""
        from .._version import __version__

        statuses = [case.status for case in self.cases]
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "einsum-analyze", "version": __version__},
            "cases": [case.to_dict() for case in self.cases],
            "summary": {
                "total": len(statuses),
                "ok": statuses.count("ok"),
                "budget_exceeded": statuses.count("budget-exceeded"),
                "errors": statuses.count("error"),
            },
        }


def cases_format(path: str) -> CasesFormat:
    """The format of a cases file, from its suffix (``.json`` or ``.toml``).

    Raises:
        InputFileError: Another suffix.

    Example:
        >>> cases_format("ci/cases.toml")
        'toml'
    """
    lowered = path.lower()
    if lowered.endswith(".json"):
        return "json"
    if lowered.endswith(".toml"):
        return "toml"
    raise InputFileError(f"cases file {path!r} must end in .json or .toml")


def parse_cases(
    text: str, fmt: CasesFormat, defaults: CaseDefaults | None = None
) -> tuple[CaseEntry, ...]:
    """Read a cases file's text into entries, each a runnable case or an error.

    Args:
        text: The file's contents.
        fmt: ``"json"`` or ``"toml"``.
        defaults: Options a case and the file's ``defaults`` table do not set.

    Returns:
        One entry per case, in file order.

    Raises:
        InputFileError: The text does not parse, or holds no list of cases.

    Example:
        >>> entries = parse_cases('[{"name": "mm", "equation": "ab,bc->ac", '
        ...                       '"shapes": [[2, 3], [3, 4]]}]', "json")
        >>> entries[0].case.shapes
        ((2, 3), (3, 4))
    """
    data = _load(text, fmt)
    if isinstance(data, list):
        data = {"cases": data}
    if not isinstance(data, dict):
        raise InputFileError("a cases file holds a table with a list 'cases', or a list")
    raw_cases = data.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise InputFileError("cases file has no non-empty list 'cases'")
    base = defaults or CaseDefaults()
    file_defaults = data.get("defaults", {})
    if not isinstance(file_defaults, dict):
        raise InputFileError("cases file 'defaults' must be a table")
    unknown = sorted(set(file_defaults) - set(_OPTION_KEYS))
    if unknown:
        raise InputFileError(
            f"cases file 'defaults' has unknown key {unknown[0]!r}; expected: "
            f"{', '.join(sorted(_OPTION_KEYS))}"
        )
    try:
        base = _with_options(base, file_defaults, where="defaults")
    except EinsumAnalyzeError as err:
        raise InputFileError(f"cases file {err}") from err
    entries: list[CaseEntry] = []
    seen: set[str] = set()
    for number, raw in enumerate(raw_cases):
        name = raw.get("name") if isinstance(raw, dict) else None
        if not isinstance(name, str) or not name.strip():
            entries.append(CaseEntry(name=f"cases[{number}]",
                                     error=f"case {number} has no name (a non-empty string)"))
            continue
        if name in seen:
            entries.append(CaseEntry(name=name, error=f"case {number}: the name {name!r} is "
                                     "already used by an earlier case"))
            continue
        seen.add(name)
        try:
            entries.append(CaseEntry(name=name, case=_read_case(name, raw, base)))
        except EinsumAnalyzeError as err:
            entries.append(CaseEntry(name=name, error=str(err)))
    return tuple(entries)


def _load(text: str, fmt: CasesFormat) -> object:
    match fmt:
        case "json":
            try:
                return json.loads(text)
            except json.JSONDecodeError as err:
                raise InputFileError(
                    f"cases file is not valid JSON: {err.msg} at line {err.lineno} "
                    f"column {err.colno}"
                ) from err
            except (ValueError, RecursionError) as err:  # huge integers, deep nesting
                raise InputFileError(f"cases file is not readable JSON: {_first_line(err)}") \
                    from err
        case "toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # pragma: no cover - exercised on Python 3.10 only
                import tomli as tomllib
            try:
                return tomllib.loads(text)
            except tomllib.TOMLDecodeError as err:
                raise InputFileError(f"cases file is not valid TOML: {err}") from err
            except (ValueError, RecursionError) as err:  # huge integers, deep nesting
                raise InputFileError(f"cases file is not readable TOML: {_first_line(err)}") \
                    from err
    raise AssertionError(f"unknown cases format {fmt!r}")


def _first_line(err: BaseException) -> str:
    text = str(err).splitlines()
    return text[0] if text else type(err).__name__


def _read_case(name: str, raw: Mapping[str, Any], base: CaseDefaults) -> Case:
    unknown = sorted(set(raw) - _CASE_KEYS)
    if unknown:
        raise InputFileError(
            f"case {name!r} has unknown key {unknown[0]!r}; expected: "
            f"{', '.join(sorted(_CASE_KEYS))}"
        )
    equation = raw.get("equation")
    if not isinstance(equation, str):
        raise InputFileError(f"case {name!r} has no equation (a string such as 'ab,bc->ac')")
    has_shapes, has_sizes = "shapes" in raw, "sizes" in raw
    if has_shapes == has_sizes:
        raise InputFileError(f"case {name!r} needs exactly one of 'shapes' and 'sizes'")
    where = f"case {name!r}"
    shapes = shapes_from_value(raw["shapes"], where) if has_shapes else None
    sizes = sizes_from_value(raw["sizes"], where) if has_sizes else None
    options = _with_options(base, raw, where=f"case {name!r}")
    return Case(name=name, equation=equation, shapes=shapes, sizes=sizes, options=options)


def _with_options(base: CaseDefaults, raw: Mapping[str, Any], *, where: str) -> CaseDefaults:
    """``base`` with the option keys ``raw`` sets; raises for unreadable values."""
    changes: dict[str, Any] = {}
    for key in _OPTION_KEYS:
        if key not in raw:
            continue
        value = raw[key]
        match key:
            case "dtype" | "optimize":
                if not isinstance(value, str):
                    raise InputFileError(f"{where} {key} is {value!r}; expected a name")
                changes[key] = value
            case "memory_limit":
                changes[key] = _memory_limit_value(value, where)
            case "budget":
                if isinstance(value, bool) or not isinstance(value, int | str):
                    raise InputFileError(f"{where} budget is {value!r}; expected bytes such "
                                         "as '40GiB'")
                changes[key] = value
            case "objective":
                if not isinstance(value, str):
                    raise InputFileError(f"{where} objective is {value!r}; expected flops, "
                                         "memory or balanced")
                changes[key] = value
            case "grad":
                if isinstance(value, list) and all(
                    isinstance(k, int) and not isinstance(k, bool) for k in value
                ):
                    changes[key] = tuple(value)
                elif isinstance(value, str):
                    changes[key] = value
                else:
                    raise InputFileError(f"{where} grad is {value!r}; expected 'all', 'none', "
                                     "text such as '0,3' or a list of positions")
            case "strategy":
                changes["strategies"] = parse_strategy_names(value, where)
            case "device":
                if isinstance(value, str):
                    value = [value]
                if not isinstance(value, list) or not value or not all(
                    isinstance(name, str) for name in value
                ):
                    raise InputFileError(f"{where} device is {value!r}; expected a name such "
                                         "as 'cpu', 'cuda', 'auto' or 'none', or a list")
                changes["devices"] = tuple(value)
            case "repeats" | "warmup":
                least = 1 if key == "repeats" else 0
                if isinstance(value, bool) or not isinstance(value, int) or value < least:
                    raise InputFileError(f"{where} {key} is {value!r}; expected a whole "
                                         f"number of at least {least}")
                changes[key] = value
            case "budgets":
                if not isinstance(value, dict):
                    raise InputFileError(f"{where} budgets must be a table such as "
                                     "{max_peak = '1GiB'}")
                changes[key] = base.budgets.merged(
                    Budgets.from_mapping(value, where=f"{where} budgets")
                )
    return replace(base, **changes)


def _memory_limit_value(
    value: object, where: str
) -> int | str | tuple[int | str | None, ...] | None:
    """A case's ``memory_limit``: one limit, or a list of limits (``none`` for no limit)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise InputFileError(f"{where} memory_limit is an empty list")
    limits: list[int | str | None] = []
    for item in items:
        if item is None or (isinstance(item, str) and item.strip().lower() == "none"):
            limits.append(None)
        elif isinstance(item, bool) or not isinstance(item, int | str):
            raise InputFileError(f"{where} memory_limit is {value!r}; expected elements, "
                                 "'max_input', bytes such as '512MiB', or a list of them")
        else:
            limits.append(item)
    if not isinstance(value, list):
        return limits[0]
    return tuple(limits)
