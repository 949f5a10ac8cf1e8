"""Slices over devices with real torch.distributed processes (gloo on cpu), no mock."""

from __future__ import annotations

import json
import multiprocessing
from typing import Any

import jsonschema
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from standin import StandInSlices
from standin import children as _children

from einsum_analyze import analyze
from einsum_analyze.distributed.assign import assign_slices, project_efficiency
from einsum_analyze.distributed.contract import DistributedJob
from einsum_analyze.distributed.devices import parse_devices
from einsum_analyze.distributed.from_report import runner_for
from einsum_analyze.distributed.run import run_distributed
from einsum_analyze.errors import BackendUnavailableError
from einsum_analyze.report import load_schema


def _validate(section: dict[str, object]) -> None:
    """The section validates against the report schema's ``distributed`` property."""
    schema = load_schema()["properties"]["distributed"]
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(section)))


def _job(runner: StandInSlices, equation: str, shapes: tuple[tuple[int, ...], ...],
         output_shape: tuple[int, ...], **options: object) -> DistributedJob:
    defaults: dict[str, object] = {"repeats": 1, "warmup": 0, "timeout_s": 60.0}
    defaults.update(options)
    return DistributedJob(runner=runner, text=equation, explicit=equation, shapes=shapes,
                          output_shape=output_shape, dtype="float64",
                          grad=tuple(range(len(shapes))), **defaults)  # type: ignore[arg-type]


# --- assignment: pure, any N ------------------------------------------------------------

@given(st.lists(st.floats(0, 100, allow_nan=False), max_size=40), st.integers(1, 9))
def test_assignment_covers_every_slice_once_and_balances(costs: list[float], n: int) -> None:
    parts = assign_slices(costs, n)
    assert len(parts) == n
    assert sorted(s for part in parts for s in part) == list(range(len(costs)))
    loads = [sum(costs[s] for s in part) for part in parts]
    # LPT: the costliest device exceeds the mean by at most the largest slice.
    if costs:
        assert max(loads) <= sum(costs) / n + max(costs) + 1e-9


@given(st.integers(1, 64), st.integers(1, 9))
def test_equal_slices_split_within_one(count: int, n: int) -> None:
    assume(count >= n)
    sizes = [len(part) for part in assign_slices([1.0] * count, n)]
    assert max(sizes) - min(sizes) <= 1


def test_unequal_costs_balance_by_cost_not_count() -> None:
    assert assign_slices([8, 1, 1, 1, 1, 1, 1, 1, 1], 2) == ((0,), (1, 2, 3, 4, 5, 6, 7, 8))


def test_projection_formula() -> None:
    two = project_efficiency(single_s=1.0, reduce_bytes=10**9, bus_bytes_per_s=10**11,
                             devices=2)
    assert two.step_s == pytest.approx(0.5 + 0.01)
    eight = project_efficiency(single_s=1.0, reduce_bytes=10**9, bus_bytes_per_s=10**11,
                               devices=8)
    assert eight.step_s == pytest.approx(0.125 + 2 * 7 / 8 * 0.01)
    assert eight.efficiency == pytest.approx(1.0 / eight.step_s / 8)
    assert eight.efficiency < two.efficiency


# --- device lists ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "devices", "backend"), [
    ("cpu*2", ("cpu:0", "cpu:1"), "gloo"),
    ("cpu:0, cpu:1,cpu:2", ("cpu:0", "cpu:1", "cpu:2"), "gloo"),
    ("cpu", ("cpu:0",), "gloo"),
    ("cuda:1,cuda:0", ("cuda:1", "cuda:0"), "nccl"),
    ("all", ("cuda:0", "cuda:1"), "nccl"),
    ("cuda*2", ("cuda:0", "cuda:1"), "nccl"),
])
def test_device_lists(text: str, devices: tuple[str, ...], backend: str) -> None:
    parsed = parse_devices(text, cuda_count=lambda: 2)
    assert (parsed.devices, parsed.backend) == (devices, backend)


@pytest.mark.parametrize(("text", "culprit"), [
    ("cuda:2", "cuda:2 does not exist"),
    ("cpu:0,cuda:0", "mixes cpu and CUDA"),
    ("cpu:0,cpu:0", "cpu:0 twice"),
    ("gpu:0", "'gpu:0'"),
    ("cpu*0", r"'cpu\*0'"),
    ("", "give a list"),
])
def test_bad_device_lists(text: str, culprit: str) -> None:
    with pytest.raises(BackendUnavailableError, match=culprit) as info:
        parse_devices(text, cuda_count=lambda: 2)
    assert "\n" not in str(info.value)


def test_all_without_cuda_is_refused() -> None:
    with pytest.raises(BackendUnavailableError, match="no CUDA GPU"):
        parse_devices("all", cuda_count=lambda: 0)


# --- real processes ----------------------------------------------------------------------

def _sliced(equation: str, shapes: list[list[int]], indices: str) -> Any:
    """The report's sliced strategy with the given slices, as the devices run it."""
    report = analyze(equation, shapes, dtype="float64", strategies=("sliced",),
                     strategy_options={"sliced": {"indices": indices}})
    return report, runner_for(report)


