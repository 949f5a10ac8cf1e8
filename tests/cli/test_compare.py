"""CLI comparison: `einsum-analyze compare BEFORE AFTER`, routed through the main command."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli, compare_cli
from einsum_analyze.report.compare import load_comparison_schema

V1 = Path(__file__).parents[1] / "golden" / "schema_v1"


def _invoke(command: Any, args: list[str]) -> Any:
    return CliRunner().invoke(command, args, catch_exceptions=False)


def _save(tmp_path: Path, name: str, args: list[str]) -> str:
    path = tmp_path / name
    result = _invoke(cli, [*args, "--device", "none", "--json", str(path)])
    assert result.exit_code in (0, 1), result.stderr
    return str(path)


@pytest.fixture
def reports(tmp_path: Path) -> dict[str, str]:
    return {
        "small": _save(tmp_path, "small.json", ["ab,bc->ac", "--shapes", "2x3,3x4"]),
        "small2": _save(tmp_path, "small2.json", ["ab,bc->ac", "--sizes", "a=2,b=3,c=4"]),
        "large": _save(tmp_path, "large.json", ["ab,bc->ac", "--shapes", "2x3,3x5"]),
    }


def test_same_figures_exit_0(reports: dict[str, str]) -> None:
    result = _invoke(cli, ["compare", reports["small"], reports["small2"]])
    assert result.exit_code == 0
    assert result.stderr == ""
    assert "No figure changed" in result.stdout
    assert "No regression" in result.stdout


def test_a_regression_exits_1_and_names_each_figure(reports: dict[str, str]) -> None:
    result = _invoke(cli, ["compare", reports["small"], reports["large"]])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "Regression: forward flops: 48 FLOPs -> 60 FLOPs (+25.0%)"
    assert all(line.startswith("Regression: ") for line in lines)
    assert "Changed figures" in result.stdout
    assert "note: shapes changed" in result.stdout


def test_an_improvement_exits_0(reports: dict[str, str]) -> None:
    result = _invoke(cli, ["compare", reports["large"], reports["small"]])
    assert result.exit_code == 0
    assert "improved" in result.stdout
    assert result.stderr == ""


def test_json_output_validates(reports: dict[str, str]) -> None:
    result = _invoke(cli, ["compare", reports["small"], reports["large"], "--json", "-"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    jsonschema.Draft202012Validator(load_comparison_schema()).validate(data)
    assert data["regressed"] is True
    assert data["kind"] == "report"
    assert data["summary"]["regressed"] >= 1
    assert "Regression:" in result.stderr


def test_compare_cli_object_works_alone(reports: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    result = _invoke(compare_cli, [reports["small"], reports["small2"], "--json", str(out)])
    assert result.exit_code == 0
    assert json.loads(out.read_text())["regressed"] is False


def _with_runs(path: str, forward: float, tmp_path: Path, name: str) -> str:
    data = json.loads(Path(path).read_text())
    data["runs"] = [{"strategy": "reverse", "backend": "torch", "device": "cpu",
                     "baseline": False, "forward_s": {"median": forward},
                     "backward_s": {"median": 0.002}}]
    out = tmp_path / name
    out.write_text(json.dumps(data))
    return str(out)


@pytest.mark.parametrize(("tolerance", "code"), [("0.05", 1), ("0.25", 0)])
def test_tolerance_applies_to_timings(reports: dict[str, str], tmp_path: Path,
                                      tolerance: str, code: int) -> None:
    before = _with_runs(reports["small"], 0.010, tmp_path, "b.json")
    after = _with_runs(reports["small"], 0.012, tmp_path, "a.json")  # +20 %
    result = _invoke(cli, ["compare", before, after, "--tolerance", tolerance,
                           "--times", "seconds"])
    assert result.exit_code == code
    if code:
        assert result.stderr.startswith("Regression: run reverse, torch, cpu forward_s: ")


def test_batch_reports_compare_by_case(tmp_path: Path) -> None:
    cases = tmp_path / "c.toml"
    cases.write_text('[[cases]]\nname = "mm"\nequation = "ab,bc->ac"\nshapes = "2x3,3x4"\n')
    before = tmp_path / "before.json"
    after = tmp_path / "after.json"
    assert _invoke(cli, ["--cases", str(cases), "--device", "none", "--json",
                         str(before)]).exit_code == 0
    cases.write_text('[[cases]]\nname = "mm"\nequation = "ab,bc->ac"\nshapes = "2x3,3x6"\n')
    assert _invoke(cli, ["--cases", str(cases), "--device", "none", "--json",
                         str(after)]).exit_code == 0
    result = _invoke(cli, ["compare", str(before), str(after)])
    assert result.exit_code == 1
    assert result.stderr.startswith("Regression: case 'mm': forward flops: ")
    mixed = _invoke(cli, ["compare", str(before), str(tmp_path / "before.json")])
    assert mixed.exit_code == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read BEFORE report"),
        ("not json", "BEFORE report"),
        ('{"schema_version": 7, "forward": {}}', "BEFORE '{path}' has schema_version 7; this "
         "einsum-analyze reads versions 1 and 2 (docs/schema.md)"),
        ("[1, 2]", "BEFORE '{path}' is not an einsum-analyze report"),
    ],
)
def test_bad_files_exit_2_with_nothing_on_stdout(reports: dict[str, str], tmp_path: Path,
                                                 content: str | None, message: str) -> None:
    path = tmp_path / "before.json"
    if content is not None:
        path.write_text(content)
    result = _invoke(cli, ["compare", str(path), reports["small"], "--json", "-"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and message.format(path=path) in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_single_against_batch_exits_2(reports: dict[str, str], tmp_path: Path) -> None:
    batch = tmp_path / "batch.json"
    data = {"schema_version": 2, "tool": {}, "cases": [], "summary": {}}
    batch.write_text(json.dumps(data))
    result = _invoke(cli, ["compare", reports["small"], str(batch)])
    assert result.exit_code == 2
    assert f"BEFORE '{reports['small']}' is a report and AFTER '{batch}' a batch" in \
        result.stderr


def test_usage_errors_exit_2(reports: dict[str, str]) -> None:
    missing = _invoke(cli, ["compare", reports["small"]])
    assert missing.exit_code == 2
    assert "AFTER.json" in missing.stderr
    negative = _invoke(cli, ["compare", reports["small"], reports["small"], "--tolerance", "-1"])
    assert negative.exit_code == 2


def test_compare_help_lists_the_rules() -> None:
    result = _invoke(cli, ["compare", "--help"])
    assert result.exit_code == 0
    assert "Usage: " in result.stdout and "compare [OPTIONS] BEFORE.json AFTER.json" in \
        result.stdout
    for text in ("--tolerance", "exact", "regressed", "Exit codes"):
        assert text in result.stdout


def test_an_equation_can_still_be_named_compare_after_double_dash() -> None:
    result = _invoke(cli, ["--device", "none", "--sizes",
                           "c=2,o=2,m=2,p=2,a=2,r=2,e=2", "--strategy", "none", "--json", "-",
                           "--", "compare"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["input"]["equation"] == "compare"


def test_installed_entry_point_routes_compare(reports: dict[str, str]) -> None:
    exe = shutil.which("einsum-analyze")
    if exe is None:
        pytest.skip("the einsum-analyze script is not on PATH")
    done = subprocess.run([exe, "compare", reports["small"], reports["large"]],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "Regression: forward flops" in done.stderr


@pytest.mark.parametrize("old_first", [True, False])
def test_a_version_1_report_is_read_either_side(tmp_path: Path, old_first: bool) -> None:
    old = str(V1 / "report_reverse.json")
    new = _save(tmp_path, "new.json", ["ab,bc->ac", "--shapes", "2x3,3x4", "--strategy",
                                       "reverse"])
    before, after = (old, new) if old_first else (new, old)
    result = _invoke(cli, ["compare", before, after])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert "No figure changed (5 compared)" in result.stdout
    which = f"BEFORE {old!r}" if old_first else f"AFTER {old!r}"
    note = f"note: {which} is a schema_version 1 report, read as version 2"
    # The note wraps at the terminal's width, wherever the checkout's path puts it.
    assert note in " ".join(result.stdout.split())


def test_a_version_1_report_shows_regressions_against_version_2(tmp_path: Path) -> None:
    new = _save(tmp_path, "new.json", ["ab,bc->ac", "--shapes", "2x3,3x5", "--strategy",
                                       "reverse"])
    result = _invoke(cli, ["compare", str(V1 / "report_reverse.json"), new, "--json", "-"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    jsonschema.Draft202012Validator(load_comparison_schema()).validate(data)
    assert data["schema_version"] == 2
    assert data["notes"][0].endswith("is a schema_version 1 report, read as version 2 "
                                     "(docs/schema.md)")
    assert result.stderr.startswith("Regression: forward flops: 48 FLOPs -> 60 FLOPs")


@pytest.mark.parametrize("version", [3, 0, "2"])
def test_an_unreadable_version_is_one_line_naming_file_and_version(
    reports: dict[str, str], tmp_path: Path, version: object
) -> None:
    data = json.loads(Path(reports["small"]).read_text())
    data["schema_version"] = version
    path = tmp_path / "future.json"
    path.write_text(json.dumps(data))
    result = _invoke(cli, ["compare", reports["small"], str(path)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: AFTER {str(path)!r} has schema_version {version!r}; this einsum-analyze "
        "reads versions 1 and 2 (docs/schema.md)\n"
    )


def test_a_budget_set_and_exceeded_only_after_is_a_regression_in_words(tmp_path: Path) -> None:
    args = ["bc,bd,cm,mdn->bn", "--shapes", "512x2,512x2,2x7,7x2x7"]
    before = _save(tmp_path, "before.json", args)
    after = _save(tmp_path, "after.json", [*args, "--max-peak", "50KiB"])
    result = _invoke(cli, ["compare", before, after])
    assert result.exit_code == 1
    assert result.stderr == ("Regression: budget max-peak on strategy reverse: exceeded "
                             "(52.88 KiB > 50.00 KiB) after, not set before\n")
    assert "not set" in result.stdout and "exceeded (52.88 KiB > 50.00 KiB)" in result.stdout
