"""On CUDA: per-step times (--profile-steps) add up to the measured forward + backward.

Skipped without CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import pytest

from einsum_analyze import analyze
from einsum_analyze.backends.calibration import calibrate
from einsum_analyze.execution import execute

# The three largest shared cases (benchmarks/cases.json): a millisecond or more, so the
# launch latency at the start of each profiled phase is noise, not a share.
CASES = {
    "tn18-b65536-bond64": (
        "bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz",
        [(65536, 2)] * 9 + [(2, 64), (64, 2, 64), (64, 2, 64), (64, 2, 64), (64, 2, 10, 64),
                            (64, 2, 64), (64, 2, 64), (64, 2, 64), (64, 2)]),
    "tucker": ("abc,ai,bj,ck->ijk", [(256, 256, 256), (256, 128), (256, 128), (256, 128)]),
    "attention3": ("bhqd,bhkd,bhkv->bhqv", [(8, 16, 1024, 64)] * 3),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_step_times_add_up_to_the_measured_total(name: str) -> None:
    report = execute(analyze(*CASES[name], strategies=("reverse", "independent")),
                     devices=["cuda:0"], repeats=20, warmup=5, profile_steps=True)
    ours = [run for run in report.runs if not run.is_baseline]
    assert ours and all(run.skipped is None for run in ours)
    for run in ours:
        assert run.forward is not None and run.backward is not None and run.steps
        measured = run.forward.median_s + run.backward.median_s
        timed = sum(step.time_s for step in run.steps) + (run.other_s or 0.0)
        assert abs(timed - measured) <= 0.10 * measured, (run.strategy, timed, measured)
        assert all(step.bound_s is not None and step.bound_s > 0 for step in run.steps)


@pytest.mark.gpu
def test_cuda_calibration_is_plausible() -> None:
    found = calibrate("cuda:0", "float32")
    # Any datacentre GPU of the last decade: 100 GB/s to 20 TB/s, 1 to 1,000 TFLOP/s.
    assert 1e11 < found.bandwidth_bytes_per_s < 2e13
    assert 1e12 < found.flops_per_s < 1e15
    assert found.seconds > 0  # its time is the benchmarks' to judge
