"""Cases files: reading JSON and TOML, defaults, bad cases, and running a batch."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from corpus import by_category

from einsum_analyze import analyze
from einsum_analyze.analysis import run_cases
from einsum_analyze.errors import InputFileError
from einsum_analyze.report import load_schema
from einsum_analyze.report.budgets import Budgets
from einsum_analyze.report.cases import CaseDefaults, cases_format, parse_cases

ROOT = Path(__file__).resolve().parents[3]

TOML = """
[defaults]
dtype = "float64"
budgets = { max_flops = 1e9 }

[[cases]]
name = "mm"
equation = "ab,bc->ac"
shapes = [[2, 3], [3, 4]]

[[cases]]
name = "mm-sizes"
equation = "ab,bc->ac"
sizes = { a = 2, b = 3, c = 4 }
dtype = "float32"
strategy = "reverse"
grad = [1]
budgets = { max_flops = 40, max_peak = "1KiB" }
"""


def test_cases_format_by_suffix() -> None:
    assert cases_format("a/b.TOML") == "toml"
    assert cases_format("cases.json") == "json"
    with pytest.raises(InputFileError, match="must end in .json or .toml"):
        cases_format("cases.yaml")


def test_toml_cases_resolve_defaults_then_case_keys() -> None:
    entries = parse_cases(TOML, "toml", CaseDefaults(optimize="greedy"))
    assert [e.name for e in entries] == ["mm", "mm-sizes"]
    first, second = (e.case for e in entries)
    assert first is not None and second is not None
    assert first.shapes == ((2, 3), (3, 4)) and first.sizes is None
    assert first.options.dtype == "float64"  # file defaults over the command line
    assert first.options.optimize == "greedy"  # the command line where nothing else says
    assert first.options.budgets == Budgets(max_flops=10**9)
    assert second.sizes == {"a": 2, "b": 3, "c": 4} and second.shapes is None
    assert second.options.dtype == "float32"  # the case over the file defaults
    assert second.options.strategies == ("reverse",)
    assert second.options.grad == (1,)
    assert second.options.budgets == Budgets(max_flops=40, max_peak_bytes=1024)


def test_command_line_budgets_merge_under_file_and_case_budgets() -> None:
    defaults = CaseDefaults(budgets=Budgets(max_retained_bytes=0, max_flops=1))
    entries = parse_cases(TOML, "toml", defaults)
    assert entries[0].case is not None and entries[1].case is not None
    assert entries[0].case.options.budgets == Budgets(max_retained_bytes=0, max_flops=10**9)
    assert entries[1].case.options.budgets == Budgets(
        max_retained_bytes=0, max_flops=40, max_peak_bytes=1024
    )


def test_json_object_and_bare_list_and_text_shapes() -> None:
    text = json.dumps([
        {"name": "a", "equation": "ij,jk", "shapes": "2x3,3x4", "kind": "free text"},
        {"name": "b", "equation": "ij,jk", "sizes": "i=2,j=3,k=4", "strategy": ["none"]},
    ])
    entries = parse_cases(text, "json")
    assert entries[0].case is not None and entries[0].case.shapes == ((2, 3), (3, 4))
    assert entries[1].case is not None and entries[1].case.sizes == {"i": 2, "j": 3, "k": 4}
    assert entries[1].case.options.strategies == ()
    assert parse_cases(json.dumps({"cases": json.loads(text)}), "json") == entries


def test_other_top_level_keys_are_notes() -> None:
    text = '{"about": "x", "scaling": {"n": [1]}, "cases": [{"name": "a", "equation": "i", '\
        '"shapes": [[2]]}]}'
    (entry,) = parse_cases(text, "json")
    assert entry.case is not None


def test_the_public_bench_cases_file_reads_as_is() -> None:
    # benchmarks/cases.json is the repository's copy of the public benchmark cases.
    path = ROOT / "benchmarks" / "cases.json"
    entries = parse_cases(path.read_text(encoding="utf-8"), "json")
    assert entries and all(e.case is not None for e in entries), [e.error for e in entries]
    assert "tn18-b512" in [e.name for e in entries]
    # tests/corpus.py copies the same cases (category "bench"): the two copies agree.
    in_file = {(e.case.equation, e.case.shapes) for e in entries if e.case is not None}
    in_corpus = {(c.equation, c.shapes) for c in by_category("bench")}
    assert in_file == in_corpus


@pytest.mark.parametrize(
    ("raw", "name", "match"),
    [
        ({"equation": "ab,bc", "shapes": [[2, 3], [3, 4]]}, "cases[0]", "case 0 has no name"),
        ({"name": "x", "shapes": [[2]]}, "x", "case 'x' has no equation"),
        ({"name": "x", "equation": "ab"}, "x", "exactly one of 'shapes' and 'sizes'"),
        ({"name": "x", "equation": "ab", "shapes": [[2, 2]], "sizes": {"a": 2}}, "x",
         "exactly one of"),
        ({"name": "x", "equation": "ab", "shape": [[2, 2]]}, "x", "unknown key 'shape'"),
        ({"name": "x", "equation": "ab", "shapes": [[2, 2.5]]}, "x", "size 2.5"),
        ({"name": "x", "equation": "ab", "shapes": "2y2"}, "x", "not of the form AxBxC"),
        ({"name": "x", "equation": "ab", "sizes": {"ab": 2}}, "x", "an index is one letter"),
        ({"name": "x", "equation": "ab", "sizes": {"a": "2"}}, "x", "size '2'"),
        ({"name": "x", "equation": "ab", "shapes": [[2, 2]], "budgets": {"max_peak": "lots"}},
         "x", "max-peak"),
        ({"name": "x", "equation": "ab", "shapes": [[2, 2]], "budgets": 5}, "x",
         "budgets must be a table"),
        ({"name": "x", "equation": "ab", "shapes": [[2, 2]], "grad": 1.5}, "x", "grad is 1.5"),
        ({"name": "x", "equation": "ab", "shapes": [[2, 2]], "strategy": 3}, "x",
         "strategy is 3"),
    ],
)
def test_a_bad_case_is_an_error_entry(raw: dict[str, object], name: str, match: str) -> None:
    good = {"name": "good", "equation": "ab,bc->ac", "shapes": [[2, 3], [3, 4]]}
    entries = parse_cases(json.dumps([raw, good]), "json")
    assert entries[0].name == name
    assert entries[0].case is None
    assert entries[0].error is not None and match in entries[0].error
    assert entries[1].case is not None


def test_duplicate_names_make_the_second_an_error() -> None:
    case = {"name": "a", "equation": "ab", "shapes": [[2, 2]]}
    first, second = parse_cases(json.dumps([case, case]), "json")
    assert first.case is not None
    assert second.case is None and second.error is not None
    assert "already used" in second.error


@pytest.mark.parametrize(
    ("text", "fmt", "match"),
    [
        ("{", "json", "not valid JSON"),
        ("[[cases]\n", "toml", "not valid TOML"),
        ('"text"', "json", "a cases file holds"),
        ("{}", "json", "no non-empty list 'cases'"),
        ('{"cases": []}', "json", "no non-empty list 'cases'"),
        ('{"cases": [{}], "defaults": 3}', "json", "'defaults' must be a table"),
        ('{"cases": [{}], "defaults": {"budgets": {"max_flop": 1}}}', "json",
         "cases file defaults budgets has an unknown budget"),
    ],
)
def test_file_level_problems_raise(text: str, fmt: str, match: str) -> None:
    with pytest.raises(InputFileError, match=match):
        parse_cases(text, fmt)  # type: ignore[arg-type]


def test_run_cases_records_statuses_and_keeps_going() -> None:
    text = json.dumps({"cases": [
        {"name": "ok", "equation": "ab,bc->ac", "shapes": [[2, 3], [3, 4]],
         "budgets": {"max_flops": 48}},
        {"name": "over", "equation": "ab,bc->ac", "shapes": [[2, 3], [3, 4]],
         "budgets": {"max_flops": 47}},
        {"name": "mismatch", "equation": "ab,bc->ac", "shapes": [[2, 3], [4, 4]]},
        {"name": "bad-dtype", "equation": "ab,bc->ac", "shapes": [[2, 3], [3, 4]],
         "dtype": "int8"},
        {"name": "no-strategy", "equation": "ab,bc->ac", "shapes": [[2, 3], [3, 4]],
         "strategy": "none", "budgets": {"max_retained": 0}},
        {"name": "last", "equation": "i->", "shapes": [[5]]},
    ]})
    batch = run_cases(parse_cases(text, "json"))
    assert [c.status for c in batch.cases] == [
        "ok", "budget-exceeded", "error", "error", "error", "ok"
    ]
    assert batch.has_errors and batch.has_budget_failures
    errors = {c.name: c.error for c in batch.cases if c.error}
    assert "size 3" in errors["mismatch"]
    assert "int8" in errors["bad-dtype"]
    assert "needs a backward strategy" in errors["no-strategy"]
    data = batch.to_dict()
    assert data["summary"] == {"total": 6, "ok": 2, "budget_exceeded": 1, "errors": 3}
    assert data["cases"][1]["report"]["budgets"][0]["passed"] is False
    assert data["cases"][2] == {"name": "mismatch", "status": "error",
                                "error": errors["mismatch"]}
    jsonschema.Draft202012Validator(load_schema()).validate(data)


def test_run_cases_uses_the_runner_and_applies_budgets_after_it() -> None:
    seen = []

    def runner(case):  # type: ignore[no-untyped-def]
        seen.append(case.name)
        report = analyze(case.equation, case.shapes, sizes=case.sizes,
                         strategies=case.options.strategies)
        return report

    entries = parse_cases(TOML, "toml")
    batch = run_cases(entries, runner=runner)
    assert seen == ["mm", "mm-sizes"]
    assert [c.status for c in batch.cases] == ["ok", "budget-exceeded"]
    assert not batch.has_errors


def test_batch_document_shape() -> None:
    batch = run_cases(parse_cases(TOML, "toml"))
    data = batch.to_dict()
    assert set(data) == {"schema_version", "tool", "cases", "summary"}
    assert [set(c) for c in data["cases"]] == [{"name", "status", "report"}] * 2
    jsonschema.Draft202012Validator(load_schema()).validate(data)
    broken = json.loads(json.dumps(data))
    del broken["cases"][0]["report"]["forward"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(load_schema()).validate(broken)


def test_ci_core_modules_import_neither_click_rich_nor_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, einsum_analyze.report.budgets, einsum_analyze.report.cases,"
        " einsum_analyze.report.compare;"
        "print(sorted(m for m in ('click', 'rich', 'torch') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
