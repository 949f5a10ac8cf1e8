"""The report's forward FLOPs are opt_einsum's ``opt_cost`` on opt_einsum's own tests.

Every (equation, shapes) pair of opt_einsum's test suite (``tests/opt_einsum_pairs.py``),
with every optimizer both tools have: ``forward.flops`` equals what
``opt_einsum.contract_path`` reports for the equation as typed. Where normalisation
relabelled a size-1 broadcast dimension and that changed the count, the plan's own
FLOPs are ``forward.flops_after_normalisation``. The pairs opt_einsum refuses, we refuse.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import opt_einsum
import opt_einsum_pairs
import pytest
from corpus import OPT_EINSUM_EQUATIONS
from opt_einsum_pairs import DATA, PAIRS, REJECTED, SUITE, UNRECORDED, Pair

from einsum_analyze import analyze
from einsum_analyze.errors import EinsumAnalyzeError
from einsum_analyze.model.planning import OPTIMIZERS

# Exponential searches above these sizes take minutes; opt_einsum's tests do not run them.
# Random greedy's samples on the long chains take seconds; opt_einsum runs only greedy there.
_LARGEST = {"optimal": 8, "branch-all": 10, "branch-2": 14, "dp": 12,
            "dynamic-programming": 12, "auto-hq": 12, "random-greedy": 60,
            "random-greedy-128": 60}
_SHARED = tuple(name for name in OPTIMIZERS if name in opt_einsum.paths._PATH_OPTIONS)


# The default run stops the searches that take longest on the suite's long chains sooner;
# ``--run-slow`` checks the rest of the cross product up to the sizes above.
_LARGEST_QUICK = dict(_LARGEST, **{"branch-all": 8, "random-greedy": 10,
                                   "random-greedy-128": 8})


def _optimizers(pair: Pair, largest: dict[str, int] = _LARGEST) -> list[str]:
    return [name for name in _SHARED if len(pair.shapes) <= largest.get(name, 10**6)]


def _slow_only(pair: Pair) -> list[str]:
    quick = _optimizers(pair, _LARGEST_QUICK)
    return [name for name in _optimizers(pair) if name not in quick]


def test_every_optimizer_of_ours_is_opt_einsums():
    assert set(_SHARED) == set(OPTIMIZERS)


def test_the_corpus_holds_test_contracts_list():
    # tests/corpus.py keeps test_contract.py's ``tests`` by hand; the recording has them too.
    recorded = {pair.equation for pair in SUITE if pair.source == "contract.compare"}
    assert set(OPT_EINSUM_EQUATIONS) == recorded


def test_the_counts_in_the_data_modules_docstring_are_the_datas():
    doc = opt_einsum_pairs.__doc__ or ""
    given = {f"test_{name}.py": int(count)
             for name, count in re.findall(r"test_(\w+)\.py (\d+)", doc)}
    counted = collections.Counter(f"test_{p.source.split('.')[0]}.py" for p in SUITE)
    assert given == dict(counted)
    assert f"{len(SUITE)} distinct pairs" in " ".join(doc.split())


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("opt_einsum.tests") is None,
                    reason="this opt_einsum ships no tests")
def test_the_data_is_what_opt_einsums_suite_plans(tmp_path: Path) -> None:
    record = Path(__file__).parents[2] / "opt_einsum_pairs_record.py"
    out = tmp_path / "pairs.json"
    subprocess.run([sys.executable, str(record), "--out", str(out)], check=True,
                   capture_output=True, timeout=600)
    recorded, kept = json.loads(out.read_text()), json.loads(DATA.read_text())
    for section in ("memory_limited", "rejected"):
        assert _keys(recorded[section]) == _keys(kept[section])
    # The tests skipped here for want of jax, tensorflow or autograd plan one pair more; with
    # those installed the recording has it, and its pairs may name another test first.
    unrecorded = _keys({"equation": p.equation, "shapes": p.shapes} for p in UNRECORDED)
    assert _keys(recorded["pairs"]) - unrecorded == _keys(kept["pairs"])


def _keys(entries: Iterable[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Each entry's equation, shapes and memory limit: what the data says, not which test."""
    return {(e["equation"], json.dumps([list(s) for s in e["shapes"]]),
             str(e.get("memory_limit"))) for e in entries}


