"""The command line, through click's CliRunner: output, JSON and one-line errors."""

from __future__ import annotations

import itertools
import json
import math
import os
import string
import subprocess
import sys

import opt_einsum
import pytest
from click.testing import CliRunner
from report_schema import validate_report

from einsum_analyze.cli import cli

README = ["bc,bd,cm,mdn->bn", "--shapes", "512x2,512x2,2x7,7x2x7"]
CHAIN = ["ab,bc,cd->ad", "--sizes", "a=2,b=3,c=4,d=5"]
# Twelve indices of a million each: nothing may be allocated.
HUGE_EQUATION = "ab,bc,cd,de,ef,fg,gh,hi,ij,jk,kl->al"
HUGE_SIZES = ",".join(f"{label}=1000000" for label in "abcdefghijkl")


def invoke(*args: str):
    """Run the CLI analysis-only (no device runs) and return click's result."""
    return CliRunner().invoke(cli, [*args, "--device", "none"], catch_exceptions=False)


def invoke_json(*args: str) -> dict:
    result = invoke(*args, "--json", "-")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def exact_flops(equation: str, sizes: dict[str, int], path: list[list[int]]) -> int:
    """opt_einsum's FLOP convention, walked independently with Python integers."""
    lhs, output = equation.split("->")
    terms = [set(term) for term in lhs.split(",")]
    total = 0
    for step in path:
        taken = [terms.pop(i) for i in sorted(step, reverse=True)]
        joint = set().union(*taken)
        keep = set(output).union(*terms) & joint
        total += math.prod(sizes[c] for c in joint) * (
            max(1, len(taken) - 1) + (1 if joint - keep else 0)
        )
        terms.append(keep)
    return total


# --- success -----------------------------------------------------------------------------


def test_readme_example():
    result = invoke(*README)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for key in ("Forward path", "Forward summary", "bc,bd,cm,mdn->bn", "FLOPs", "31,112",
                "largest intermediate", "peak (incl. inputs)", "float32"):
        assert key in out
    assert not out.lstrip().startswith("{")


def test_json_to_stdout_is_pure_json():
    result = invoke(*README, "--json", "-")
    assert result.exit_code == 0
    assert result.stderr == ""
    data = json.loads(result.stdout)  # nothing but JSON
    validate_report(data)
    assert data["schema_version"] == 2
    assert data["equation"] == "bc,bd,cm,mdn->bn"
    assert data["shapes"] == [[512, 2], [512, 2], [2, 7], [7, 2, 7]]
    assert data["dtype"] == "float32"
    forward = data["forward"]
    assert forward["optimizer"] == "auto"
    path = forward["path"]
    assert isinstance(path, list) and all(isinstance(step, list) for step in path)
    assert len(forward["steps"]) == len(path) == 3
    for key in ("flops", "largest_intermediate_elements", "peak_bytes",
                "peak_bytes_without_inputs"):
        assert isinstance(forward[key], int) and forward[key] > 0
    info = opt_einsum.contract_path(
        data["equation"], *data["shapes"], shapes=True, optimize=path
    )[1]
    assert forward["flops"] == int(info.opt_cost) == 31112
    assert forward["largest_intermediate_elements"] == int(info.largest_intermediate)
    assert forward["peak_bytes"] >= forward["peak_bytes_without_inputs"] + 4 * (
        2 * 512 * 2 + 2 * 7 + 7 * 2 * 7
    )
    assert [step["flops"] for step in forward["steps"]] == [2048, 392, 28672]


def test_json_to_a_file(tmp_path):
    target = tmp_path / "report.json"
    result = invoke(*README, "--json", str(target))
    assert result.exit_code == 0, result.stderr
    assert "Forward summary" in result.stdout  # the tables still print
    data = json.loads(target.read_text(encoding="utf-8"))
    assert data["forward"]["flops"] == 31112
    assert target.read_text(encoding="utf-8").endswith("}\n")


def test_sizes_equal_shapes():
    by_sizes = invoke_json("bc,bd,cm,mdn->bn", "--sizes", "b=512,c=2,d=2,m=7,n=7")
    by_shapes = invoke_json(*README)
    assert by_sizes["shapes"] == by_shapes["shapes"]
    assert by_sizes["forward"]["flops"] == by_shapes["forward"]["flops"]
    assert by_sizes["forward"]["path"] == by_shapes["forward"]["path"]


