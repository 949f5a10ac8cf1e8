"""The sliced plan on every GPU with NCCL: right gradients, each device's peak as predicted.

Skipped without CUDA (tests/conftest.py) and without a second GPU; runs on all the GPUs
of the machine (2, 4 or 8). For a multi-GPU session: each device's measured peak
(``max_memory_allocated`` over its slices and its collectives, inputs included) must
equal the model's replay of its own slices' schedule and packs, for every way of
communicating (``all-reduce``, ``gather``, ``overlap``, timed interleaved in one run),
as every single-device strategy's does; the gathers must move fewer bytes than the
all-reduce; a missing GPU and a stopped rank end every rank with one line naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from einsum_analyze import analyze
from einsum_analyze.distributed import DistributedJob, parse_devices, run_distributed
from einsum_analyze.distributed.from_report import runner_for

CASES = {c["name"]: c for c in json.loads(
    (Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]}
TOLERANCE = 0.02
ROUNDING = 512


@pytest.mark.gpu
def test_two_gpus_reduce_the_oracle_and_measure_their_prediction() -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    case = CASES["tn18-b65536-bond64"]
    unsliced = analyze(case["equation"], case["shapes"], strategies=("reverse",))
    budget = unsliced.strategies[0].memory.peak_bytes // 8
    report = analyze(case["equation"], case["shapes"], strategies=("sliced",),
                     strategy_options={"sliced": {"budget_bytes": budget}})
    runner = runner_for(report)
    assert runner.slice_count >= 8
    eq = report.equation
    job = DistributedJob(runner=runner, text=eq.text, explicit=eq.explicit,
                         shapes=tuple(tuple(s) for s in eq.shapes),
                         output_shape=tuple(eq.size_dict[c] for c in eq.output),
                         dtype="float32", grad=tuple(report.grad_operands), repeats=3,
                         warmup=1, timeout_s=300, communication="all-reduce",
                         compare=("gather", "overlap"), calibrate=True)
    result = run_distributed(job, parse_devices("all"))
    assert not result.failed, result.errors
    assert result.backend == "nccl"
    assert [c.communication for c in result.compared] == ["gather", "overlap"]
    assert result.single_device is not None
    figures = [(result.single_device["peak_bytes_measured"],
                result.single_device["peak_bytes_predicted"])]
    for way in (result, *result.compared):
        assert way.max_grad_error is not None and way.max_grad_error < 1e-3, way.communication
        figures.extend((d.peak_bytes_measured, d.peak_bytes_predicted) for d in way.per_device)
    for measured, predicted in figures:
        assert measured is not None and predicted is not None
        assert abs(measured - predicted) <= TOLERANCE * predicted + 4 * ROUNDING, figures
    assert result.moved_bytes is not None
    for way in result.compared:
        assert way.moved_bytes is not None and way.moved_bytes < result.moved_bytes


@pytest.mark.gpu
def test_a_missing_gpu_and_a_stopped_rank_are_one_line_each() -> None:
    import torch

    from einsum_analyze.distributed.devices import DeviceList

    count = torch.cuda.device_count()
    if count < 2:
        pytest.skip("needs two CUDA devices")
    report = analyze("ij,jk->ik", [[64, 64], [64, 64]], strategies=("sliced",),
                     strategy_options={"sliced": {"indices": "j:16"}})
    eq = report.equation
    job = DistributedJob(runner=runner_for(report), text=eq.text, explicit=eq.explicit,
                         shapes=((64, 64), (64, 64)), output_shape=(64, 64),
                         dtype="float32", grad=(0, 1), repeats=1, warmup=0,
                         timeout_s=120, stall_floor_s=5.0)
    missing = run_distributed(job, DeviceList(("cuda:0", f"cuda:{count}"), "nccl"))
    assert missing.failed and missing.failure is not None
    assert missing.failure.startswith(f"rank 1 (cuda:{count}): BackendUnavailableError: ")
    from dataclasses import replace

    stopped = run_distributed(replace(job, fault=(1, "stop")), parse_devices("cuda:0,cuda:1"))
    assert stopped.failed and stopped.failure is not None
    assert stopped.failure.startswith("rank 1 (cuda:1): stopped responding: no heartbeat")
