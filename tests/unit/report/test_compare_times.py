"""compare's times: ratios to the torch baseline of the same report, seconds when asked."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from einsum_analyze import analyze
from einsum_analyze.report.changes import Change
from einsum_analyze.report.compare import compare_reports, load_comparison_schema


def _report() -> dict[str, Any]:
    data: dict[str, Any] = analyze("ab,bc->ac", [(2, 3), (3, 4)]).to_dict()
    return data


def _run(strategy: str, forward: float, backward: float, *, baseline: bool = False,
         spread: float = 0.0, device: str = "cpu") -> dict[str, Any]:
    return {
        "strategy": strategy, "backend": "torch", "device": device, "baseline": baseline,
        "forward_s": {"median": forward, "iqr": forward * spread},
        "backward_s": {"median": backward, "iqr": backward * spread},
    }


def _with_runs(*runs: dict[str, Any]) -> dict[str, Any]:
    data = _report()
    data["runs"] = list(runs)
    return data


def _find(changes: tuple[Change, ...], subject: str, figure: str) -> Change:
    return next(c for c in changes if c.subject == subject and c.figure == figure)


def _pair(load: float, slowdown: float = 1.0, spread: float = 0.0
          ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Reverse and independent beside torch, then every run ``load`` times slower and
    independent ``slowdown`` times slower again."""
    before = _with_runs(_run("reverse", 0.004, 0.006, spread=spread),
                        _run("independent", 0.005, 0.009, spread=spread),
                        _run("torch-autograd", 0.008, 0.010, baseline=True, spread=spread))
    after = _with_runs(_run("reverse", 0.004 * load, 0.006 * load, spread=spread),
                       _run("independent", 0.005 * load * slowdown,
                            0.009 * load * slowdown, spread=spread),
                       _run("torch-autograd", 0.008 * load, 0.010 * load, baseline=True,
                            spread=spread))
    return before, after


@pytest.mark.parametrize("load", [0.5, 1.0, 2.0, 6.0])
def test_a_change_of_load_between_the_runs_cancels(load: float) -> None:
    before, after = _pair(load)
    comparison = compare_reports(before, after)
    assert not comparison.has_regressions
    ratio = _find(comparison.changes, "run reverse, torch, cpu", "forward_s")
    assert (ratio.rule, ratio.unit, ratio.status) == ("ratio", "ratio", "unchanged")
    assert ratio.before == pytest.approx(0.5) and ratio.after == pytest.approx(0.5)
    assert ratio.fact("seconds_after") == pytest.approx(0.004 * load)
    # The same pair in seconds: the load is all that changed, and it is what regresses.
    seconds = compare_reports(before, after, times="seconds")
    assert seconds.has_regressions == (load > 1.05)


def test_a_3x_slowdown_of_one_strategy_regresses_under_any_load() -> None:
    for load in (0.5, 1.0, 3.0):
        comparison = compare_reports(*_pair(load, slowdown=3.0))
        assert [(c.subject, c.figure) for c in comparison.regressions] == [
            ("run independent, torch, cpu", "forward_s"),
            ("run independent, torch, cpu", "backward_s"),
        ]
        change = comparison.regressions[0]
        assert change.after == pytest.approx(3 * change.before)


@pytest.mark.parametrize(
    ("slowdown", "spread", "status"),
    [
        # margin = r * (tolerance + s_before) + r_after * s_after, s = both relative IQRs
        (1.04, 0.0, "unchanged"), (1.06, 0.0, "regressed"),
        (1.20, 0.05, "unchanged"),  # 1.2 r < r (1 + 0.05 + 0.10) + 1.2 r 0.10
        (1.40, 0.05, "regressed"),
        (0.70, 0.05, "improved"), (0.90, 0.05, "unchanged"),
    ],
)
def test_the_margin_is_the_tolerance_plus_the_ratios_spreads(
        slowdown: float, spread: float, status: str) -> None:
    comparison = compare_reports(*_pair(1.0, slowdown=slowdown, spread=spread))
    assert _find(comparison.changes, "run independent, torch, cpu", "forward_s").status == \
        status


def test_the_baseline_is_the_reference_not_a_compared_figure() -> None:
    comparison = compare_reports(*_pair(2.0))
    subjects = {c.subject for c in comparison.changes if c.figure in ("forward_s",
                                                                       "backward_s")}
    assert subjects == {"run reverse, torch, cpu", "run independent, torch, cpu"}
    jsonschema.Draft202012Validator(load_comparison_schema()).validate(comparison.to_dict())
    assert comparison.to_dict()["times"] == "ratio"


def test_runs_without_a_baseline_on_their_device_are_noted_not_judged() -> None:
    before, after = _pair(1.0)
    after["runs"][2]["device"] = "cuda:0"  # the cpu runs have no cpu baseline after
    after["runs"][1]["forward_s"]["median"] *= 10
    comparison = compare_reports(before, after)
    assert not comparison.has_regressions
    assert any("times of run reverse, torch, cpu, run independent, torch, cpu not compared"
               in note for note in comparison.notes)


def test_a_budget_that_newly_fails_is_a_regression_in_words() -> None:
    before = _report()
    after = copy.deepcopy(before)
    after["budgets"] = [{"name": "max-peak", "subject": "strategy reverse", "limit": 64,
                         "value": 144, "unit": "bytes", "passed": False}]
    comparison = compare_reports(before, after)
    change = _find(comparison.changes, "budget max-peak on strategy reverse", "passed")
    assert (change.status, change.detail) == ("regressed", "not set before, exceeded after")
    assert (change.fact("value_after"), change.fact("limit_after")) == (144, 64)
    passing = copy.deepcopy(after)
    passing["budgets"][0].update(passed=True, value=60)
    assert _find(compare_reports(before, passing).changes,
                 "budget max-peak on strategy reverse", "passed").status == "added"
    assert _find(compare_reports(passing, after).changes,
                 "budget max-peak on strategy reverse", "passed").status == "regressed"
    assert _find(compare_reports(after, passing).changes,
                 "budget max-peak on strategy reverse", "passed").status == "improved"


def test_an_unknown_time_rule_is_refused() -> None:
    from einsum_analyze.errors import InputFileError

    with pytest.raises(InputFileError, match="times is 'wall'; expected one of ratio, seconds"):
        compare_reports(_report(), _report(), times="wall")  # type: ignore[arg-type]
