"""The roofline's arithmetic against hand-computed figures, and its device profiles."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from einsum_analyze import analyze
from einsum_analyze.errors import PlanningError
from einsum_analyze.roofline import (
    NOMINAL,
    build_roofline,
    load_profile,
    profile_from_dict,
    step_costs,
    with_roofline,
)

UNIT = profile_from_dict({"name": "unit", "bandwidth_bytes_per_s": 1e9,
                          "flops_per_s": 2e9}, "unit")


def _steps(equation, shapes, strategy="reverse", itemsize=4):
    report = analyze(equation, shapes, strategies=(strategy,))
    return {c.tensor: c for c in step_costs(report.strategies[0].events,
                                            report.equation.size_dict, itemsize)}


def test_reduce_first_counts_the_kernels_work_not_the_convention():
    # ijj,k->ik at 32: operand 1's gradient ik,ijj->k sums j away first (the diagonal's
    # 32 x 32 elements, two FLOPs each by opt_einsum's one-operand rule: 2,048), then a
    # 32 x 32 matrix-vector product (2 x 32 x 32 = 2,048): 4,096. The convention counts
    # the joint space i, j, k twice: 2 x 32^3 = 65,536.
    steps = _steps("ijj,k->ik", [(32, 32, 32), (32,)])
    d1 = steps["d1"]
    assert (d1.kernel, d1.flops, d1.flops_convention) == ("bmm", 4096, 65536)
    # Reads G (32 x 32) and the diagonal (32 x 32), writes 32: float32.
    assert d1.bytes == (1024 + 1024 + 32) * 4
    assert d1.copy_bytes == 0
    # Forward k,ijj->ik: the same sum (2,048), then an outer product of 1,024 elements.
    x = steps["x2"]
    assert (x.kernel, x.flops, x.flops_convention) == ("mul", 3072, 65536)
    # The unreduce d0 = i->ijj reads 32 and writes the 32^3 gradient, no FLOPs.
    d0 = steps["d0"]
    assert (d0.kernel, d0.flops, d0.bytes) == ("unreduce", 0, (32 + 32**3) * 4)


def test_matmul_step_bound_and_intensity():
    steps = _steps("ij,jk->ik", [(8, 16), (16, 4)])
    x = steps["x2"]
    assert (x.flops, x.flops_convention, x.bytes, x.copy_bytes) == (1024, 1024, 896, 0)
    assert x.intensity == pytest.approx(1024 / 896)
    # max(1024 / 2e9, 896 / 1e9): memory-bound.
    assert x.bound_s(2e9, 1e9) == pytest.approx(896e-9)
    entry = x.to_dict(2e9, 1e9)
    assert entry["limit"] == "memory" and entry["bound_s"] == pytest.approx(896e-9)
    assert x.to_dict(1e9, 1e12)["limit"] == "compute"


def test_layout_copy_bytes_are_apart_from_the_bound():
    # ijk,jl->ikl sums j, which sits between i and k in memory: the bmm copies the
    # 8 x 16 x 4 operand to (i, k, j) first, reading and writing 512 float32s.
    steps = _steps("ijk,jl->ikl", [(8, 16, 4), (16, 2)])
    x = steps["x2"]
    assert x.flops == 2 * 8 * 4 * 16 * 2
    assert x.bytes == (512 + 32 + 64) * 4
    assert x.copy_bytes == 2 * 512 * 4
    assert x.bound_s(1e30, 1e9) == pytest.approx(x.bytes / 1e9)


def test_strategy_bound_is_the_sum_of_its_steps():
    report = analyze("abc,ai,bj,ck->ijk", [(16, 16, 16), (16, 8), (16, 8), (16, 8)],
                     strategies=("reverse", "independent", "checkpoint", "torch-autograd"))
    roofline = build_roofline(report, UNIT)
    assert [s.strategy for s in roofline.strategies] == [s.name for s in report.strategies]
    for row, strategy in zip(roofline.strategies, report.strategies, strict=True):
        data = row.to_dict()
        assert data["bound_s"] == pytest.approx(sum(s["bound_s"] for s in data["steps"]))
        assert data["bound_s"] == pytest.approx(data["forward_bound_s"]
                                                + data["backward_bound_s"])
        # The convention's total is the strategy's forward and backward FLOPs.
        assert data["flops_convention"] == strategy.forward_flops + strategy.backward_flops
        assert all(s["bound_s"] == max(s["flops"] / 2e9, s["bytes"] / 1e9)
                   for s in data["steps"])


def test_report_section_uses_the_profile_rate_for_its_dtype():
    report = with_roofline(analyze("ij,jk->ik", [(8, 16), (16, 4)], dtype="float64",
                                   strategies=("reverse",)), NOMINAL["h200"])
    data = report.to_dict()["roofline"]
    assert data["profile"]["source"] == "nominal"
    assert data["profile"]["flops_per_s"] == {"float64": 67e12}
    assert data["strategies"][0]["steps"][0]["bytes"] == 896 * 2


def test_builtin_profiles_are_labelled_nominal():
    for name in ("h200", "H100", " a100 ", "cpu"):
        profile = load_profile(name)
        assert profile.source == "nominal"
        assert profile.description.startswith("NOMINAL")
        assert profile.rate("float32") > 0 and profile.bandwidth_bytes_per_s > 0


def test_profile_file(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"name": "dev", "bandwidth_bytes_per_s": 2e12,
                                "flops_per_s": {"float32": 5e13}}))
    profile = load_profile(str(path))
    assert (profile.name, profile.source, profile.rate("float32")) == ("dev", "file", 5e13)
    with pytest.raises(PlanningError, match="no flops_per_s for dtype float64"):
        profile.rate("float64")


@pytest.mark.parametrize(("content", "message"), [
    ("{", "not JSON"),
    ("[1]", "expected a JSON object"),
    ('{"flops_per_s": 1}', "missing field 'bandwidth_bytes_per_s'"),
    ('{"bandwidth_bytes_per_s": 1}', "missing field 'flops_per_s'"),
    ('{"bandwidth_bytes_per_s": -1, "flops_per_s": 1}', "positive"),
    ('{"bandwidth_bytes_per_s": "fast", "flops_per_s": 1}', "must be a number"),
    ('{"bandwidth_bytes_per_s": 1, "flops_per_s": {"int8": 1}}', "unknown dtype"),
    ('{"bandwidth_bytes_per_s": 1, "flops_per_s": {}}', "empty"),
    ('{"bandwidth_bytes_per_s": true, "flops_per_s": 1}', "must be a number"),
])
def test_bad_profile_files_are_refused_in_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PlanningError, match=message) as caught:
        load_profile(str(path))
    assert "\n" not in str(caught.value)


def test_unknown_name_and_missing_file():
    with pytest.raises(PlanningError, match="not a built-in profile"):
        load_profile("v100")
    with pytest.raises(PlanningError, match="cannot read"):
        load_profile("/nonexistent/x.json")


def test_roofline_imports_no_torch():
    code = ("import sys; from einsum_analyze import analyze; "
            "from einsum_analyze.roofline import NOMINAL, with_roofline; "
            "r = with_roofline(analyze('ij,jk->ik', [(4, 5), (5, 6)]), NOMINAL['h200']); "
            "r.to_dict(); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