def test_json_shapes_and_ellipsis():
    data = invoke_json("...ij,...jk", "--shapes", "[[8,1,32,64],[1,4,64,16]]")
    assert data["equation"] == "acij,dbjk->abik"
    assert data["input"]["equation"] == "...ij,...jk"


def test_optimizer_option():
    data = invoke_json(*CHAIN, "--optimize", "greedy")
    assert data["forward"]["optimizer"] == "greedy"
    assert data["forward"]["path"] == [[1, 2], [0, 1]]
    assert data["forward"]["flops"] == 180
    assert invoke_json(*CHAIN, "--optimize", "OPTIMAL")["forward"]["flops"] == 128


def test_memory_limit_in_bytes():
    # 32 bytes of float32 is 8 elements: greedy may no longer build db (15 elements)
    data = invoke_json(*CHAIN, "--optimize", "greedy", "--memory-limit", "32B")
    assert data["forward"]["memory_limit_elements"] == 8
    assert data["forward"]["path"] == [[0, 1], [0, 1]]
    data = invoke_json(*CHAIN, "--optimize", "greedy", "--memory-limit", "32B",
                       "--dtype", "float64")
    assert data["forward"]["memory_limit_elements"] == 4
    data = invoke_json(*CHAIN, "--memory-limit", "max_input")
    assert data["forward"]["memory_limit_elements"] == 20


def test_dtype_scales_bytes():
    f32 = invoke_json(*CHAIN, "--dtype", "float32")["forward"]
    f64 = invoke_json(*CHAIN, "--dtype", "float64")["forward"]
    assert f64["peak_bytes"] == 2 * f32["peak_bytes"]
    assert f64["flops"] == f32["flops"]


def test_huge_sizes_are_analysed_exactly():
    data = invoke_json(HUGE_EQUATION, "--sizes", HUGE_SIZES)
    sizes = dict.fromkeys("abcdefghijkl", 10**6)
    flops = data["forward"]["flops"]
    assert isinstance(flops, int)
    assert flops == exact_flops(HUGE_EQUATION, sizes, data["forward"]["path"])
    # a chain of ten matrix products of 1e6 x 1e6 matrices, each 2e18 FLOPs
    assert flops == 10 * 2 * 10**18
    assert data["forward"]["largest_intermediate_elements"] == 10**12


def test_huge_sizes_do_not_import_torch():
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from einsum_analyze.cli import cli\n"
        f"r = CliRunner().invoke(cli, [{HUGE_EQUATION!r}, '--sizes', {HUGE_SIZES!r},"
        " '--device', 'none', '--json', '-'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ}, check=True, timeout=60)
    assert result.stdout.strip() == "False"


# 41 matrices of 2**40 x 2**40: naive FLOPs about 1e505, beyond any float.
LONG_CHAIN_LABELS = string.ascii_letters[:42]
LONG_CHAIN = ",".join(a + b for a, b in itertools.pairwise(LONG_CHAIN_LABELS)) + (
    "->" + LONG_CHAIN_LABELS[0] + LONG_CHAIN_LABELS[-1]
)
LONG_CHAIN_SIZES = ",".join(f"{label}={2**40}" for label in LONG_CHAIN_LABELS)


@pytest.mark.parametrize("json_out", [True, False], ids=["json", "table"])
def test_astronomical_naive_cost_is_reported(json_out):
    args = [LONG_CHAIN, "--sizes", LONG_CHAIN_SIZES, "--optimize", "greedy",
            "--strategy", "none", "--device", "none"]
    result = CliRunner().invoke(cli, [*args, "--json", "-"] if json_out else args)
    assert result.exit_code == 0, result.stderr
    if json_out:
        forward = json.loads(result.stdout)["forward"]
        assert forward["naive_flops"] > 10**500
        assert forward["flops"] == exact_flops(
            LONG_CHAIN, dict.fromkeys(LONG_CHAIN_LABELS, 2**40), forward["path"]
        )


def test_version_and_help():
    from einsum_analyze import __version__

    result = CliRunner().invoke(cli, ["--version"], catch_exceptions=False)
    assert result.exit_code == 0
    assert __version__ in result.stdout
    result = CliRunner().invoke(cli, ["--help"], catch_exceptions=False)
    assert result.exit_code == 0
    for key in ("EQUATION", "--shapes", "--sizes", "--optimize", "--memory-limit", "--json",
                "Exit codes"):
        assert key in result.stdout


# --- errors: exit code 2, one line on stderr naming the culprit, nothing on stdout ------------

