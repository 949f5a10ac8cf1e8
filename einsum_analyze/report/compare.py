"""Compare two saved reports, before and after a change, figure by figure.

Rules (docs/ci.md):

- FLOPs and modelled memory are exact: any increase is a regression, any decrease an
  improvement. Compared: forward ``flops`` and ``peak_bytes``; per strategy (matched by
  name) ``backward_flops``, ``retained_bytes`` and ``peak_bytes``.
- Timings are judged against their recorded spread: a run's median ``forward_s`` or
  ``backward_s`` (runs matched by strategy, backend and device) regresses when it grows
  by more than ``tolerance`` (0.05: 5 %) of the median *plus* the two interquartile
  ranges recorded (``iqr``, before and after), and improves when it shrinks by as much.
  Two runs of the same code thus never regress by noise their own spreads show. A
  change of exactly the bound (up to float rounding) is unchanged.
- Measured memory is exact: each run's ``peak_bytes_measured`` and
  ``retained_bytes_measured`` (the allocator's figures) regress on any increase.
- Budget outcomes: a budget (matched by name and subject) that passed and now fails
  regresses; one that failed and now passes improves.
- A figure that is present but not a number (``"flops": "abc"``) makes the document
  unreadable: :class:`InputFileError`, never a silent ``removed``.
- A strategy, run or case present on one side only is ``added`` or ``removed``, not a
  regression. A batch case that had a report before and an error after is a regression.
- A changed memory limit (``forward.memory_limit_elements``, or the list of a limit
  sweep) is a change of input, never a regression: it is noted, and the figures that
  depend on it (forward, strategies, recommended plan) are not compared. The rows of a
  limit sweep are matched by limit: a limit on both sides is compared like the forward
  pass and strategies (exact), a limit on one side only is ``added`` or ``removed``. A
  changed training budget or objective is noted likewise, and the recommended plan is
  compared (training FLOPs and peak, exact) only when both are unchanged.
- Analysis time, versions and environment are never compared.

Both documents must be both single or both batch reports, of this schema version or of
version 1: a version-1 report is read through :func:`upgrade_report`, which maps its
keys to this version's, and the comparison notes it. Other versions are refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InputFileError
from .report import SCHEMA_VERSION
from .saved import (
    FORWARD_FIGURES,
    READABLE_VERSIONS,
    RUN_FIGURES,
    RUN_MEMORY,
    STRATEGY_FIGURES,
    DocumentKind,
    Unit,
    check_figures,
    document_kind,
    load_comparison_schema,
    upgrade_report,
)

__all__ = [
    "READABLE_VERSIONS",
    "Change",
    "ChangeStatus",
    "Comparison",
    "compare_reports",
    "load_comparison_schema",
    "upgrade_report",
]

ChangeStatus = Literal["regressed", "improved", "unchanged", "added", "removed"]
Rule = Literal["exact", "relative", "presence", "budget"]

_RUN_IDENTITY = ("strategy", "backend", "device")
_INPUT_KEYS = ("equation", "shapes", "dtype")


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One figure, before and after.

    Attributes:
        case: The batch case's name; ``None`` for single reports.
        subject: ``"forward"``, ``"strategy reverse"``, ``"run 0 (reverse, torch, cpu)"``,
            or ``"case"`` for a batch case as a whole.
        figure: The report key compared, e.g. ``"backward_flops"``; ``""`` for a case.
        unit: ``"flops"``, ``"bytes"``, ``"s"``, or ``""``.
        before: The figure before (``None``: absent).
        after: The figure after (``None``: absent).
        rule: ``"exact"``, ``"relative"`` (timings) or ``"presence"``.
        status: The verdict.
        detail: Free text, e.g. the error a case now raises.
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
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Every figure compared between two reports.

    Attributes:
        kind: ``"report"`` (single) or ``"batch"``.
        tolerance: Relative tolerance applied to timings.
        changes: Every compared figure, unchanged ones included, in report order.
        notes: Differences that are not figures (a changed equation, shapes, dtype).
    """

    kind: DocumentKind
    tolerance: float
    changes: tuple[Change, ...]
    notes: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Comparison({self.kind}, {len(self.regressions)} regressed)"

    @property
    def regressions(self) -> tuple[Change, ...]:
        """The changes that regressed."""
        return tuple(c for c in self.changes if c.status == "regressed")

    @property
    def has_regressions(self) -> bool:
        """Whether any figure regressed."""
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        """The comparison document (``schema/comparison.schema.json``)."""
        from .._version import __version__

        statuses = [c.status for c in self.changes]
        return {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "einsum-analyze", "version": __version__},
            "kind": self.kind,
            "tolerance": self.tolerance,
            "regressed": self.has_regressions,
            "summary": {
                status: statuses.count(status)
                for status in ("regressed", "improved", "unchanged", "added", "removed")
            },
            "changes": [c.to_dict() for c in self.changes],
            "notes": list(self.notes),
        }


