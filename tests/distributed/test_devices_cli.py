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
