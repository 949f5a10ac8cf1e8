"""The default strategies depend on the equation's size: independent grows as n^2."""

from __future__ import annotations

import json

from click.testing import CliRunner

from einsum_analyze import analyze
from einsum_analyze.cli import cli
from einsum_analyze.strategies import STRATEGIES, default_strategy_names, left_out_note

LETTERS = [chr(0x100 + k) for k in range(202)]
CHAIN = ",".join(a + b for a, b in zip(LETTERS, LETTERS[1:], strict=False))  # 201 matrices
SHAPES = [(2, 2)] * 201


def test_independent_is_a_default_up_to_200_operands():
    assert default_strategy_names(200) == STRATEGIES
    assert "independent" not in default_strategy_names(201)
    assert left_out_note(200) is None
    note = left_out_note(201)
    assert note is not None and "independent" in note and "200 operands" in note
    assert f"--strategy {','.join(STRATEGIES)}" in note


def test_a_large_network_leaves_it_out_and_says_how_to_add_it_back():
    report = analyze(CHAIN, SHAPES)
    assert [s.name for s in report.strategies] == list(default_strategy_names(201))
    assert any(w.startswith("independent left out of the default strategies") for w in
               report.warnings)
    named = analyze(CHAIN, SHAPES, strategies=list(STRATEGIES))  # equal, named
    assert [s.name for s in named.strategies] == list(STRATEGIES)
    assert not any("left out" in w for w in named.warnings)


def test_the_cli_default_and_the_named_list():
    runner = CliRunner()
    base = [CHAIN, "--shapes", json.dumps(SHAPES), "--device", "none", "--json", "-"]
    default = json.loads(runner.invoke(cli, base, catch_exceptions=False).stdout)
    assert "independent" not in [s["name"] for s in default["strategies"]]
    assert any("left out" in w for w in default["warnings"])
    named = runner.invoke(cli, [*base, "--strategy", ",".join(STRATEGIES)],
                          catch_exceptions=False)
    assert [s["name"] for s in json.loads(named.stdout)["strategies"]] == list(STRATEGIES)
