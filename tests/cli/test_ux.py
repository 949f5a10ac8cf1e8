"""What a user sees (issue 10): first output at once, no traceback, readable figures at
any width, figures that reconcile, cases files and compare that don't mislead.

Each test failed on the tree before these changes.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from einsum_analyze import analyze, execution
from einsum_analyze.cli import cli
from einsum_analyze.render.formatting import format_bytes, format_count
from einsum_analyze.render.report import stacked, wrap_equation
from einsum_analyze.render.terminal import RunProgress

README = ["bc,bd,cm,mdn->bn", "--shapes", "512x2,512x2,2x7,7x2x7"]
FAST = ["--repeats", "2", "--warmup", "0"]
HUGE_SIZES = ",".join(f"{label}=1000000" for label in "ijklmnopqrst")
ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)


def one_error_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


# --- 1. the first output comes at once ------------------------------------------------------


def test_analysis_is_printed_before_the_runs_start(monkeypatch):
    def fake_execute(report, **_):
        print("RUNS START")
        return report

    monkeypatch.setattr(execution, "execute", fake_execute)
    result = invoke(*README, "--device", "cpu")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.index("Forward path") < out.index("Backward strategies") < out.index("RUNS START")


def test_progress_counts_the_runs():
    seen: list[str] = []
    report = analyze("ab,bc->ac", [(2, 3), (3, 4)], dtype="float64")
    execution.execute(report, devices=["cpu"], repeats=1, warmup=0, on_progress=seen.append)
    assert [label.split()[0] for label in seen] == ["1/4", "2/4", "3/4", "4/4"]
    assert seen[0].startswith("1/4 reverse on cpu")


def test_progress_bar_takes_the_counts_and_streams_the_runs():
    updates: list[dict] = []
    printed: list[str] = []
    bar = SimpleNamespace(add_task=lambda *a, **k: 7, update=lambda task, **k: updates.append(k),
                          remove_task=lambda task: None,
                          advance=lambda task: updates.append({"advance": task}),
                          console=SimpleNamespace(print=lambda text, **k: printed.append(text)))
    progress = RunProgress(bar)
    progress.cases(2)
    progress.next_case("mm")
    progress.run("3/8 reverse on cuda:0 (torch)")
    assert updates[0]["description"] == "case 1/2 mm"
    assert updates[-1]["total"] == 8 and updates[-1]["completed"] == 2
    assert updates[-1]["description"] == "3/8 reverse on cuda:0 (torch)"
    report = analyze("ab,bc->ac", [(2, 3), (3, 4)], dtype="float64")
    (run, *_) = execution.execute(report, devices=["cpu"], repeats=1, warmup=0).runs
    progress.run_done(run)
    assert updates[-1] == {"completed": 2}  # runs 1 and 2 are started, one is done
    assert printed[-1].startswith("  reverse on cpu: fwd ") and "grad err" in printed[-1]
    # The executor labels every run before it times the first: the finished runs then
    # count up to the total and never past it (it once read 6/4 and 7/4).
    progress.finish_runs()
    for k in range(1, 5):
        progress.run(f"{k}/4 reverse on cpu (torch)")
    counts = []
    for _ in range(4):
        progress.run_done(run)
        counts.append(updates[-1]["completed"])
    assert counts == [3, 3, 3, 4]
    assert not any("advance" in update for update in updates)


def test_default_device_is_auto():
    import torch

    expected = ("cuda:0",) if torch.cuda.is_available() else ("cpu",)
    assert execution.resolve_devices(None) == expected
    assert execution.resolve_devices(["auto"]) == expected
    assert "auto" in invoke("--help").stdout


def test_cases_table_has_the_timings(tmp_path):
    cases = tmp_path / "cases.toml"
    cases.write_text('[[cases]]\nname = "mm"\nequation = "ab,bc->ac"\nshapes = "2x3,3x4"\n')
    result = invoke("--cases", str(cases), "--device", "cpu", *FAST)
    assert result.exit_code == 0, result.stderr
    assert "fwd+bwd" in result.stdout
    assert re.search(r"\d+(\.\d+)? (us|ms|ns|s) \(", result.stdout)


# --- 2. no traceback, whatever the input ----------------------------------------------------

BIG = "9" * 5000


@pytest.mark.parametrize("args", [
    ["ab,bc->ac", "--shapes", f"2x{BIG},3x4"],
    ["ab,bc->ac", "--sizes", f"a={BIG},b=2,c=3"],
    ["ab,bc->ac", "--sizes", "a=2,b=2,c=3", "--grad", BIG],
    ["ab,bc->ac", "--sizes", "a=2,b=2,c=3", "--max-flops", BIG],
    ["ab,bc->ac", "--shapes", "[" * 2000 + "]" * 2000],
])
def test_huge_integers_and_deep_json_are_one_line(args):
    one_error_line(invoke(*args, "--device", "none"))


def test_deep_json_report_in_compare_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 2000 + "]" * 2000)
    one_error_line(invoke("compare", str(deep), str(deep)))


def test_byte_figures_beyond_a_float():
    assert format_bytes(10**400) == "8.88e+384 PiB"
    assert format_bytes(4 * 10**72) == "3.55e+57 PiB"
    assert format_count(10**5000) == "1.00e5000"


def test_overflow_names_the_first_step_that_is_not_finite():
    import torch

    report = analyze("a,ab,bc->c", [(4,), (4, 4), (4, 4)], dtype="float16")
    operands = [torch.full((4,), 100.0, dtype=torch.float16),
                torch.full((4, 4), 100.0, dtype=torch.float16),
                torch.full((4, 4), 100.0, dtype=torch.float16)]
    run = execution.Run(strategy="reverse", is_baseline=False, device="cpu", backend="torch",
                        max_grad_error=math.inf)
    marked = execution._overflowed(run, report, SimpleNamespace(operands=operands))
    assert marked.max_grad_error is None
    step = report.plan.steps[1]
    assert marked.note == (f"overflowed in float16: step 1 ({step.equation}) is the first "
                           "whose output is not finite")


def test_float16_operands_are_scaled_so_sums_stay_finite():
    report = analyze("ab,bc,cd->ad", [(8, 256), (256, 256), (256, 8)], dtype="float16")
    scales = execution.operand_scales(report)
    assert math.isclose(math.prod(scales), 256**-1.0)  # sqrt of every summed size
    assert execution.operand_scales(analyze("ab,bc->ac", [(2, 3), (3, 4)])) == ()


def test_reports_never_hold_nan():
    from einsum_analyze.render.terminal import finite

    data = finite({"a": [1.0, math.nan, {"b": math.inf}], "c": 2})
    assert data == {"a": [1.0, None, {"b": None}], "c": 2}


# --- 3. astronomical sizes read as numbers --------------------------------------------------


def test_astronomical_runs_are_refused_in_one_short_line():
    result = invoke("ijklmnopqrst->", "--sizes", HUGE_SIZES, "--device", "cpu")
    assert result.exit_code == 0, result.stderr
    assert "3.55e+57 PiB" in result.stdout
    assert not re.search(r"\d{12,}", result.stdout)
    skips = [line for line in result.stdout.splitlines() if line.startswith("skipped ")]
    assert skips and all("beyond any device" in line and len(line) <= 120 for line in skips)


# --- 4. any width, any pipe -----------------------------------------------------------------


def test_sixty_columns_in_a_pipe_stack_instead_of_cutting():
    result = invoke(*README, "--device", "none", env={"COLUMNS": "60"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 60
    assert "…" not in result.stdout
    assert any(line.startswith("train peak (incl. inputs)") for line in lines)


def test_long_equations_wrap_after_commas_never_before_the_arrow():
    pairs = zip("abcdefghijklmnopqrs", "bcdefghijklmnopqrst", strict=True)
    terms = ",".join(f"{a}{b}" for a, b in pairs)
    wrapped = wrap_equation(terms + "->at", 20)
    assert wrapped.replace("\n", "") == terms + "->at"
    assert all(len(line) <= 20 for line in wrapped.splitlines())
    assert wrapped.splitlines()[-1].endswith("st->at")
    result = invoke(terms + "->at", "--sizes", ",".join(f"{c}=2" for c in "abcdefghijklmnopqrst"),
                    "--device", "none", env={"COLUMNS": "80"})
    assert "..." not in result.stdout and "…" not in result.stdout


def test_stacked_is_generic():
    from rich.table import Table

    table = Table(title="t")
    table.add_column("name")
    table.add_column("value")
    table.add_row("x", "1")
    table.add_row("y", "2")
    out = stacked(table)
    assert [list(column.cells) for column in out.columns] == [
        ["name", "value", "name", "value"], ["x", "1", "y", "2"]]


def test_closed_pipe_ends_quietly_with_exit_0():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for extra in ([], ["--json", "-"]):
        process = subprocess.Popen(
            [sys.executable, "-m", "einsum_analyze", *README, "--device", "none", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.close()
        code = process.wait(timeout=60)
        with process.stderr:
            assert process.stderr.read() == b""
        assert code == 0


def test_warnings_go_to_stderr_once():
    # random-greedy's path breaks the limit: replanned, with one warning per contraction
    # and the same text must not repeat.
    result = invoke("ea,ac,ce->", "--shapes", "32x32,32x32,32x32", "--optimize",
                    "random-greedy", "--memory-limit", "64", "--device", "none")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings and len(warnings) == len(set(warnings))
    assert "warning:" not in result.stdout


# --- 5. figures that reconcile --------------------------------------------------------------


def test_every_ratio_names_its_basis():
    data = json.loads(invoke("ijj,k->ik", "--shapes", "4x4x4,8", "--device", "none",
                             "--json", "-").stdout)
    model = next(s for s in data["strategies"] if s["name"] == "torch-autograd")
    executor_peak = data["forward"]["executor_peak_bytes"]
    out = invoke("ijj,k->ik", "--shapes", "4x4x4,8", "--device", "none").stdout
    assert "fwd FLOPs" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("torch-autograd "))
    assert f" {model['forward_flops']:,} " in row  # the basis of its bwd/fwd
    assert f"inference peak as run, {format_bytes(executor_peak)}" in " ".join(out.split())
    assert "inference peak as run (incl. inputs)" in out


def test_wording_equation_and_speedup_below_one():
    out = invoke("ab", "--shapes", "2x3", "--device", "none").stdout
    assert "1 step" in out and "1 steps" not in out
    out = invoke("ab,bc", "--shapes", "2x3,3x4", "--device", "none").stdout
    assert "equation as typed" in out and "ab,bc->ac" in out
    out = invoke("ijj,k->ik", "--shapes", "4x4x4,8", "--device", "none").stdout
    assert "0.5x" in out and "below 1x" in out


# --- 9. cases files and compare that don't mislead ------------------------------------------


def test_unknown_defaults_key_exits_2_naming_it(tmp_path):
    cases = tmp_path / "cases.toml"
    cases.write_text('[defaults]\nmemory_limt = "1KiB"\n[[cases]]\nname = "mm"\n'
                     'equation = "ab,bc->ac"\nshapes = "2x3,3x4"\n')
    assert "memory_limt" in one_error_line(invoke("--cases", str(cases), "--device", "none"))


def test_case_errors_name_the_case_once(tmp_path):
    cases = tmp_path / "cases.toml"
    cases.write_text('[[cases]]\nname = "mm"\nequation = "ab,bc->ac"\nshapes = "2x3,3x4"\n'
                     'memory_limt = 3\n')
    result = invoke("--cases", str(cases), "--device", "none")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.count("'mm'") == 1 and "memory_limt" in line


def test_a_case_sets_its_own_run_options(tmp_path):
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps({"cases": [
        {"name": "run", "equation": "ab,bc->ac", "shapes": "2x3,3x4", "device": "cpu",
         "repeats": 2, "warmup": 0, "grad": "0", "budgets": {"max_flops": 100}},
        {"name": "still", "equation": "ab,bc->ac", "shapes": "2x3,3x4"},
    ]}))
    data = json.loads(invoke("--cases", str(cases), "--device", "none", "--json", "-").stdout)
    run_case, still = data["cases"]
    assert {run["forward_s"]["blocks"] for run in run_case["report"]["runs"]} == {2}
    assert run_case["report"]["grad_operands"] == [0]
    assert run_case["report"]["budgets"][0]["name"] == "max-flops"
    assert "runs" not in still["report"]


def _report_with_run(median: float, iqr: float, peak: int, passed: bool = True) -> dict:
    data = analyze("ab,bc->ac", [(2, 3), (3, 4)]).to_dict()
    data["runs"] = [{"strategy": "reverse", "baseline": False, "device": "cpu",
                     "backend": "torch",
                     "forward_s": {"median": median, "iqr": iqr},
                     "backward_s": {"median": median, "iqr": iqr},
                     "peak_bytes_measured": peak, "retained_bytes_measured": 0}]
    data["budgets"] = [{"name": "max-time", "subject": "runs", "limit": 1.0,
                        "value": 0.5 if passed else 2.0, "unit": "s", "passed": passed}]
    return data


def test_compare_judges_timings_against_their_spread():
    from einsum_analyze.report.compare import compare_reports

    before = _report_with_run(1e-4, 2e-4, 1000)
    after = _report_with_run(3e-4, 2e-4, 1000)  # +200%, inside the recorded spread
    # One run, no torch baseline to divide by: the seconds rule.
    assert not compare_reports(before, after, times="seconds").has_regressions
    slower = _report_with_run(1e-2, 2e-4, 1000)
    assert compare_reports(before, slower, times="seconds").has_regressions


def test_compare_covers_measured_memory_and_budget_outcomes():
    from einsum_analyze.report.compare import compare_reports

    before = _report_with_run(1e-4, 0.0, 1000)
    regressed = compare_reports(before, _report_with_run(1e-4, 0.0, 1024)).regressions
    assert [change.figure for change in regressed] == ["peak_bytes_measured"]
    failed = compare_reports(before, _report_with_run(1e-4, 0.0, 1000, passed=False))
    assert [change.subject for change in failed.regressions] == ["budget max-time on runs"]


def test_corrupted_report_is_exit_2(tmp_path):
    data = analyze("ab,bc->ac", [(2, 3), (3, 4)]).to_dict()
    good = tmp_path / "good.json"
    good.write_text(json.dumps(data))
    data["forward"]["flops"] = "abc"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert "forward.flops" in one_error_line(invoke("compare", str(good), str(bad)))


@pytest.mark.parametrize("args", [
    ["--max-memory", "abc"],
    ["--backend", "numpy", "--dtype", "bfloat16"],
])
def test_run_options_rejected_at_once_even_without_runs(args):
    one_error_line(invoke(*README, "--device", "none", *args))


# --- 10. quiet examples ---------------------------------------------------------------------


def test_noisy_timings_are_summarised_in_one_line():
    from einsum_analyze.backends.timing import Measurement

    def measured(blocks):
        return Measurement(block_times_s=blocks, calls_per_block=1, warmup_calls=0,
                           fence="none")

    noisy, quiet = measured((1.0, 1.0, 3.0, 5.0, 9.0)), measured((1.0, 1.0, 1.0, 1.0, 1.0))
    runs = [execution.Run(strategy=name, is_baseline=False, device="cpu", backend="torch",
                          forward=noisy, backward=quiet) for name in ("reverse", "independent")]
    line = execution._noise_summary(runs)
    assert line is not None and "2 of 4 measurements" in line and "\n" not in line
    assert execution._noise_summary(runs[:0]) is None


def test_readme_example_is_quick():
    script = (ROOT / "examples" / "tn18_b512.sh").read_text(encoding="utf-8")
    assert "--repeats 3 --warmup 1" in script
    assert script.index("--repeats 3") < script.index('"$@"')  # the user's options win
