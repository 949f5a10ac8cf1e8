"""--precision said under the runs; --profile-steps with --cases that run nothing refused."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from einsum_analyze.cli import cli


@pytest.mark.parametrize(("mode", "said"), [
    ("tf32", "precision tf32: float32 tensors, CUDA matrix products in TF32"),
    ("fp16", "precision fp16: every tensor and product in float16"),
    ("highest", None),
])
def test_the_runs_name_their_precision(mode: str, said: str | None) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        cli, ["ij,jk->ik", "--sizes", "i=4,j=5,k=6", "--device", "cpu", "--strategy",
              "reverse", "--precision", mode, "--repeats", "1", "--warmup", "0"],
        catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    if said is None:
        assert "precision " not in result.stdout
    else:
        assert said in result.stdout


def test_profile_steps_on_cases_that_run_nothing_is_refused(tmp_path) -> None:
    cases = tmp_path / "cases.toml"
    cases.write_text('[[cases]]\nname = "a"\nequation = "ij,jk->ik"\nshapes = "2x3,3x4"\n',
                     encoding="utf-8")
    result = CliRunner().invoke(cli, ["--cases", str(cases), "--device", "none",
                                      "--profile-steps"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip() == "Error: --profile-steps times runs; drop --device none"


@pytest.mark.parametrize("mode, code", [("tf32", 2), ("bf16", 0), ("highest", 0)])
def test_tf32_without_runs_is_refused(mode: str, code: int) -> None:
    """tf32 only changes how runs compute; bf16 changes the dtype the analysis counts."""
    result = CliRunner().invoke(cli, ["ij,jk->ik", "--sizes", "i=4,j=4,k=4", "--device",
                                      "none", "--precision", mode, "--json", "-"])
    assert result.exit_code == code, result.output
    if code == 2:
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and "--precision tf32" in result.stderr
