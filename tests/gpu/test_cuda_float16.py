"""float16 on CUDA: an overflow is a finding, never a crash or NaN in the report (issue 10).

Before, `--device cuda --dtype float16` on tn18-b512, mps-layer and tucker ended in exit 1
with "Out of range float values are not JSON compliant: nan". Skipped without CUDA.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli

CASES = {c["name"]: c for c in json.loads(
    (Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]}


def _no_constants(name: str) -> float:
    raise AssertionError(f"the report holds {name}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["tn18-b512", "mps-layer", "tucker"])
def test_float16_runs_are_finite_or_marked_overflowed(name: str) -> None:
    case = CASES[name]
    shapes = json.dumps(case["shapes"])
    result = CliRunner().invoke(
        cli, [case["equation"], "--shapes", shapes, "--device", "cuda", "--dtype", "float16",
              "--repeats", "2", "--warmup", "1", "--json", "-"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout, parse_constant=_no_constants)
    assert data["environment"]["operand_scales"]
    for run in data["runs"]:
        if run["skipped"] is not None:
            continue
        error = run["max_grad_error"]
        assert (error is not None and math.isfinite(error)) or (
            run["note"] or "").startswith("overflowed in float16"), run
