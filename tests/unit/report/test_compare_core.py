"""Comparing two reports: exact rules for FLOPs and memory, a tolerance for timings."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from einsum_analyze import analyze
from einsum_analyze.analysis import run_cases
from einsum_analyze.errors import InputFileError
from einsum_analyze.report import SCHEMA_VERSION, load_schema
from einsum_analyze.report.cases import parse_cases
from einsum_analyze.report.compare import (
    READABLE_VERSIONS,
    Change,
    compare_reports,
    load_comparison_schema,
    upgrade_report,
)

V1 = Path(__file__).parents[2] / "golden" / "schema_v1"


def _report(shapes: Any = ((2, 3), (3, 4)), **kwargs: Any) -> dict[str, Any]:
    return analyze("ab,bc->ac", shapes, **kwargs).to_dict()


def _find(changes: tuple[Change, ...], subject: str, figure: str) -> Change:
    return next(c for c in changes if c.subject == subject and c.figure == figure)


def _validate(data: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(load_comparison_schema()).validate(data)


def test_identical_reports_have_no_regression() -> None:
    before = _report()
    after = _report()  # analysis_s and environment differ; they are not compared
    after["timing"]["analysis_s"] = 1e9
    comparison = compare_reports(before, after)
    assert not comparison.has_regressions
    assert {c.status for c in comparison.changes} == {"unchanged"}
    figures = {(c.subject, c.figure) for c in comparison.changes}
    assert ("forward", "flops") in figures and ("forward", "peak_bytes") in figures
    for name in ("reverse", "independent", "torch-autograd"):
        for figure in ("backward_flops", "retained_bytes", "peak_bytes"):
            assert (f"strategy {name}", figure) in figures
    assert comparison.notes == ()
    _validate(comparison.to_dict())


def test_any_flop_or_byte_increase_regresses_and_a_decrease_improves() -> None:
    before = _report()
    after = copy.deepcopy(before)
    after["forward"]["flops"] += 1
    after["strategies"][0]["peak_bytes"] -= 4
    comparison = compare_reports(before, after, tolerance=0.5)  # tolerance is for timings
    flops = _find(comparison.changes, "forward", "flops")
    assert (flops.before, flops.after, flops.status, flops.rule) == (48, 49, "regressed", "exact")
    peak = _find(comparison.changes, "strategy reverse", "peak_bytes")
    assert peak.status == "improved"
    assert comparison.regressions == (flops,)
    assert flops.relative == pytest.approx(1 / 48)


def test_a_real_change_of_shapes_is_noted_and_regresses() -> None:
    comparison = compare_reports(_report(), _report(((2, 3), (3, 5))))
    assert comparison.has_regressions
    assert comparison.notes == ("shapes changed from [[2, 3], [3, 4]] to [[2, 3], [3, 5]]",)


def test_added_and_removed_strategies_are_not_regressions() -> None:
    before = _report(strategies=("reverse", "independent"))
    after = _report(strategies=("reverse", "torch-autograd"))
    comparison = compare_reports(before, after)
    assert not comparison.has_regressions
    assert _find(comparison.changes, "strategy independent", "peak_bytes").status == "removed"
    assert _find(comparison.changes, "strategy torch-autograd", "peak_bytes").status == "added"


def _run(strategy: str, forward: float | None, backward: float | None,
         baseline: bool = False) -> dict[str, Any]:
    return {
        "strategy": strategy, "backend": "torch", "device": "cpu", "baseline": baseline,
        "forward_s": None if forward is None else {"median": forward},
        "backward_s": None if backward is None else {"median": backward},
    }


@pytest.mark.parametrize(
    ("after_s", "tolerance", "status"),
    [(0.0104, 0.05, "unchanged"), (0.0106, 0.05, "regressed"), (0.0106, 0.10, "unchanged"),
     (0.0094, 0.05, "improved"), (0.0096, 0.05, "unchanged")],
)
def test_timings_use_the_relative_tolerance(after_s: float, tolerance: float,
                                            status: str) -> None:
    before, after = _report(), _report()
    before["runs"] = [_run("reverse", 0.010, 0.02)]
    after["runs"] = [_run("reverse", after_s, 0.02)]
    comparison = compare_reports(before, after, tolerance=tolerance, times="seconds")
    change = _find(comparison.changes, "run reverse, torch, cpu", "forward_s")
    assert (change.status, change.rule, change.unit) == (status, "relative", "s")
    assert _find(comparison.changes, "run reverse, torch, cpu", "backward_s").status == \
        "unchanged"
    assert comparison.has_regressions == (status == "regressed")


def test_runs_are_matched_by_identity_not_position() -> None:
    before, after = _report(), _report()
    before["runs"] = [_run("reverse", 1.0, 1.0), _run("torch-autograd", 2.0, None, True)]
    after["runs"] = [_run("torch-autograd", 2.0, None, True), _run("reverse", 1.0, 1.0),
                     _run("independent", 3.0, 3.0)]
    comparison = compare_reports(before, after, times="seconds")
    assert not comparison.has_regressions
    baseline = _find(comparison.changes, "run torch-autograd, torch, cpu, baseline", "forward_s")
    assert baseline.status == "unchanged"
    assert _find(comparison.changes, "run independent, torch, cpu", "forward_s").status == "added"
    _validate(comparison.to_dict())


BATCH = """
[[cases]]
name = "mm"
equation = "ab,bc->ac"
shapes = "2x3,3x4"

