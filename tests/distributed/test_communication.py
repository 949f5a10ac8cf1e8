"""Less communication: parts of sliced buffers gathered from their owners, the rest summed.

The plan (:mod:`einsum_analyze.distributed.comm`) is checked on its own against a brute
force over the slices; the real runs (two and three gloo processes) against the float64
oracle and each rank's measured peak against the model's, packs and overlap included.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from budgets import examples
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from einsum_analyze import analyze
from einsum_analyze.distributed.assign import assign_contiguous, assign_slices, choose_assignment
from einsum_analyze.distributed.comm import FINAL, OUTPUT, plan_communication
from einsum_analyze.distributed.contract import DistributedJob
from einsum_analyze.distributed.devices import parse_devices
from einsum_analyze.distributed.from_report import runner_for
from einsum_analyze.distributed.run import run_distributed
from einsum_analyze.slicing.plan import SlicePlan

# --- the plan, pure ----------------------------------------------------------------------


def _cells(index: tuple[tuple[int, int], ...]) -> set[tuple[int, ...]]:
    return set(itertools.product(*(range(a, b) for a, b in index)))


def _written(term: str, sizes: dict[str, int], slices: SlicePlan, k: int) -> set[tuple[int, ...]]:
    """Cells of a buffer slice ``k`` writes (a repeated label: its diagonal block)."""
    ranges = {c: (a, b) for c, a, b in slices.ranges(k)}
    return _cells(tuple(ranges.get(c, (0, sizes[c])) for c in term))


@settings(max_examples=examples(60), deadline=None)
@given(st.sampled_from(["ij,jk->ik", "ijj,jk->ik", "bi,bj->bij", "abc,cd->abd"]),
       st.integers(1, 3), st.integers(1, 3), st.integers(1, 4),
       st.sampled_from(["gather", "overlap"]), st.booleans())
def test_every_written_cell_reaches_every_rank_once(equation: str, chunk_a: int, chunk_b: int,
                                                    devices: int, communication: str,
                                                    runs: bool) -> None:
    inputs, output = equation.split("->")
    terms = inputs.split(",")
    labels = sorted(set(equation) - set(",->"))
    sizes = {c: 3 + n for n, c in enumerate(labels)}
    sliced = labels[:2]
    slices = SlicePlan.of({sliced[0]: chunk_a, sliced[1]: chunk_b}, sizes)
    assume(slices.count >= devices)
    costs = [1.0 + (k % 3) for k in range(slices.count)]
    assignment = assign_contiguous(costs, devices) if runs else assign_slices(costs, devices)
    buffers = {OUTPUT: output, **dict(enumerate(terms))}
    plan = plan_communication(buffers=buffers, sizes=sizes, slices=slices,
                              assignment=assignment, itemsize=8, communication=communication)
    for key, term in buffers.items():
        writers: dict[tuple[int, ...], set[int]] = {}
        for rank, part in enumerate(assignment):
            for k in part:
                for cell in _written(term, sizes, slices, k):
                    writers.setdefault(cell, set()).add(rank)
        summed: set[tuple[int, ...]] = set()
        sent: dict[tuple[int, ...], int] = {}
        for t in plan.transfers:
            for region in t.regions:
                if region.buffer != key:
                    continue
                cells = _cells(region.index)
                assert region.elements == len(cells)
                if t.kind == "all_reduce":
                    assert not cells & summed, "a cell summed twice"
                    summed |= cells
                else:
                    for cell in cells:
                        assert cell not in sent, "a cell broadcast twice"
                        sent[cell] = t.source
                    if communication == "overlap" and t.round != FINAL:
                        owner = assignment[t.source]
                        last = max(p for p, k in enumerate(owner)
                                   if _written(term, sizes, slices, k) & cells)
                        assert t.round == last  # sent once its owner has written it
        assert not summed & set(sent)
        for cell, ranks in writers.items():
            # Written on several ranks: summed; on one: summed or sent by that one.
            assert cell in summed or (len(ranks) == 1 and sent.get(cell) in ranks), (key, cell)
        for cell, source in sent.items():
            assert writers.get(cell) == {source}


def test_runs_of_slices_make_owned_parts_and_halve_the_bytes() -> None:
    # ij,jk->ik, j cut in 4 on 2 devices: both gradients hold j, the output does not.
    sizes = {"i": 64, "j": 64, "k": 64}
    slices = SlicePlan(("j",), (64,), (16,))
    buffers = {OUTPUT: "ik", 0: "ij", 1: "jk"}
    common: dict[str, Any] = {"buffers": buffers, "sizes": sizes, "slices": slices,
                              "itemsize": 4}
    baseline = plan_communication(assignment=[[0, 1], [2, 3]], communication="all-reduce",
                                  **common)
    gather = plan_communication(assignment=[[0, 1], [2, 3]], **common)
    assert baseline.moved_bytes == 3 * 64 * 64 * 4  # 2 (N-1)/N of every buffer, N = 2
    # Each rank receives the other's half of dA and dB, and sums the output.
    assert gather.moved_bytes == (64 * 32 * 2 + 64 * 64) * 4
    assert [(t.kind, t.source) for t in gather.transfers] == [
        ("broadcast", 0), ("broadcast", 1), ("all_reduce", -1)]
    # Interleaved slices (longest first on equal costs) would leave nothing owned.
    interleaved = plan_communication(assignment=[[0, 2], [1, 3]], **common)
    assert interleaved.moved_bytes == gather.moved_bytes
    assert choose_assignment([1.0] * 4, 2) == ((0, 1), (2, 3))


def test_overlap_sends_a_part_after_the_slice_that_finishes_it() -> None:
    sizes = {"i": 4, "j": 8, "k": 4}
    slices = SlicePlan(("j",), (8,), (2,))
    plan = plan_communication(buffers={0: "ij", 1: "jk"}, sizes=sizes, slices=slices,
                              assignment=[[0, 1], [2, 3]], itemsize=8,
                              communication="overlap")
    rounds = [(t.source, t.round) for t in plan.transfers]
    assert rounds == [(0, 0), (1, 0), (0, 1), (1, 1)]
    # Each broadcast packs a part of dA (4 x 2, not contiguous) with one of dB (2 x 4).
    # On a rank of two slices, round 0's packs come after its first slice; round 1 is
    # after its last, with the final ones; a rank of one slice has them all at the end.
    assert plan.packs(2) == ((16, 16), (), (16, 16))
    assert plan.packs(1) == ((), (16, 16, 16, 16))


def test_choose_keeps_longest_first_where_runs_balance_worse() -> None:
    costs = [3.0, 3.0, 2.0, 2.0, 2.0]  # runs 6 | 6, longest first 7 | 5
    assert choose_assignment(costs, 2) == assign_contiguous(costs, 2) == ((0, 1), (2, 3, 4))
    costs = [3.0, 2.0, 2.0, 3.0, 1.0, 1.0]  # runs at best 5 | 7, longest first 6 | 6
    assert max(sum(costs[s] for s in p) for p in assign_contiguous(costs, 2)) == 7.0
    assert choose_assignment(costs, 2) == assign_slices(costs, 2)


def test_the_projection_adds_its_parts_measured_apart() -> None:
    from einsum_analyze.distributed.projection import (
        CollectiveCosts,
        fit_collective_costs,
        predict_step,
    )

    costs = fit_collective_costs({"all_reduce": [(8, 1e-4), (8_000_008, 2.1e-3)],
                                  "broadcast": [(8, 5e-5), (8_000_008, 1.05e-3)]}, 1e-5)
    assert costs.bytes_per_s["all_reduce"] == pytest.approx(4e9)
    assert costs.bytes_per_s["broadcast"] == pytest.approx(8e9)
    assert CollectiveCosts.from_dict(costs.to_dict()) == costs
    sizes = {"i": 64, "j": 64, "k": 64}
    slices = SlicePlan(("j",), (64,), (16,))
    buffers = {OUTPUT: "ik", 0: "ij", 1: "jk"}
    plan = plan_communication(buffers=buffers, sizes=sizes, slices=slices,
                              assignment=[[0, 1], [2, 3]], itemsize=4)
    got = predict_step(single_s=1.0, costs=[1.0, 1.0, 1.0, 3.0],
                       assignment=[[0, 1], [2, 3]], plan=plan, collectives=costs)
    # Rank 1 carries 4 of 6: 2/3 s. Its calls: rank 0's broadcast received (its parts of
    # dA and dB: 4 blocks of 64 x 16, 16 KiB), its own sent, the output's all-reduce
    # (16 KiB, of which a ring receives 2 (N-1)/N = all); two barriers.
    received = 4 * 64 * 16 * 4
    comm = (5e-5 + received / 8e9) + 5e-5 + (1e-4 + 64 * 64 * 4 / 4e9)
    assert got.compute_s == pytest.approx(2 / 3)
    assert got.step_s == pytest.approx(2 / 3 + comm + 2e-5)
    assert got.after_compute_s == pytest.approx(comm + 2e-5)


# --- real processes ----------------------------------------------------------------------

def _job(equation: str, shapes: list[list[int]], indices: str, **options: Any) -> DistributedJob:
    report = analyze(equation, shapes, dtype="float64", strategies=("sliced",),
                     strategy_options={"sliced": {"indices": indices}})
    eq = report.equation
    return DistributedJob(runner=runner_for(report), text=eq.text, explicit=eq.explicit,
                          shapes=tuple(tuple(s) for s in shapes),
                          output_shape=tuple(eq.size_dict[c] for c in eq.output),
                          dtype="float64", grad=tuple(report.grad_operands), repeats=1,
                          warmup=0, baseline=False, timeout_s=120.0, **options)


@pytest.mark.parametrize("communication", ["all-reduce", "gather", "overlap"])
def test_each_communication_equals_the_oracle_and_its_predicted_peak(
        communication: str) -> None:
    # i (an output index) and j (repeated in operand 0) sliced: the output and dA have
    # owned parts (packed: not contiguous), dB's parts are shared between the ranks.
    job = _job("ijj,jk->ik", [[6, 8, 8], [8, 5]], "i:2,j:3", communication=communication)
    result = run_distributed(job, parse_devices("cpu*2"))
    assert not result.failed, result.errors
    assert result.max_grad_error is not None and result.max_grad_error < 1e-12
    assert result.output_error is not None and result.output_error < 1e-12
    for device in result.per_device:
        assert device.peak_bytes_measured == device.peak_bytes_predicted, device
    section = result.to_dict()
    assert section["communication"] == communication


def test_three_processes_overlap_uneven_shares_equal_the_oracle() -> None:
    # b outer and sliced: consecutive runs own whole parts of dA and of the output.
    job = _job("bi,bij->bj", [[7, 6], [7, 6, 5]], "b:1", communication="overlap")
    result = run_distributed(job, parse_devices("cpu*3"))
    assert not result.failed, result.errors
    assert sorted(len(d.slices) for d in result.per_device) == [2, 2, 3]
    assert result.max_grad_error is not None and result.max_grad_error < 1e-12
    for device in result.per_device:
        assert device.peak_bytes_measured == device.peak_bytes_predicted, device
    gathered = result.to_dict()["moved_bytes"]
    assert gathered < 2 * 2 / 3 * result.reduce_bytes  # below the all-reduce of it all
