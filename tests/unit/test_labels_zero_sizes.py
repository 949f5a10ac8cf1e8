"""Labels opt_einsum accepts (digits), scalar einsums on the CLI, and zero-size dimensions.

Issue 10 item 6: ``a0,0b->ab`` is an einsum opt_einsum accepts; ``"->"`` works on the
command line without ``--``; a dimension of size 0 (torch.einsum accepts it) is analysed
with exact figures, 0 FLOPs and 0 bytes where the tensors are empty, and runs on the CPU
without a crash.
"""

from __future__ import annotations

import json
import math

import numpy as np
import opt_einsum
import pytest
import torch
from click.testing import CliRunner
from report_schema import validate_report

from einsum_analyze import analyze, execute, parse_equation
from einsum_analyze.backends.relabel import torch_equation
from einsum_analyze.cli import cli
from einsum_analyze.errors import ShapeError
from einsum_analyze.model.equation import shapes_from_sizes
from einsum_analyze.model.parsing import parse_sizes

FAST = {"devices": ["cpu"], "repeats": 1, "warmup": 0}


# --- digits as labels ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shapes", "explicit"),
    [
        ("a0,0b->ab", [(2, 3), (3, 4)], "a0,0b->ab"),
        ("a0,0b", [(2, 3), (3, 4)], "a0,0b->ab"),
        ("01,12,23->03", [(2, 3), (3, 4), (4, 5)], "01,12,23->03"),
        ("9a,a", [(2, 3), (3,)], "9a,a->9"),
    ],
)
def test_digits_are_labels_and_match_opt_einsum(text, shapes, explicit):
    eq = parse_equation(text, shapes)
    assert eq.explicit == explicit
    report = analyze(text, shapes, optimize="optimal")
    info = opt_einsum.contract_path(text, *shapes, shapes=True, optimize="optimal")[1]
    assert report.plan.flops == info.opt_cost
    assert report.plan.largest_intermediate_elements == info.largest_intermediate


def test_digits_beside_an_ellipsis():
    # The ellipsis is exactly three dots; a digit after it is a label of its own.
    eq = parse_equation("...0,0->...", [(2, 5, 3), (3,)])
    assert eq.size_dict["0"] == 3
    assert len(eq.terms[0]) == 3 and eq.terms[0].endswith("0")
    assert len(eq.output) == 2 and "0" not in eq.output
    info = opt_einsum.contract_path("...0,0->...", np.ones((2, 5, 3)), np.ones(3))[1]
    assert analyze("...0,0->...", [(2, 5, 3), (3,)]).plan.flops == info.opt_cost


def test_digit_sizes():
    assert parse_sizes("a=2,0=3,b=4") == {"a": 2, "0": 3, "b": 4}
    assert shapes_from_sizes("a0,0b->ab", {"a": 2, "0": 3, "b": 4}) == ((2, 3), (3, 4))


def _torch_text(text: str) -> str | None:
    return torch_equation(text, parse_equation(text, _ones(text)).explicit)


def _ones(text: str) -> list[tuple[int, ...]]:
    """Shapes of 2s for an equation without '...'; (2, 2, n) where '...' is present."""
    lhs = text.replace(" ", "").split("->")[0]
    return [tuple(2 for c in term if c != ".") + ((2, 2) if "..." in term else ())
            for term in lhs.split(",")]


def test_torch_equation_relabels_what_torch_refuses():
    # One relabelling for the oracle and both baselines (backends/relabel.py): letters
    # only is kept as typed; any other label (a digit, a non-ASCII symbol) is relabelled.
    assert _torch_text("ab,bc->ac") == "ab,bc->ac"
    assert _torch_text("a0,0b->ab") == "ab,bc->ac"
    assert _torch_text("...0, 0 -> ...") == "...a, a -> ..."
    assert _torch_text("\u00e0b,b->\u00e0") == "ab,b->a"
    every = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    assert torch_equation(every + "0->", every + "0->") is None
    x, y = torch.randn(2, 3), torch.randn(3, 4)
    for text in ("a0,0b->ab", "a0,0b"):
        relabelled = _torch_text(text)
        assert relabelled is not None
        assert torch.allclose(torch.einsum(relabelled, x, y), x @ y)
    # Implicit output: the normalised order, not torch's sort of the new letters.
    relabelled = _torch_text("b0,0a")
    assert relabelled is not None
    assert torch.allclose(torch.einsum(relabelled, x, y), (x @ y).T)


def test_digit_labels_run_on_cpu_and_match_autograd():
    report = execute(analyze("a0,0b,b1->a1", [(2, 3), (3, 4), (4, 5)], dtype="float64"),
                     **FAST)
    assert report.runs
    for run in report.runs:
        assert run.skipped is None, run
        assert run.max_grad_error is not None and run.max_grad_error < 1e-12


# --- "->" on the command line ----------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["->", "--shapes", "()", "--device", "none", "--json", "-"],
        ["--shapes", "()", "->", "--device", "none", "--json", "-"],
        ["--device", "none", "--json", "-", "--shapes", "()", "->"],
        ["->", "--shapes=()", "--json=-", "--device=none"],
    ],
)
def test_scalar_einsum_needs_no_double_dash(args):
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["input"]["equation"] == "->"
    assert data["equation"] == "->"


def test_an_option_value_is_never_taken_for_the_equation():
    # '--json ->' names a file called '->'; EQUATION is then missing: exit 2, one line.
    result = CliRunner().invoke(cli, ["--shapes", "()", "--json", "->", "--device", "none"])
    assert result.exit_code == 2
    assert "EQUATION" in result.stderr


