"""The runs' times in a comparison: as ratios to the torch baseline, or in seconds.

A shared CI runner's load changes between two runs, so a time in seconds says as much
about the machine as about the code. Every report that has runs also has torch
autograd's, measured in the same process moments apart (the ``torch-autograd``
baseline run on each device). By default each run's median ``forward_s`` and
``backward_s`` is compared as its **ratio** to that baseline's median of the same phase
on the same device, in the same report: the load of the moment cancels.

Each median is uncertain by its notch, ``1.57 * iqr / sqrt(blocks)`` (the notch of a
box plot: two medians whose notches do not overlap differ at about the 95 % level;
:func:`.changes.notch_of`). With ``r`` a ratio and ``s`` its relative notch (the run's
notch over its median plus the baseline's notch over its median), ``r_after``
regresses when it exceeds ``r_before + r_before * tolerance + r_before * s_before +
r_after * s_after``, and improves when it falls below ``r_before`` minus the same
margin. The baseline's own times are the reference and are not compared. A run on a
device where either report has no baseline cannot be judged this way: a note says so.
``times="seconds"`` compares the medians themselves by the same rule (``after > before +
before * tolerance + notch_before + notch_after``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ..model.units import format_seconds
from .changes import (
    Change,
    ChangeStatus,
    beyond,
    median_of,
    notch_of,
    presence,
    runs_by_key,
    union,
)
from .saved import RUN_FIGURES

__all__ = ["BASELINE_STRATEGY", "TIME_RULES", "TimeRule", "compare_run_times"]

TimeRule = Literal["ratio", "seconds"]
TIME_RULES: tuple[TimeRule, ...] = ("ratio", "seconds")
BASELINE_STRATEGY = "torch-autograd"
"""The run every other run's times are divided by (torch.einsum under autograd)."""


def compare_run_times(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    case: str | None,
    tolerance: float,
    times: TimeRule,
    changes: list[Change],
    notes: list[str],
) -> None:
    """Append one :class:`Change` per run and phase; note runs that cannot be judged.

    Example:
        Twice as slow in seconds, but so is the baseline: a loaded machine, no regression.

        >>> def report(reverse_s, torch_s):
        ...     def run(name, s, baseline):
        ...         return {"strategy": name, "backend": "torch", "device": "cpu",
        ...                 "baseline": baseline, "forward_s": {"median": s, "iqr": 0.0}}
        ...     return {"runs": [run("reverse", reverse_s, False),
        ...                      run("torch-autograd", torch_s, True)]}
        >>> changes, notes = [], []
        >>> compare_run_times(report(1.0, 2.0), report(2.0, 4.0), None, 0.05, "ratio",
        ...                   changes, notes)
        >>> [(c.figure, c.before, c.after, c.status) for c in changes]
        [('forward_s', 0.5, 0.5, 'unchanged'), ('backward_s', None, None, 'unchanged')]
    """
    runs_before, runs_after = runs_by_key(before.get("runs")), runs_by_key(after.get("runs"))
    if times == "seconds":
        for key in union(runs_before, runs_after):
            old, new = runs_before.get(key, {}), runs_after.get(key, {})
            for figure in RUN_FIGURES:
                changes.append(_seconds_change(case, key, figure, old.get(figure),
                                               new.get(figure), tolerance))
        return
    bases_before, bases_after = _baselines(before), _baselines(after)
    unjudged: list[str] = []
    for key in union(runs_before, runs_after):
        old, new = runs_before.get(key, {}), runs_after.get(key, {})
        if _is_baseline(old or new):
            continue
        device = str((old or new).get("device"))
        for figure in RUN_FIGURES:
            ratio_before = _ratio(old, bases_before.get(device), figure)
            ratio_after = _ratio(new, bases_after.get(device), figure)
            if (ratio_before is None and median_of(old.get(figure)) is not None) or (
                    ratio_after is None and median_of(new.get(figure)) is not None):
                unjudged.append(key)
                continue
            changes.append(_ratio_change(case, key, figure, ratio_before, ratio_after,
                                         tolerance, old.get(figure), new.get(figure)))
    if unjudged:
        where = f"case {case!r}: " if case is not None else ""
        names = ", ".join(dict.fromkeys(unjudged))
        notes.append(f"{where}times of {names} not compared: a report has no "
                     f"{BASELINE_STRATEGY} baseline on that device to divide them by "
                     "(--times seconds compares seconds)")


def _is_baseline(run: Mapping[str, Any]) -> bool:
    return bool(run.get("baseline")) and run.get("strategy") == BASELINE_STRATEGY


def _baselines(report: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The first torch-autograd baseline run of each device."""
    found: dict[str, Mapping[str, Any]] = {}
    for run in runs_by_key(report.get("runs")).values():
        if _is_baseline(run):
            found.setdefault(str(run.get("device")), run)
    return found


def _ratio(run: Mapping[str, Any], base: Mapping[str, Any] | None,
           figure: str) -> tuple[float, float] | None:
    """``(run median / baseline median, relative notch of that ratio)``, or ``None``."""
    if base is None:
        return None
    top, bottom = median_of(run.get(figure)), median_of(base.get(figure))
    if top is None or bottom is None or bottom <= 0:
        return None
    spread = notch_of(run.get(figure)) / top if top > 0 else 0.0
    spread += notch_of(base.get(figure)) / bottom
    return top / bottom, spread


def _ratio_change(
    case: str | None, key: str, figure: str, before: tuple[float, float] | None,
    after: tuple[float, float] | None, tolerance: float, stats_before: object,
    stats_after: object,
) -> Change:
    status = presence(before, after)
    if status is None:
        assert before is not None and after is not None
        (r_before, s_before), (r_after, s_after) = before, after
        margin = r_before * (tolerance + s_before) + r_after * s_after
        status = _judge(r_before, r_after, margin)
    return Change(case=case, subject=key, figure=figure, unit="ratio",
                  before=None if before is None else before[0],
                  after=None if after is None else after[0], rule="ratio", status=status,
                  detail=f"over {BASELINE_STRATEGY}'s {figure} in the same report",
                  context=(("seconds_before", median_of(stats_before)),
                           ("seconds_after", median_of(stats_after))))


def _seconds_change(case: str | None, key: str, figure: str, old: object, new: object,
                    tolerance: float) -> Change:
    before, after = median_of(old), median_of(new)
    spread = notch_of(old) + notch_of(new)
    status = presence(before, after)
    if status is None:
        assert before is not None and after is not None
        status = _judge(before, after, before * tolerance + spread)
    return Change(case=case, subject=key, figure=figure, unit="s", before=before,
                  after=after, rule="relative", status=status,
                  detail=(f"the medians' notches together {format_seconds(spread)}" if spread
                          else ""))


def _judge(before: float, after: float, margin: float) -> ChangeStatus:
    if beyond(after, before + margin):
        return "regressed"
    if beyond(before - margin, after):
        return "improved"
    return "unchanged"
