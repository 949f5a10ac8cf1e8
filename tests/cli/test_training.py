"""The command line for limit sweeps, training budgets, objectives and recommended runs."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from report_schema import validate_comparison, validate_report

from einsum_analyze import analyze, execute
from einsum_analyze.analysis import analyze_case, run_cases
from einsum_analyze.cli import cli
from einsum_analyze.report.cases import CaseDefaults, parse_cases
from einsum_analyze.report.compare import compare_reports

CHAIN = ["abc,bd,de,ef->af", "--shapes", "8x6x5,6x40,40x40,40x3"]


def invoke(*args: str):
    return CliRunner().invoke(cli, [*args, "--device", "none"], catch_exceptions=False)


def test_a_limit_list_prints_one_row_per_limit_and_json_rows():
    result = invoke(*CHAIN, "--memory-limit", "none,100,1KiB,max_input")
    assert result.exit_code == 0, result.stderr
    assert "Memory limits" in result.stdout
    table = result.stdout.split("Memory limits", 1)[1]
    for limit in ("none", "100", "1KiB", "max_input"):
        # One row per limit, or one block per limit where the table is stacked to fit.
        assert re.search(rf"\n *(limit +)?{limit}( |\n)", table), limit
    assert "Recommended (time)" in result.stdout
    data = json.loads(invoke(*CHAIN, "--memory-limit", "none,100", "--json", "-").stdout)
    validate_report(data)
    assert [row["limit"] for row in data["memory_limits"]] == ["none", "100"]


def test_a_single_limit_keeps_todays_output():
    data = json.loads(invoke(*CHAIN, "--memory-limit", "100", "--json", "-").stdout)
    for key in ("memory_limits", "recommended", "pareto", "budget", "search"):
        assert key not in data
    assert data["forward"]["memory_limit_elements"] == 100


def test_a_budget_that_fits_exits_0_and_says_which_strategies_fit():
    result = invoke(*CHAIN, "--budget", "1MiB", "--json", "-")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["budget"]["fits"] and data["recommended"]["fits"]
    assert all(s["fits"] for s in data["budget"]["strategies"])
    assert data["budgets"][0]["name"] == "budget" and data["budgets"][0]["passed"]


def test_a_budget_nothing_reaches_exits_1_with_the_smallest_figure():
    result = invoke(*CHAIN, "--budget", "1000")
    assert result.exit_code == 1
    data = json.loads(invoke(*CHAIN, "--budget", "1000", "--json", "-").stdout)
    smallest = data["budget"]["smallest_peak_bytes"]
    assert smallest > 1000 and data["recommended"]["peak_bytes"] == smallest
    assert "smallest reachable training peak" in result.stderr
    assert f"{smallest:,} B" in result.stderr


@pytest.mark.parametrize("args", [
    ("--budget", "0"), ("--budget", "-1GiB"), ("--budget", "huge"),
    ("--memory-limit", "none,0"), ("--memory-limit", "none,-5"), ("--memory-limit", "1e6,x"),
    ("--objective", "fastest"),
])
def test_bad_budgets_limits_and_objectives_exit_2_with_one_line(args):
    result = invoke(*CHAIN, *args)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("Error: ")


def test_the_objective_shows_forward_and_training_optimal_side_by_side():
    result = invoke(*CHAIN, "--objective", "balanced")
    assert result.exit_code == 0, result.stderr
    assert "forward-optimal" in result.stdout and "training-optimal" in result.stdout
    assert "Recommended (balanced)" in result.stdout


def test_the_recommended_plan_is_among_the_runs_with_ratios_to_torch():
    report = analyze("abc,bd,de,ef->af", [(8, 6, 5), (6, 40), (40, 40), (40, 3)],
                     objective="memory", grad="1,2,3")
    assert report.recommended is not None
    done = execute(report, devices=["cpu"], repeats=1, warmup=0)
    assert done.recommended is not None
    label = done.recommended.label
    runs = [r for r in done.runs if r.strategy == label and not r.is_baseline]
    assert len(runs) == 1 and runs[0].skipped is None
    assert runs[0].max_grad_error is not None and runs[0].max_grad_error < 1e-4
    measured = done.recommended.measured
    assert measured and measured[0]["device"] == "cpu" and "time_vs_torch" in measured[0]
    validate_report(done.to_dict())


def test_a_recommended_plan_on_another_path_runs_under_its_own_label():
    report = analyze("abc,bd,de,ef->af", [(8, 6, 5), (6, 40), (40, 40), (40, 3)],
                     optimize="greedy", memory_limit="none", objective="flops")
    assert report.recommended is not None
    assert report.recommended.plan.path != report.plan.path  # dp's path, not greedy's
    done = execute(report, devices=["cpu"], repeats=1, warmup=0)
    assert done.recommended is not None and done.recommended.label == "recommended"
    [run] = [r for r in done.runs if r.strategy == "recommended"]
    assert run.skipped is None and run.max_grad_error is not None
    assert run.max_grad_error < 1e-4
    assert run.peak_bytes_predicted is not None


def test_a_cases_file_takes_a_limit_list_a_budget_and_an_objective():
    text = json.dumps({"cases": [
        {"name": "sweep", "equation": "ab,bc,cd->ad", "sizes": {"a": 4, "b": 30, "c": 30,
                                                                 "d": 5},
         "memory_limit": ["none", 120, "max_input"], "budget": "64KiB",
         "objective": "memory"},
        {"name": "bad", "equation": "ab,bc->ac", "shapes": [[2, 3], [3, 4]], "budget": "0"},
    ]})
    entries = parse_cases(text, "json", CaseDefaults())
    batch = run_cases(entries)
    sweep, bad = batch.cases
    assert sweep.report is not None and len(sweep.report.memory_limits) == 3
    assert sweep.report.recommended is not None
    assert sweep.report.recommended.objective == "memory"
    assert bad.report is None and "budget" in (bad.error or "")
    assert analyze_case(entries[0].case).budget is not None  # type: ignore[arg-type]


def test_compare_names_a_changed_limit_a_change_of_input_never_a_regression():
    eq, shapes = "abc,bd,de,ef->af", [(8, 6, 5), (6, 40), (40, 40), (40, 3)]
    free = analyze(eq, shapes).to_dict()
    tight = analyze(eq, shapes, memory_limit=100).to_dict()
    assert tight["forward"]["flops"] > free["forward"]["flops"]
    comparison = compare_reports(free, tight)
    assert not comparison.has_regressions
    assert any("memory limit changed" in note and "change of input" in note
               for note in comparison.notes)
    swept = analyze(eq, shapes, memory_limit="none,100").to_dict()
    more = analyze(eq, shapes, memory_limit="none,100,max_input").to_dict()
    comparison = compare_reports(swept, more)
    assert not comparison.has_regressions
    assert [c.status for c in comparison.changes if c.subject.startswith("memory limit 1600")] \
        == ["added"]


def test_compare_still_finds_a_regression_of_the_recommended_plan():
    eq, shapes = "abc,bd,de,ef->af", [(8, 6, 5), (6, 40), (40, 40), (40, 3)]
    before = analyze(eq, shapes, objective="flops").to_dict()
    after = json.loads(json.dumps(before))
    after["recommended"]["training_flops"] += 1
    comparison = compare_reports(before, after)
    assert [c.figure for c in comparison.regressions] == ["training_flops"]


def test_the_search_imports_neither_torch_click_nor_rich():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from einsum_analyze import analyze\n"
        "r = analyze('ab,bc,cd->ad', [(2, 3), (3, 4), (4, 5)], memory_limit='none,max_input',"
        " budget='1KiB', objective='balanced')\n"
        "assert r.recommended is not None\n"
        "print(sorted(m for m in ('click', 'rich', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_comparisons_of_sweeps_validate_against_the_comparison_schema():
    eq, shapes = "abc,bd,de,ef->af", [(8, 6, 5), (6, 40), (40, 40), (40, 3)]
    before = analyze(eq, shapes, memory_limit="none,100", objective="flops").to_dict()
    after = analyze(eq, shapes, memory_limit="none,100,max_input", objective="flops").to_dict()
    validate_comparison(compare_reports(before, after).to_dict())


def test_a_cases_file_budget_nothing_reaches_exits_1(tmp_path):
    path = tmp_path / "cases.toml"
    path.write_text(
        '[[cases]]\nname = "tight"\nequation = "ab,bc,cd->ad"\n'
        'sizes = {a = 4, b = 30, c = 30, d = 5}\nbudget = "100B"\n'
        'memory_limit = ["none", "max_input"]\n\n'
        '[[cases]]\nname = "loose"\nequation = "ab,bc->ac"\nshapes = [[2, 3], [3, 4]]\n'
        'budget = "1MiB"\n'
    )
    result = invoke("--cases", str(path))
    assert result.exit_code == 1
    assert "case 'tight': budget on smallest reachable training peak" in result.stderr
    assert "'loose'" not in result.stderr


def test_cotengra_without_the_extra_is_one_line_and_exit_2(monkeypatch):
    import einsum_analyze.analysis as analysis

    monkeypatch.setattr(analysis, "cotengra_available", lambda: False)
    result = invoke(*CHAIN, "--objective", "flops", "--cotengra")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "pip install 'einsum-analyze[cotengra]'" in result.stderr


def test_the_search_runs_without_cotengra(monkeypatch):
    import einsum_analyze.search.candidates as candidates

    monkeypatch.setattr(candidates, "cotengra_available", lambda: False)
    data = json.loads(invoke(*CHAIN, "--objective", "flops", "--json", "-").stdout)
    assert data["recommended"]["fits"] is True
    assert not any(p["source"].startswith("cotengra") for p in data["pareto"])