def test_double_dash_still_works():
    result = CliRunner().invoke(cli, ["--shapes", "()", "--device", "none", "--json", "-",
                                      "--", "->"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr


# --- zero-size dimensions --------------------------------------------------------------

ZERO = [
    ("ij,jk->ik", [(2, 0), (0, 4)]),  # a summed index of size 0: a zero output
    ("ij,jk,kl->il", [(0, 3), (3, 4), (4, 5)]),  # an empty output
    ("ij,jk,kl->il", [(2, 0), (0, 4), (4, 5)]),
    ("ii->i", [(0, 0)]),
    ("ab,b->a", [(3, 0), (0,)]),
    ("...a,a->...", [(0, 2, 3), (3,)]),
    ("a,a->a", [(1,), (0,)]),  # size 1 broadcasts against size 0, as in numpy
    ("abc,cd,de->abe", [(2, 3, 0), (0, 4), (4, 5)]),
]


@pytest.mark.parametrize(("text", "shapes"), ZERO, ids=[case[0] for case in ZERO])
def test_zero_sizes_are_analysed_exactly(text, shapes):
    report = analyze(text, shapes, dtype="float64")
    eq = report.equation
    assert 0 in eq.size_dict.values()
    info = opt_einsum.contract_path(text, *[np.empty(s) for s in shapes],
                                    optimize=[tuple(p) for p in report.plan.path])[1]
    assert report.plan.flops == info.opt_cost == 0
    assert report.plan.naive_flops == 0
    assert report.plan.speedup == 0
    assert report.forward_memory.input_bytes == 8 * sum(math.prod(s) for s in shapes)
    # The only bytes are those of the tensors that are not empty.
    out = math.prod(eq.size_dict[c] for c in eq.output)
    assert report.forward_memory.peak_bytes >= 8 * out
    for strategy in report.strategies:
        assert strategy.forward_flops == 0 and strategy.backward_flops == 0
        assert strategy.memory.peak_bytes >= strategy.memory.input_bytes
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    validate_report(data)
    assert data["forward"]["flops"] == 0
    assert data["forward"]["log10_flops"] == 0.0


@pytest.mark.parametrize(("text", "shapes"), ZERO, ids=[case[0] for case in ZERO])
def test_zero_sizes_run_on_cpu(text, shapes):
    report = execute(analyze(text, shapes, dtype="float64"), **FAST)
    assert report.runs
    for run in report.runs:
        assert run.skipped is None, run
        if run.max_grad_error is not None:
            assert run.max_grad_error == 0.0
    ours = [run for run in report.runs if run.strategy in ("reverse", "independent")]
    for run in ours:
        assert run.peak_bytes_measured == run.peak_bytes_predicted


def test_zero_size_cli_renders():
    result = CliRunner().invoke(cli, ["ij,jk->ik", "--shapes", "2x0,0x4", "--device", "cpu",
                                      "--repeats", "1", "--warmup", "0"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_negative_sizes_are_still_refused():
    with pytest.raises(ShapeError, match="has size -1; sizes must be zero or more"):
        parse_equation("ab->a", [(2, -1)])


# --- the search and the drop-in ----------------------------------------------------------

SEARCHED = [
    ("a0,0b,b1->a1", [(2, 3), (3, 4), (4, 5)]),
    ("b0,0a", [(2, 3), (3, 4)]),
    ("ij,jk,kl->il", [(2, 0), (0, 4), (4, 5)]),
    ("abc,cd,de->abe", [(2, 3, 0), (0, 4), (4, 5)]),
]


@pytest.mark.parametrize(("text", "shapes"), SEARCHED, ids=[case[0] for case in SEARCHED])
def test_the_training_search_takes_digits_and_zero_sizes(text, shapes):
    report = analyze(text, shapes, dtype="float64", budget="1MiB",
                     memory_limit="none,max_input")
    assert report.recommended is not None and report.recommended.fits
    if 0 in report.equation.size_dict.values():
        assert report.recommended.plan.training_flops == 0
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    validate_report(data)


@pytest.mark.parametrize(("text", "shapes"), [*SEARCHED, *ZERO],
                         ids=[case[0] for case in [*SEARCHED, *ZERO]])
def test_the_drop_in_refuses_digits_as_torch_does_and_takes_zero_sizes(text, shapes):
    from einsum_analyze.torch import einsum

    generator = torch.Generator().manual_seed(0)
    ours = [torch.randn(s, generator=generator, dtype=torch.float64, requires_grad=True)
            for s in shapes]
    theirs = [t.detach().clone().requires_grad_() for t in ours]
    relabelled = torch_equation(text, parse_equation(text, shapes).explicit)
    assert relabelled is not None
    if any(c.isdigit() for c in text):  # the drop-in follows torch.einsum: no digits
        with pytest.raises(RuntimeError, match="invalid subscript"):
            torch.einsum(text, *theirs)
        with pytest.raises(RuntimeError, match="invalid subscript"):
            einsum(text, *ours)
    got = einsum(relabelled, *ours, strategy="reverse")
    want = torch.einsum(relabelled, *theirs)
    assert got.shape == want.shape
    assert torch.allclose(got, want)
    upstream = torch.randn(want.shape, generator=generator, dtype=torch.float64)
    got.backward(upstream)
    want.backward(upstream)
    for mine, reference in zip(ours, theirs, strict=True):
        assert mine.grad is not None and reference.grad is not None
        assert torch.allclose(mine.grad, reference.grad)
