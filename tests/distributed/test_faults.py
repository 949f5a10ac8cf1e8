"""Faults end every rank with one line naming the rank, and leave no process behind.

Real gloo processes on the cpu: a rank stopped with SIGSTOP (its heartbeat ends), a rank
that lives but makes no progress, a backend that cannot join, and GPUs the processes do
not have. The stall limit is the job's floor here (tiny work), far below its timeout, so
the error says which detector named the rank. The runs spawn two interpreters each, so
they are marked slow (``--run-slow``), as the other fault tests are.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest
from standin import StandInSlices, children

from einsum_analyze.distributed.contract import DistributedJob
from einsum_analyze.distributed.devices import DeviceList, parse_devices
from einsum_analyze.distributed.launch import RANK_ENVIRONMENT, launch
from einsum_analyze.distributed.run import run_distributed, stall_limit_s

TIMEOUT_S = 120.0
STALL_FLOOR_S = 10.0
"""Above what a loaded machine takes between two marks of tiny work (3 s was not)."""


def _job(**options: Any) -> DistributedJob:
    runner = StandInSlices("ij,jk->ik", (("i", 2), ("j", 4), ("k", 2)), "j")
    return DistributedJob(runner=runner, text="ij,jk->ik", explicit="ij,jk->ik",
                          shapes=((2, 4), (4, 2)), output_shape=(2, 2), dtype="float64",
                          grad=(0, 1), repeats=1, warmup=0, timeout_s=TIMEOUT_S,
                          stall_floor_s=STALL_FLOOR_S, **options)


def _run(job: DistributedJob, devices: DeviceList) -> tuple[str, ...]:
    before = children()
    result = run_distributed(job, devices)
    assert result.failed and result.speedup is None
    assert not multiprocessing.active_children()
    assert children() <= before  # none left behind, the stopped one included
    assert all("no result after" not in line for line in result.errors), result.errors
    return result.errors


@pytest.mark.slow
def test_a_stopped_rank_is_named_first_by_its_heartbeat() -> None:
    errors = _run(_job(fault=(1, "stop")), parse_devices("cpu*2"))
    assert errors[0].startswith("rank 1 (cpu:1): stopped responding: no heartbeat for 10 s")
    assert "stopped by a signal: state T" in errors[0]
    assert errors[1].startswith("rank 0 (cpu:0): ")


@pytest.mark.slow
def test_a_rank_without_progress_is_named_not_its_waiting_peer() -> None:
    errors = _run(_job(fault=(1, "hang")), parse_devices("cpu*2"))
    assert errors[0].startswith("rank 1 (cpu:1): no progress for 10 s"), errors


@pytest.mark.slow
def test_a_backend_that_cannot_join_names_its_rank() -> None:
    errors = _run(_job(fault=(1, "backend")), parse_devices("cpu*2"))
    assert errors[0].startswith("rank 1 (cpu:1): "), errors
    assert "no-such-interface0" in errors[0] or "interface" in errors[0].lower(), errors
    assert "\n" not in errors[0]


@pytest.mark.slow
def test_a_missing_gpu_is_one_line_naming_its_rank() -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    devices = DeviceList(("cuda:0", f"cuda:{max(count, 1)}"), "nccl")
    errors = _run(_job(), devices)
    missing = 1 if count else 0  # without CUDA every rank misses its GPU: rank 0 first
    assert errors[0].startswith(f"rank {missing} (cuda:{max(count, 1) if missing else 0}): "
                                "BackendUnavailableError: "), errors
    assert "is missing: this process sees" in errors[0]


class _Heavy(StandInSlices):
    def slice_costs(self) -> list[float]:
        return [2.5e9] * self.slice_count


def _job_of(runner: StandInSlices) -> DistributedJob:
    return DistributedJob(runner=runner, text="ij,jk->ik", explicit="ij,jk->ik",
                          shapes=((2, 4), (4, 2)), output_shape=(2, 2), dtype="float64",
                          grad=(0, 1), stall_floor_s=3.0)


def test_the_stall_limit_grows_with_the_predicted_work() -> None:
    assert stall_limit_s(_job(), is_cuda=False) == STALL_FLOOR_S  # 4 FLOPs: the floor
    heavy = _job_of(_Heavy("ij,jk->ik", (("i", 2), ("j", 4), ("k", 2)), "j"))
    # 4 slices of 2.5e9 FLOPs at the cautious rates (1e8 cpu, 1e10 cuda), four times over.
    assert stall_limit_s(heavy, is_cuda=False) == pytest.approx(400.0)
    assert stall_limit_s(heavy, is_cuda=True) == pytest.approx(4.0)  # above the floor


def _environment(rank: int) -> dict[str, str | None]:
    import os

    return {name: os.environ.get(name) for name in RANK_ENVIRONMENT}


def test_every_rank_runs_with_nvlink_multicast_off() -> None:
    outcomes = launch(_environment, [()] * 2, timeout_s=60)
    assert [o.error for o in outcomes] == [None, None]
    assert all(o.result == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                            "NVSHMEM_DISABLE_NVLS": "1"} for o in outcomes)
