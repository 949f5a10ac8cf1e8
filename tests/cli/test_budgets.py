"""CLI budgets: exit code 1 when exceeded, one stderr line each, the JSON still complete."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli
from einsum_analyze.render.report import format_bytes
from einsum_analyze.report import load_schema

# bc,bd,cm,mdn->bn: forward 31,112 FLOPs; reverse mode retains intermediates.
TN = ["bc,bd,cm,mdn->bn", "--shapes", "512x2,512x2,2x7,7x2x7", "--device", "none"]
MM = ["ab,bc->ac", "--shapes", "2x3,3x4", "--device", "none"]  # 48 FLOPs, forward peak 104 B


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _json(args: list[str]) -> tuple[int, dict[str, Any], str]:
    result = _invoke([*args, "--json", "-"])
    data = json.loads(result.stdout)
    jsonschema.Draft202012Validator(load_schema()).validate(data)
    return result.exit_code, data, result.stderr


def test_budgets_within_limits_exit_0_and_are_recorded() -> None:
    code, data, stderr = _json([*TN, "--max-flops", "31112", "--max-peak", "1MiB",
                                "--max-retained", "1MiB", "--max-backward-flops", "1e6"])
    assert code == 0
    assert stderr == ""
    assert [(b["name"], b["subject"], b["passed"]) for b in data["budgets"]] == [
        ("max-flops", "forward", True),
        ("max-backward-flops", "strategy reverse", True),
        ("max-peak", "strategy reverse", True),
        ("max-retained", "strategy reverse", True),
    ]
    assert data["budgets"][0]["value"] == data["forward"]["flops"] == 31112


def test_an_exceeded_budget_exits_1_with_one_line_each_and_full_json() -> None:
    code, data, stderr = _json([*TN, "--max-flops", "31111", "--max-retained", "0",
                                "--max-peak", "1GiB"])
    assert code == 1
    retained = data["strategies"][0]["retained_bytes"]
    assert retained > 1024
    lines = stderr.splitlines()
    assert lines == [
        "Budget exceeded: max-flops on forward: 31,112 FLOPs > limit 31,111 FLOPs",
        f"Budget exceeded: max-retained on strategy reverse: "
        f"{retained:,} B ({format_bytes(retained)}) > limit 0 B",
    ]
    assert {"forward", "strategies", "gradients", "budgets"} <= set(data)
    assert [b["passed"] for b in data["budgets"]] == [False, True, False]


def test_budget_order_follows_the_option_list() -> None:
    _, data, _ = _json([*TN, "--max-retained", "0", "--max-peak", "1GiB", "--max-flops", "1"])
    assert [b["name"] for b in data["budgets"]] == ["max-flops", "max-peak", "max-retained"]
    assert [b["passed"] for b in data["budgets"]] == [False, True, False]


def test_terminal_output_shows_the_budgets_table(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = _invoke([*TN, "--max-peak", "1KiB", "--json", str(out)])
    assert result.exit_code == 1
    assert "Budgets: 1 exceeded" in result.stdout
    assert "EXCEEDED" in result.stdout
    assert "Budget exceeded: max-peak on strategy reverse" in result.stderr
    data = json.loads(out.read_text())
    assert data["budgets"][0]["passed"] is False


def test_budget_strategy_all_reports_every_strategy() -> None:
    code, data, stderr = _json([*TN, "--max-backward-flops", "66320", "--budget-strategy", "all"])
    assert code == 1
    assert [(b["subject"], b["passed"]) for b in data["budgets"]] == [
        ("strategy reverse", True), ("strategy independent", False),
        ("strategy torch-autograd", True),
    ]
    assert len(stderr.splitlines()) == 1
    assert "strategy independent" in stderr


def test_budget_strategy_follows_the_strategy_option() -> None:
    code, data, _ = _json([*TN, "--strategy", "independent,reverse", "--max-retained", "0"])
    assert code == 0
    assert data["budgets"][0]["subject"] == "strategy independent"


def test_forward_only_peak_budget_checks_the_forward_peak() -> None:
    code, data, stderr = _json([*MM, "--strategy", "none", "--max-peak", "103"])
    assert code == 1
    assert data["budgets"] == [{"name": "max-peak", "subject": "forward", "limit": 103,
                                "value": 104, "unit": "bytes", "passed": False}]
    assert stderr == "Budget exceeded: max-peak on forward: 104 B > limit 103 B\n"


def test_max_time_without_runs_passes_silently() -> None:
    code, data, stderr = _json([*MM, "--max-time", "1ns"])
    assert code == 0
    assert stderr == ""
    assert data["budgets"] == [{"name": "max-time", "subject": "runs (none measured)",
                                "limit": 1e-9, "value": None, "unit": "s", "passed": True}]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-peak", "5XB"], "Error: max-peak: unknown unit 'XB' in '5XB'"),
        (["--max-flops", "many"], "Error: max-flops is 'many'; expected a whole number"),
        (["--max-flops", "1.5"], "Error: max-flops is '1.5'"),
        (["--max-time", "soon"], "Error: max-time is 'soon'"),
        (["--strategy", "none", "--max-retained", "1"],
         "Error: --max-retained needs a backward strategy"),
        (["--strategy", "reverse", "--budget-strategy", "independent", "--max-peak", "1"],
         "Error: budget strategy 'independent' was not modelled; the report has: reverse"),
    ],
)
def test_bad_budgets_exit_2_with_one_line_and_no_stdout(args: list[str], message: str) -> None:
    result = _invoke([*MM, *args, "--json", "-"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(message)
    assert len(result.stderr.splitlines()) == 1


def test_unknown_budget_strategy_is_a_usage_error() -> None:
    result = _invoke([*MM, "--budget-strategy", "bogus"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "bogus" in result.stderr


def test_a_budget_strategy_not_modelled_is_refused_before_any_table() -> None:
    result = _invoke([*MM, "--budget-strategy", "checkpoint", "--max-peak", "1GiB"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == ("Error: budget strategy 'checkpoint' was not modelled; the "
                             "report has: reverse, independent, torch-autograd\n")


def test_help_documents_budgets_and_exit_codes() -> None:
    result = _invoke(["--help"])
    assert result.exit_code == 0
    for text in ("--max-flops", "--max-backward-flops", "--max-peak", "--max-retained",
                 "--max-time", "--budget-strategy", "--cases", "compare", "1  a budget"):
        assert text in result.stdout


def test_max_time_checks_real_runs() -> None:
    pytest.importorskip("torch")
    base = ["ab,bc->ac", "--shapes", "2x3,3x4", "--device", "cpu", "--repeats", "1",
            "--warmup", "0", "--strategy", "reverse", "--json", "-"]
    tight = _invoke([*base, "--max-time", "1ns"])
    data = json.loads(tight.stdout)
    jsonschema.Draft202012Validator(load_schema()).validate(data)
    assert data["runs"]
    measured = [b for b in data["budgets"] if b["value"] is not None]
    assert measured and all(b["subject"].startswith("run ") for b in measured)
    for budget in measured:
        run = data["runs"][int(budget["subject"].split()[1])]
        expected = run["forward_s"]["median"] + (run["backward_s"] or {"median": 0})["median"]
        assert budget["value"] == pytest.approx(expected)
    assert tight.exit_code == 1
    assert "Budget exceeded: max-time on run 0" in tight.stderr
    loose = _invoke([*base, "--max-time", "60"])
    assert loose.exit_code == 0, loose.stderr


def test_a_wide_step_is_run_pairwise_and_the_budget_it_breaks_exits_1() -> None:
    # Under a limit of 1,000 elements opt_einsum's path ends with a step of three tensors.
    # It runs pairwise, every strategy over 45 KiB as measured: no plan is said to fit, and
    # the smallest reachable peak (sliced) is over it too.
    code, data, stderr = _json([*TN, "--budget", "45KiB", "--memory-limit", "1e3",
                                "--max-search-time", "600"])
    assert code == 1
    forward = data["forward"]
    assert forward["path"] == [[2, 3], [0, 1, 2]] and forward["flops"] == 43_400
    assert forward["pairwise"]["path"] == [[2, 3], [0, 1], [0, 1]]
    assert forward["pairwise"]["flops"] == 31_112
    assert all(not s["fits_budget"] for s in data["strategies"])
    assert data["recommended"]["fits"] is False
    assert any("run pairwise, as torch.einsum contracts such a step" in w
               for w in data["warnings"])
    (line,) = [line for line in stderr.splitlines() if line.startswith("Budget exceeded")]
    assert "smallest reachable training peak" in line