def compare_reports(
    before: object,
    after: object,
    *,
    tolerance: float = 0.05,
    names: tuple[str, str] = ("BEFORE", "AFTER"),
) -> Comparison:
    """Compare two reports (single or batch) read back from JSON.

    Args:
        before: The report before the change.
        after: The report after the change.
        tolerance: Relative tolerance for timings, at least 0 (0.05: 5 %).
        names: What to call the two documents in messages, e.g. their file names.

    Returns:
        The :class:`Comparison`.

    Raises:
        InputFileError: Not reports of a version in :data:`READABLE_VERSIONS`, or one
            single and one batch.

    Example:
        >>> from einsum_analyze import analyze
        >>> old = analyze("ab,bc->ac", [(2, 3), (3, 4)]).to_dict()
        >>> new = analyze("ab,bc->ac", [(2, 3), (3, 5)]).to_dict()
        >>> [c.figure for c in compare_reports(old, new).regressions][:2]
        ['flops', 'peak_bytes']
    """
    if isinstance(tolerance, bool) or not tolerance >= 0:
        raise InputFileError(f"tolerance is {tolerance!r}; expected a number of at least 0")
    name_before, name_after = names
    kind_before = document_kind(before, name_before)
    kind_after = document_kind(after, name_after)
    if kind_before != kind_after:
        raise InputFileError(
            f"{name_before} is a {kind_before} and {name_after} a {kind_after}; "
            "compare like with like"
        )
    assert isinstance(before, Mapping) and isinstance(after, Mapping)
    changes: list[Change] = []
    notes: list[str] = []
    for name, data in ((name_before, before), (name_after, after)):
        if data["schema_version"] != SCHEMA_VERSION:
            notes.append(f"{name} is a schema_version {data['schema_version']} report, read "
                         f"as version {SCHEMA_VERSION} (docs/schema.md)")
    before, after = upgrade_report(before), upgrade_report(after)
    check_figures(before, name_before)
    check_figures(after, name_after)
    if kind_before == "report":
        _compare_single(before, after, None, tolerance, changes, notes)
    else:
        _compare_batch(before, after, tolerance, changes, notes)
    return Comparison(kind=kind_before, tolerance=float(tolerance), changes=tuple(changes),
                      notes=tuple(notes))


def _number(value: object) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _median(stats: object) -> float | None:
    if isinstance(stats, Mapping):
        value = _number(stats.get("median"))
        return None if value is None else float(value)
    return None


def _iqr(stats: object) -> float:
    if isinstance(stats, Mapping):
        value = _number(stats.get("iqr"))
        return float(value) if value is not None else 0.0
    return 0.0


def _verdict(
    before: int | float | None, after: int | float | None, rule: Rule, tolerance: float,
    spread: float = 0.0,
) -> ChangeStatus:
    if before is None and after is None:
        return "unchanged"
    if before is None:
        return "added"
    if after is None:
        return "removed"
    if rule == "relative":
        margin = before * tolerance + spread
        if _beyond(after, before + margin):
            return "regressed"
        if _beyond(before - margin, after):
            return "improved"
        return "unchanged"
    if after > before:
        return "regressed"
    if after < before:
        return "improved"
    return "unchanged"


def _beyond(larger: float, bound: float) -> bool:
    """``larger > bound``, where a bound reached up to float rounding is not beyond.

    With a 15 % tolerance, ``0.115`` after ``0.1`` is at the tolerance although
    ``0.1 * 1.15`` is ``0.11499999999999999`` in floats; likewise ``0.009`` after ``0.010``
    with 10 % (``0.010 * 0.9`` is ``0.009000000000000001``).
    """
    return larger > bound and not math.isclose(larger, bound, rel_tol=1e-12, abs_tol=0.0)


def _add(
    changes: list[Change],
    case: str | None,
    subject: str,
    figure: str,
    unit: Unit,
    before: int | float | None,
    after: int | float | None,
    rule: Rule,
    tolerance: float,
    spread: float = 0.0,
) -> None:
    detail = f"recorded IQRs together {spread:.3g} s" if spread else ""
    changes.append(Change(case=case, subject=subject, figure=figure, unit=unit, before=before,
                          after=after, rule=rule,
                          status=_verdict(before, after, rule, tolerance, spread),
                          detail=detail))