def test_two_gloo_processes_equal_the_oracle_with_sliced_output_and_repeated_indices() -> None:
    # i is an output index, j repeats inside operand 0; both are sliced, in uneven chunks
    # (6 = 2+2+2, 8 = 3+3+2), so the slices have different schedules and costs.
    report, runner = _sliced("ijj,jk->ik", [[6, 8, 8], [8, 5]], "i:2,j:3")
    assert runner.slice_count == 9
    eq = report.equation
    job = DistributedJob(runner=runner, text=eq.text, explicit=eq.explicit,
                         shapes=((6, 8, 8), (8, 5)), output_shape=(6, 5), dtype="float64",
                         grad=(0, 1), repeats=2, warmup=1, timeout_s=120.0)
    before = _children()
    result = run_distributed(job, parse_devices("cpu*2"))
    assert not result.failed, result.errors
    assert result.max_grad_error is not None and result.max_grad_error < 1e-12
    assert result.output_error is not None and result.output_error < 1e-12
    assert sorted(s for d in result.per_device for s in d.slices) == list(range(9))
    costs = runner.slice_costs()
    loads = [sum(costs[s] for s in d.slices) for d in result.per_device]
    assert max(loads) - min(loads) <= max(costs)
    for figures in result.per_device:
        assert figures.compute_s is not None and figures.compute_s > 0
        assert figures.communication_s is not None and figures.communication_s > 0
        # cpu: the allocator's events equal the replay of the device's own schedule.
        assert figures.peak_bytes_measured == figures.peak_bytes_predicted
        assert figures.peak_bytes_predicted is not None
    single = result.single_device
    assert single is not None and single["slices"] == 9 and single["device"] == "cpu:0"
    assert single["peak_bytes_measured"] == single["peak_bytes_predicted"]
    assert result.speedup is not None and result.efficiency == result.speedup / 2
    section = result.to_dict()
    assert section["backend"] == "gloo" and section["errors"] == []
    _validate(section)
    assert _children() <= before


@pytest.mark.slow
@pytest.mark.parametrize(("how", "said"), [
    ("raise", "RuntimeError: injected failure on rank 1"),
    ("exit", "exited with status 3"),
    ("kill", "killed by SIGKILL"),
])
def test_a_dying_rank_is_reported_and_nothing_is_left(how: str, said: str) -> None:
    equation = "ij,jk->ik"
    runner = StandInSlices(equation, (("i", 2), ("j", 4), ("k", 2)), "j")
    job = _job(runner, equation, ((2, 4), (4, 2)), (2, 2), fault=(1, how))
    before = _children()
    result = run_distributed(job, parse_devices("cpu*2"))
    assert result.failed
    assert result.errors[0].startswith("rank 1 (cpu:1): ")
    assert said in result.errors[0]
    assert result.speedup is None
    _validate(result.to_dict())
    assert not multiprocessing.active_children()
    assert _children() <= before


@pytest.mark.slow
def test_a_silent_rank_times_out_and_is_killed() -> None:
    equation = "ij,jk->ik"
    runner = StandInSlices(equation, (("i", 2), ("j", 4), ("k", 2)), "j")
    job = _job(runner, equation, ((2, 4), (4, 2)), (2, 2), fault=(1, "hang"), timeout_s=6.0)
    before = _children()
    result = run_distributed(job, parse_devices("cpu*2"))
    assert result.failed
    assert any("no result after 6 s" in e or "timed out" in e.lower() or "stopped" in e
               for e in result.errors), result.errors
    assert not multiprocessing.active_children()
    assert _children() <= before


def _train_rank(rank: int, init: str, runner: Any) -> float:
    """A torchrun-style rank: the group is initialised by the caller, then sliced_einsum."""
    import torch
    import torch.distributed as dist

    from einsum_analyze.distributed.training import sliced_einsum

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    try:
        generator = torch.Generator().manual_seed(7)
        a = torch.randn(3, 4, 4, generator=generator, dtype=torch.float64)
        b = torch.randn(4, 5, generator=generator, dtype=torch.float64)
        a.requires_grad_(True)
        b.requires_grad_(True)
        y = sliced_einsum(runner, a, b)
        (y.sin().sum()).backward()
        a64, b64 = a.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
        want = torch.einsum("ijj,jk->ik", a64, b64)
        want.sin().sum().backward()
        assert a.grad is not None and b.grad is not None and a64.grad is not None
        assert b64.grad is not None
        return max(float((y - want).abs().max()), float((a.grad - a64.grad).abs().max()),
                   float((b.grad - b64.grad).abs().max()))
    finally:
        dist.destroy_process_group()


def test_training_api_on_an_initialised_group_equals_the_oracle() -> None:
    from einsum_analyze.distributed.launch import free_port, launch

    _, runner = _sliced("ijj,jk->ik", [[3, 4, 4], [4, 5]], "i:1,j:3")
    init = f"tcp://127.0.0.1:{free_port()}"
    outcomes = launch(_train_rank, [(init, runner)] * 2, timeout_s=60)
    assert [o.error for o in outcomes] == [None, None]
    assert all(o.result < 1e-12 for o in outcomes)
