"""On CUDA: the allocator's recorded timeline overlays the prediction (--plot after runs).

Skipped without CUDA (tests/conftest.py skips every test marked gpu).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from einsum_analyze import analyze
from einsum_analyze.backends.base import predicted_peak_bytes
from einsum_analyze.cli import cli
from einsum_analyze.plots import figure_data
from einsum_analyze.runs.timeline import record_timelines

TN18 = ("bc,bd,be,bf,bg,bh,bi,bj,bk,cm,mdn,neo,ofp,pgzq,qhr,ris,sjt,tk->bz",
        [(512, 2)] * 9 + [(2, 7), (7, 2, 7), (7, 2, 7), (7, 2, 7), (7, 2, 10, 7), (7, 2, 7),
                          (7, 2, 7), (7, 2, 7), (7, 2)])


@pytest.mark.gpu
def test_recorded_timeline_peaks_where_the_model_does() -> None:
    report = analyze(*TN18, strategies=("reverse", "independent", "checkpoint"))
    found = record_timelines(report, "cuda:0")
    assert [t["strategy"] for t in found] == ["reverse", "independent", "checkpoint"]
    for entry, strategy in zip(found, report.strategies, strict=True):
        trace = entry["allocated_bytes"]
        assert trace and 0 < entry["backward_start"] < len(trace)
        assert min(trace) >= entry["start_bytes"] - 512
        # The prediction on the allocator's basis (every block rounded up to 512 B), as
        # runs[].peak_bytes_predicted; the recorded peak agrees within 2% and 4 blocks,
        # the tolerance of test_cuda_execution.py.
        predicted = predicted_peak_bytes(
            strategy.events, input_bytes=[4 * math.prod(s) for s in TN18[1]],
            output_elements=report.plan.steps[-1].output_elements, itemsize=4, is_cuda=True)
        assert abs(max(trace) - predicted) <= 0.02 * predicted + 4 * 512, (
            strategy.name, max(trace), predicted)


@pytest.mark.gpu
def test_plot_after_cuda_runs_carries_and_draws_the_trace(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out, saved = tmp_path / "r.svg", tmp_path / "r.json"
    result = CliRunner().invoke(cli, [
        "ij,jk,kl->il", "--sizes", "i=256,j=128,k=256,l=64", "--device", "cuda",
        "--repeats", "2", "--warmup", "1", "--plot", str(out), "--json", str(saved),
    ], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(saved.read_text())
    assert {t["strategy"] for t in data["measured_timelines"]} == {"reverse", "independent"}
    assert all(s.trace for s in figure_data(data).timeline if s.name != "torch-autograd")
    assert "recorded on cuda" in out.read_text()
