"""``--devices`` on the command line: bad lists are one line, exit 2, nothing else printed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli

CASE = ["ij,jk->ik", "--sizes", "i=4,j=6,k=5"]


@pytest.mark.parametrize(("devices", "culprit"), [
    ("cuda:7", "cuda:7 does not exist"),
    ("cpu:0,cuda:0", "mixes cpu and CUDA"),
    ("cpu*2,cpu:1", "cpu:1 twice"),
    ("tpu:0", "'tpu:0'"),
])
def test_bad_device_list_is_one_line_exit_2(devices: str, culprit: str) -> None:
    result = CliRunner().invoke(cli, [*CASE, "--devices", devices])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and culprit in lines[0], result.stderr


def test_devices_need_the_sliced_strategy() -> None:
    result = CliRunner().invoke(cli, [*CASE, "--strategy", "reverse", "--devices", "cpu*2"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "add sliced to --strategy" in result.stderr


def test_devices_do_not_go_with_cases() -> None:
    result = CliRunner().invoke(cli, ["--cases", "x.toml", "--devices", "cpu*2"])
    assert result.exit_code == 2
    assert "cannot go with --cases" in result.stderr


def test_devices_cpu2_runs_the_sliced_plan_and_writes_the_section() -> None:
    import json

    from einsum_analyze.report import load_schema

    result = CliRunner().invoke(cli, ["ijj,jk->ik", "--shapes", "6x8x8,8x5", "--dtype",
                                      "float64", "--strategy", "sliced", "--budget", "7400",
                                      "--devices", "cpu*2", "--repeats", "1", "--warmup", "0",
                                      "--json", "-"])
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert "runs" not in document  # --devices alone: no single-device runs
    section = document["distributed"]
    assert section["devices"] == ["cpu:0", "cpu:1"] and not section["failed"]
    assert section["slices"] >= 2
    assert section["max_grad_error"] < 1e-12
    for device in section["per_device"]:
        assert device["peak_bytes_measured"] == device["peak_bytes_predicted"]
    import jsonschema

    jsonschema.Draft202012Validator(load_schema()).validate(document)


@pytest.mark.parametrize("device", ["none", "NONE"])
def test_devices_with_device_none_is_refused(device: str) -> None:
    result = CliRunner().invoke(cli, [*CASE, "--strategy", "sliced", "--devices", "cpu*2",
                                      "--device", device])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--device none" in lines[0], result.stderr
