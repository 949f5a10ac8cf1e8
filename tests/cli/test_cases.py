"""CLI batch mode: --cases FILE, one document holding a list, exit codes across cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli
from einsum_analyze.report import load_schema

GOOD = """
[defaults]
budgets = { max_flops = 1e6 }

[[cases]]
name = "mm"
equation = "ab,bc->ac"
shapes = [[2, 3], [3, 4]]

[[cases]]
name = "chain"
equation = "ij,jk,kl->il"
sizes = { i = 8, j = 4, k = 8, l = 4 }
budgets = { max_peak = "1MiB", budget_strategy = "all" }
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _validate(data: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(load_schema()).validate(data)


def test_toml_cases_write_one_document(tmp_path: Path) -> None:
    result = _invoke(["--cases", _write(tmp_path, "c.toml", GOOD), "--device", "none",
                      "--json", "-"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    data = json.loads(result.stdout)
    _validate(data)
    assert [(c["name"], c["status"]) for c in data["cases"]] == [("mm", "ok"), ("chain", "ok")]
    assert data["summary"] == {"total": 2, "ok": 2, "budget_exceeded": 0, "errors": 0}
    mm = data["cases"][0]["report"]
    assert mm["forward"]["flops"] == 48
    assert [b["name"] for b in mm["budgets"]] == ["max-flops"]
    chain = data["cases"][1]["report"]
    assert [b["subject"] for b in chain["budgets"]][1:] == [
        "strategy reverse", "strategy independent", "strategy torch-autograd"
    ]


def test_json_cases_and_terminal_table(tmp_path: Path) -> None:
    cases = [{"name": "mm", "equation": "ab,bc->ac", "shapes": "2x3,3x4"}]
    out = tmp_path / "out.json"
    result = _invoke(["--cases", _write(tmp_path, "c.json", json.dumps({"cases": cases})),
                      "--device", "none", "--json", str(out)])
    assert result.exit_code == 0
    assert "Cases: 1" in result.stdout and "mm" in result.stdout
    _validate(json.loads(out.read_text()))


def test_command_line_options_are_the_defaults(tmp_path: Path) -> None:
    result = _invoke(["--cases", _write(tmp_path, "c.toml", GOOD), "--device", "none",
                      "--dtype", "float64", "--strategy", "reverse", "--max-retained", "0",
                      "--json", "-"])
    data = json.loads(result.stdout)
    _validate(data)
    for case in data["cases"]:
        report = case["report"]
        assert report["dtype"] == "float64"
        assert [s["name"] for s in report["strategies"]] == ["reverse"]
        assert "max-retained" in [b["name"] for b in report["budgets"]]
    # mm retains nothing; the chain keeps an intermediate for backward
    assert [c["status"] for c in data["cases"]] == ["ok", "budget-exceeded"]
    assert result.exit_code == 1
    assert result.stderr.startswith("Budget exceeded: case 'chain': max-retained on strategy "
                                    "reverse: ")


def test_a_bad_case_does_not_stop_the_others_and_exits_2(tmp_path: Path) -> None:
    text = GOOD + """
[[cases]]
name = "mismatch"
equation = "ab,bc->ac"
shapes = [[2, 3], [4, 4]]

[[cases]]
name = "over-budget"
equation = "ab,bc->ac"
shapes = [[2, 3], [3, 4]]
budgets = { max_flops = 1 }
"""
    result = _invoke(["--cases", _write(tmp_path, "c.toml", text), "--device", "none",
                      "--json", "-"])
    assert result.exit_code == 2  # bad input wins over an exceeded budget
    data = json.loads(result.stdout)
    _validate(data)
    assert [c["status"] for c in data["cases"]] == ["ok", "ok", "error", "budget-exceeded"]
    assert "size 3" in data["cases"][2]["error"]
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Error: case 'mismatch': index 'b' has size 3")
    assert lines[1].startswith("Budget exceeded: case 'over-budget': max-flops on forward: ")
    assert len(lines) == 2


def test_only_budget_failures_exit_1(tmp_path: Path) -> None:
    text = GOOD.replace("max_flops = 1e6", "max_flops = 100")
    result = _invoke(["--cases", _write(tmp_path, "c.toml", text), "--device", "none",
                      "--json", "-"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [c["status"] for c in data["cases"]] == ["ok", "budget-exceeded"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["ab,bc->ac"], "give either --cases or EQUATION"),
        (["--shapes", "2x3"], "give either --cases or EQUATION"),
    ],
)
def test_cases_with_an_equation_is_a_usage_error(tmp_path: Path, extra: list[str],
                                                 message: str) -> None:
    result = _invoke(["--cases", _write(tmp_path, "c.toml", GOOD), *extra])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr


def test_neither_equation_nor_cases_is_a_usage_error() -> None:
    result = _invoke(["--device", "none"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Missing argument 'EQUATION' (or give --cases FILE)" in result.stderr


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("c.yaml", "cases: []", "must end in .json or .toml"),
        ("c.toml", "[[cases]\n", "cases file is not valid TOML"),
        ("c.json", "{}", "no non-empty list 'cases'"),
        ("c.json", '{"cases": [], }', "not valid JSON"),
    ],
)
def test_a_bad_cases_file_exits_2_with_nothing_on_stdout(tmp_path: Path, name: str, text: str,
                                                         message: str) -> None:
    result = _invoke(["--cases", _write(tmp_path, name, text), "--json", "-"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_missing_cases_file_exits_2(tmp_path: Path) -> None:
    result = _invoke(["--cases", str(tmp_path / "absent.toml")])
    assert result.exit_code == 2
    assert "cannot read the cases file" in result.stderr


def test_the_example_cases_file_passes() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "ci" / "cases.toml"
    result = _invoke(["--cases", str(path), "--device", "none", "--json", "-"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    _validate(data)
    assert data["summary"]["ok"] == data["summary"]["total"] >= 3
    assert all(c["report"]["budgets"] for c in data["cases"])