def _by_name(items: object) -> dict[str, Mapping[str, Any]]:
    if not isinstance(items, list):
        return {}
    return {str(s["name"]): s for s in items if isinstance(s, Mapping) and "name" in s}


def _runs_by_key(items: object) -> dict[str, Mapping[str, Any]]:
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


def _compare_single(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    case: str | None,
    tolerance: float,
    changes: list[Change],
    notes: list[str],
) -> None:
    where = f"case {case!r}: " if case is not None else ""
    for key in _INPUT_KEYS:
        if before.get(key) != after.get(key):
            notes.append(f"{where}{key} changed from {before.get(key)!r} to {after.get(key)!r}")
    fwd_before, fwd_after = before.get("forward", {}), after.get("forward", {})
    if fwd_before.get("optimizer") != fwd_after.get("optimizer"):
        notes.append(f"{where}optimizer changed from {fwd_before.get('optimizer')!r} "
                     f"to {fwd_after.get('optimizer')!r}")
    same_limit = _compare_limits(before, after, case, tolerance, changes, notes)
    _compare_recommended(before, after, case, same_limit, tolerance, changes, notes)
    if not same_limit:
        _compare_runs(before, after, case, tolerance, changes)
        return
    for figure, unit in FORWARD_FIGURES:
        _add(changes, case, "forward", figure, unit, _number(fwd_before.get(figure)),
             _number(fwd_after.get(figure)), "exact", tolerance)
    strategies_before = _by_name(before.get("strategies"))
    strategies_after = _by_name(after.get("strategies"))
    for name in _union(strategies_before, strategies_after):
        old, new = strategies_before.get(name, {}), strategies_after.get(name, {})
        for figure, unit in STRATEGY_FIGURES:
            _add(changes, case, f"strategy {name}", figure, unit, _number(old.get(figure)),
                 _number(new.get(figure)), "exact", tolerance)
    _compare_runs(before, after, case, tolerance, changes)


def _limit_key(report: Mapping[str, Any]) -> tuple[object, ...]:
    """The memory limit(s) a report was analysed under: its input, not a figure."""
    rows = report.get("memory_limits")
    if isinstance(rows, list) and rows:
        return tuple(row.get("limit_elements") for row in rows if isinstance(row, Mapping))
    forward = report.get("forward", {})
    return (forward.get("memory_limit_elements") if isinstance(forward, Mapping) else None,)


def _compare_limits(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    case: str | None,
    tolerance: float,
    changes: list[Change],
    notes: list[str],
) -> bool:
    """Note a changed limit; compare sweep rows by limit. Whether the limit is unchanged."""
    where = f"case {case!r}: " if case is not None else ""
    old_key, new_key = _limit_key(before), _limit_key(after)
    same = old_key[:1] == new_key[:1]
    if old_key != new_key:
        notes.append(f"{where}memory limit changed from {_limit_text(old_key)} to "
                     f"{_limit_text(new_key)}: a change of input, not a regression"
                     + ("" if same else "; the figures that depend on it are not compared"))
    rows_before = _rows_by_limit(before.get("memory_limits"))
    rows_after = _rows_by_limit(after.get("memory_limits"))
    for limit in _union(rows_before, rows_after):
        old, new = rows_before.get(limit), rows_after.get(limit)
        subject = f"memory limit {limit}"
        if old is None or new is None:
            changes.append(Change(case=case, subject=subject, figure="", unit="", before=None,
                                  after=None, rule="presence",
                                  status="added" if old is None else "removed",
                                  detail="a limit of the sweep (a change of input)"))
            continue
        row_figures: tuple[tuple[str, Unit], ...] = (
            ("forward_flops", "flops"), ("inference_peak_bytes", "bytes"))
        for figure, unit in row_figures:
            _add(changes, case, subject, figure, unit, _number(old.get(figure)),
                 _number(new.get(figure)), "exact", tolerance)
        old_s, new_s = _by_name(old.get("strategies")), _by_name(new.get("strategies"))
        for name in _union(old_s, new_s):
            for figure, unit in STRATEGY_FIGURES:
                _add(changes, case, f"{subject}, strategy {name}", figure, unit,
                     _number(old_s.get(name, {}).get(figure)),
                     _number(new_s.get(name, {}).get(figure)), "exact", tolerance)
    return same


def _limit_text(key: tuple[object, ...]) -> str:
    texts = ["none" if value is None else f"{value} elements" for value in key]
    return ", ".join(texts) if len(texts) > 1 else texts[0]


def _rows_by_limit(rows: object) -> dict[str, Mapping[str, Any]]:
    if not isinstance(rows, list):
        return {}
    found: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if isinstance(row, Mapping):
            value = row.get("limit_elements")
            found.setdefault("none" if value is None else f"{value} elements", row)
    return found


