"""Compare two saved reports, before and after a change, figure by figure.

Rules (docs/ci.md):

- FLOPs and modelled memory are exact: any increase is a regression, any decrease an
  improvement. Compared: forward ``flops`` and ``peak_bytes``; per strategy (matched by
  name) ``backward_flops``, ``retained_bytes`` and ``peak_bytes``.
- Timings (runs matched by strategy, backend and device) are compared as ratios to the
  torch baseline measured in the same report, so that a change of load between the two
  runs cancels; in seconds only when asked (``times="seconds"``). Either way the margin
  is ``tolerance`` (0.05: 5 %) plus the recorded spreads (:mod:`.compare_times`). A
  change of exactly the bound (up to float rounding) is unchanged.
- Measured memory is exact: each run's ``peak_bytes_measured`` and
  ``retained_bytes_measured`` (the allocator's figures) regress on any increase.
- Budget outcomes: a budget (matched by name and subject) that fails after and did not
  before (it passed, or it was not set) regresses; one that failed and now passes
  improves.
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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InputFileError
from .changes import Change, ChangeStatus, number_of, presence, runs_by_key, union
from .compare_times import TIME_RULES, TimeRule, compare_run_times
from .report import SCHEMA_VERSION
from .saved import (
    FORWARD_FIGURES,
    READABLE_VERSIONS,
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
    "TIME_RULES",
    "TimeRule",
    "compare_reports",
    "load_comparison_schema",
    "upgrade_report",
]

_INPUT_KEYS = ("equation", "shapes", "dtype")


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Every figure compared between two reports.

    Attributes:
        kind: ``"report"`` (single) or ``"batch"``.
        tolerance: Relative tolerance applied to timings.
        times: How timings were compared: ``"ratio"`` or ``"seconds"``.
        changes: Every compared figure, unchanged ones included, in report order.
        notes: Differences that are not figures (a changed equation, shapes, dtype).
    """

    kind: DocumentKind
    tolerance: float
    times: TimeRule
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
            "times": self.times,
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
    times: TimeRule = "ratio",
    names: tuple[str, str] = ("BEFORE", "AFTER"),
) -> Comparison:
    """Compare two reports (single or batch) read back from JSON.

    Args:
        before: The report before the change.
        after: The report after the change.
        tolerance: Relative tolerance for timings, at least 0 (0.05: 5 %).
        times: ``"ratio"``: each run's times over the torch baseline's in the same report
            (:mod:`.compare_times`); ``"seconds"``: the times themselves.
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
    if times not in TIME_RULES:
        raise InputFileError(f"times is {times!r}; expected one of {', '.join(TIME_RULES)}")
    rules = _Rules(tolerance=float(tolerance), times=times)
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
        _compare_single(before, after, None, rules, changes, notes)
    else:
        _compare_batch(before, after, rules, changes, notes)
    return Comparison(kind=kind_before, tolerance=float(tolerance), times=times,
                      changes=tuple(changes), notes=tuple(notes))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Rules:
    tolerance: float
    times: TimeRule


def _by_name(items: object) -> dict[str, Mapping[str, Any]]:
    if not isinstance(items, list):
        return {}
    return {str(s["name"]): s for s in items if isinstance(s, Mapping) and "name" in s}


def _add(
    changes: list[Change],
    case: str | None,
    subject: str,
    figure: str,
    unit: Unit,
    before: int | float | None,
    after: int | float | None,
) -> None:
    """An exact figure: any increase regresses, any decrease improves."""
    status = presence(before, after)
    if status is None:
        assert before is not None and after is not None
        status = ("regressed" if after > before else "improved" if after < before
                  else "unchanged")
    changes.append(Change(case=case, subject=subject, figure=figure, unit=unit, before=before,
                          after=after, rule="exact", status=status))


def _compare_single(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    case: str | None,
    rules: _Rules,
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
    same_limit = _compare_limits(before, after, case, rules, changes, notes)
    _compare_recommended(before, after, case, same_limit, rules, changes, notes)
    if not same_limit:
        _compare_runs(before, after, case, rules, changes, notes)
        return
    for figure, unit in FORWARD_FIGURES:
        _add(changes, case, "forward", figure, unit, number_of(fwd_before.get(figure)),
             number_of(fwd_after.get(figure)))
    strategies_before = _by_name(before.get("strategies"))
    strategies_after = _by_name(after.get("strategies"))
    for name in union(strategies_before, strategies_after):
        old, new = strategies_before.get(name, {}), strategies_after.get(name, {})
        for figure, unit in STRATEGY_FIGURES:
            _add(changes, case, f"strategy {name}", figure, unit, number_of(old.get(figure)),
                 number_of(new.get(figure)))
    _compare_runs(before, after, case, rules, changes, notes)


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
    rules: _Rules,
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
    for limit in union(rows_before, rows_after):
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
            _add(changes, case, subject, figure, unit, number_of(old.get(figure)),
                 number_of(new.get(figure)))
        old_s, new_s = _by_name(old.get("strategies")), _by_name(new.get("strategies"))
        for name in union(old_s, new_s):
            for figure, unit in STRATEGY_FIGURES:
                _add(changes, case, f"{subject}, strategy {name}", figure, unit,
                     number_of(old_s.get(name, {}).get(figure)),
                     number_of(new_s.get(name, {}).get(figure)))
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
    rules: _Rules,
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
        _add(changes, case, "recommended", figure, unit, number_of(old.get(figure)),
             number_of(new.get(figure)))


def _compare_runs(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    case: str | None,
    rules: _Rules,
    changes: list[Change],
    notes: list[str],
) -> None:
    compare_run_times(before, after, case, rules.tolerance, rules.times, changes, notes)
    runs_before = runs_by_key(before.get("runs"))
    runs_after = runs_by_key(after.get("runs"))
    for key in union(runs_before, runs_after):
        old, new = runs_before.get(key, {}), runs_after.get(key, {})
        for figure, unit in RUN_MEMORY:
            _add(changes, case, key, figure, unit, number_of(old.get(figure)),
                 number_of(new.get(figure)))
    _compare_budgets(before, after, case, changes)


def _compare_budgets(
    before: Mapping[str, Any], after: Mapping[str, Any], case: str | None,
    changes: list[Change],
) -> None:
    """A budget that fails after and did not before (it passed, or was not set) regresses.

    One that failed and now passes improves; one set on one side only and passing is
    ``added`` or ``removed``. Each change carries the figure and the limit of both sides.
    """

    def budgets(doc: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {f"budget {b.get('name')} on {b.get('subject')}": b
                for b in doc.get("budgets") or () if isinstance(b, Mapping)}

    old, new = budgets(before), budgets(after)
    for subject in union(old, new):
        was = bool(old[subject].get("passed")) if subject in old else None
        now = bool(new[subject].get("passed")) if subject in new else None
        status: ChangeStatus
        if was == now:
            status = "unchanged"
        elif now is False:
            status = "regressed"
        elif was is False:
            status = "improved" if now else "removed"
        else:
            status = "added" if was is None else "removed"
        words = {True: "passed", False: "exceeded", None: "not set"}
        unit = (new.get(subject) or old[subject]).get("unit")
        context = (
            ("value_before", number_of(old.get(subject, {}).get("value"))),
            ("limit_before", number_of(old.get(subject, {}).get("limit"))),
            ("value_after", number_of(new.get(subject, {}).get("value"))),
            ("limit_after", number_of(new.get(subject, {}).get("limit"))),
            ("budget_unit", unit if isinstance(unit, str) else None),
        )
        changes.append(Change(case=case, subject=subject, figure="passed", unit="",
                              before=None if was is None else int(was),
                              after=None if now is None else int(now), rule="budget",
                              status=status,
                              detail=f"{words[was]} before, {words[now]} after",
                              context=context))


def _compare_batch(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    rules: _Rules,
    changes: list[Change],
    notes: list[str],
) -> None:
    cases_before = _by_name(before["cases"])
    cases_after = _by_name(after["cases"])
    for name in union(cases_before, cases_after):
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
        _compare_single(old_report, new_report, name, rules, changes, notes)
