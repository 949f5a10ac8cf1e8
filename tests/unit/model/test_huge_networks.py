"""Huge networks are analysed, or refused with one line: never a hang, never a traceback."""

from __future__ import annotations

import io
import json
import re
import string

import pytest
from click.testing import CliRunner
from opt_einsum import get_symbol
from opt_einsum.testing import rand_equation

from einsum_analyze import analyze, parse_equation
from einsum_analyze.cli import cli
from einsum_analyze.report.report import dump_json


def test_a_unicode_space_is_a_label_as_in_opt_einsum():
    # opt_einsum's generated symbols include U+1680 (a network of 5,000 tensors uses it).
    eq = parse_equation("a\u1680,\u1680b -> ab", [(2, 3), (3, 4)])
    assert eq.terms == ("a\u1680", "\u1680b") and eq.size_dict["\u1680"] == 3


def test_sixty_four_labels_in_one_term_are_analysed():
    labels = "".join(get_symbol(i) for i in range(64))
    report = analyze(f"{labels},{labels[::-1]}->{labels[:3]}", [(2,) * 64] * 2)
    assert report.plan.flops == 2 * 2**64
    assert {s.name for s in report.strategies} == {"reverse", "independent", "torch-autograd"}


def test_counts_beyond_pythons_digit_limit_are_written_exactly():
    labels = "".join(get_symbol(i) for i in range(361))
    chain = ",".join(labels[k:k + 2] for k in range(360))
    report = analyze(chain, [(2**40, 2**40)] * 360, optimize="greedy", strategies=None)
    stream = io.StringIO()
    dump_json(report.to_dict(), stream)
    naive = report.plan.naive_flops
    assert naive > 10**4300  # more digits than int-to-text converts by default
    (digits,) = re.findall(r'"naive_flops": ([0-9]+)', stream.getvalue())
    assert len(digits) > 4300 and int(digits[-9:]) == naive % 10**9


def test_an_optimizer_that_overflows_is_named_in_one_line():
    letters = string.ascii_letters[:40]
    sizes = ",".join(f"{c}={2**40}" for c in letters)
    result = CliRunner().invoke(cli, [f"{letters[:30]},{letters[10:40]},{letters[35:40]}",
                                      "--sizes", sizes, "--device", "none",
                                      "--optimize", "random-greedy"])
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("Error: optimizer 'random-greedy' failed")


@pytest.mark.slow
def test_five_thousand_tensors_are_analysed(tmp_path):
    equation, shapes = rand_equation(5000, 3, seed=0, d_min=2, d_max=8)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(cli, [equation, "--shapes", json.dumps(shapes), "--device",
                                      "none", "--json", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert "independent left out of the default strategies above 200 operands" in text