[[cases]]
name = "gone"
equation = "i->"
shapes = "5"

[[cases]]
name = "breaks"
equation = "ab,bc->ac"
shapes = "2x3,3x4"
"""


def _batch(text: str) -> dict[str, Any]:
    return run_cases(parse_cases(text, "toml")).to_dict()


def test_batch_reports_are_matched_by_case_name() -> None:
    before = _batch(BATCH)
    after_text = BATCH.replace('name = "gone"\nequation = "i->"', 'name = "new"\nequation = "i->"')
    after_text = after_text.replace('name = "breaks"\nequation = "ab,bc->ac"\nshapes = "2x3,3x4"',
                                    'name = "breaks"\nequation = "ab,bc->ac"\nshapes = "2x3,4x4"')
    comparison = compare_reports(before, _batch(after_text))
    by_case = {(c.case, c.subject): c for c in comparison.changes if c.subject == "case"}
    assert by_case[("gone", "case")].status == "removed"
    assert by_case[("new", "case")].status == "added"
    assert by_case[("breaks", "case")].status == "regressed"
    assert "now fails" in by_case[("breaks", "case")].detail
    assert {c.status for c in comparison.changes if c.case == "mm"} == {"unchanged"}
    assert comparison.kind == "batch"
    assert [c.case for c in comparison.regressions] == ["breaks"]
    _validate(comparison.to_dict())


def test_batch_case_that_recovers_improves() -> None:
    broken = BATCH.replace('shapes = "2x3,3x4"\n', 'shapes = "2x3,4x4"\n')
    comparison = compare_reports(_batch(broken), _batch(BATCH))
    statuses = {c.case: c.status for c in comparison.changes if c.subject == "case"}
    assert statuses == {"mm": "improved", "breaks": "improved"}
    assert not comparison.has_regressions


@pytest.mark.parametrize(
    ("before", "after", "match"),
    [
        ([], {}, "BEFORE is not an einsum-analyze report"),
        ({"schema_version": 1, "forward": {}}, {"x": 1}, "AFTER is not an einsum-analyze"),
        ({"schema_version": 99, "forward": {}}, {"schema_version": 1, "forward": {}},
         "BEFORE has schema_version 99; this einsum-analyze reads versions 1 and 2 "),
        ({"schema_version": 2, "forward": {}}, {"schema_version": 0, "forward": {}},
         "AFTER has schema_version 0; this einsum-analyze reads versions 1 and 2 "),
        ({"schema_version": True, "forward": {}}, {"schema_version": 2, "forward": {}},
         "BEFORE has schema_version True"),
        ({"schema_version": 1}, {"schema_version": 1, "forward": {}}, "neither 'forward'"),
        ({"schema_version": 1, "forward": {}}, {"schema_version": 1, "cases": []},
         "BEFORE is a report and AFTER a batch"),
    ],
)
def test_unreadable_documents_raise(before: object, after: object, match: str) -> None:
    with pytest.raises(InputFileError, match=match):
        compare_reports(before, after)


def test_negative_tolerance_is_refused() -> None:
    with pytest.raises(InputFileError, match="tolerance"):
        compare_reports(_report(), _report(), tolerance=-0.1)


def test_names_label_the_documents_in_messages() -> None:
    with pytest.raises(InputFileError, match="^AFTER 'new.json' has schema_version 3; "):
        compare_reports(_report(), {"schema_version": 3, "forward": {}},
                        names=("BEFORE 'old.json'", "AFTER 'new.json'"))


# --- the tolerance at its boundary --------------------------------------------------------


@pytest.mark.parametrize(
    ("before_s", "after_s", "tolerance", "status"),
    [
        # Exactly at the tolerance is not beyond it, in both directions. 0.5 * 1.25 and
        # 0.5 * 0.75 are exact in binary. In floats 0.1 * 1.15 is 0.11499999999999999,
        # under 0.115, and 0.010 * 0.9 is 0.009000000000000001, over 0.009: a plain
        # comparison would call these two a regression and an improvement.
        (0.5, 0.625, 0.25, "unchanged"),
        (0.5, 0.375, 0.25, "unchanged"),
        (0.010, 0.0105, 0.05, "unchanged"),
        (0.1, 0.115, 0.15, "unchanged"),
        (0.010, 0.009, 0.1, "unchanged"),
        (1.1, 0.99, 0.1, "unchanged"),
        # Just beyond the tolerance.
        (0.5, 0.62500001, 0.25, "regressed"),
        (0.5, 0.37499999, 0.25, "improved"),
        (0.010, 0.0105001, 0.05, "regressed"),
        (0.010, 0.0094999, 0.05, "improved"),
        # Tolerance 0: equal is unchanged, any growth regresses, any drop improves.
        (0.010, 0.010, 0.0, "unchanged"),
        (0.010, 0.0100001, 0.0, "regressed"),
        (0.010, 0.0099999, 0.0, "improved"),
        (0.0, 0.0, 0.0, "unchanged"),
        (0.0, 1e-9, 0.0, "regressed"),
    ],
)
def test_timing_at_and_beyond_the_tolerance(before_s: float, after_s: float, tolerance: float,
                                            status: str) -> None:
    before, after = _report(), _report()
    before["runs"] = [_run("reverse", before_s, 0.02)]
    after["runs"] = [_run("reverse", after_s, 0.02)]
    comparison = compare_reports(before, after, tolerance=tolerance, times="seconds")
    assert _find(comparison.changes, "run reverse, torch, cpu", "forward_s").status == status
    assert comparison.has_regressions == (status == "regressed")
    assert comparison.tolerance == tolerance


def test_tolerance_zero_leaves_exact_figures_exact() -> None:
    before = _report()
    after = copy.deepcopy(before)
    after["strategies"][1]["retained_bytes"] += 1
    comparison = compare_reports(before, after, tolerance=0)
    assert [(c.subject, c.figure) for c in comparison.regressions] == [
        (f"strategy {after['strategies'][1]['name']}", "retained_bytes")
    ]


# --- reports of schema version 1 -----------------------------------------------------------


def _v1(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((V1 / name).read_text(encoding="utf-8"))
    assert data["schema_version"] == 1  # a report the version-1 tool wrote
    return data


def test_this_tool_writes_version_2_and_reads_1_and_2() -> None:
    assert SCHEMA_VERSION == 2
    assert READABLE_VERSIONS == (1, 2)
    assert _report()["schema_version"] == 2


def test_upgrade_maps_every_changed_key_of_version_1() -> None:
    old = _v1("report_runs.json")
    new = upgrade_report(old)
    assert new["schema_version"] == 2
    assert [step["summed"] for step in new["forward"]["steps"]] == ["b"]
    assert all("removed" not in step for step in new["forward"]["steps"])
    assert new["grad_operands"] == [0, 1]
    run = new["runs"][0]
    assert run["peak_bytes_measured_without_inputs"] == old["runs"][0]["peak_bytes_measured"]
    assert run["peak_bytes_predicted_without_inputs"] == old["runs"][0]["peak_bytes_predicted"]
    assert "peak_bytes_measured" not in run and "peak_bytes_predicted" not in run
    assert "removed" in old["forward"]["steps"][0]  # the input is left alone
    assert upgrade_report(new) is new  # a current report comes back as it is


def test_upgrade_fills_grad_operands_from_the_strategies() -> None:
    old = _v1("report_reverse.json")
    assert "grad_operands" not in old and "gradients" not in old  # reverse only, in v1
    assert upgrade_report(old)["grad_operands"] == [0, 1]
    assert upgrade_report({"schema_version": 1, "forward": {}})["grad_operands"] == []


def test_upgraded_version_1_reports_validate_against_version_2_where_they_can() -> None:
    new = dict(upgrade_report(_v1("report_reverse.json")))
    jsonschema.Draft202012Validator(load_schema()).validate(new)


@pytest.mark.parametrize("old_first", [True, False])
def test_version_1_against_version_2_compares_figure_by_figure(old_first: bool) -> None:
    old = _v1("report_reverse.json")
    new = _report(strategies=("reverse",))
    before, after = (old, new) if old_first else (new, old)
    comparison = compare_reports(before, after)
    assert not comparison.has_regressions
    assert {c.status for c in comparison.changes} == {"unchanged"}
    figures = {(c.subject, c.figure) for c in comparison.changes}
    assert figures == {("forward", "flops"), ("forward", "peak_bytes"),
                       ("strategy reverse", "backward_flops"),
                       ("strategy reverse", "retained_bytes"),
                       ("strategy reverse", "peak_bytes")}
    which = "BEFORE" if old_first else "AFTER"
    assert comparison.notes == (
        f"{which} is a schema_version 1 report, read as version 2 (docs/schema.md)",
    )
    _validate(comparison.to_dict())


def test_a_version_1_report_still_shows_a_regression() -> None:
    old = _v1("report_reverse.json")
    new = _report(((2, 3), (3, 5)), strategies=("reverse",))
    comparison = compare_reports(old, new)
    # A matrix product under reverse mode retains nothing beyond its inputs: 0 B both sides.
    assert [(c.subject, c.figure) for c in comparison.regressions] == [
        ("forward", "flops"), ("forward", "peak_bytes"),
        ("strategy reverse", "backward_flops"), ("strategy reverse", "peak_bytes"),
    ]
    flops = _find(comparison.changes, "forward", "flops")
    assert (flops.before, flops.after) == (48, 60)


def test_version_1_batch_against_version_2_batch() -> None:
    old = _v1("batch.json")
    new = _batch('[[cases]]\nname = "mm"\nequation = "ab,bc->ac"\nshapes = "2x3,3x4"\n\n'
                 '[[cases]]\nname = "bad"\nequation = "ab,bc->ac"\nshapes = "2x3,3x4"\n')
    comparison = compare_reports(old, new)
    statuses = {(c.case, c.subject): c.status for c in comparison.changes
                if c.subject in ("case", "forward")}
    assert statuses[("bad", "case")] == "improved"  # failed in the old batch
    assert statuses[("mm", "forward")] == "unchanged"
    assert comparison.notes[0].startswith("BEFORE is a schema_version 1 report")
    upgraded = upgrade_report(old)
    assert upgraded["cases"][0]["report"]["forward"]["steps"][0]["summed"] == "b"
    assert upgraded["cases"][0]["report"]["schema_version"] == 2
