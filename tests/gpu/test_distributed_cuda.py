"""The sliced plan on two GPUs with NCCL: right gradients, each device's peak as predicted.

Skipped without CUDA (tests/conftest.py) and without a second GPU. For the lead's batch
on a 2-GPU machine: each device's measured peak (``max_memory_allocated`` over its
slices and the all-reduce, inputs included) must equal the model's replay of its own
slices' schedule, as every single-device strategy's does.
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
                         warmup=1, timeout_s=300)
    result = run_distributed(job, parse_devices("cuda:0,cuda:1"))
    assert not result.failed, result.errors
    assert result.backend == "nccl"
    assert result.max_grad_error is not None and result.max_grad_error < 1e-3
    figures = [*((d.peak_bytes_measured, d.peak_bytes_predicted) for d in result.per_device)]
    assert result.single_device is not None
    figures.append((result.single_device["peak_bytes_measured"],
                    result.single_device["peak_bytes_predicted"]))
    for measured, predicted in figures:
        assert measured is not None and predicted is not None
        assert abs(measured - predicted) <= TOLERANCE * predicted + 4 * ROUNDING, figures