ERRORS = {
    "bad-character": (["ab,b#->a", "--shapes", "2x3,3x4"], "unknown character '#'"),
    "arrow-twice": (["a->b->c", "--shapes", "2"], "more than one '->'"),
    "output-index": (["ab,bc->az", "--shapes", "2x3,3x4"], "output index 'z'"),
    "rank-mismatch": (["ab,bc->ac", "--shapes", "2x3,3"], "operand 1 has subscripts 'bc'"),
    "ellipsis-rank": (["...ij->ij", "--shapes", "3"], "operand 0 has subscripts '...ij'"),
    "size-conflict": (["ab,bc->ac", "--shapes", "2x3,4x5"], "index 'b' has size 3"),
    "diagonal-sizes": (["ii->", "--shapes", "2x3"], "repeats index 'i' with sizes 2 and 3"),
    "negative-size": (["ab->a", "--shapes", "[[2,-1]]"], "has size -1"),
    "absurd-size": (["a->a", "--sizes", "a=2000000000000"], "beyond the limit"),
    "shape-count": (["ab,bc->ac", "--shapes", "2x3"], "2 operand(s) but 1 shape(s)"),
    "bad-shapes": (["ab,bc->ac", "--shapes", "2x,3x4"], "--shapes item 0 '2x'"),
    "bad-shapes-json": (["ab,bc->ac", "--shapes", "[[2,3],[3"], "--shapes is not valid JSON"),
    "bad-sizes": (["ab,bc->ac", "--sizes", "a:2,b=3,c=4"], "--sizes item 'a:2'"),
    "sizes-missing": (["ab,bc->ac", "--sizes", "a=2,b=3"], "no size for index 'c'"),
    "sizes-extra": (["ab,bc->ac", "--sizes", "a=2,b=3,c=4,z=1"], "index 'z'"),
    "sizes-ellipsis": (["...a->a", "--sizes", "a=2"], "'...'"),
    "unknown-optimizer": ([*CHAIN, "--optimize", "fastest"], "'fastest' is not one of"),
    "bad-memory-limit": ([*CHAIN, "--memory-limit", "lots"], "memory limit 'lots'"),
    "memory-limit-unit": ([*CHAIN, "--memory-limit", "5XB"], "unknown unit 'XB'"),
    "memory-limit-zero": ([*CHAIN, "--memory-limit", "0"], "memory limit '0'"),
    "bad-dtype": ([*CHAIN, "--dtype", "float8"], "'float8' is not one of"),
    "shapes-and-sizes": (["ab->a", "--shapes", "2x3", "--sizes", "a=2,b=3"],
                         "exactly one of --shapes and --sizes"),
    "neither-shapes-nor-sizes": (["ab->a"], "exactly one of --shapes and --sizes"),
    "grad-position": ([*CHAIN, "--grad", "7"], "operand 7 does not exist"),
    "no-equation": (["--shapes", "2x3"], "EQUATION"),
    "unknown-option": ([*CHAIN, "--frobnicate"], "--frobnicate"),
}


@pytest.mark.parametrize(("args", "culprit"), list(ERRORS.values()), ids=list(ERRORS))
def test_errors_are_one_line(args, culprit):
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error:")
    assert result.stderr.endswith("\n")
    assert result.stderr.count("\n") == 1, result.stderr
    assert culprit in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("option", ["--memory-limit", "--max-peak"])
def test_overflowing_byte_size_is_an_input_error(option):
    result = CliRunner().invoke(cli, [*CHAIN, option, "1e400", "--device", "none"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error:")
    assert "1e400" in result.stderr


def test_unwritable_json_path(tmp_path):
    target = tmp_path / "no-such-folder" / "report.json"
    result = invoke(*CHAIN, "--json", str(target))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("Error: cannot write the JSON report to")
    assert str(target) in result.stderr
    assert not target.exists()


def test_json_path_is_a_directory(tmp_path):
    result = invoke(*CHAIN, "--json", str(tmp_path))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: cannot write the JSON report")


def test_forward_only_runs_nothing_unless_a_device_is_asked_for():
    result = CliRunner().invoke(cli, ["ij,jk->ik", "--shapes", "2x3,3x4", "--strategy", "none",
                                      "--json", "-"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert "runs" not in data and "strategies" not in data
    asked = CliRunner().invoke(cli, ["ij,jk->ik", "--shapes", "2x3,3x4", "--strategy", "none",
                                     "--device", "cpu"])
    assert asked.exit_code == 2 and asked.stdout == ""
    assert "--strategy" in asked.stderr
