"""The command line's --roofline and --profile-steps."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from report_schema import validate_report

from einsum_analyze.cli import cli

TUCKER = ["abc,ai,bj,ck->ijk", "--sizes", "a=16,b=16,c=16,i=8,j=8,k=8"]


def invoke(*args: str, columns: int = 120):
    return CliRunner(env={"COLUMNS": str(columns)}).invoke(cli, list(args),
                                                           catch_exceptions=False)


@pytest.mark.parametrize("columns", [60, 120])
def test_nominal_roofline_table_and_json(columns):
    result = invoke(*TUCKER, "--device", "none", "--roofline", "h200", columns=columns)
    assert result.exit_code == 0, result.stderr
    assert "Roofline (NOMINAL h200" in result.stdout
    assert all(len(line) <= columns for line in result.stdout.splitlines())
    data = json.loads(invoke(*TUCKER, "--device", "none", "--roofline", "h200",
                             "--json", "-").stdout)
    validate_report(data)
    section = data["roofline"]
    assert section["profile"]["source"] == "nominal"
    assert [s["strategy"] for s in section["strategies"]] == [
        s["name"] for s in data["strategies"]]
    assert all(s["bound_s"] > 0 for s in section["strategies"])


def test_no_roofline_without_the_option():
    data = json.loads(invoke(*TUCKER, "--device", "none", "--json", "-").stdout)
    assert "roofline" not in data


@pytest.mark.parametrize(("value", "content", "culprit"), [
    ("v100", None, "not a built-in profile"),
    ("missing.json", None, "cannot read"),
    ("bad.json", "{not json", "not JSON"),
    ("fields.json", '{"flops_per_s": 1e12}', "missing field 'bandwidth_bytes_per_s'"),
    ("dtype.json", '{"bandwidth_bytes_per_s": 1e12, "flops_per_s": {"float64": 1e12}}',
     "no flops_per_s for dtype float32"),
    ("long.json", '{"name": "' + "n" * 65 + '", "bandwidth_bytes_per_s": 1, "flops_per_s": 1}',
     "name must be 1 to 64 printable characters"),
    ("newline.json", '{"name": "a\\nb", "bandwidth_bytes_per_s": 1, "flops_per_s": 1}',
     "name must be"),
    ("array.json", "[1, 2]", "expected a JSON object"),
    ("bool.json", '{"bandwidth_bytes_per_s": true, "flops_per_s": 1}', "must be a number"),
    ("empty.json", '{"bandwidth_bytes_per_s": 1, "flops_per_s": {}}', "flops_per_s is empty"),
])
def test_bad_roofline_is_one_line_exit_2(tmp_path, monkeypatch, value, content, culprit):
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / value).write_text(content)
    result = invoke(*TUCKER, "--device", "none", "--roofline", value)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: --roofline") and culprit in lines[0]
    assert result.stdout == ""


def test_roofline_from_a_file(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"name": "mydev", "bandwidth_bytes_per_s": 1e11,
                                "flops_per_s": 1e12}))
    data = json.loads(invoke(*TUCKER, "--device", "none", "--roofline", str(path),
                             "--json", "-").stdout)
    assert data["roofline"]["profile"] == {
        "name": "mydev", "source": "file", "bandwidth_bytes_per_s": 1e11,
        "flops_per_s": {"float32": 1e12}, "description": "", "launch_s": 0.0,
        "is_async": False,
        "host": {"forward_step_s": 0.0, "backward_step_s": 0.0, "forward_run_s": 0.0,
                 "backward_run_s": 0.0, "forward_kind_s": 0.0, "backward_kind_s": 0.0,
                 "forward_label_s": 0.0, "backward_label_s": 0.0, "dispatch_s": 0.0,
                 "torch_forward": [], "torch_node_s": 0.0,
                 "torch_backward_s": 0.0, "torch_backward": []}}


@pytest.mark.parametrize("columns", [60, 120])
def test_profile_steps_on_cpu(tmp_path, columns):
    out = tmp_path / "r.json"
    result = invoke(*TUCKER, "--device", "cpu", "--strategy", "reverse,independent",
                    "--profile-steps", "--repeats", "2", "--warmup", "1", "--json", str(out),
                    columns=columns)
    assert result.exit_code == 0, result.stderr
    assert "Costliest steps: reverse on cpu" in result.stdout
    assert "Roofline (CALIBRATED cpu" in result.stdout
    assert all(len(line) <= columns for line in result.stdout.splitlines())
    data = json.loads(out.read_text())
    validate_report(data)
    (calibration,) = data["environment"]["calibration"]
    assert calibration["device"] == "cpu" and calibration["flops_per_s"] > 0
    assert data["roofline"]["profile"]["source"] == "calibrated"
    ours = [run for run in data["runs"] if not run["baseline"]]
    for run in ours:
        roofline = next(s for s in data["roofline"]["strategies"]
                        if s["strategy"] == run["strategy"])
        # Every computing step of the schedule is timed, once, in schedule order.
        assert [s["event"] for s in run["steps"]] == [s["event"] for s in roofline["steps"]]
        assert sum(s["share"] for s in run["steps"]) <= 1 + 1e-9
        assert all(s["time_s"] > 0 and s["bound_s"] > 0 for s in run["steps"])
        assert all(s["efficiency"] == pytest.approx(s["bound_s"] / s["time_s"])
                   for s in run["steps"])
        # The time model beside every measured time: the run's and each step's.
        assert run["predicted"] == roofline["predicted"]
        assert [s["predicted_s"] for s in run["steps"]] == \
            [s["predicted_s"] for s in roofline["steps"]]
        # Priced by the calibrated kernel classes, which in cache may beat the large
        # copy's bandwidth the bound uses: no order between the two.
        assert all(s["predicted_s"] > 0 for s in run["steps"])
        assert sum(s["predicted_s"] for s in run["steps"]) == \
            pytest.approx(run["predicted"]["total_s"])
    assert all("steps" not in run for run in data["runs"] if run["baseline"])
    torch_run = next(run for run in data["runs"] if run["strategy"] == "torch-autograd")
    assert torch_run["predicted"]["source"] == "calibrated"
    assert all(run["predicted"] is None for run in data["runs"]
               if run["strategy"] == "opt_einsum-torch")


def test_runs_without_profile_steps_time_no_step():
    result = invoke(*TUCKER, "--device", "cpu", "--strategy", "reverse", "--repeats", "1",
                    "--warmup", "0", "--json", "-")
    data = json.loads(result.stdout)
    assert all("steps" not in run for run in data["runs"])
    assert data["environment"]["calibration"][0]["device"] == "cpu"


def test_profile_steps_without_a_run_is_refused():
    result = invoke(*TUCKER, "--device", "none", "--profile-steps")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--profile-steps" in lines[0] and result.stdout == ""


def test_profile_steps_with_numpy_backend_says_nothing_was_timed():
    result = invoke(*TUCKER, "--device", "cpu", "--backend", "numpy", "--strategy", "reverse",
                    "--profile-steps", "--repeats", "1", "--warmup", "0")
    assert result.exit_code == 0, result.stderr
    assert "no step was timed: --profile-steps needs --backend torch" in result.stdout


def test_a_profile_name_is_text_not_markup(tmp_path):
    path = tmp_path / "markup.json"
    path.write_text('{"name": "[/x] gpu", "bandwidth_bytes_per_s": 1e12, "flops_per_s": 1e13}')
    result = invoke(*TUCKER, "--device", "none", "--roofline", str(path))
    assert result.exit_code == 0, result.stderr
    assert "Roofline (FILE [/x] gpu: 1 TB/s, 10 TFLOP/s float32)" in result.stdout


@pytest.mark.parametrize(("ratio", "text"), [
    (0.0, "0%"), (0.12, "12%"), (1.0, "100%"), (43.0, "4300%"), (0.0091, "0.91%"),
    (0.00049, "0.049%"), (0.01, "1%"),
])
def test_a_small_share_or_efficiency_is_not_printed_as_zero(ratio, text):
    from einsum_analyze.render.roofline import percent

    assert percent(ratio) == text


def test_the_steps_title_is_one_line_at_120_columns(tmp_path):
    result = invoke(*TUCKER, "--device", "cpu", "--strategy", "reverse", "--profile-steps",
                    "--repeats", "1", "--warmup", "0", columns=120)
    assert result.exit_code == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if "Costliest steps" in line)
    assert line.strip().endswith("between them)")


def test_the_search_title_keeps_its_time_whole_at_60_columns():
    result = invoke(*TUCKER, "--device", "none", "--strategy", "reverse,checkpoint",
                    "--budget", "40KiB", columns=60)
    assert result.exit_code in (0, 1), result.stderr
    line = next(line for line in result.stdout.splitlines() if "Training-aware search" in line)
    assert line.strip().endswith(")"), line