def _compare_recommended(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    case: str | None,
    same_limit: bool,
    tolerance: float,
    changes: list[Change],
    notes: list[str],
) -> None:
    """The recommended plan's training FLOPs and peak, when its inputs are unchanged."""
    where = f"case {case!r}: " if case is not None else ""
    old, new = before.get("recommended"), after.get("recommended")
    if not isinstance(old, Mapping) and not isinstance(new, Mapping):
        return
    old = old if isinstance(old, Mapping) else {}
    new = new if isinstance(new, Mapping) else {}
    inputs_same = same_limit
    for key in ("budget_bytes", "objective"):
        if old and new and old.get(key) != new.get(key):
            notes.append(f"{where}recommended plan's {key} changed from {old.get(key)!r} to "
                         f"{new.get(key)!r}: a change of input, not a regression")
            inputs_same = False
    if not inputs_same:
        return
    plan_figures: tuple[tuple[str, Unit], ...] = (
        ("training_flops", "flops"), ("peak_bytes", "bytes"))
    for figure, unit in plan_figures:
        _add(changes, case, "recommended", figure, unit, _number(old.get(figure)),
             _number(new.get(figure)), "exact", tolerance)


def _compare_runs(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    case: str | None,
    tolerance: float,
    changes: list[Change],
) -> None:
    runs_before = _runs_by_key(before.get("runs"))
    runs_after = _runs_by_key(after.get("runs"))
    for key in _union(runs_before, runs_after):
        old, new = runs_before.get(key, {}), runs_after.get(key, {})
        for figure in RUN_FIGURES:
            _add(changes, case, key, figure, "s", _median(old.get(figure)),
                 _median(new.get(figure)), "relative", tolerance,
                 _iqr(old.get(figure)) + _iqr(new.get(figure)))
        for figure, unit in RUN_MEMORY:
            _add(changes, case, key, figure, unit, _number(old.get(figure)),
                 _number(new.get(figure)), "exact", tolerance)
    _compare_budgets(before, after, case, changes)


def _compare_budgets(
    before: Mapping[str, Any], after: Mapping[str, Any], case: str | None,
    changes: list[Change],
) -> None:
    """A budget that passed and now fails regresses; the reverse improves."""

    def outcomes(doc: Mapping[str, Any]) -> dict[str, bool]:
        return {f"budget {b.get('name')} on {b.get('subject')}": bool(b.get("passed"))
                for b in doc.get("budgets") or () if isinstance(b, Mapping)}

    old, new = outcomes(before), outcomes(after)
    for subject in _union(old, new):
        was, now = old.get(subject), new.get(subject)
        if was is None or now is None:
            status: ChangeStatus = "added" if was is None else "removed"
        elif was == now:
            status = "unchanged"
        else:
            status = "regressed" if was else "improved"
        words = {True: "passed", False: "exceeded", None: "absent"}
        changes.append(Change(case=case, subject=subject, figure="passed", unit="",
                              before=None if was is None else int(was),
                              after=None if now is None else int(now), rule="budget",
                              status=status, detail=f"{words[was]} -> {words[now]}"))


def _compare_batch(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    tolerance: float,
    changes: list[Change],
    notes: list[str],
) -> None:
    cases_before = _by_name(before["cases"])
    cases_after = _by_name(after["cases"])
    for name in _union(cases_before, cases_after):
        old, new = cases_before.get(name), cases_after.get(name)
        old_report = old.get("report") if old is not None else None
        new_report = new.get("report") if new is not None else None
        status: ChangeStatus | None = None
        detail = ""
        if old is None:
            status = "added"
        elif new is None:
            status = "removed"
        elif old_report is not None and new_report is None:
            status, detail = "regressed", f"now fails: {new.get('error', '')}"
        elif old_report is None and new_report is not None:
            status, detail = "improved", f"no longer fails: {old.get('error', '')}"
        elif old_report is None:
            status, detail = "unchanged", f"fails before and after: {new.get('error', '')}"
        if status is not None:
            changes.append(Change(case=name, subject="case", figure="", unit="", before=None,
                                  after=None, rule="presence", status=status, detail=detail))
            continue
        assert isinstance(old_report, Mapping) and isinstance(new_report, Mapping)
        _compare_single(old_report, new_report, name, tolerance, changes, notes)


def _union(first: Mapping[str, Any], second: Mapping[str, Any]) -> Sequence[str]:
    """Keys of ``first`` in order, then those only ``second`` has."""
    return [*first, *(key for key in second if key not in first)]
