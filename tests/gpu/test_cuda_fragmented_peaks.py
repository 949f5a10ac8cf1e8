"""A measured peak does not depend on what the process left in the CUDA allocator.

The caching allocator hands a cached block out whole where at most 1 MiB of it would be
left over, and counts all of it. Segments that a live tensor keeps hold such blocks
after other work, and an emptied cache cannot give them back: the measured call's
blocks come from a private pool of its own (``torch_backend.fresh_segments``). Here
the process first leaves holes of many sizes between live tensors, then every run's
measured peak must still be its prediction.

Skipped without CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from einsum_analyze import analyze, execute

CASES = {c["name"]: c for c in json.loads(
    (Path(__file__).parents[2] / "benchmarks" / "cases.json").read_text())["cases"]}
MIB = 1 << 20


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["mps-layer", "tucker", "tn18-b512"])
def test_peaks_are_the_prediction_beside_holes_the_process_left(name: str) -> None:
    import torch

    holes, keep = [], []
    for k in range(48):  # holes of 1.05 to 9.3 MiB, each between two live 1.01 MiB tensors
        holes.append(torch.empty(int((1.05 + 0.175 * k) * MIB), dtype=torch.uint8,
                                 device="cuda"))
        keep.append(torch.empty(int(1.01 * MIB), dtype=torch.uint8, device="cuda"))
    del holes
    torch.cuda.empty_cache()  # what it can give back; the kept tensors hold the rest
    case = CASES[name]
    report = execute(analyze(case["equation"], case["shapes"],
                             strategies=("reverse", "recompute")),
                     devices=["cuda"], repeats=1, warmup=1)
    ours = [r for r in report.runs if not r.is_baseline and r.skipped is None]
    assert ours
    for run in ours:
        assert run.peak_bytes_measured == run.peak_bytes_predicted, run.strategy
    del keep  # held to here: their segments keep the holes