@pytest.mark.parametrize("pair", REJECTED, ids=str)
def test_what_opt_einsum_refuses_we_refuse(pair: Pair) -> None:
    with pytest.raises(EinsumAnalyzeError) as refused:
        analyze(pair.equation, pair.shapes, strategies=None)
    assert "\n" not in str(refused.value)


def _mismatch(pair: Pair, name: str) -> str | None:
    """None when the report's forward FLOPs are opt_einsum's; else what differs."""
    report = analyze(pair.equation, pair.shapes, optimize=name, strategies=None,
                     memory_limit=pair.memory_limit, max_search_s=None)
    forward = report.to_dict()["forward"]
    # Our limit is a guarantee: a path over it, or none at all (dp raises), is replanned
    # with greedy under it, and the report says so.
    replanned = pair.memory_limit is not None and any(
        "memory limit" in w for w in report.plan.warnings)
    after = forward.get("flops_after_normalisation")
    if after is not None and (after != report.plan.flops or after == forward["flops"]):
        return f"{name}: after normalisation {after}, the plan's {report.plan.flops}"
    if sum(step["flops"] for step in forward["steps"]) != (after or forward["flops"]):
        return f"{name}: the steps do not add up to the plan's FLOPs"
    try:
        _, info = opt_einsum.contract_path(pair.equation, *pair.shapes, shapes=True,
                                           optimize=name, memory_limit=pair.memory_limit)
    except RuntimeError:
        return None if replanned else f"{name}: opt_einsum found no path, and no warning"
    if forward["flops"] == int(info.opt_cost) or replanned:
        return None
    return f"{name}: {forward['flops']} FLOPs, opt_einsum's opt_cost {info.opt_cost}"


@pytest.mark.parametrize("pair", PAIRS, ids=lambda pair: str(pair)[:60])
def test_forward_flops_are_opt_einsums(pair: Pair) -> None:
    names = _optimizers(pair, _LARGEST_QUICK)
    assert "greedy" in names
    found = [_mismatch(pair, name) for name in names]
    assert [m for m in found if m is not None] == []


@pytest.mark.slow
@pytest.mark.parametrize("pair", [pair for pair in PAIRS if _slow_only(pair)],
                         ids=lambda pair: str(pair)[:60])
def test_forward_flops_are_opt_einsums_with_the_longer_searches(pair: Pair) -> None:
    found = [_mismatch(pair, name) for name in _slow_only(pair)]
    assert [m for m in found if m is not None] == []


def test_a_broadcast_dimension_reports_both_figures():
    report = analyze("ijk,kl,jl,i->i", [(1, 5, 4), (4, 6), (5, 6), (10,)], strategies=None)
    forward = report.to_dict()["forward"]
    assert forward["flops"] == 650  # opt_einsum's opt_cost for the equation as typed
    assert forward["flops_after_normalisation"] == 290


def test_without_broadcasting_there_is_one_figure():
    forward = analyze("ab,bc->ac", [(2, 3), (3, 4)], strategies=None).to_dict()["forward"]
    assert forward["flops"] == 48
    assert "flops_after_normalisation" not in forward


def test_the_summary_shows_both_figures():
    from click.testing import CliRunner

    from einsum_analyze.cli import cli

    result = CliRunner().invoke(cli, ["ijk,kl,jl,i->i", "--shapes", "1x5x4,4x6,5x6,10",
                                      "--device", "none", "--strategy", "none"],
                                catch_exceptions=False)
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in result.stdout.splitlines() if line.count("│") == 3}
    assert rows["FLOPs, opt_einsum's count"] == "650"
    assert rows["after normalisation"] == "290"
