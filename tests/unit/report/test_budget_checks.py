"""Budgets: reading limits, and the rule that checks them against a report."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from einsum_analyze import analyze
from einsum_analyze.errors import BudgetError, EinsumAnalyzeError
from einsum_analyze.report import load_schema
from einsum_analyze.report.budgets import BudgetCheck, Budgets, apply_budgets, check_budgets

# ab,bc->ac with a=2, b=3, c=4 in float32: forward 2*2*3*4 = 48 FLOPs; inputs 6+12
# elements, output 8: forward peak (6+12+8)*4 = 104 bytes.
MM = ("ab,bc->ac", [(2, 3), (3, 4)])
TN = ("bc,bd,cm,mdn->bn", [(512, 2), (512, 2), (2, 7), (7, 2, 7)])


def _report(equation: str, shapes: Any, **kwargs: Any) -> dict[str, Any]:
    return analyze(equation, shapes, **kwargs).to_dict()


def _strategy(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in data["strategies"] if s["name"] == name)


def test_from_mapping_reads_every_spelling_and_unit() -> None:
    budgets = Budgets.from_mapping(
        {
            "--max-flops": "1e6",
            "max_backward_flops": 2e6,
            "max-peak": "1KiB",
            "MAX_RETAINED": 512,
            "max-time": "10ms",
            "budget_strategy": "Independent",
        }
    )
    assert budgets == Budgets(
        max_flops=10**6,
        max_backward_flops=2 * 10**6,
        max_peak_bytes=1024,
        max_retained_bytes=512,
        max_time_s=pytest.approx(0.01),
        strategy="independent",
    )
    assert not budgets.is_empty


def test_from_mapping_skips_none_and_strategy_alone_is_not_a_budget() -> None:
    budgets = Budgets.from_mapping({"max-flops": None, "budget-strategy": "all"})
    assert budgets.is_empty
    assert budgets.strategy == "all"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"max-flop": 3}, "unknown budget 'max-flop'"),
        ({"max-peak": "5XB"}, "max-peak: unknown unit 'XB'"),
        ({"max-peak": -1}, "max-peak"),
        ({"budget-strategy": "bogus"}, "unknown budget strategy 'bogus'"),
        ({"max-retained": [1]}, "max-retained"),
    ],
)
def test_from_mapping_names_the_culprit(data: dict[str, object], match: str) -> None:
    with pytest.raises(BudgetError, match=match):
        Budgets.from_mapping(data)


def test_budget_error_is_an_input_error() -> None:
    assert issubclass(BudgetError, EinsumAnalyzeError)


def test_merged_overrides_only_what_is_set() -> None:
    base = Budgets(max_flops=10, max_peak_bytes=100, strategy="all")
    merged = base.merged(Budgets(max_peak_bytes=50))
    assert merged == Budgets(max_flops=10, max_peak_bytes=50, strategy="all")


def test_forward_flops_equal_to_limit_passes_one_below_fails() -> None:
    data = _report(*MM)
    assert data["forward"]["flops"] == 48
    (check,) = check_budgets(data, Budgets(max_flops=48))
    assert check == BudgetCheck(name="max-flops", subject="forward", limit=48, value=48,
                                unit="flops")
    assert check.passed
    (check,) = check_budgets(data, Budgets(max_flops=47))
    assert not check.passed


def test_backward_budgets_default_to_the_first_modelled_strategy() -> None:
    data = _report(*TN, strategies=("independent", "reverse"))
    checks = check_budgets(data, Budgets(max_backward_flops=1, max_peak_bytes=1,
                                         max_retained_bytes=10**9))
    assert [c.subject for c in checks] == ["strategy independent"] * 3
    independent = _strategy(data, "independent")
    assert [c.value for c in checks] == [
        independent["backward_flops"], independent["peak_bytes"], independent["retained_bytes"]
    ]
    assert [c.passed for c in checks] == [False, False, True]


def test_default_strategy_order_makes_reverse_the_budget_strategy() -> None:
    data = _report(*TN)
    (check,) = check_budgets(data, Budgets(max_retained_bytes=0))
    assert check.subject == "strategy reverse"
    assert check.value == _strategy(data, "reverse")["retained_bytes"] > 0
    assert not check.passed


def test_named_budget_strategy() -> None:
    data = _report(*TN)
    (check,) = check_budgets(data, Budgets(max_retained_bytes=0, strategy="independent"))
    assert check.subject == "strategy independent"
    assert check.value == 0
    assert check.passed


def test_all_checks_every_strategy_and_reports_each() -> None:
    data = _report(*TN)
    limit = _strategy(data, "reverse")["backward_flops"]
    checks = check_budgets(data, Budgets(max_backward_flops=limit, strategy="all"))
    assert [c.subject for c in checks] == [
        "strategy reverse", "strategy independent", "strategy torch-autograd"
    ]
    # independent recomputes shared work, so it costs more backward FLOPs than reverse
    assert [c.passed for c in checks] == [True, False, True]


def test_budget_strategy_not_modelled_is_an_error() -> None:
    data = _report(*MM, strategies=("reverse",))
    with pytest.raises(BudgetError, match="'independent' was not modelled; the report has: "
                                          "reverse"):
        check_budgets(data, Budgets(max_peak_bytes=1, strategy="independent"))


def test_peak_without_strategies_checks_the_forward_peak() -> None:
    data = _report(*MM, strategies=())
    (check,) = check_budgets(data, Budgets(max_peak_bytes=100))
    assert (check.subject, check.value, check.passed) == ("forward", 104, False)


@pytest.mark.parametrize("budgets", [Budgets(max_backward_flops=1), Budgets(max_retained_bytes=1)])
def test_backward_budget_without_strategies_is_an_error(budgets: Budgets) -> None:
    data = _report(*MM, strategies=())
    with pytest.raises(BudgetError, match="needs a backward strategy"):
        check_budgets(data, budgets)


def test_max_time_without_runs_passes_with_no_value() -> None:
    data = _report(*MM)
    (check,) = check_budgets(data, Budgets(max_time_s=1e-9))
    assert check.value is None
    assert check.passed
    assert check.subject == "runs (none measured)"


def _with_runs(data: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    data["runs"] = [
        {"strategy": "reverse", "backend": "torch", "device": "cpu", "baseline": False,
         "forward_s": {"median": 0.002}, "backward_s": {"median": 0.003}},
        {"strategy": "torch-autograd", "backend": "torch", "device": "cpu", "baseline": True,
         "forward_s": {"median": 0.001}, "backward_s": None},
        {"strategy": "independent", "backend": "torch", "device": "cpu",
         "forward_s": None, "backward_s": None, "skipped": "too large"},
    ]
    return data


def test_max_time_adds_forward_and_backward_medians_of_every_run() -> None:
    data = _with_runs(_report(*MM))
    checks = check_budgets(data, Budgets(max_time_s=0.004))
    assert [c.subject for c in checks] == [
        "run 0 (reverse, torch, cpu)",
        "run 1 (torch-autograd, torch, cpu, baseline)",
        "run 2 (independent, torch, cpu, skipped)",
    ]
    assert [c.value for c in checks] == [pytest.approx(0.005), pytest.approx(0.001), None]
    assert [c.passed for c in checks] == [False, True, True]


def test_apply_budgets_attaches_checks_and_they_validate() -> None:
    report = analyze(*TN)
    assert apply_budgets(report, Budgets()) is report
    checked = apply_budgets(report, Budgets(max_flops=10**9, max_peak_bytes=1, max_time_s=1.0))
    data = checked.to_dict()
    assert [b["name"] for b in data["budgets"]] == ["max-flops", "max-peak", "max-time"]
    assert [b["passed"] for b in data["budgets"]] == [True, False, True]
    assert "budgets" not in report.to_dict()
    jsonschema.Draft202012Validator(load_schema()).validate(data)


def test_check_budgets_reads_a_report_with_runs_that_validates() -> None:
    data = _with_runs(_report(*MM))
    checked = [c.to_dict() for c in check_budgets(data, Budgets(max_time_s=0.004))]
    data["budgets"] = checked
    for run in data["runs"]:
        run.setdefault("baseline", False)
    jsonschema.Draft202012Validator(load_schema()).validate(data)
